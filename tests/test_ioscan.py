"""The scan of every process's block I/O (collect/ioscan.py) and what the sampler and
the model make of it (collect/procio.py follow(), model/ioprocs.py), on this machine's
real /proc with a real reader: a child doing 4 KiB O_DIRECT reads from a file on the
real disk."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

import realdisk

from gpudisk_top.collect.host import parse_process_cgroup
from gpudisk_top.collect.ioscan import IoScan, read_io_bytes
from gpudisk_top.collect.procio import OTHERS_REFRESH_S, ProcIoCollector
from gpudisk_top.collect.roots import Roots
from gpudisk_top.collect.sampler import Sampler
from gpudisk_top.model.ioprocs import container_of, io_rows, readers_of
from gpudisk_top.model.snapshot import Model
from gpudisk_top.sim.fake_nvml import FakeNvml

READER = r"""
import mmap, os, random, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
blocks = os.fstat(fd).st_size // 4096
buf = mmap.mmap(-1, 4096)
while True:
    os.preadv(fd, [buf], random.randrange(blocks) * 4096)
"""

# a neighbour that both holds a CPU (its main thread spins: state R, the CPU time of a
# process the job's loaders wait behind) and loads the disk (a thread of 4 KiB O_DIRECT
# reads), as fio at a deep queue does on a slow machine
SPINNING_READER = r"""
import mmap, os, random, sys, threading
def read():
    fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
    blocks = os.fstat(fd).st_size // 4096
    buf = mmap.mmap(-1, 4096)
    while True:
        os.preadv(fd, [buf], random.randrange(blocks) * 4096)
threading.Thread(target=read, daemon=True).start()
while True:
    pass
