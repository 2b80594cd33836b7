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
    notes = panel.splitlines()[-1]     # the seven far apart together, their figures' span
    assert re.fullmatch(r"  ! GPU 0-6 SM \d(-\d)?% \(util 9\d(-(9\d|100))?%\)", notes), panel
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
        assert "* GPU 0-6 util: GPM: first sample" in first, first
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


# ---------------------------------------------------------------------------- Prometheus
def stepped(n: int):
    """The Stepper's steps over the first n samples of the scenario (seed 0)."""
    from gpudisk_top.sim import Simulator, builtin
    from gpudisk_top.verdict.step import Stepper

    sim, stepper = Simulator(builtin(SCENARIO), seed=0), Stepper()
    return [stepper.step(sim.sample()) for _ in range(n)]


def exposition(step) -> dict:
    """{(name, frozenset(labels)): value} of the exporter fed `step`."""
    from prometheus_client.parser import text_string_to_metric_families

    from gpudisk_top.exporter import MetricsServer

    server = MetricsServer(None)
    server.update(step.model, step.verdict, [], [], [])
    return {(s.name, frozenset(s.labels.items())): s.value
            for fam in text_string_to_metric_families(server.render_text()) for s in fam.samples}


def test_prometheus_names_each_gpus_tier_and_the_ratio_is_the_tiers_figure():
    s = exposition(stepped(SMALL_KERNELS_AT)[-1])
    tiers = {dict(ls)["gpu"]: dict(ls)["source"] for (n, ls), v in s.items()
             if n == "gpudisk_top_gpu_busy_source_info" and v == 1}
    assert tiers == {**{str(i): "gpm-sm-active" for i in range(7)}, "7": "utilization"}
    ratio = {dict(ls)["gpu"]: v for (n, ls), v in s.items()
             if n == "gpudisk_top_gpu_utilization_ratio"}
    nvml = {dict(ls)["gpu"]: v for (n, ls), v in s.items()
            if n == "gpudisk_top_gpu_nvml_utilization_ratio"}
    assert ratio["0"] < 0.12 and nvml["0"] > 0.9       # SM activity, not utilization.gpu
    assert ratio["7"] == nvml["7"] > 0.9


# ---------------------------------------------------------------------------- report
def test_the_report_says_each_gpus_tier_over_the_recording(tmp_path):
    import json
    import subprocess
    import sys

    from gpudisk_top.sim import Simulator, builtin

    n, bad = 60, range(30, 33)
    sim = Simulator(builtin(SCENARIO), seed=0)
    samples = []
    for k in range(n):
        # GPU 0's driver answers NaN SM activity for 3 intervals: it falls back, and says why
        sim.nvml.set_state(0, gpm_values={2: float("nan")} if k in bad else {})
        samples.append(sim.sample())
    path = write_recording(tmp_path / "gpm.gdtrec", samples, scenario=SCENARIO)
    run = lambda *a: subprocess.run([sys.executable, "-m", "gpudisk_top", "report", *a, path],  # noqa: E731
                                    capture_output=True, text=True, timeout=120, check=True).stdout
    doc = json.loads(run("--json"))
    assert doc["busy_tiers_counted"] == {"intervals": n - 1, "of": n - 1}
    gpus = {g["index"]: g for g in doc["gpus"]}
    # n samples, n - 1 intervals (the first sample has none: its "first sample" is no
    # interval's)
    for i in range(1, 7):
        assert gpus[i]["busy_tier_intervals"] == n - 1
        assert gpus[i]["busy_tier_pct"] == {"gpm-sm-active": 100.0, "utilization": 0.0}
        assert gpus[i]["busy_fallbacks"] == []
    assert gpus[0]["busy_tier_pct"] == {"gpm-sm-active": round((n - 1 - 3) / (n - 1) * 100, 1),
                                        "utilization": round(3 / (n - 1) * 100, 1)}
    (fell,) = gpus[0]["busy_fallbacks"]
    assert fell["intervals"] == 3 and "nan" in fell["note"].lower(), fell
    assert gpus[7]["busy_tier_pct"] == {"gpm-sm-active": 0.0, "utilization": 100.0}
    assert gpus[7]["busy_fallbacks"] == []
    text = run()
    assert "GPU busy figure, per GPU (every interval): the share of intervals" in text
    assert "  GPU  0: GPM SM activity 94.9%, utilization.gpu 5.1%" in text
    assert f"fell back 3x: {fell['note']}" in text
    assert "  GPU  1: GPM SM activity 100.0%\n" in text
    assert "  GPU  7: utilization.gpu 100.0%" in text


def test_a_window_too_long_to_read_raw_says_what_it_counted(tmp_path, monkeypatch):
    """Recorded summaries do not keep the tier: a window of whole blocks longer than
    MAX_RAW_SAMPLES counts only the intervals it modelled, and says so; --recompute
    counts every one."""
    from gpudisk_top.record import Recording
    from gpudisk_top.report import summary, tally, tiers
    from gpudisk_top.report.tiers import tier_lines

    path = write_recording(tmp_path / "gpm.gdtrec", sim_samples(SCENARIO, n=130), scenario=SCENARIO)
    monkeypatch.setattr(tally, "MIN_CHART_BLOCKS", 0)      # whole blocks, as a long window
    monkeypatch.setattr(tiers, "MAX_RAW_SAMPLES", 100)
    with Recording.open(path) as rec:
        fast = summary.build(rec, rec.start_s + 10, None).data
        slow = summary.build(rec, rec.start_s + 10, None, recompute=True).data
    assert fast["busy_tiers_counted"]["of"] == 120
    assert 0 < fast["busy_tiers_counted"]["intervals"] < 120       # the window's cut block
    assert slow["busy_tiers_counted"] == {"intervals": 120, "of": 120}
    assert f"{fast['busy_tiers_counted']['intervals']} of 120 intervals counted: report " \
        "--recompute counts every one" in tier_lines(fast)[0]
    monkeypatch.setattr(tiers, "MAX_RAW_SAMPLES", 1200)          # read raw: as a replay
    with Recording.open(path) as rec:
        again = summary.build(rec, rec.start_s + 10, None).data
    assert [g["busy_tier_pct"] for g in again["gpus"]] == [g["busy_tier_pct"] for g in slow["gpus"]]
    assert again["busy_tiers_counted"] == slow["busy_tiers_counted"]


