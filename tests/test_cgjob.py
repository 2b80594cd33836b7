"""A job's cgroup totals (collect/cgjob.py, model/cgjob.py) and the I/O scan's io rule
(collect/cgscan.py) on real cgroups laid out as Slurm lays them out (tests/cgjobs.py),
with real processes: busy loops, sleepers, and a reader doing 4 KiB O_DIRECT reads from a
file on this machine's real disk.

  - cpu.stat's usage over an interval is its processes' CPU time (their schedstat);
  - io.stat's read bytes over an interval are its reader's /proc/PID/io read_bytes, and no
    more than the disk's own (diskstats): where the host's cgroup v2 tree has io.stat (the
    io controller on v2; on a hybrid host it is v1's, and that test says so and skips);
  - a cgroup removed between two reads, made again under the same path (counters back to
    0), a process moved to another cgroup: no interval, never a negative rate;
  - the node's I/O scan finds the same busiest, with the same counters, reading only what
    its rule says as reading every process finds.
The same rules on a tree the test writes: tests/test_cgjob_rules.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

import realdisk
from cgjobs import CgJob, skip_unless_cgroups, slurm_v2, unique_job_id
from gpudisk_top.collect.cgjob import CgJobReader, device_names
from gpudisk_top.collect import diskstats
from gpudisk_top.collect.ioscan import IoScan
from gpudisk_top.collect.roots import Roots, read_text
from gpudisk_top.model.cgjob import interval, job_interval
from slack import slack

BUSY = [sys.executable, "-c", "while True: pass"]
SLEEP = [sys.executable, "-c", "import time; time.sleep(600)"]
# a process that runs 100 times a second and reads nothing: an agent's tick
TICK = [sys.executable, "-c", "import time\nwhile True: time.sleep(0.01)"]
READER = r"""
import mmap, os, random, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
blocks = os.fstat(fd).st_size // 4096
buf = mmap.mmap(-1, 4096)
while True:
    os.preadv(fd, [buf], random.randrange(blocks) * 4096)
