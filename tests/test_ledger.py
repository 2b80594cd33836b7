"""The stall ledger (verdict/ledger.py): GPU time not used, by cause, counted from the raw
samples; its total and its split checked against a count made here, independently, from
the recordings' raw NVML samples and the verdicts' states."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from gpudisk_top.collect.sample import window_values
from gpudisk_top.exporter.server import MetricsServer
from gpudisk_top.verdict import ledger as L
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
    for _i, model, verdict, loss in replay.run(rec.ranges()):
        server.update(model, verdict, loss=loss)
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
        assert led.lost_of(ep.id) > 0
    assert sum(led.lost_of(ep.id) for ep in replay.episodes) == pytest.approx(led.lost_gpu_s, rel=1e-9)
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


# ---------------------------------------------------------------------------- the rule
def _verdict(state, raw_state=None, **kw):
    from gpudisk_top.verdict.detect import Verdict

    return Verdict(wall_s=0.0, state=state, raw_state=raw_state or state, **kw)


def test_one_interval_counts_unused_time_to_its_state_and_idle_gpus_apart():
    from model_factory import gpu, model

    m = model(1, interval_s=2.0, gpus=[gpu(0, 40.0, pids=[7]), gpu(1, 90.0, pids=[7]),
                                      gpu(2, 0.0), gpu(3, None, pids=[7])])
    loss = L.Accountant().account(m, _verdict("disk-starved", devices=["sda"]))
    # GPU 3's utilization is not known: not counted; GPU 2 has no process: idle
    assert loss.job_gpus == 2 and loss.idle_gpu_s == 2.0
    assert loss.unused_gpu_s == pytest.approx(2.0 * 0.6 + 2.0 * 0.1)
    assert loss.lost_gpu_s == pytest.approx(loss.unused_gpu_s)    # against 100%
    assert loss.healthy_gpu_s == pytest.approx(0.0)
    assert (loss.cause, loss.blamed, loss.reference_pct) == ("disk-starved", "sda", None)
    healthy = L.Accountant().account(m, _verdict("healthy"))
    assert healthy.lost_gpu_s == 0 and healthy.healthy_gpu_s == pytest.approx(1.4)
    idle = L.Accountant().account(model(1, gpus=[gpu(0, 0.0), gpu(1, 0.0)]), _verdict("idle"))
    assert idle.cause is None and idle.idle_gpu_s == 2.0 and idle.unused_gpu_s == 0


def test_the_jobs_healthy_median_becomes_the_reference_and_a_new_job_forgets_it():
    from model_factory import gpu, model

    acc = L.Accountant()
    utils = [90.0 + (k % 5) for k in range(L.MIN_HEALTHY_INTERVALS)]   # median 92
    for k, u in enumerate(utils[:-1]):
        acc.account(model(k + 1, gpus=[gpu(0, u, pids=[7])]), _verdict("healthy"))
    starved = model(100, gpus=[gpu(0, 50.0, pids=[7])])
    assert acc.account(starved, _verdict("cpu-starved", kind="own")).reference_pct is None
    acc.account(model(40, gpus=[gpu(0, utils[-1], pids=[7])]), _verdict("healthy"))
    loss = acc.account(starved, _verdict("cpu-starved", kind="own"))
    assert loss.reference_pct == statistics.median(utils) == 92.0
    assert loss.lost_gpu_s == pytest.approx(0.92 - 0.50)
    assert loss.healthy_gpu_s == pytest.approx(1 - 0.92) and loss.blamed == "own"
    # a healthy-looking dip inside nothing (raw starved, shown calm) teaches nothing
    acc.account(model(41, gpus=[gpu(0, 10.0, pids=[7])]), _verdict("healthy", "cpu-starved"))
    assert acc.level.n == L.MIN_HEALTHY_INTERVALS
    # another job (no PID in common): 100% again
    other = acc.account(model(101, gpus=[gpu(0, 50.0, pids=[8])]), _verdict("disk-starved"))
    assert other.reference_pct is None and other.lost_gpu_s == pytest.approx(0.5)


def test_ledger_line_json_and_cost_read_the_same():
    from gpudisk_top.model.vocab import gpu_hours

    led = L.Ledger()
    led.add(L.IntervalLoss(0, 3600.0, "disk-starved", "disk-starved", "sdb", 8,
                           unused_gpu_s=3 * 3600.0, lost_gpu_s=2.9 * 3600, healthy_gpu_s=0.1 * 3600,
                           job_gpu_s=8 * 3600.0))
    led.add(L.IntervalLoss(0, 3600.0, "cpu-starved", "cpu-starved", "own", 8,
                           unused_gpu_s=0.3 * 3600, lost_gpu_s=0.3 * 3600, job_gpu_s=8 * 3600.0))
    price = L.Price(2.5, "USD")
    assert led.line(price) == ("lost 3.20 GPU-h below 100%: disk sdb 2.90, cpu own 0.30 "
                               "(cost 8.00 USD)")
    j = led.as_json(price)
    assert j["lost_gpu_s"] == pytest.approx(3.2 * 3600) and j["cost"] == pytest.approx(8.0)
    assert j["by_device"] == {"sdb": pytest.approx(2.9 * 3600)}
    assert gpu_hours(j["lost_gpu_s"]) == "3.20"
    assert led.as_json()["cost"] is None and "cost" not in led.line()


# ---------------------------------------------------------------------------- the surfaces
def test_report_json_counts_the_same_ledger_by_either_path(demo):
    from gpudisk_top.report import summary

    _rec, replay, _server, _ = demo
    led = replay.stepper.ledger
    for recompute in (False, True):
        rec = Recording.open(DEMO)
        try:
            d = summary.build(rec, recompute=recompute, price=L.Price(2.0)).data["ledger"]
        finally:
            rec.close()
        assert d["counted"] and d["lost_gpu_s"] == pytest.approx(led.lost_gpu_s, rel=1e-3)
        assert d["cost"] == pytest.approx(d["lost_gpu_s"] / 3600 * 2.0)
        assert sum(e["lost_gpu_s"] for e in d["by_episode"]) == pytest.approx(d["lost_gpu_s"], rel=1e-3)
        assert d["share_pct"] == pytest.approx(d["lost_gpu_s"] / d["gpu_s"] * 100)
        ck = next(e for e in d["by_episode"] if e["state"] == "checkpoint-stall")
        # the checkpoint's best fix (async save) is predicted to take the GPUs to ~100%
        assert ck["best_fix"] == "checkpoint" and 0 < ck["recovered_gpu_s"] <= ck["lost_gpu_s"]


def test_once_json_has_the_ledger_and_text_says_it(tmp_path):
    import json
    import subprocess
    import sys

    cfg = tmp_path / "c.toml"
    cfg.write_text('[ledger]\ngpu_hour_cost = 3\ncurrency = "EUR"\n')
    run = [sys.executable, "-m", "gpudisk_top", "--demo", "--once", "--demo-start", "120",
           "--config", str(cfg)]
    out = subprocess.run(run + ["--json"], capture_output=True, text=True, check=True).stdout
    led = json.loads(out)["ledger"]
    assert led["by_cause"]["disk-starved"] > 0 and led["currency"] == "EUR"
    assert led["cost"] == pytest.approx(led["lost_gpu_s"] / 3600 * 3)
    text = subprocess.run(run, capture_output=True, text=True, check=True).stdout
    assert f"GPU time: lost {led['lost_gpu_s'] / 3600:.2f} GPU-h" in text and "EUR)" in text


@pytest.mark.parametrize("body,message", [
    ("gpu_hour_cost = -1", "ledger.gpu_hour_cost must be"),
    ('gpu_hour_cost = "2"', "ledger.gpu_hour_cost must be"),
    ('currency = "USD"', "without ledger.gpu_hour_cost"),
    ('gpu_hour_cost = 1\ncurrency = "a b"', "ledger.currency must be"),
    ("price = 1", "unknown setting ledger.price"),
])
def test_a_bad_ledger_section_is_one_line_naming_it(tmp_path, body, message):
    from gpudisk_top.config import ConfigError, load

    cfg = tmp_path / "c.toml"
    cfg.write_text("[ledger]\n" + body + "\n")
    with pytest.raises(ConfigError) as err:
        load(str(cfg), required=True)
    assert message in str(err.value) and "line" in str(err.value)


def test_perfetto_counter_track_ends_at_the_ledger(demo, tmp_path):
    import json

    from gpudisk_top.report.export import LEDGER_TRACK, write_perfetto

    _rec, replay, _server, _ = demo
    rec = Recording.open(DEMO)
    path = tmp_path / "t.json"
    try:
        with open(path, "w") as out:
            write_perfetto(out, rec)
    finally:
        rec.close()
    track = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("name") == LEDGER_TRACK]
    ts = [e["ts"] for e in track]
    assert ts == sorted(ts)
    for cause in L.CAUSES:
        values = [e["args"][cause] for e in track]
        assert all(b >= a for a, b in zip(values, values[1:]))
    assert track[-1]["args"]["disk-starved"] == pytest.approx(
        replay.stepper.ledger.by_cause["disk-starved"])


def test_serve_demo_counters_never_go_down_between_scrapes():
    """A running `serve --demo` scraped twice: every cause's counter is there from the
    first scrape, none goes down, and the disk-starved one (and its device's) grows."""
    import re
    import signal
    import subprocess
    import sys
    import time
    import urllib.request

    from test_exporter import SERVE
    from test_prometheus_server import free_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", SERVE, "--demo", "disk-starved-sata",
                             "--demo-start", "40", "--listen", f"127.0.0.1:{port}", "-i", "0.5"],
                            stderr=subprocess.PIPE, text=True)

    def scrape() -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
        return {k: float(v) for k, v in re.findall(
            r'^(gpudisk_top_gpu_(?:idle_)?seconds(?:_by_device)?_total(?:\{[^}]*\})?) (\S+)$',
            text, re.M)}

    try:
        assert proc.stderr.readline().startswith("gpudisk-top: serving")
        deadline = time.monotonic() + 30
        first = scrape()
        while first.get('gpudisk_top_gpu_seconds_total{cause="disk-starved"}', 0) <= 0:
            assert time.monotonic() < deadline
            time.sleep(0.3)
            first = scrape()
        time.sleep(2.0)
        second = scrape()
        for cause in L.CAUSES:
            assert f'gpudisk_top_gpu_seconds_total{{cause="{cause}"}}' in first
        for key, value in first.items():
            assert second[key] >= value, key
        disk = 'gpudisk_top_gpu_seconds_total{cause="disk-starved"}'
        dev = 'gpudisk_top_gpu_seconds_by_device_total{device="sda"}'
        assert second[disk] > first[disk] and second[dev] > first[dev]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


