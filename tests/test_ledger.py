"""The stall ledger (model/ledger.py): GPU time not used, by cause, counted from the raw
samples; its total and its split checked against a count made here, independently, from
the recordings' raw NVML samples and the verdicts' states."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from gpudisk_top.collect.sample import window_values
from gpudisk_top.exporter.server import MetricsServer
from gpudisk_top.model import ledger as L
from gpudisk_top.record.reader import Recording
from gpudisk_top.session.replay import Replay

DEMO = Path(__file__).resolve().parent.parent / "examples" / "demo-simulated.gdtrec"


def _util_pct(raw, last_wall_s, wall_s):
    """A GPU's utilization over (last, now], from NVML's own samples, as nvidia-smi
    defines it: the mean of the samples stamped inside the interval."""
    samples = raw.util_samples
    if samples is None:
        return raw.util_now_pct
    if hasattr(samples, "sum_pct"):                 # a recording's UtilWindow
        return samples.sum_pct / samples.count
    values = window_values(samples, (int(last_wall_s * 1e6), int(wall_s * 1e6)))
    return sum(values) / len(values) if values else raw.util_now_pct


def independent(rec: Recording, replay: Replay):
    """(unused GPU-s by cause, idle GPU-s, per-interval (state, unused, lost)) counted
    here from the raw samples: the utilization of each GPU with a process, and the
    verdict's state; the reference the job's healthy median (0.1 % steps) after 30."""
    by_cause = dict.fromkeys(L.CAUSES, 0.0)
    idle = 0.0
    healthy_utils: list[float] = []
    last = None
    rows = []
    for model, verdict in replay.models():
        sample = model.sample
        if last is None or model.interval_s <= 0 or sample.gpu.status != "ok":
            last = sample
            continue
        interval_s = sample.mono_s - last.mono_s
        job, n_idle = [], 0
        for g in sample.gpu.gpus:
            if g.lost:
                continue
            if not g.processes:
                n_idle += 1
                continue
            u = _util_pct(g, last.wall_s, sample.wall_s)
            if u is not None:
                job.append(min(100.0, max(0.0, u)) / 100.0)
        idle += n_idle * interval_s
        last = sample
        if not job:
            continue
        state = verdict.state
        cause = L.CAUSE_OF_STATE.get(state)
        if cause is None:
            continue
        ref = 1.0
        if len(healthy_utils) >= L.MIN_HEALTHY_INTERVALS:
            ref = statistics.median(healthy_utils) / 100.0
        unused = sum(interval_s * (1 - u) for u in job)
        lost = 0.0 if cause == "healthy" else sum(interval_s * max(0.0, ref - u) for u in job)
        by_cause["healthy"] += unused - lost
        if cause != "healthy":
            by_cause[cause] += lost
        if state == "healthy" and verdict.raw_state == "healthy":
            healthy_utils.append(round(sum(job) / len(job) * 1000) / 10)
        rows.append((state, unused, lost))
    return by_cause, idle, rows


@pytest.fixture(scope="module")
def demo():
    rec = Recording.open(DEMO)
    replay = Replay(rec, warmup_s=None)
    server = MetricsServer(None)
    scraped = []
    for model, verdict in replay.models():
        server.update(model, verdict)
        scraped.append(server.collector.collect())
    return rec, replay, server, scraped


def _counter(families, name, **labels):
    for fam in families:
        for s in fam.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    return None


def test_demo_total_and_split_equal_an_independent_count(demo):
    rec, replay, _server, _ = demo
    led = replay.stepper.ledger
    by_cause, idle, rows = independent(rec, Replay(rec, warmup_s=None))
    total = sum(by_cause.values())
    assert total > 0 and led.lost_gpu_s > 0
    assert led.unused_gpu_s == pytest.approx(total, rel=1e-3)
    for cause in L.CAUSES:
        assert led.by_cause[cause] == pytest.approx(by_cause[cause], rel=1e-3, abs=1e-6), cause
    assert led.idle_gpu_s == pytest.approx(idle, rel=1e-3)
    # the demo's three episodes each lose time, to their own state
    states = {s for s, _u, lost in rows if lost > 0}
    assert states == {"disk-starved", "checkpoint-stall", "cpu-starved"}
    for ep in replay.episodes:
        assert ep.lost_gpu_s > 0
    assert sum(ep.lost_gpu_s for ep in replay.episodes) == pytest.approx(led.lost_gpu_s, rel=1e-9)
    assert led.by_device == {"sdb": pytest.approx(by_cause["disk-starved"], rel=1e-3)}


def test_exporter_counters_only_grow_and_match_the_ledger(demo):
    _rec, replay, _server, scraped = demo
    name = "gpudisk_top_gpu_seconds_total"
    for cause in L.CAUSES:
        values = [_counter(f, name, cause=cause) for f in scraped]
        assert all(v is not None for v in values), cause       # every cause from the start
        assert all(b >= a for a, b in zip(values, values[1:])), cause
        assert values[-1] == pytest.approx(replay.stepper.ledger.by_cause[cause])
    idle = [_counter(f, "gpudisk_top_gpu_idle_seconds_total") for f in scraped]
    assert all(b >= a for a, b in zip(idle, idle[1:])) and idle[-1] > 0
    dev = _counter(scraped[-1], "gpudisk_top_gpu_seconds_by_device_total", device="sdb")
    assert dev == pytest.approx(replay.stepper.ledger.by_cause["disk-starved"])
