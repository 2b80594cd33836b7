"""Verdicts on real jobs: real processes doing real work on this machine's disk and CPUs,
with other real load beside them.

The job is tests/jobs/loader_job.py: a trainer that takes batches from DataLoader-like
worker processes (reading 4 KiB blocks with O_DIRECT, or burning CPU) and makes 50 steps
a second when they keep up.  The one stand-in is the GPU (tests/standin.py): its compute
process is the trainer and its utilization follows the trainer's real progress (steps a
second against 50).  gpudisk-top runs as users run it: `record` for the whole run, a
`--once --json` in the middle, and `report --json` of the recording afterwards.

What each scenario must read, whatever else loads the machine (CI machines are shared):
  - a few workers reading 4 KiB blocks one at a time: disk-starved, naming the disk and
    the trainer, latency-bound unless the device was at its ceiling (then saturated),
    and the same with every CPU taken by other processes beside it;
  - many workers on an IOPS-capped volume: disk-starved, saturated, naming the volume;
  - one worker decoding: cpu-starved, the job's own;
  - workers that need a little CPU each while other processes take every CPU:
    cpu-starved, taken by others, and one of them named;
  - the trainer fed from memory with other disk load beside it: no starvation at all;
  - no job: idle, no alarm.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

import realdisk
from jobrun import RECORD_S, Run, assert_starved

pytestmark = pytest.mark.integration

DATA_BYTES = 768 * 2**20


@pytest.fixture(scope="module")
def data_file():
    path = realdisk.random_file(os.path.join(realdisk.BASE, f"gdt-realjob-{os.getpid()}.bin"),
                                DATA_BYTES >> 20)
    yield path
    for p in (path, path + ".ckpt", path + ".other"):
        if os.path.exists(p):
            os.unlink(p)


disk_of = realdisk.whole_disk


def cpu_hogs(n: int) -> list[subprocess.Popen]:
    """Other users' work: busy loops, as many as asked."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def disk_load(path: str) -> list[subprocess.Popen]:
    """Another process's reads, 4 KiB random O_DIRECT at queue depth 4, from its own file."""
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed")
    return [subprocess.Popen(["fio", "--name=other", f"--filename={path}.other", "--size=256M",
                              "--rw=randread", "--bs=4k", "--direct=1", "--ioengine=libaio",
                              "--iodepth=4", "--thread", "--time_based", "--runtime=120"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]


# ---------------------------------------------------------------------------- storage
def test_few_workers_reading_small_blocks_are_disk_starved_latency_bound(tmp_path, data_file):
    run = Run(tmp_path, "disk", 2, data_file, reads=realdisk.starving_reads(data_file, 2, 128))
    ep = assert_starved(run, "disk-starved", disk_of(data_file),
                        kinds=("latency-bound", "saturated"))
    loaders = run.once["gpus"][0]["processes"][0]["loaders"]
    assert loaders["count"] == 2 and loaders["io_wait_pct"] >= 40, run.explain()
    if ep["kind"] == "latency-bound":
        assert "not saturated, so each synchronous read of 4 KiB waits" in ep["reason"]
        assert "more DataLoader workers" in ep["advice"]


def test_disk_starved_stays_disk_starved_when_others_take_every_cpu(tmp_path, data_file):
    """The old detector called this cpu-starved whenever anything else loaded the CPU."""
    reads = realdisk.starving_reads(data_file, 2, 128)
    run = Run(tmp_path, "disk", 2, data_file, reads=reads, others=cpu_hogs(os.cpu_count() or 2))
    assert_starved(run, "disk-starved", disk_of(data_file),
                   kinds=("latency-bound", "saturated"))


@pytest.mark.root(reason="a loop device and a cgroup's IOPS cap need root")
def test_many_workers_on_a_capped_volume_are_disk_starved_saturated(tmp_path, loop_volume):
    dev, cap = loop_volume
    run = Run(tmp_path, "disk", 8, dev, reads=32, preexec_fn=cap.enter_self)
    ep = assert_starved(run, "disk-starved", os.path.basename(dev), kinds=("saturated",))
    # its workers read with O_DIRECT (fdinfo) and nobody else reads the volume: the page
    # cache cannot help, and the advice does not say it would
    for advice in (ep["advice"], run.once["verdict"]["advice"]):
        assert "O_DIRECT" in advice and "warm" not in advice, run.explain()


# ---------------------------------------------------------------------------- CPU
def test_a_decoding_worker_is_cpu_starved_by_its_own_work(tmp_path, data_file):
    run = Run(tmp_path, "cpu", 1, data_file)
    ep = assert_starved(run, "cpu-starved", kinds=("own", "others"))
    assert "DataLoader worker" in ep["reason"]


def test_workers_waiting_for_cpus_others_hold_are_cpu_starved_and_the_others_named(tmp_path, data_file):
    # three busy loops a CPU: with two, a shared CI machine's faster CPUs left the job at
    # 54 % of its healthy steps (starved, but barely)
    hogs = cpu_hogs(3 * (os.cpu_count() or 2))
    run = Run(tmp_path, "light-cpu", 2, data_file, others=hogs)
    ep = assert_starved(run, "cpu-starved", kinds=("others",))
    hog_pids = {p.pid for p in hogs}
    named = [int(w) for w in ep["reason"].replace("(", " ").split() if w.isdigit()]
    assert hog_pids.intersection(named), run.explain()
    assert "taken by other processes" in ep["advice"]


# ---------------------------------------------------------------------------- no alarm
def test_a_healthy_job_beside_other_disk_load_raises_no_alarm(tmp_path, data_file):
    run = Run(tmp_path, "healthy", 2, data_file, others=disk_load(data_file))
    assert run.starved_share() <= 0.2, run.explain()
    assert run.episodes() == [], run.explain()
    states = run.report["states"]["0"]
    assert states["healthy"] >= RECORD_S - 3, states


def test_no_job_is_idle_and_raises_no_alarm(tmp_path, data_file):
    run = Run(tmp_path, "healthy", 2, data_file, others=disk_load(data_file), job=False)
    assert run.episodes() == [], run.explain()
    assert run.once["verdict"]["state"] == "idle"


# ---------------------------------------------------------------------------- fixtures
@pytest.fixture
def loop_volume():
    """A loop device over a file on the real disk, its reads capped at 2000 IOPS for the
    job's cgroup (as a cloud volume's provisioned IOPS): requests queue in it."""
    with realdisk.loop_device(256, "volume") as (dev, path):
        cap = realdisk.IopsCap.for_disk_of(path, 2000)
        try:
            yield dev, cap
        finally:
            cap.remove()