# ---------------------------------------------------------------------------- a real job
@pytest.mark.integration
def test_a_real_loader_job_disk_starved_then_healthy(tmp_path):
    """tests/jobs/loader_job.py, its workers reading 4 KiB blocks with O_DIRECT from this
    machine's disk for 12 s, then fed from memory (the same trainer), recorded with a
    stand-in GPU that follows its progress: the ledger of the recording equals the count
    made here from its raw samples, the disk's time is the disk-starved intervals', blamed
    on the disk the data is on, and nothing more is lost once the job runs well."""
    import os
    import subprocess
    import sys

    import realdisk
    import standin
    from jobrun import HEALTHY_STEPS_S, JOB

    data = realdisk.random_file(os.path.join(realdisk.BASE, f"gdt-ledger-{os.getpid()}.bin"), 384)
    progress, rec_path = str(tmp_path / "progress"), str(tmp_path / "run.gdtrec")
    disk = realdisk.whole_disk(data)
    try:
        reads = realdisk.starving_reads(data, 2, 128)
        job = subprocess.Popen([sys.executable, JOB, "disk", "--then", "healthy", "--switch-s",
                                "13", "--workers", "2", "--seconds", "40", "--data", data,
                                "--progress", progress, "--reads", str(reads)])
        try:
            recorder = standin.popen(["record", "-o", rec_path, "-i", "1", "--duration", "28"],
                                     gpus=1, processes={0: [job.pid]}, progress=progress,
                                     healthy_steps_s=HEALTHY_STEPS_S)
            assert recorder.wait(90) == 0, recorder.stderr.read()
        finally:
            job.kill()
            job.wait()
    finally:
        os.unlink(data)
    rec = Recording.open(rec_path)
    try:
        replay = Replay(rec, warmup_s=None)
        for _ in replay.models():
            pass
        led = replay.stepper.ledger
        by_cause, _idle, rows = independent(rec, Replay(rec, warmup_s=None))
    finally:
        rec.close()
    states = [s for s, _u, _l in rows]
    # the invariants, whatever the machine's load made of the job
    assert led.unused_gpu_s == pytest.approx(sum(by_cause.values()), rel=1e-3)
    for cause in L.CAUSES:
        assert led.by_cause[cause] == pytest.approx(by_cause[cause], rel=1e-3, abs=1e-6), cause
    # the split follows the states: what each state's intervals lost is its cause's
    for state, cause in L.CAUSE_OF_STATE.items():
        if cause != "healthy":
            lost = sum(x for s, _u, x in rows if s == state)
            assert led.by_cause[cause] == pytest.approx(lost, rel=1e-3, abs=1e-6), state
    disk_lost = sum(lost for s, _u, lost in rows if s == "disk-starved")
    if disk_lost:
        assert led.by_device == {disk: pytest.approx(disk_lost, rel=1e-3)}
    assert led.lost_gpu_s > 3, states          # the job really was starved a while
    # the scenario's shape: the disk first, then healthy (a machine whose CPUs others
    # take makes the job cpu-starved instead: the verdict's business, test_real_jobs)
    if "disk-starved" not in states or states[-1] != "healthy":
        pytest.skip(f"this machine made the job {sorted(set(states))}: the ledger's "
                    "invariants held; the disk-then-healthy shape needs CPUs to spare")
    last = max(k for k, s in enumerate(states) if s != "healthy")
    assert last < len(states) - 3, states
    assert all(lost == 0 for _s, _u, lost in rows[last + 1:])


