"""Issue 40, item 1: every surface names the tier each GPU's busy figure comes from (GPM SM
activity "SM", utilization.gpu "util"): the dashboard's GPU panel and replay (8 GPUs at
80x24, through Pilot), the report (text and JSON), the Prometheus exporter and the fleet;
the simulated node declares GPM per GPU (sim/scenarios/small-kernels-gpm.toml: GPUs 0-6
with GPM, GPU 7 without; 97% utilization.gpu and 9% SM activity in its middle phase)."""

from __future__ import annotations

import re

from gpudisk_top.collect.source import simulated_source
from gpudisk_top.ui.widgets.gpus import GpuPanel
from apps import dashboard_app, replay_screen_app
from recording_helpers import sim_samples, write_recording
from screen_text import screen_text, text_of

SMALL = (80, 24)
SCENARIO = "small-kernels-gpm"
SMALL_KERNELS_AT = 50     # a sample in the phase of small kernels (40-80 s)


def cells(panel_text: str) -> dict[int, str]:
    """{GPU index: its busy figure as its cell shows it ("SM 9%!")}, from the cells' rows
    (not the title, not the notes line)."""
    rows = "\n".join(line for line in panel_text.splitlines()[1:] if "GPU " not in line)
    found = re.findall(r"(?:^|\s)(\d) [^\d\s]* ?\s*(SM|util)\s+(\d+%|n/a)([!* ]?)", rows,
                       flags=re.M)
    return {int(i): f"{t} {p}{m}".strip() for i, t, p, m in found}


def assert_tiers_shown(app) -> None:
    panel = text_of(app.query_one(GpuPanel))
    shown = cells(panel)
    assert sorted(shown) == list(range(8)), panel
    for i in range(7):                            # GPM: SM activity, far below util.gpu
        assert re.fullmatch(r"SM \d%!", shown[i]), (i, panel)
    assert re.fullmatch(r"util 9\d%", shown[7]), panel
    notes = panel.splitlines()[-1]
    assert re.match(r"\s+! GPU 0 SM \d% \(util 9\d%\); ! GPU 1 SM", notes), panel
    # the whole panel is on the screen: the 8 GPUs and the notes line
    screen = screen_text(app)
    for line in panel.splitlines()[1:]:
        assert line.rstrip()[:60] in screen, (line, screen)


async def test_the_dashboard_names_each_gpus_tier_at_80x24():
    app = dashboard_app(scenario=SCENARIO)
    async with app.run_test(size=SMALL) as pilot:
        app.advance(1)
        await pilot.pause()
        first = text_of(app.query_one(GpuPanel))
        # the first interval has no two GPM samples yet: utilization.gpu, and why
        assert "* GPU 0 util: GPM: first sample" in first, first
        assert re.search(r"\butil\s+9\d%\*", first), first
        app.advance(SMALL_KERNELS_AT)
        await pilot.pause()
        assert_tiers_shown(app)


async def test_replay_names_the_tiers_as_the_dashboard(tmp_path):
    path = write_recording(tmp_path / "gpm.gdtrec", sim_samples(SCENARIO, n=SMALL_KERNELS_AT + 2),
                           scenario=SCENARIO)
    app = replay_screen_app(path, simulated_source(SCENARIO, 0), start_index=SMALL_KERNELS_AT)
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        assert_tiers_shown(app)