"""

pytestmark = pytest.mark.root(reason="makes cgroups and moves processes into them")


@pytest.fixture(scope="module")
def data_file():
    path = realdisk.random_file(os.path.join(realdisk.BASE, f"gdt-cgjob-{os.getpid()}.bin"), 64)
    try:
        yield path
    finally:
        os.unlink(path)


def _job_path(step: int | str = 0) -> str:
    return slurm_v2(unique_job_id(), step)


def _cpu_ns(pids) -> int:
    """Time on a CPU of these processes, every thread (schedstat's first field, ns)."""
    total = 0
    for pid in pids:
        text = read_text(f"/proc/{pid}/schedstat")
        if text:
            total += int(text.split()[0])
    return total


def _read_bytes(pid: int) -> int:
    for line in (read_text(f"/proc/{pid}/io") or "").splitlines():
        if line.startswith("read_bytes:"):
            return int(line.split(":")[1])
    raise AssertionError(f"no read_bytes for {pid}")


def _disks():
    return diskstats.read(Roots())[0]


def _wait_stopped(pid: int) -> None:
    deadline = time.monotonic() + 10 * slack()
    while (read_text(f"/proc/{pid}/stat") or "").rsplit(")", 1)[-1].split()[:1] != ["T"]:
        assert time.monotonic() < deadline, f"{pid} did not stop"
        time.sleep(0.01)


def test_cpu_usage_is_its_processes_cpu_time():
    skip_unless_cgroups("v2")
    path = _job_path()
    with CgJob(path, BUSY) as job:
        reader = CgJobReader(Roots())
        cg = "/" + path
        time.sleep(0.3)
        before, ns_before = reader.read([cg], {})[cg], _cpu_ns(job.pids())
        t0 = time.monotonic()
        time.sleep(1.0)
        after, ns_after = reader.read([cg], {})[cg], _cpu_ns(job.pids())
        elapsed_s = time.monotonic() - t0
    usage_us = after.cpu["usage_usec"] - before.cpu["usage_usec"]
    procs_us = (ns_after - ns_before) / 1000
    assert procs_us > 50_000, "the busy loop never ran"
    # the two reads are a few syscalls apart, each pair: a few ms of a busy loop's time
    assert abs(usage_us - procs_us) <= 0.03 * procs_us + 10_000 * slack()
    iv = interval(before, after, elapsed_s)
    assert iv.cpu_pct == pytest.approx(100.0 * usage_us / (elapsed_s * 1e6))
    assert iv.user_pct > iv.system_pct
    # the pressure files a cgroup v2 has on this kernel are read, every one
    for resource in ("cpu", "io", "memory"):
        if os.path.exists(os.path.join(reader.root, path, f"{resource}.pressure")):
            assert resource in after.psi and resource in iv.psi_pct


def test_io_stat_reads_are_its_readers_and_within_the_disks(data_file):
    skip_unless_cgroups("v2")
    path = _job_path()
    disk = realdisk.whole_disk(data_file)
    with CgJob(path, [sys.executable, "-c", READER, data_file]) as job:
        reader = CgJobReader(Roots())
        cg = "/" + path
        if not os.path.exists(os.path.join(reader.root, path, "io.stat")):
            pytest.skip(f"no io.stat in this host's cgroup v2 tree ({reader.root}): the io "
                        "controller is not on there (on a hybrid host it is v1's blkio)")
        time.sleep(0.3)
        disks = _disks()
        before, rb_before = reader.read([cg], device_names(disks))[cg], _read_bytes(job.pid)
        time.sleep(1.5)
        disks_after = _disks()
        after, rb_after = reader.read([cg], device_names(disks_after))[cg], _read_bytes(job.pid)
    cg_bytes = after.io[disk].rbytes - before.io[disk].rbytes
    proc_bytes = rb_after - rb_before
    disk_bytes = (disks_after[disk].rd_sectors - disks[disk].rd_sectors) * 512
    assert proc_bytes >= 100 * 4096, "the reader read next to nothing"
    # charged at the same moment (submit_bio): apart only by the reads between the
    # two files' reads, a few 4 KiB reads
    assert abs(cg_bytes - proc_bytes) <= 0.05 * proc_bytes + 64 * 4096
    # the disk's count is at completion, the cgroup's at submission: a read in flight
    assert cg_bytes <= disk_bytes * 1.05 + 64 * 4096
    assert interval(before, after, 1.5).io[disk].read_kb_s > 0


def test_a_cgroup_removed_or_made_again_gives_no_interval():
    skip_unless_cgroups("v2")
    path = _job_path()
    cg = "/" + path
    reader = CgJobReader(Roots())
    with CgJob(path, BUSY):
        time.sleep(0.3)
        first = reader.read([cg], {})[cg]
        time.sleep(0.3)
        old = reader.read([cg], {})[cg]
    assert reader.read([cg], {}) == {}                       # removed: left out
    assert interval(old, None, 1.0) is None
    with CgJob(path, SLEEP):
        new = reader.read([cg], {})[cg]
    assert old.cpu["usage_usec"] > new.cpu["usage_usec"]     # counters back near 0
    assert new.inode != old.inode                            # a new kernfs node
    assert interval(old, new, 1.0) is None
    assert interval(first, old, 0.3).cpu_pct > 0


def test_a_process_moved_to_another_cgroup():
    skip_unless_cgroups("v2")
    path_a, path_b = _job_path(0), _job_path(1)
    a, b = "/" + path_a, "/" + path_b
    reader = CgJobReader(Roots())
    with CgJob(path_a, BUSY) as job_a, CgJob(path_b, SLEEP) as job_b:
        time.sleep(0.3)
        first = reader.read([a, b], {})
        with open(os.path.join(reader.root, path_b, "cgroup.procs"), "w") as f:
            f.write(str(job_a.pid))
        moved = reader.read([a, b], {})
        time.sleep(0.5)
        second = reader.read([a, b], {})
        assert job_b.is_member(job_a.pid)
    # its old cgroup stops counting it (a moment of time before the move aside); its new
    # one counts it from the move on, never its past
    assert second[a].cpu["usage_usec"] - moved[a].cpu["usage_usec"] == 0
    assert second[b].cpu["usage_usec"] - moved[b].cpu["usage_usec"] > 200_000
    assert moved[b].cpu["usage_usec"] < first[a].cpu["usage_usec"]
    assert job_interval(a, b, first, second, 0.8) is None
    assert job_interval(b, b, moved, second, 0.5).cpu_pct > 40


def test_the_io_scan_finds_what_reading_every_process_finds(data_file):
    """A reader in one Slurm-shaped cgroup, an agent that ticks 100 times a second in
    another, sleepers in four more: the scan under its rule and a scan of every process
    find the same busiest with the same counters; the agent is read only where its
    cgroup has no io.stat (the cpu rule)."""
    skip_unless_cgroups("v2")
    jid = unique_job_id()
    jobs = [CgJob(slurm_v2(jid, 0), [sys.executable, "-c", READER, data_file]),
            CgJob(f"gdt-cgjob-{jid}/agent.service", TICK)]
    jobs += [CgJob(f"gdt-cgjob-{jid}/svc{i}.service", SLEEP) for i in range(4)]
    entered = []
    try:
        for job in jobs:
            entered.append(job.__enter__())
        reader, agent = jobs[0], jobs[1]
        ours = {p for job in jobs for p in job.pids()}
        narrowed, full = IoScan(Roots()), IoScan(Roots())
        full._files.narrowed = False
        asked = set()
        read = narrowed._files.read
        narrowed._files.read = lambda pid: (asked.add(pid), read(pid))[1]
        for now in (0.0, 1.0, 2.0):
            os.kill(reader.pid, signal.SIGSTOP)       # the same counters for both scans
            _wait_stopped(reader.pid)
            asked.clear()
            got = narrowed.run(now), full.run(now)
            os.kill(reader.pid, signal.SIGCONT)
            assert {p: narrowed._last.get(p) for p in ours} == {p: full._last.get(p) for p in ours}
            assert [p for p in got[0] if p in ours] == [p for p in got[1] if p in ours]
            if now:
                assert [p for p in got[0] if p in ours][:1] == [reader.pid]
            time.sleep(0.5)
        io_rule = os.path.exists(os.path.join(narrowed._files._cg_root,
                                              f"gdt-cgjob-{jid}", "agent.service", "io.stat"))
        assert (agent.pid in asked) == (not io_rule)
        assert not asked & set(jobs[2].pids())           # a sleeper is never read again
    finally:
        for job in reversed(entered):
            job.stop()