def test_one_voice_the_lost_gpu_hours_read_the_same_on_every_surface(demo):
    """--once's line, report's section, the dashboard's episode list and the exporter's
    counters read back: the same GPU-hours, by vocab's one Metric."""
    from gpudisk_top.model.select import DeviceFilter
    from gpudisk_top.model.snapshot import Model
    from gpudisk_top.model.vocab import gpu_hours
    from gpudisk_top.output import once
    from gpudisk_top.report.ledger import lines, section
    from gpudisk_top.ui.screens.episodes import EpisodesScreen

    _rec, replay, _server, scraped = demo
    led = replay.stepper.ledger
    want = f"lost {gpu_hours(led.lost_gpu_s)} GPU-h"
    m = Model.new(replay.stepper.last, None)
    assert want in once.render_text(m, DeviceFilter(), verdict=None, ledger=led)
    assert lines(section(led, [], []))[0].startswith(
        f"GPU time lost: {gpu_hours(led.lost_gpu_s)} GPU-h")
    assert want in EpisodesScreen([], 0.0, ledger=led).note
    counted = sum(_counter(scraped[-1], "gpudisk_top_gpu_seconds_total", cause=c)
                  for c in L.LOST_CAUSES)
    assert f"lost {gpu_hours(counted)} GPU-h" == want


