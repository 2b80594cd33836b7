"""Issue 35 item 5: a gap in sampling is a gap, not GPU time, and a utilization that is
not a percentage reaches no output.

Recordings are made with the project's real recorder (tests/recording_helpers.py) from
the demo node's simulated samples while its disk starves (8 GPUs, 1 s apart), with one
gap or one bad utilization put in, and read back through the real `report` (text, JSON,
`--recompute`) and `export` (csv, jsonl, Perfetto) in fresh interpreters.  `serve` runs
with stand-in GPUs (tests/standin.py, the fake NVML) and is frozen by SIGSTOP.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import os
import re
import select
import signal
import subprocess
import time
import urllib.request

import pytest

import standin
from gpudisk_top.collect.sample import GpuRaw, GpuSnapshot, UtilWindow
from gpudisk_top.collect.utilpct import check_gpu, check_snapshot, checked, is_pct
from gpudisk_top.verdict import gaps
from gpudisk_top.verdict.ledger import GAPS_LISTED, IntervalLoss, Ledger, gaps_text
from gpudisk_top.verdict.step import Stepper
from gpudisk_top.record.reader import Recording
from recording_helpers import run_command, sim_samples, write_recording
from slack import slack

GPUS = 8
N = 30
BOUND_GPU_S = GPUS * N * 1.0    # every GPU, every second of a 30 s recording


def _starving(n: int = N):
    """n samples of the demo node from its first disk starvation (near 60 s) on."""
    return sim_samples("demo", 88 + n)[88:]


def _with_gap(samples, at: int, mono_s: float, wall_s: float):
    return samples[:at] + [dataclasses.replace(s, mono_s=s.mono_s + mono_s, wall_s=s.wall_s + wall_s)
                           for s in samples[at:]]


def _with_util(samples, at: int, value: float):
    s = samples[at]
    gpus = [dataclasses.replace(g, util_samples=None, util_now_pct=value) for g in s.gpu.gpus]
    out = list(samples)
    out[at] = dataclasses.replace(s, gpu=dataclasses.replace(s.gpu, gpus=gpus))
    return out


def _strict(text: str):
    def refuse(c):
        raise ValueError(f"{c} in the JSON")
    return json.loads(text, parse_constant=refuse)


def _report(path, *extra) -> dict:
    out = run_command("report", os.fspath(path), "--json", *extra)
    assert out.returncode == 0, out.stderr
    return _strict(out.stdout)


# ---------------------------------------------------------------------------- the rule
def test_the_gap_rule():
    # far past the cadence: a gap; within it, or under the floor, an interval
    assert gaps.gap_s(1.0, 1.0, 1.0) is None
    assert gaps.gap_s(10.0, 10.0, 1.0) is None and gaps.gap_s(10.5, 10.5, 1.0) == 10.5
    assert gaps.gap_s(4.9, 4.9, 0.1) is None and gaps.gap_s(5.1, 5.1, 0.1) == 5.1
    assert gaps.gap_s(300.0, 300.0, 60.0) is None          # record -i 60
    assert gaps.gap_s(1e9, 1e9, None) is None              # no cadence: only the clocks tell
    # a monotonic clock far ahead of the wall clock: its length is not confirmed
    assert gaps.gap_s(1e9 + 1, 1.0, None) == 1e9 + 1
    assert gaps.gap_s(1.0, -3599.0, 1.0) is None           # NTP stepped the wall clock back
    assert gaps.gap_s(math.inf, 1.0, 1.0) == 0.0 and gaps.gap_s(math.nan, 1.0, 1.0) == 0.0
    assert gaps.gap_s(0.0, 0.0, 1.0) is None and gaps.gap_s(-5.0, 1.0, 1.0) is None
    for bad in (None, 0, -1.0, math.nan, math.inf, True, "1"):
        assert gaps.cadence_of(bad) is None and gaps.limit_s(bad) is None


def test_the_step_splits_at_a_gap_and_says_it():
    samples = _with_gap(_starving(), 15, 20.0, 20.0)
    stepper = Stepper(cadence_s=1.0)
    losses = [stepper.step(s).loss for s in samples]
    gap = losses[15]
    assert gap.gap_s == pytest.approx(21.0) and gap.interval_s == 0.0 and gap.cause is None
    assert [x.gap_s for k, x in enumerate(losses) if k != 15] == [None] * (N - 1)
    ledger = stepper.ledger
    assert ledger.gap_count == 1 and ledger.gap_s == pytest.approx(21.0)
    assert ledger.seconds == pytest.approx(N - 2)          # the gap is not time
    assert ledger.job_gpu_s + ledger.idle_gpu_s == pytest.approx(GPUS * (N - 2))
    # the episode open before the gap ends there; none spans it
    wall_gap = samples[15].wall_s
    assert all(e.end_wall_s <= samples[14].wall_s or e.start_wall_s >= samples[14].wall_s
               for e in stepper.episodes if e.end_wall_s is not None)
    assert any(e.end_wall_s == samples[14].wall_s for e in stepper.episodes)
    assert all(not (e.start_wall_s < wall_gap - 20 < (e.end_wall_s or e.last_wall_s))
               for e in stepper.episodes)
    # without a cadence the same 20 s is an interval (a Stepper given none: --once)
    plain = Stepper()
    for s in samples:
        plain.step(s)
    assert plain.ledger.gap_count == 0 and plain.ledger.seconds == pytest.approx(N - 1 + 20)


def test_a_ledger_lists_its_longest_gaps_and_merges_them():
    a, b = Ledger(), Ledger()
    for k in range(GAPS_LISTED + 5):
        a.add(IntervalLoss(wall_s=1000.0 + k, interval_s=0.0, state="healthy", gap_s=10.0 + k))
    b.add(IntervalLoss(wall_s=5000.0, interval_s=0.0, state="healthy", gap_s=1e9))
    c = a.copy()
    a.merge(b)
    assert a.gap_count == GAPS_LISTED + 6 and len(a.gaps) == GAPS_LISTED
    assert a.gaps[0] == (5000.0, 1e9) and a.gap_s == pytest.approx(sum(10.0 + k for k in range(15)) + 1e9)
    assert c.gap_count == GAPS_LISTED + 5 and len(c.gaps) == GAPS_LISTED   # a copy stays
    text = gaps_text(a.as_json()["gaps"])
    assert text.startswith(f"not counted: {GAPS_LISTED + 6} gaps in sampling") and "the longest" in text
    assert gaps_text(Ledger().gaps_json()) is None


def test_utilizations_that_are_not_percentages_go_no_further():
    assert [is_pct(v) for v in (0, 0.0, 50.5, 100)] == [True] * 4
    assert not any(is_pct(v) for v in (-0.1, 100.1, math.nan, math.inf, -math.inf, 4294967295.0,
                                         True, None, "50"))
    raw = GpuRaw(index=3, util_samples=[(1, 50.0), (2, math.nan), (3, 4294967246.0)],
                 mem_util_samples=UtilWindow(math.inf, 2), util_now_pct=-50.0,
                 mem_util_now_pct=20.0)
    assert check_gpu(raw) == ["util_samples", "mem_util_samples", "util_now_pct"]
    assert raw.util_samples == [(1, 50.0)] and raw.mem_util_samples is None
    assert raw.util_now_pct is None and raw.mem_util_now_pct == 20.0
    assert check_gpu(raw) == []
    snap = GpuSnapshot(status="ok", gpus=[GpuRaw(index=0, util_now_pct=30.0),
                                          GpuRaw(index=1, util_samples=UtilWindow(-10.0, 1))])
    line = check_snapshot(snap)
    assert line.startswith("GPU 1: a utilization that is not a percentage (0-100) read as n/a")
    # checked(): a copy, the sample given left as it was (what a recorder writes)
    s = _with_util(_starving(2), 1, math.nan)[1]
    c = checked(s)
    assert c is not s and all(g.util_now_pct is None for g in c.gpu.gpus)
    assert all(math.isnan(g.util_now_pct) for g in s.gpu.gpus)
    good = _starving(2)[1]
    assert checked(good) is good


# ---------------------------------------------------------------------------- recordings
GAPS = {"mono-1e9": (1e9, 0.0), "both-1e9": (1e9, 1e9), "both-20s": (20.0, 20.0)}


@pytest.fixture(scope="module")
def gap_recordings(tmp_path_factory):
    d = tmp_path_factory.mktemp("gaps")
    return {name: write_recording(d / f"{name}.gdtrec", _with_gap(_starving(), 15, *jump))
            for name, jump in GAPS.items()}


@pytest.mark.parametrize("name", sorted(GAPS))
def test_report_and_recompute_agree_and_say_the_gap(gap_recordings, name):
    path = gap_recordings[name]
    with Recording.open(path) as rec:
        assert len(rec) == N                     # nothing recorded is lost
    fast, slow = _report(path), _report(path, "--recompute")
    assert slow["derived"] == "recomputed"
    jump = GAPS[name][0] + 1.0
    for d in (fast, slow):
        led = d["ledger"]
        assert d["samples"] == N and d["duration_s"] == N - 2
        assert 0 < led["lost_gpu_s"] <= BOUND_GPU_S and led["gpu_s"] == GPUS * (N - 2)
        assert led["gaps"]["count"] == 1 and led["gaps"]["seconds"] == pytest.approx(jump)
        assert led["gaps"]["listed"][0]["gap_s"] == pytest.approx(jump)
        assert led["gaps"]["listed"][0]["end_s"] == d["start_s"] + 15 + GAPS[name][1]
    for key in ("lost_gpu_s", "unused_gpu_s", "idle_gpu_s", "job_gpu_s"):
        assert fast["ledger"][key] == pytest.approx(slow["ledger"][key], rel=1e-9, abs=1e-9)
    text = run_command("report", path)
    assert text.returncode == 0, text.stderr
    section = text.stdout.split("GPU time lost:")[1]
    assert float(re.match(r" ([\d.]+) GPU-h of ([\d.]+)", section).group(2)) * 3600 <= BOUND_GPU_S
    assert "not counted: 1 gap in sampling" in section


@pytest.mark.parametrize("name", sorted(GAPS))
def test_exports_leave_the_gap_out(gap_recordings, name):
    path = gap_recordings[name]
    out = run_command("export", path, "-f", "jsonl", "-o", "-")
    assert out.returncode == 0, out.stderr
    lines = [_strict(x) for x in out.stdout.splitlines()]
    assert len(lines) == N - 2 and all(x["interval_s"] == 1.0 for x in lines)
    out = run_command("export", path, "-f", "csv", "-o", "-")
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert {r["interval_s"] for r in rows} == {"1.0"}
    out = run_command("export", path, "-f", "perfetto", "-o", "-")
    assert out.returncode == 0, out.stderr
    track = [e for e in _strict(out.stdout)["traceEvents"] if e.get("name") == "GPU time lost (GPU-s)"]
    assert len(track) == N - 2 and sum(track[-1]["args"].values()) <= BOUND_GPU_S


def test_summaries_that_counted_a_gap_are_replayed(tmp_path, monkeypatch):
    """A recorder before the rule (here: one whose rule let 20 s pass) counted the gap as
    time in its summaries: report does not add them up, and agrees with --recompute."""
    monkeypatch.setattr(gaps, "GAP_INTERVALS", 1000)
    monkeypatch.setattr(gaps, "GAP_MIN_S", 1e12)
    path = write_recording(tmp_path / "old.gdtrec", _with_gap(_starving(), 15, 20.0, 20.0))
    with Recording.open(path) as rec:
        rows = [r for _, b, _ in rec.summaries() for r in b.ledger]
        assert max(r[0] for r in rows if r) == pytest.approx(21.0)     # counted as time
    monkeypatch.undo()
    fast, slow = _report(path), _report(path, "--recompute")
    assert fast["derived"] == "recomputed"
    assert fast["ledger"] == slow["ledger"] | {"counted_from": fast["ledger"]["counted_from"]}
    assert fast["ledger"]["gaps"]["count"] == 1 and fast["duration_s"] == N - 2


BAD_UTILS = {"nan": math.nan, "inf": math.inf, "neg": -50.0, "huge": 1e308,
             "wrapped": 4294967246.0}


@pytest.mark.parametrize("name", sorted(BAD_UTILS))
def test_bad_utilizations_reach_no_output(tmp_path, name):
    samples = _with_util(_starving(), 10, BAD_UTILS[name])
    # the recorder's summaries see them as a reader will: it closes, and keeps the raw
    # samples as given (nothing recorded is lost)
    path = write_recording(tmp_path / "r.gdtrec", samples)
    with Recording.open(path) as rec:
        assert len(rec) == N and rec.summaries()
    for extra in ((), ("--recompute",)):
        d = _report(path, *extra)
        assert all(0 <= e["min_util_pct"] <= 100 for e in d["episodes"])
        assert 0 <= d["ledger"]["lost_gpu_s"] <= BOUND_GPU_S
        said = [w for w in d["warnings"] if "not a percentage" in w]
        assert len(said) == 1 and "sample 10: GPU 0, 1, 2, 3, 4, 5, 6, 7" in said[0]
    assert _report(path)["ledger"]["lost_gpu_s"] == pytest.approx(
        _report(path, "--recompute")["ledger"]["lost_gpu_s"])
    text = run_command("report", path)
    assert text.returncode == 0, text.stderr
    body = text.stdout.replace(os.fspath(path), "")
    assert not re.search(r"\bnan\b|\binf\b|-\d+(\.\d+)?%", body, re.I)
    for fmt in ("jsonl", "perfetto"):
        out = run_command("export", path, "-f", fmt, "-o", "-")
        assert out.returncode == 0, out.stderr
        if fmt == "jsonl":
            per_gpu = [g for x in out.stdout.splitlines() for g in _strict(x)["gpus"]]
        else:
            per_gpu = [e["args"] for e in _strict(out.stdout)["traceEvents"]
                       if e.get("ph") == "C" and e["name"].startswith("GPU ")]
        utils = [g.get("util_pct") for g in per_gpu]
        assert len(utils) >= GPUS * (N - 2) - GPUS
        assert all(u is None or 0 <= u <= 100 for u in utils)
    out = run_command("export", path, "-f", "csv", "-o", "-")
    assert out.returncode == 0, out.stderr
    for r in csv.DictReader(io.StringIO(out.stdout)):
        if r["kind"] == "gpu" and r["gpu_util_pct"]:
            assert 0 <= float(r["gpu_util_pct"]) <= 100


# ---------------------------------------------------------------------------- serve, frozen
def _scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def _sum(m: dict, *prefixes: str) -> float:
    return sum(v for k, v in m.items() if k.startswith(prefixes))


def test_serve_frozen_by_sigstop_counts_no_gpu_time_for_it():
    """The issue's serve stopped 20 s counted 20.7 GPU-s at a utilization it never saw:
    here, stopped 8 s at -i 0.5 (the rule's bound: 5 s), scraped before and after."""
    interval_s, freeze_s = 0.5, 8.0
    proc = standin.popen(["serve", "--listen", "127.0.0.1:0", "-i", str(interval_s)], gpus=2,
                         processes={0: [os.getpid()], 1: [os.getpid()]}, util_pct=40.0)
    try:
        line = ""
        deadline = time.monotonic() + 30 * slack()
        while "serving" not in line and time.monotonic() < deadline:
            if select.select([proc.stderr], [], [], 1.0)[0]:
                line = proc.stderr.readline()
        url = re.search(r"serving (http://\S+/metrics)", line).group(1)
        time.sleep(2.0)
        before, t1 = _scrape(url), time.monotonic()
        proc.send_signal(signal.SIGSTOP)
        time.sleep(freeze_s)
        proc.send_signal(signal.SIGCONT)
        time.sleep(2.0 * slack())
        after, t2 = _scrape(url), time.monotonic()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=10 * slack())
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    counted = ("gpudisk_top_gpu_seconds_total{", "gpudisk_top_gpu_idle_seconds_total")
    grown = _sum(after, *counted) - _sum(before, *counted)
    gap_s = _sum(after, "gpudisk_top_sample_gap_seconds_total")
    # the intervals counted between the scrapes lie between them, less the gap (which
    # holds the freeze), plus the interval under way at the first scrape
    assert gap_s >= freeze_s - 0.5
    assert after["gpudisk_top_sample_gaps_total"] >= 1
    sampled_s = (t2 - t1) - gap_s + interval_s + 1.0 * slack()
    assert grown <= 2 * sampled_s, (grown, sampled_s)
    assert re.search(r"warning: no sample for \d+\.\d s .*a gap in sampling, not counted", err)
