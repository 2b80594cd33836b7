"""Fault round (issue 9, item 3): an NVML call that never returns stops nothing else.

The real command line runs with stand-in GPUs whose driver call hangs (tests/standin.py):
--once answers, record goes on recording the disks on time and stops promptly on SIGTERM,
and /metrics says the GPUs cannot be read instead of repeating old numbers."""

from __future__ import annotations

import json
import re
import signal
import time
import urllib.request

import standin
from gpudisk_top.errors import RuntimeFailure, UsageError
from gpudisk_top.exporter.families import Frame, Renderer
from gpudisk_top.exporter.server import ModelCollector
from gpudisk_top.record import Recording
from model_factory import model
from slack import slack

HANG = {"function": "nvmlDeviceGetPowerUsage"}


def test_once_answers_with_a_driver_call_that_never_returns():
    t0 = time.monotonic()
    proc = standin.run(["--once", "--json", "-i", "1"], gpus=2, hang=dict(HANG, after_s=0),
                       timeout=30)
    took_s = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["gpu_status"].startswith("unavailable: NVML has not answered for")
    assert "nvmlDeviceGetPowerUsage on GPU" in out["gpu_status"]
    assert out["disks"] and out["host"]["cpu_idle_pct"] is not None
    # one interval, plus at most the half-second deadline of each sample, plus start-up
    assert took_s < 8 * slack(), took_s


def hung_samples(path) -> int:
    """Samples of the recording at `path` (while it is written) taken with NVML hung."""
    if not path.exists():
        return 0
    try:
        with Recording.open(path) as rec:
            return sum(rec.sample(i).gpu.status.startswith("unavailable: NVML has not")
                       for i in range(len(rec)))
    except (UsageError, RuntimeFailure):
        return 0                           # nothing in it yet


def test_record_keeps_sampling_the_disks_and_stops_promptly_while_nvml_hangs(tmp_path):
    path = tmp_path / "hung.gdtrec"
    # healthy for four samples (the hang starts at a call, not at a time: under load the
    # start-up alone may outlast a head start in seconds), then hung until SIGTERM
    proc = standin.popen(["record", "-o", str(path), "-i", "0.5"], gpus=2,
                         hang=dict(HANG, after_calls=4 * 2))
    try:
        deadline = time.monotonic() + 30 * slack()
        while hung_samples(path) < 10 and time.monotonic() < deadline:
            time.sleep(0.25)               # about 5 s of samples with the call hung
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(10)
        stop_s = time.monotonic() - t0
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert rc == 0, err
    assert stop_s < 3.0 * slack(), stop_s            # not held until the driver answers
    with Recording.open(path) as rec:
        assert rec.sessions[-1].end is not None
        walls = [rec.wall_s(i) for i in range(len(rec))]
        statuses = [rec.sample(i).gpu.status for i in range(len(rec))]
        disks = [len(rec.sample(i).disks) for i in range(len(rec))]
    hung = [i for i, s in enumerate(statuses) if s.startswith("unavailable: NVML has not")]
    assert statuses[0] == "ok" and len(hung) >= 6
    # the disks were read on every sample, at the interval, while NVML hung
    assert all(d > 0 for d in disks)
    gaps = [b - a for a, b in zip(walls[hung[0]:], walls[hung[0] + 1:])]
    assert max(gaps) < 1.2, gaps


def scrape_until(url: str, predicate, timeout_s: float) -> str:
    """/metrics as soon as predicate(text) holds (or the last one read at the deadline)."""
    deadline = time.monotonic() + timeout_s
    while True:
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        if predicate(text) or time.monotonic() > deadline:
            return text
        time.sleep(0.1)


def test_metrics_say_the_gpus_cannot_be_read_while_nvml_hangs():
    # the hang starts at a call, not at a time: under load the start-up alone may take
    # longer than any head start in seconds, and the first sample would already hang
    proc = standin.popen(["serve", "--listen", "127.0.0.1:0", "-i", "0.5"], gpus=1,
                         processes={0: [1]}, util_pct=90.0, hang=dict(HANG, after_calls=6))
    try:
        line = proc.stderr.readline()
        url = re.search(r"http://\S+", line).group(0)
        # the first sample served (six power reads answer: a few samples, 0.5 s apart)
        before = scrape_until(url, lambda t: "gpudisk_top_gpus_available " in t, 30 * slack())
        during = scrape_until(url, lambda t: "gpudisk_top_gpus_available 0.0" in t,
                              30 * slack())
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert "gpudisk_top_gpus_available 1.0" in before
    assert "gpudisk_top_gpu_utilization_ratio{" in before
    assert "gpudisk_top_gpus_available 0.0" in during
    assert "gpudisk_top_gpu_utilization_ratio{" not in during   # no stale GPU numbers
    assert "gpudisk_top_disk_reads_per_second{" in during        # the disks still fresh
    age = float(re.search(r"^gpudisk_top_sample_age_seconds (\S+)$", during, re.M).group(1))
    assert age < 1.5


def test_a_stalled_sampler_is_not_served_as_now():
    clock = {"now": 100.0}
    collector = ModelCollector(Renderer(), clock=lambda: clock["now"])
    frame = Frame(model=model(1, {"nvme0n1": 50.0}), samples=1)
    collector.set_frame(frame)
    names = lambda: {f.name for f in collector.collect()}  # noqa: E731
    assert "gpudisk_top_disk_utilization_ratio" in names()
    clock["now"] += 2.9                 # under 3 intervals (and the 5 s floor): fresh
    assert "gpudisk_top_disk_utilization_ratio" in names()
    clock["now"] += 3.0
    stale = {f.name: f for f in collector.collect()}
    assert "gpudisk_top_disk_utilization_ratio" not in stale
    assert "gpudisk_top_last_sample_timestamp_seconds" in stale
    assert abs(stale["gpudisk_top_sample_age_seconds"].samples[0].value - 5.9) < 1e-9
    # what the ledger counted stays counted: its counters are not gauges of "now"
    ledger = {f.name for f in Renderer().render(frame)
              if f.name.startswith(("gpudisk_top_gpu_seconds", "gpudisk_top_gpu_idle_seconds"))}
    assert len(ledger) == 3 and ledger <= set(stale), (ledger, sorted(stale))
