"""Issue 40: throttling and per-process GPU use on the dashboard, in the report and in
simulated nodes.  A scenario gives per-GPU throttle shares (the stand-in counts them as
NVML's clock-event durations), the GPU panel says each GPU held back with its reason and
share under the cells ("throttled: GPU 0-4,6-7 pwr 42%; GPU 5 pwr 40%, therm 10%", at
80x24 and 160x48, through Pilot), a GPU that counts no duration says its bit mask is one
("hw therm (mask)"), the `p` process rows show NVML's per-process SM % with its age as
--once does ("71@3s", n/a where none came; no column where no process has one), and the
report gives each GPU's share of the recording each reason held."""

from __future__ import annotations

import json
import re

import pynvml
import pytest

from gpudisk_top.collect.gpu import GpuCollector
from gpudisk_top.model.gpu import gpu_views
from gpudisk_top.model.snapshot import Model
from gpudisk_top.sim import Simulator
from gpudisk_top.sim.fake_nvml import FakeGpu, FakeNvml
from gpudisk_top.sim.scenario import ScenarioError
from gpudisk_top.sim.scenario_toml import loads_toml
from gpudisk_top.ui.widgets.gpu_notes import throttle_notes
from gpudisk_top.ui.widgets.gpus import GpuPanel
from apps import dashboard_app
from screen_text import screen_text, text_of

SMALL, LARGE = (80, 24), (160, 48)
# GPUs 0-4 and 6-7 at their power cap 42% of the time, GPU 5 40% and 10% thermal, in
# the first phase; none in the second
SCENARIO = """
name = "throttled"
[gpus]
count = 8
[[disks]]
name = "nvme0n1"
class = "NVMe"
mountpoint = "/data"
[job]
dataset_disk = "nvme0n1"
[[phases]]
name = "capped"
duration_s = 30
gpu_util_pct = 96
gpu_throttle_pct = { sw_power_cap = 42 }
gpu_throttle_by_gpu = { 5 = { sw_power_cap = 40, sw_thermal = 10 } }
[[phases]]
name = "cool"
duration_s = 30
gpu_util_pct = 96
"""
THROTTLED = "  throttled: GPU 0-4,6-7 pwr 42%; GPU 5 pwr 40%, therm 10%"


def scenario(text: str = SCENARIO):
    return loads_toml(text, "test")


def test_a_scenario_gives_each_gpu_its_throttle_shares():
    sim = Simulator(scenario(), seed=0)
    last = sim.sample()
    shares = []
    for _ in range(40):
        sample = sim.sample()
        model = Model.new(sample, last)
        last = sample
        shares.append({g.index: {r: round(p, 1) for r, p in g.throttle_pct.items() if p}
                       for g in model.gpus})
    capped = shares[5]
    assert capped[0] == capped[7] == {"sw_power_cap": 42.0}, capped
    assert capped[5] == {"sw_power_cap": 40.0, "sw_thermal": 10.0}, capped
    assert shares[-1] == {i: {} for i in range(8)}, shares[-1]     # the cool phase


@pytest.mark.parametrize("phase, error", [
    ('gpu_throttle_pct = { power = 40 }', "gpu_throttle_pct: unknown reason 'power'"),
    ('gpu_throttle_pct = { sw_power_cap = 140 }',
     "gpu_throttle_pct.sw_power_cap must be within 0..100, not 140.0"),
    ('gpu_throttle_by_gpu = { 9 = { sw_thermal = 10 } }', "gpu_throttle_by_gpu: GPU 9 does not exist"),
])
def test_a_bad_throttle_key_is_a_clear_error(phase, error):
    text = SCENARIO.replace("gpu_throttle_pct = { sw_power_cap = 42 }\n"
                            "gpu_throttle_by_gpu = { 5 = { sw_power_cap = 40, sw_thermal = 10 } }",
                            phase)
    with pytest.raises(ScenarioError, match=re.escape(error)):
        scenario(text)


@pytest.mark.parametrize("size", [SMALL, LARGE])
async def test_the_gpu_panel_says_which_gpus_were_held_back_by_what_and_how_long(size):
    app = dashboard_app(Simulator(scenario(), seed=0))
    async with app.run_test(size=size) as pilot:
        app.advance(3)
        await pilot.pause()
        panel = text_of(app.query_one(GpuPanel))
        assert THROTTLED in panel.splitlines(), panel
        assert THROTTLED in screen_text(app), screen_text(app)
        app.advance(35)                    # the cool phase: nothing held them back
        await pilot.pause()
        assert "throttled" not in text_of(app.query_one(GpuPanel))


@pytest.mark.parametrize("size", [SMALL, LARGE])
async def test_the_process_rows_show_nvmls_per_process_sm_with_its_age(size):
    sim = Simulator(scenario(), seed=0)
    app = dashboard_app(sim)
    async with app.run_test(size=size) as pilot:
        app.advance(2)
        await pilot.press("p")
        await pilot.pause()
        # the simulator's GPUs give no per-process sample: no column
        assert " sm% " not in text_of(app.query_one(GpuPanel))
        pids = sim.job_pids
        sim.nvml.set_state(0, process_util={pids[0]: (71.0, 20.0)})
        app.advance(6)                     # the process list's cadence (5 s)
        await pilot.pause()
        lines = text_of(app.query_one(GpuPanel)).splitlines()
        head = next(line for line in lines if " pid " in line)
        row = next(line for line in lines if f" {pids[0]} " in line)
        assert re.search(r" 71@\ds ", row), row
        # in the column its header names
        at = head.index("sm%") + 3
        assert re.fullmatch(r"71@\ds", row[:at].split()[-1]), (head, row)
        assert any(f" {pid} " in line and " n/a " in line[:at + 1] for line in lines
                   for pid in pids[1:]), lines
        assert any(line.startswith("   sm%: NVML's last sample") for line in lines), lines