# ---------------------------------------------------------------------------- the fleet
def busy_counts(instance: str, counts: dict[str, float], job: str = "gpudisk-top") -> list:
    """The table query's tier elements of a node, as Prometheus answers its
    `count without (gpu, uuid) (gpu_busy_source_info)` marked fleet_busy (no name)."""
    return [({"instance": instance, "job": job, "training_job": "llama", "source": source,
              "fleet_busy": "1"}, n) for source, n in counts.items()]


def fleet_view(series: list, now_s: float = 1_767_225_600.0):
    from fleet_series import vector_answer

    from gpudisk_top.fleet.promapi import parse_answer
    from gpudisk_top.fleet.table import build_view

    return build_view(parse_answer(vector_answer(series, now_s)), None, now_s)


def test_the_fleet_asks_for_each_nodes_tiers_in_its_one_query():
    from gpudisk_top.fleet.queries import table_query

    for recorded in (False, True):
        q = table_query({"training_job": "llama"}, recorded=recorded)
        assert ('label_replace(count without (gpu, uuid) (gpudisk_top_gpu_busy_source_info'
                '{training_job="llama"}), "fleet_busy", "1", "", "")') in q


def test_the_fleet_names_each_nodes_tier_and_old_exporters_read_as_utilization():
    from fleet_series import node_series

    from gpudisk_top.fleet.text import render_text

    now = 1_767_225_600.0
    hopper = node_series("h100:9808", now) + busy_counts("h100:9808", {"gpm-sm-active": 8})
    mixed = node_series("mixed:9808", now) + busy_counts(
        "mixed:9808", {"gpm-sm-active": 7, "utilization": 1})
    old = node_series("old:9808", now)                   # an exporter before the series
    # a bad count, and a tier this version does not know: dropped, read as utilization
    odd = node_series("odd:9808", now) + busy_counts("odd:9808", {"gpm-sm-active": -1,
                                                                  "future-tier": 8})
    view = fleet_view(hopper + mixed + old + odd, now)
    rows = {r.node: r for r in view.rows}
    assert rows["h100:9808"].busy_sources == {"gpm-sm-active": 8}
    assert rows["h100:9808"].busy_tag == "SM"
    assert rows["mixed:9808"].busy_tag == "SM+util"
    assert rows["old:9808"].busy_sources == {} and rows["old:9808"].busy_tag == "util"
    assert rows["odd:9808"].busy_sources == {"utilization": 8} and rows["odd:9808"].bad_series == 1
    nodes = {n["node"]: n for n in view.to_json()["nodes"]}
    assert nodes["mixed:9808"]["busy_sources"] == {"gpm-sm-active": 7, "utilization": 1}
    assert nodes["mixed:9808"]["busy_tag"] == "SM+util" and nodes["old:9808"]["busy_tag"] == "util"
    text = render_text(view)
    head = next(line for line in text.splitlines() if line.startswith("NODE"))
    assert "BUSY%" in head
    marks = {line.split()[0]: line for line in text.splitlines() if ":9808" in line}
    assert re.search(r"\b95%S\b", marks["h100:9808"]) and re.search(r"\b95%~", marks["mixed:9808"])
    assert re.search(r"\b95%U\b", marks["old:9808"])
    assert "BUSY%: S GPM SM activity, U utilization.gpu, ~ a node of both" in text
    # every node on one tier: the header names it, the rows are not marked
    only = render_text(fleet_view(hopper, now))
    assert "SM%" in next(line for line in only.splitlines() if line.startswith("NODE"))
    assert re.search(r"\b95%(\s|$)", next(line for line in only.splitlines() if "h100" in line))
    legacy = render_text(fleet_view(old, now))
    assert "UTIL%" in next(line for line in legacy.splitlines() if line.startswith("NODE"))


async def test_the_fleet_screen_marks_each_rows_tier_where_they_differ():
    import sys

    from fleet_series import node_series

    from gpudisk_top.ui.fleet_app import FleetApp
    from gpudisk_top.ui.widgets.fleet_table import FleetTable

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1] / "screenshots"))
    import fleet_shots

    now = 1_767_225_600.0
    source = fleet_shots.CannedSource()
    app = FleetApp(source, autostart=False)
    mixed = (node_series("h100:9808", now) + busy_counts("h100:9808", {"gpm-sm-active": 8})
             + node_series("old:9808", now))
    async with app.run_test(size=SMALL) as pilot:
        app.apply(fleet_view(mixed, now))
        await pilot.pause()
        text = text_of(app.query_one(FleetTable))
        head = text.splitlines()[0]
        assert " GPUs busy " in head, head
        rows = {line.split()[2]: line for line in text.splitlines()[1:] if ":9808" in line}
        assert " 95%S " in rows["h100:9808"] and " 95%U " in rows["old:9808"], rows
        app.apply(fleet_view(node_series("h100:9808", now)
                             + busy_counts("h100:9808", {"gpm-sm-active": 8}), now))
        await pilot.pause()
        text = text_of(app.query_one(FleetTable))
        assert " GPUs SM   " in text.splitlines()[0] and " 95% " in text, text
