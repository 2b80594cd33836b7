"""The processes at a slow cadence while the job is healthy, every interval from the first
starved one (issue 41 item 2), on this machine's real disk with a real job.

A loader job (tests/jobs/loader_job.py `disk`: 2 workers of random 4 KiB O_DIRECT reads of
a file on this machine's disk, few enough that the disk serves them at the healthy pace)
feeds a stand-in GPU whose utilization is the job's step rate against its healthy one, as
tests/standin.py's.  A live Sampler with the cadence the commands give it
(session/detail.py) samples it once a second, and the Stepper judges each interval, as
`record --listen` and `serve` do:

  - while the job is healthy, the processes are read only every DETAIL_SLOW_S: the
    samples between read none (ProcIoCollector.processes_read does not move), their rows
    are the last read's, carried with their age, never a zero rate or a vanished process;
  - while it is healthy, the node's I/O scan (who else reads the disks) comes only every
    SCANS_SLOW_S, not at every read;
  - then fio (random 64 KiB O_DIRECT reads of the same file at queue depth 32) takes the
    disk: the first interval the detector judges starved read the processes at its end
    (the GPU's drop, read first in the same sample, asked for them), and its verdict
    names the job's device and its DataLoader workers, with their rates; the scan is back
    at its own cadence, and the verdict names fio, the neighbour, within the first
    starved intervals;
  - the same samples through a recording (record/v2) give back each sample's age, so a
    replay takes the same rates at the same samples (model/detail.py).
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

import realdisk
from cgjobs import HEALTHY_STEPS_S, LOADER_JOB
from slack import slack
from gpudisk_top.collect.detail import CADENCE, DETAIL_SLOW_S, SCANS_SLOW_S
from gpudisk_top.collect.ioscan import SCAN_S
from gpudisk_top.collect.roots import Roots
from gpudisk_top.collect.sampler import Sampler
from gpudisk_top.model.snapshot import Model
from gpudisk_top.record.v2 import canonical
from gpudisk_top.session.detail import after_step, slow_detail
from gpudisk_top.sim.fake_nvml import FakeNvml
from gpudisk_top.verdict.detect.states import STARVED_STATES
from gpudisk_top.verdict.step import Stepper

# it loads the machine (fio): tests/conftest.py REAL_LOAD runs it alone
pytestmark = [pytest.mark.integration]

DATA_MIB = 256
WORKERS = 2
CARRIED_WANTED = 8        # healthy samples that read no process, before fio starts


class ProgressGpu:
    """The stand-in GPU's utilization: the job's steps a second since the last sample
    against its healthy rate (tests/standin.py's rule, per sample)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.last: tuple[float, float] | None = None

    def util_pct(self) -> float:
        try:
            with open(self.path) as f:
                steps, _at = (float(x) for x in f.read().split()[:2])
        except (OSError, ValueError):
            return 97.0          # not started yet
        now = time.monotonic()
        last, self.last = self.last, (now, steps)
        if last is None or now - last[0] < 0.2:
            return 97.0
        return max(0.0, min(100.0, 100.0 * (steps - last[1]) / (now - last[0]) / HEALTHY_STEPS_S))


@pytest.fixture(scope="module")
def data_file():
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed (Debian: fio)")
    path = realdisk.random_file(os.path.join(realdisk.BASE, f"gdt-cadence-{os.getpid()}.bin"),
                                DATA_MIB)
    yield path
    os.unlink(path)


def test_healthy_reads_every_5_s_and_the_first_starved_interval_has_the_processes(
        data_file, tmp_path):
    qd1 = max(realdisk.qd1_reads_per_s(data_file, 0.5) for _ in range(3))
    # a fifth of what two workers at QD1 can read at the healthy pace: healthy alone
    reads = max(1, math.floor(0.2 * qd1 * WORKERS / (HEALTHY_STEPS_S * 8)))
    progress = str(tmp_path / "job.progress")
    job = subprocess.Popen([sys.executable, LOADER_JOB, "disk", "--workers", str(WORKERS),
                            "--seconds", "600", "--data", data_file, "--progress", progress,
                            "--reads", str(reads)], start_new_session=True)
    fio = None
    nvml = FakeNvml.with_gpus(1)
    gpu = ProgressGpu(progress)
    sampler = Sampler(Roots(), nvml=nvml)
    slow_detail(sampler)
    stepper = Stepper()
    # (phase, sample, model, verdict, processes read, cadence's reason, scanned the node)
    rows = []

    def one(phase: str):
        nvml.set_state(0, util_pct=gpu.util_pct(), power_mw=500_000, power_limit_mw=700_000,
                       processes=[(job.pid, 30 * 2**30)])
        nvml.advance_to(time.time())
        before, scans = sampler._procio.processes_read, sampler._ioscan._scans
        sample = sampler.sample()
        read = sampler._procio.processes_read - before
        model, verdict, _loss = stepper.step(sample)
        after_step(sampler, verdict)
        rows.append((phase, sample, model, verdict, read, sampler.detail.reason,
                     sampler._ioscan._scans > scans))

    try:
        time.sleep(2 * slack())       # the workers started
        start = time.monotonic()
        deadline = start + 60 * slack()
        # healthy: until enough samples carried the processes (a shared machine's disk,
        # busy with other work, asks for them every second meanwhile: said below)
        while time.monotonic() < deadline:
            one("healthy")
            if sum(1 for r in rows[2:] if r[4] == 0) >= CARRIED_WANTED and \
                    time.monotonic() - start >= 2 * DETAIL_SLOW_S:
                break
            time.sleep(max(0.0, start + len(rows) - time.monotonic()))
        fio = subprocess.Popen(["fio", "--name=neighbour", f"--filename={data_file}",
                                "--readonly", "--rw=randread", "--bs=64k", "--direct=1",
                                "--ioengine=libaio", "--iodepth=32", "--thread",
                                "--time_based", "--runtime=300", "--output=/dev/null"],
                               start_new_session=True, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL)
        fio_at = len(rows)
        deadline = time.monotonic() + 30 * slack()
        while time.monotonic() < deadline:
            one("fio")
            starved = [r for r in rows[fio_at:] if r[3].raw_state in STARVED_STATES]
            if len(starved) >= 3 and any("(fio)" in r[3].raw_reason for r in starved):
                break
            time.sleep(max(0.0, start + len(rows) - time.monotonic()))
    finally:
        for p in (fio, job):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        sampler.close()

    healthy = [r for r in rows if r[0] == "healthy"][2:]     # past the session's first reads
    # (seconds in, processes read, why, this interval's state) a sample: what went wrong
    said = [(round(r[1].mono_s - rows[0][1].mono_s, 1), r[4], r[5], r[6], r[3].raw_state)
            for r in rows]
    print(said)
    carried = [r for r in healthy if r[5] is None]
    assert len(carried) >= CARRIED_WANTED // 2, said
    for _phase, sample, model, verdict, read, why, _scan in carried:
        # nothing read: the last read's rows, with their age; none vanished, no rate zeroed
        assert read == 0, said
        assert sample.procs_age_s > 0 and model.procs_age_s == sample.procs_age_s
        assert model.detail_s == DETAIL_SLOW_S
        assert job.pid in model.procs and len(model.procs) >= WORKERS + 1
        assert all(v.cpu_pct is not None for v in model.procs.values() if v.root_pid is not None)
    # the reads while healthy: the cadence's, DETAIL_SLOW_S apart, or asked for by a reason
    # the sample gives (this machine's disk busy with other work, the GPU under 70 %)
    reads = [r for r in healthy if r[5] is not None]
    assert all(r[4] > 0 for r in reads), said
    cadence = [r[1].mono_s for r in healthy if r[5] == CADENCE]
    assert cadence, said
    for prev, r in zip(healthy, healthy[1:]):
        if r[5] == CADENCE:
            last_read = max(x[1].mono_s for x in rows if x[5] is not None and x[1].mono_s < r[1].mono_s)
            assert r[1].mono_s - last_read >= DETAIL_SLOW_S - 0.6, said
    # the node's I/O scans: while the reads are the slow cadence's, SCANS_SLOW_S apart (the
    # read nearest it on the DETAIL_SLOW_S grid), so that some cadence reads scan nothing
    scanned = [r[1].mono_s for r in rows if r[6]]
    for r in healthy:
        if r[6] and r[5] == CADENCE:
            last_scan = max(t for t in scanned if t < r[1].mono_s)
            assert r[1].mono_s - last_scan >= SCANS_SLOW_S - DETAIL_SLOW_S / 2 - 0.6, said
    assert any(r[5] == CADENCE and not r[6] for r in healthy), said
    # the first starved interval after fio came: the processes read at its end, judged on them
    starved = [r for r in rows[fio_at:] if r[3].raw_state in STARVED_STATES]
    assert starved, said
    _phase, sample, model, verdict, read, why, scan = starved[0]
    assert read > 0 and why is not None and model.procs_age_s == 0.0, said
    # ... and the scan at its own cadence again: at this read, or one less than SCAN_S ago
    assert scan or sample.mono_s - max(t for t in scanned if t < sample.mono_s) < SCAN_S, said
    # fio, the neighbour, named within the first starved intervals (followed from the scan
    # that found it, its rates from the read after)
    assert any("(fio)" in r[3].raw_reason for r in starved[:3]), [r[3].raw_reason for r in starved]
    device = realdisk.whole_disk(data_file)
    workers = [v for v in model.procs.values() if v.root_pid == job.pid and v.pid != job.pid]
    assert len(workers) >= WORKERS and all(v.cpu_pct is not None for v in workers)
    assert verdict.raw_state == "disk-starved", (verdict.raw_reason, said)
    assert any(d == device or d.startswith(device) for d in verdict.raw.devices), verdict.raw_reason
    assert "DataLoader worker" in verdict.raw_reason, verdict.raw_reason
    # a recording gives back each sample's age: the same rates at the same samples
    back = canonical([r[1] for r in rows])
    assert [s.procs_age_s for s in back] == [
        None if r[1].procs_age_s is None else round(r[1].procs_age_s, 3) for r in rows]
    last = None
    for r, s in zip(rows, back):
        m = Model.new(s, last)
        assert m.procs_age_s == pytest.approx(r[2].procs_age_s, abs=1e-3)
        assert m.procs.keys() == r[2].procs.keys()
        for pid, v in m.procs.items():
            live = r[2].procs[pid].cpu_pct
            assert (v.cpu_pct is None) == (live is None), (pid, r[1].mono_s)
            if live is not None:
                assert v.cpu_pct == pytest.approx(live, rel=5e-3, abs=1e-3)
        last = s