# ---------------------------------------------------------------------------- report
def stand_in_views(intervals: int):
    """Each interval's GpuViews of three stand-in GPUs: GPU 0 counts no duration and
    reads its power cap in the bit mask, GPU 1 at its power cap 25% of the time, GPU 2
    idle."""
    fields = [getattr(pynvml, f"NVML_FI_DEV_CLOCKS_EVENT_REASON_{n}") for n in (
        "SW_POWER_CAP", "HW_POWER_BRAKE_SLOWDOWN", "SW_THERM_SLOWDOWN", "HW_THERM_SLOWDOWN",
        "SYNC_BOOST")]
    nvml = FakeNvml(gpus=[FakeGpu(unsupported_fields=set(fields),
                                  clocks_event_reasons=pynvml.nvmlClocksEventReasonSwPowerCap),
                          FakeGpu(throttle_pct={fields[0]: 25.0}),
                          FakeGpu(clocks_event_reasons=0x1)],
                    start_us=1_767_225_600_000_000)
    now = [1000.0]
    collector = GpuCollector(nvml, clock=lambda: now[0], pcie_background=False)
    prev = collector.collect()
    out = []
    for _ in range(intervals):
        now[0] += 1
        nvml.advance(1)
        snap = collector.collect()
        out.append(gpu_views(snap, prev, None))
        prev = snap
    collector.close()
    return out


def test_the_panels_words_for_a_mask_are_never_a_share():
    [views] = stand_in_views(1)
    [[(text, _)]] = throttle_notes(views, 80)
    assert text == "  throttled: GPU 0 pwr cap (mask); GPU 1 pwr 25%", text
    [[(text, _)]] = throttle_notes(views, 30)           # cut to the width, never wrapped
    assert len(text) == 30 and text.endswith("…")
    assert throttle_notes(views[2:], 80) == []           # an idle GPU is not held down


def test_the_report_counts_a_mask_in_intervals_and_durations_in_time():
    from gpudisk_top.report.throttle import ThrottleCount, add_throttle, throttle_lines

    count = ThrottleCount()
    for views in stand_in_views(4):
        count.add(views, 1.0)
    data = {"gpus": [{"index": i} for i in range(3)]}
    add_throttle(data, count)
    g0, g1, g2 = data["gpus"]
    assert g0["throttle_pct"] == dict.fromkeys(g0["throttle_pct"]) and g0["throttle_counted_s"] == 0
    assert (g0["throttle_mask_intervals"], g0["throttle_mask"]) == (4, {"sw_power_cap": 4})
    assert g1["throttle_pct"]["sw_power_cap"] == 25.0 and g1["throttle_counted_s"] == 4.0
    assert g2["throttle_mask"] == {} and not any(g2["throttle_pct"].values())
    assert throttle_lines(data) == [
        "GPU throttling, per GPU: the share of the time each reason held the clocks down "
        "(NVML clock-event durations)",
        "  GPU  1: sw_power_cap 25.0%",
        "GPU throttling at the read, per GPU (the bit mask: these GPUs count no duration, so "
        "no share of the time is known)",
        "  GPU  0: sw_power_cap in 4 of 4 intervals"]
    assert throttle_lines({"gpus": [{"index": 0}]}) == []     # a recording with neither


def recorded(tmp_path, n: int = 60) -> str:
    from recording_helpers import write_recording

    sim = Simulator(scenario(), seed=0)
    return write_recording(tmp_path / "throttled.gdtrec", [sim.sample() for _ in range(n)])


def test_the_report_gives_each_gpus_share_of_the_recording_each_reason_held(tmp_path):
    import subprocess
    import sys

    path = recorded(tmp_path)
    run = lambda *a: subprocess.run([sys.executable, "-m", "gpudisk_top", "report", *a, path],  # noqa: E731
                                    capture_output=True, text=True, timeout=120, check=True).stdout
    doc = json.loads(run("--json"))
    gpus = {g["index"]: g for g in doc["gpus"]}
    # 59 intervals, 29 of them in the capped phase (its first sample has no interval)
    share = lambda pct: round(pct * 29 / 59, 1)  # noqa: E731
    for i in (0, 7):
        assert gpus[i]["throttle_pct"] == {"sw_power_cap": share(42), "hw_power_brake": 0.0,
                                           "sw_thermal": 0.0, "hw_thermal": 0.0, "sync_boost": 0.0}
        assert gpus[i]["throttle_counted_s"] == 59.0 and gpus[i]["throttle_mask_intervals"] == 0
    assert gpus[5]["throttle_pct"]["sw_power_cap"] == share(40)
    assert gpus[5]["throttle_pct"]["sw_thermal"] == share(10)
    text = run()
    assert f"  GPU  0: sw_power_cap {share(42)}%\n" in text, text
    assert f"  GPU  5: sw_power_cap {share(40)}%, sw_thermal {share(10)}%\n" in text, text


def test_summaries_and_a_replay_count_the_same_throttling(tmp_path, monkeypatch):
    from gpudisk_top.record import Recording
    from gpudisk_top.report import summary, tally

    path = recorded(tmp_path, n=130)
    monkeypatch.setattr(tally, "MIN_CHART_BLOCKS", 0)      # whole blocks, as a long window
    with Recording.open(path) as rec:
        fast = summary.build(rec, rec.start_s + 10, None).data
        slow = summary.build(rec, rec.start_s + 10, None, recompute=True).data
    assert [g["throttle_pct"] for g in fast["gpus"]] == [g["throttle_pct"] for g in slow["gpus"]]
    assert fast["gpus"][0]["throttle_pct"]["sw_power_cap"] > 0
