"""Issue 23, item 4: no readable GPU is the state `unavailable`, never `idle`.

This machine has no NVIDIA driver, so the real command line here is the "no driver" case:
--once (text and JSON), `serve` scraped over HTTP, an alert rule, a recording and its
report.  The other ways of reading no GPU (a driver that stops answering or unloads, NVML
seeing none, every GPU lost) and GPUs that come back run through the real collector,
model and detector with the project's one NVML fake (sim/fake_nvml.py)."""

from __future__ import annotations

import copy
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

import pynvml
import pytest
from prometheus_client.parser import text_string_to_metric_families

import standin
from gpudisk_top.collect.gpu import GpuCollector
from gpudisk_top.exporter.families import REASON_MAX_CHARS, reason_label
from gpudisk_top.fleet.table import build_view
from gpudisk_top.fleet.view import NO_GPU_TEXT
from gpudisk_top.fleet.promapi import parse_answer
from gpudisk_top.fleet.text import render_text as fleet_text
from gpudisk_top.verdict.detect import STARVED_STATES, STATES, UNAVAILABLE
from gpudisk_top.model.history import Column
from gpudisk_top.verdict.step import Stepper
from gpudisk_top.record.header import make_header
from gpudisk_top.record.writer import Recorder
from gpudisk_top.sim import Simulator, builtin
from gpudisk_top.sim.fake_nvml import FakeNvml
from gpudisk_top.ui import theme
from gpudisk_top.ui.widgets.fleet_table import state_cell
from gpudisk_top.ui.widgets.gpus import GpuPanel
from gpudisk_top.ui.widgets.timeline import Timeline
from gpudisk_top.ui.widgets.verdict import VerdictBanner
from gpudisk_top.collect.source import simulated_source
from apps import replay_screen_app
from cli_run import gdt
from screen_text import text_of

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PREFIX = "unavailable: "


@pytest.fixture(scope="module")
def once_json() -> dict:
    """`--once --json` on this machine; a machine with a working driver has nothing to show."""
    proc = gdt("--once", "--json", "--interval", "0.3")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    if doc["gpu_status"] == "ok":
        pytest.skip("this machine reads its GPUs: no real 'no driver' case here")
    return doc


@pytest.fixture(scope="module")
def reason(once_json) -> str:
    """NVML's own reason on this machine, as the collector put it in gpu_status."""
    assert once_json["gpu_status"].startswith(PREFIX)
    return once_json["gpu_status"][len(PREFIX):]


# ---------------------------------------------------------------------------- --once
def test_once_json_says_unavailable_with_the_reason_never_idle(once_json, reason):
    v = once_json["verdict"]
    assert v["state"] == "unavailable" and v["reason"] == reason, v
    assert f"GPUs unavailable: {reason}" in once_json["warnings"]
    assert once_json["gpus"] == [] and once_json["disks"]      # the disks are still read


def test_once_text_gives_the_verdict_and_its_reason_once(reason):
    proc = gdt("--once", "--interval", "0.3")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    verdicts = [line for line in lines if line.startswith("verdict: ")]
    assert verdicts == [f"verdict: unavailable: {reason}"], verdicts
    assert "GPUs: none readable" in lines
    assert proc.stdout.count(reason) == 1, proc.stdout    # item 11: said once, not twice


def test_a_hung_driver_call_is_unavailable_and_its_label_does_not_tick():
    proc = standin.run(["--once", "--json", "-i", "1"], gpus=2, processes={0: [os.getpid()]},
                       util_pct=90.0, hang={"function": "nvmlDeviceGetPowerUsage", "after_s": 0},
                       timeout=60)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    v = doc["verdict"]
    assert v["state"] == "unavailable", v
    assert v["reason"] == doc["gpu_status"][len(PREFIX):]
    assert v["reason"].startswith("NVML has not answered for ")
    # the exporter's label leaves out the running time, which changes every sample
    label = reason_label(v["reason"])
    assert re.fullmatch(r"NVML has not answered \(nvmlDeviceGetPowerUsage on GPU \d\)", label), label
    assert reason_label(v["reason"].replace("for 0.", "for 7.")) == label


def test_the_reason_label_is_escaped_and_bounded():
    assert reason_label("NVML error: \x1b]2;pwned\x07") == "NVML error: \\x1b]2;pwned\\x07"
    long = reason_label("NVML error: " + "x" * 1000)
    assert len(long) == REASON_MAX_CHARS and long.endswith("…")