"""


@pytest.fixture(scope="module")
def reader():
    path = realdisk.random_file(os.path.join(realdisk.BASE, f"gdt-ioscan-{os.getpid()}.bin"), 64)
    proc = subprocess.Popen([sys.executable, "-c", READER, path])
    idle = subprocess.Popen(["sleep", "60"])
    time.sleep(0.5)
    try:
        yield proc, idle, path
    finally:
        for p in (proc, idle):
            p.kill()
            p.wait()
        os.unlink(path)


def test_read_io_bytes_sums_block_reads_and_writes():
    with open("/proc/self/io", "rb") as f:
        data = f.read()
    fields = dict(line.split(b": ") for line in data.splitlines())
    assert read_io_bytes(data) == int(fields[b"read_bytes"]) + int(fields[b"write_bytes"])
    assert read_io_bytes(b"rchar: 5\nread_bytes: x\nwrite_bytes: 1\n") is None
    assert read_io_bytes(b"rchar: 5\n") is None


def test_the_scan_finds_the_reader_and_not_the_idle(reader):
    proc, idle, _ = reader
    scan = IoScan(Roots())
    assert scan.run(time.monotonic()) == []          # the first scan only counts
    time.sleep(1.0)
    busiest = scan.run(time.monotonic())
    assert proc.pid in busiest and idle.pid not in busiest
    assert len(busiest) <= scan.top
    # due: the second scan at once, then every SCAN_S (SCAN_OPEN_S with the view open)
    fresh = IoScan(Roots())
    assert fresh.due(0.0, False)
    fresh.run(0.0)
    assert fresh.due(0.1, False)
    fresh.run(0.1)
    assert not fresh.due(1.0, False) and fresh.due(2.2, True) and fresh.due(5.2, False)
    # every job healthy (collect/detail.py): the caller's slower cadence, the view's first
    assert not fresh.due(5.2, False, 12.5) and fresh.due(12.7, False, 12.5)
    assert fresh.due(2.2, True, 12.5)


def test_the_search_for_who_takes_the_cpus_keeps_the_callers_slower_cadence():
    """ProcIoCollector.collect_others searches the node (every process's stat) at most
    every OTHERS_REFRESH_S, or every slow_s where the caller gives one; on this machine's
    real /proc, our own process as the job."""
    c = ProcIoCollector(Roots())
    job = {os.getpid(): None}
    c.collect_others(job, contended=True)
    first = c._others_scan
    assert first is not None and os.getppid() in first[1]     # a real search: our parent
    c.collect_others(job, contended=True)
    assert c._others_scan is first                            # too soon: none
    # the last search as if OTHERS_REFRESH_S + 1 s ago: due at the own cadence, not the slow
    c._others_scan = (first[0] - OTHERS_REFRESH_S - 1.0, first[1])
    aged = c._others_scan
    c.collect_others(job, contended=True, slow_s=3 * OTHERS_REFRESH_S)
    assert c._others_scan is aged
    c.collect_others(job, contended=False)
    assert c._others_scan is aged                             # nobody waits for a CPU
    c.collect_others(job, contended=True)
    assert c._others_scan is not aged and c._others_scan[0] > aged[0]


def test_counters_the_sample_read_a_moment_ago_are_taken_not_read_again(reader):
    """run(read_now=): a process whose io file the sample just read (the job's) counts
    with the total it was handed, its file not read again; the others are read as
    before.  Handed a growing total, the idle sleeper is the busiest; handed its real
    one, the reader is what a scan reading every file finds."""
    proc, idle, _ = reader
    scan = IoScan(Roots())
    scan.run(time.monotonic(),
             read_now={idle.pid: _io_total(idle.pid), proc.pid: _io_total(proc.pid)})
    time.sleep(1.0)
    busiest = scan.run(time.monotonic(), keep=True,
                       read_now={idle.pid: 2**40, proc.pid: _io_total(proc.pid)})
    assert busiest[0] == idle.pid and proc.pid in busiest
    # what a caller read itself is not kept again as a file (the sampler has it)
    assert idle.pid not in scan.counters and proc.pid not in scan.counters


def _io_total(pid: int) -> int:
    with open(f"/proc/{pid}/io", "rb") as f:
        return read_io_bytes(f.read())


def test_a_cover_scan_keeps_the_file_of_a_process_handed_over_before(reader, tmp_path):
    """A process handed over at one scan (read_now) whose cgroup has not run since is
    carried over as it was then: with its total and no file.  A later scan that keeps the
    files (--once's covered first interval) reads its file, as it keeps every other's."""
    from test_scan_cgroups import _cgroup

    proc, _, _ = reader
    sys_root = str(tmp_path / "sys")
    _cgroup(sys_root, "", None, [])
    _cgroup(sys_root, "job.slice", 50, [proc.pid])   # a usage that never moves: carried
    scan = IoScan(Roots(sysfs=sys_root))
    assert scan._files.narrowed, scan._files.reason
    scan.run(time.monotonic(), read_now={proc.pid: _io_total(proc.pid)})
    scan.run(time.monotonic(), keep=True)
    assert read_io_bytes(scan.counters[proc.pid]) > 0


def test_the_sampler_hands_the_scan_what_it_read_of_the_job(reader, monkeypatch):
    """At a scan, the sampler hands over the counters it read in the same sample (the
    job's processes, and those it read as holding the CPUs): their io files are not read
    twice; a process the sample did not read is read by the scan."""
    proc, idle, _ = reader
    handed = []
    run = IoScan.run

    def spy(self, now_s, keep=False, read_now={}):
        handed.append(dict(read_now))
        return run(self, now_s, keep=keep, read_now=read_now)
    monkeypatch.setattr(IoScan, "run", spy)
    nvml = FakeNvml.with_gpus(1)
    nvml.set_state(0, util_pct=10.0, processes=[(proc.pid, 2**30)])
    sampler = Sampler(Roots(), nvml=nvml)
    try:
        sample = sampler.sample()                 # a session's first sample scans
    finally:
        sampler.close()
    assert handed and proc.pid in handed[0] and idle.pid not in handed[0]
    assert handed[0] == {pid: sample.procs[pid].read_bytes + sample.procs[pid].write_bytes
                         for pid in handed[0]}


def test_the_sampler_follows_the_reader_with_its_device_share_and_cgroup(reader):
    proc, idle, path = reader
    sampler = Sampler(Roots())
    try:
        samples = []
        for _ in range(3):
            samples.append(sampler.sample())
            time.sleep(1.0)
    finally:
        sampler.close()
    last, before = samples[-1], samples[-2]
    raw = last.procs[proc.pid]
    assert raw.root_pid is None and raw.read_bytes > before.procs[proc.pid].read_bytes
    with open(f"/proc/{proc.pid}/cgroup") as f:
        assert raw.cgroup == parse_process_cgroup(f.read())
    model = Model.new(last, before)
    rows = {r.view.pid: r for r in io_rows(model)}
    row = rows[proc.pid]
    device = realdisk.whole_disk(path)
    assert row.device is not None and device in (row.device, model.devices[row.device].parent)
    disk = model.disks[row.device]
    # its share is its read_bytes rate over the device's rkB/s, at most 100%
    expected = min(100.0, row.view.read_kb_s / disk.rkb_s * 100)
    assert row.read_share_pct == pytest.approx(expected)
    assert row.read_share_pct > 0 and not row.job
    assert idle.pid not in rows
    assert proc.pid in {r.view.pid for r in readers_of(model, row.device)}
    # busiest first
    assert [r.io_kb_s for r in io_rows(model)] == sorted((r.io_kb_s for r in io_rows(model)),
                                                        reverse=True)


def test_parse_process_cgroup():
    with open("/proc/self/cgroup") as f:
        text = f.read()
    mine = parse_process_cgroup(text)
    assert mine is None or mine.startswith("/")
    # cgroup v2 (a Docker container, a Kubernetes pod under systemd), v1, the root only
    assert parse_process_cgroup("0::/system.slice/docker-3f2a1b9c0d4e5f.scope\n") == \
        "/system.slice/docker-3f2a1b9c0d4e5f.scope"
    assert parse_process_cgroup("12:blkio:/docker/ab12\n1:name=systemd:/docker/ab12\n0::/\n") == \
        "/docker/ab12"
    assert parse_process_cgroup("0::/\n4:memory:/\n") is None
    assert parse_process_cgroup("") is None


def test_container_of_names_containers_and_units():
    assert container_of("/system.slice/docker-3f2a1b9c0d4e5f6a7b.scope") == "docker 3f2a1b9c0d4e"
    assert container_of("/docker/0123456789abcdef") == "docker 0123456789ab"
    assert container_of("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1f2e3d4c_"
                        "5b6a.slice/cri-containerd-99aa88bb77cc.scope") == "containerd 99aa88bb77cc"
    assert container_of("/kubepods.slice/kubepods-pod1f2e3d4c_5b6a.slice") == "pod 1f2e3d4c_5b6"
    assert container_of("/system.slice/rsync.service") == "rsync.service"
    assert container_of(None) == "-"


def _two_samples(sampler: Sampler, cover: bool):
    """--once's two samples a second apart, the interval after the first covered (every
    process doing block I/O in it named) when `cover`; the sampler closed after."""
    try:
        if cover:
            sampler.cover_next_interval()
        first = sampler.sample()
        time.sleep(1.0)
        return first, sampler.sample()
    finally:
        sampler.close()


def test_a_covered_first_interval_has_the_readers_rates(reader):
    """--once's one interval: a sampler asked to cover its next interval has the reader's
    read rate over exactly the interval between its first two samples, as pidstat would;
    a sampler that was not has none for it there (the scan follows a process from the
    sample after the one that finds it), which is what --once printed before."""
    proc, idle, path = reader
    views = {}
    for cover in (True, False):
        first, second = _two_samples(Sampler(Roots()), cover)
        views[cover] = Model.new(second, first).procs.get(proc.pid)
        if cover:
            # its rate is read_bytes over the two samples' interval, of what it read then
            grown = second.procs[proc.pid].read_bytes - first.procs[proc.pid].read_bytes
            assert views[cover].read_kb_s == pytest.approx(
                grown / 1024 / (second.mono_s - first.mono_s))
            assert idle.pid not in second.procs      # bare counters: only the busiest follow
    assert views[True].read_kb_s > 0 and views[True].name is not None
    assert views[True].devices, views[True]
    assert views[False] is None or views[False].read_kb_s is None


def test_a_reader_that_also_holds_a_cpu_is_named_as_the_disks_reader(reader, tmp_path):
    """--once in CI named one of fio's two jobs and not the other: the one that was
    running when the first sample looked for who holds the CPUs was read for its CPU
    alone (no devices), and the node scan that found it reading then skipped it as
    already read.  It must be followed with its devices like any reader.

    The node is this machine's /proc with only the job and the neighbour for processes
    (a procfs root of links, as tests/test_sample_cost.py makes), so that the search for
    who holds the CPUs finds the neighbour whatever else runs on a shared machine."""
    _proc, _idle, path = reader
    job = subprocess.Popen(["sleep", "60"])
    spinner = subprocess.Popen([sys.executable, "-c", SPINNING_READER, path])
    proc = tmp_path / "proc"
    proc.mkdir()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (job.pid, spinner.pid):
            os.symlink(os.path.join("/proc", name), proc / name)
    nvml = FakeNvml.with_gpus(1)
    nvml.set_state(0, util_pct=10.0, processes=[(job.pid, 2**30)])
    try:
        time.sleep(0.5)                          # its reader thread has started
        first, second = _two_samples(Sampler(Roots(procfs=str(proc)), nvml=nvml), cover=True)
    finally:
        for p in (job, spinner):
            p.kill()
            p.wait()
    # the first sample read it as one of the others (for its CPU: a name, no devices)
    assert first.procs[spinner.pid].name is not None, "not among the CPUs' holders"
    assert first.procs[spinner.pid].devices is None
    raw = second.procs[spinner.pid]
    assert raw.devices, raw
    model = Model.new(second, first)
    device = realdisk.whole_disk(path)
    on = [row.device for row in io_rows(model) if row.view.pid == spinner.pid
          and row.device is not None
          and device in (row.device, model.devices[row.device].parent)]
    assert on, [(row.view.pid, row.device) for row in io_rows(model)]
    assert spinner.pid in {r.view.pid for r in readers_of(model, on[0])}