def test_a_window_too_long_to_replay_from_summaries_says_how_to_count_it(monkeypatch):
    """report over recorded summaries written before they carried the ledger replays the
    window for it only up to REPLAY_MAX_SAMPLES; beyond, the section says why not and
    --recompute counts it (test_ledger_summaries.py: summaries that carry it).  Such
    summaries are model 9's only: the reading model is pinned to the fixture's."""
    from gpudisk_top.record import derived
    from gpudisk_top.report import ledger as report_ledger
    from gpudisk_top.report import summary
    from gpudisk_top.report.text import render

    monkeypatch.setattr(derived, "MODEL_VERSION", "9")
    monkeypatch.setattr(derived, "DERIVED_LAYOUT", 2)      # and its layout (no job rows)

    monkeypatch.setattr(report_ledger, "REPLAY_MAX_SAMPLES", 100)
    rec = Recording.open(DEMO.parent.parent / "tests" / "fixtures" / "recordings"
                         / "v2-model9-no-ledger.gdtrec")
    try:
        fast = summary.build(rec)
        full = summary.build(rec, recompute=True)
    finally:
        rec.close()
    assert fast.data["derived"] != full.data["derived"]
    assert fast.data["ledger"]["counted"] is False
    assert "--recompute" in fast.data["ledger"]["why_not"]
    assert "GPU time lost: not counted (" in render(fast, charts=False)
    assert full.data["ledger"]["counted"] and full.data["ledger"]["lost_gpu_s"] > 0