# ---------------------------------------------------------------------------- serve, alerts
def test_serve_exports_the_state_and_why_over_http(reason):
    proc = subprocess.Popen([sys.executable, "-m", "gpudisk_top", "serve", "--listen",
                             "127.0.0.1:0", "-i", "0.3"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        url = re.search(r"http://\S+", proc.stderr.readline()).group(0)
        deadline = time.monotonic() + 30
        while True:
            body = urllib.request.urlopen(url, timeout=10).read().decode()
            if "gpudisk_top_state{" in body or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    fams = {f.name: f for f in text_string_to_metric_families(body)}
    states = {s.labels["state"]: s.value for s in fams["gpudisk_top_state"].samples}
    assert set(states) == set(STATES)
    assert states["unavailable"] == 1.0 and states["idle"] == 0.0 and sum(states.values()) == 1
    [info] = fams["gpudisk_top_gpus_unavailable_info"].samples
    assert info.labels == {"reason": reason} and info.value == 1.0
    assert [s.value for s in fams["gpudisk_top_gpus_starved"].samples] == [0.0]


def test_an_alert_rule_on_the_state_fires_and_starved_does_not(tmp_path, reason):
    log = tmp_path / "alerts.log"
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[[alerts]]\nname = "no-gpus"\nverdict = "unavailable"\nfor_samples = 2\n'
                   f'log = "{log}"\n\n'
                   f'[[alerts]]\nname = "starving"\nverdict = "starved"\nlog = "{log}"\n')
    proc = gdt("serve", "--listen", "127.0.0.1:0", "--count", "5", "-i", "0.3", "--config", str(cfg))
    assert proc.returncode == 0, proc.stderr
    lines = log.read_text().splitlines()
    assert len(lines) == 1, lines                     # once: the cooldown holds it after
    assert " gpudisk-top alert no-gpus: " in lines[0] and "unavailable" in lines[0], lines
    assert reason in lines[0]


# ---------------------------------------------------------------------------- the detector
def _states(sim: Simulator, stepper: Stepper, n: int) -> list:
    return [stepper.step(sim.sample())[1] for _ in range(n)]


def test_gpus_that_stop_answering_are_unavailable_then_come_back():
    sim = Simulator(builtin("healthy-cached"), seed=0)
    stepper = Stepper()
    before = _states(sim, stepper, 20)
    assert before[-1].state == "healthy"
    sim.nvml.count_error = pynvml.NVMLError_DriverNotLoaded     # the driver unloads
    gone = _states(sim, stepper, 5)
    assert {v.state for v in gone} == {UNAVAILABLE}
    assert {v.reason for v in gone} == {"NVIDIA driver not loaded"}
    assert all(v.gpus == [] and v.episode is None for v in gone)
    sim.nvml.count_error = None                                 # and loads again
    after = _states(sim, stepper, 45)                  # the collector retries after 30 s
    back = next(i for i, v in enumerate(after) if v.state != UNAVAILABLE)
    assert all(v.state == "healthy" for v in after[back:]), [v.state for v in after]
    assert all(v.state == UNAVAILABLE for v in after[:back])


def test_every_gpu_lost_is_unavailable_but_one_lost_is_not():
    sim = Simulator(builtin("healthy-cached"), seed=0)
    stepper = Stepper()
    _states(sim, stepper, 10)
    sim.nvml.lose_gpu(0)
    assert _states(sim, stepper, 3)[-1].state == "healthy"
    for i in range(len(sim.nvml.gpus)):
        sim.nvml.lose_gpu(i)
    v = _states(sim, stepper, 2)[-1]
    n = len(sim.nvml.gpus)
    assert v.state == UNAVAILABLE and v.reason.startswith(f"all {n} GPUs are lost: "), v.reason


def test_nvml_seeing_no_gpu_is_unavailable():
    sim = Simulator(builtin("idle-other-disk-load"), seed=0)
    sim.gpu_collector = GpuCollector(nvml=FakeNvml())
    stepper = Stepper()
    v = _states(sim, stepper, 3)[-1]
    assert (v.state, v.reason) == (UNAVAILABLE, "NVML sees no GPU")


def test_the_state_list_is_one_and_unavailable_is_not_starved():
    assert UNAVAILABLE in STATES and UNAVAILABLE not in STARVED_STATES
    assert STATES[-1] == UNAVAILABLE     # the recorder's state codes of the others unchanged
    assert theme.STATE_GLYPH[UNAVAILABLE] == "×"
    assert theme.STATE_BADGE[UNAVAILABLE] == "⊘ NO GPUS"


# ---------------------------------------------------------------------------- recordings
ORIGIN = simulated_source("healthy-cached", 0)


@pytest.fixture(scope="module")
def gone_and_back(tmp_path_factory) -> str:
    """90 s of a simulated node whose driver unloads at 30 s for 10 s; the collector
    reads the GPUs again at its retry, 30 s after the failure."""
    path = tmp_path_factory.mktemp("rec") / "gone.gdtrec"
    sim = Simulator(builtin("healthy-cached"), seed=0)
    rec = Recorder(str(path), make_header(ORIGIN, 1.0))
    for i in range(90):
        sim.nvml.count_error = pynvml.NVMLError_DriverNotLoaded if 30 <= i < 40 else None
        rec.append(sim.sample())
    rec.close("test")
    return str(path)


def _report(path: str, *args: str) -> dict:
    proc = gdt("report", "--json", "--source", "simulated", *args, path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("how", [(), ("--recompute",)], ids=["summaries", "recomputed"])
def test_report_tallies_unavailable_as_its_own_state(gone_and_back, how):
    doc = _report(gone_and_back, *how)
    assert doc["unavailable_s"] == pytest.approx(30.0, abs=1.01)
    for idx, per in doc["states"].items():
        assert per["unavailable"] == doc["unavailable_s"], (idx, per)
        assert per["idle"] == 0.0, (idx, per)              # never counted as idle
        assert per["unavailable"] + per["healthy"] == pytest.approx(doc["duration_s"])
    proc = gdt("report", "--no-charts", "--source", "simulated", *how, gone_and_back)
    assert proc.returncode == 0, proc.stderr
    head = next(line for line in proc.stdout.splitlines() if line.startswith("GPU "))
    assert head.split()[1:] == ["healthy", "unavailable"], head


def test_a_recording_here_without_a_driver_reports_no_readable_gpu(tmp_path, reason):
    path = tmp_path / "here.gdtrec"
    proc = gdt("record", "-o", str(path), "-i", "0.3", "--duration", "2")
    assert proc.returncode == 0, proc.stderr
    proc = gdt("report", "--json", str(path))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["states"] == {} and doc["duration_s"] > 0
    assert doc["unavailable_s"] == pytest.approx(doc["duration_s"])
    proc = gdt("report", "--no-charts", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "GPUs: none readable (unavailable) for " in proc.stdout, proc.stdout


async def test_the_replay_screen_shows_the_state_its_glyph_and_the_reason_once(gone_and_back):
    app = replay_screen_app(gone_and_back, ORIGIN, start_index=50)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        banner = text_of(app.query_one(VerdictBanner))
        assert "⊘ NO GPUS" in banner and "NVIDIA driver not loaded" in banner, banner
        assert "IDLE" not in banner
        assert text_of(app.query_one(GpuPanel)).strip(" >") == "GPUs: none readable"
        [state_row] = [line for line in text_of(app.query_one(Timeline)).splitlines()
                       if line.startswith("state")]
        assert "×" * 20 in state_row, state_row


def test_the_timeline_state_row_draws_the_glyph():
    cols = [Column(wall_s=float(i), interval_s=1.0, state=s, raw_state=s, episode=None)
            for i, s in enumerate(["healthy", UNAVAILABLE, UNAVAILABLE, "healthy"])]
    line = Timeline.state_line(cols, Timeline.shade_spans(cols))
    assert "".join(t for t, _ in line[1:]) == "·××·"


# ---------------------------------------------------------------------------- the fleet
FLEET = os.path.join(ROOT, "tests", "fixtures", "fleet")


def _fleet_with_a_broken_driver(node_name: str):
    """The captured table (Prometheus's own answer over the simulated fleet), with the
    node `node_name` exporting what a node without a driver exports: state unavailable,
    no GPU series."""
    with open(os.path.join(FLEET, "table.json")) as f:
        raw = json.load(f)
    with open(os.path.join(FLEET, "meta.json")) as f:
        meta = json.load(f)
    instance = meta["nodes"][node_name]
    out = copy.deepcopy(raw)
    kept = []
    for s in out["data"]["result"]:
        m = s["metric"]
        if m.get("instance") == instance:
            if m.get("__name__") == "gpudisk_top_gpu_utilization_ratio":
                continue
            if m.get("__name__") == "gpudisk_top_verdict_info":
                m.update(state=UNAVAILABLE, kind="", devices="", gpus="")
            if m.get("__name__") == "gpudisk_top_gpus_starved":
                s["value"][1] = "0"
        kept.append(s)
    out["data"]["result"] = kept
    return build_view(parse_answer(out, "Prometheus at http://test"), None, meta["table_at_s"])


def test_the_fleet_lists_it_with_the_problem_rows_not_with_idle():
    view = _fleet_with_a_broken_driver("healthy")
    order = [r.node for r in view.rows]
    broken = next(r for r in view.rows if r.state == UNAVAILABLE)
    tiers = [r.state for r in view.rows]
    at = order.index(broken.node)
    # after the nodes starved by their own cause, with the stale and down ones, before
    # the nodes waiting on peers, the healthy and the idle
    assert all(s in ("disk-starved", "cpu-starved", "checkpoint-stall", "stale", "down")
               for s in tiers[:at]), tiers
    assert all(s in ("stale", "down", "straggler", "undiagnosed-stall", "healthy", "idle")
               for s in tiers[at + 1:]), tiers
    assert not broken.starved and broken.evidence_text == NO_GPU_TEXT
    assert state_cell(broken, view.wall_s) == ("⊘ NO GPUS", theme.WARN)
    line = next(line for line in fleet_text(view).splitlines() if line.startswith(broken.node))
    assert "unavailable" in line and NO_GPU_TEXT in line, line
