"""A job cgroup's totals (collect/cgjob.py) and its intervals (model/cgjob.py) on a cgroup
tree the test writes (a --sysfs of its own, the files as a 6.x kernel prints them), and the
I/O scan's io rule (collect/cgscan.py rule="io") on such a tree holding real processes:
what pairs, what does not, and the bounds.  The same on real cgroups and real I/O:
tests/test_cgjob.py."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from gpudisk_top.collect import cgjob
from gpudisk_top.collect.cgjob import CgJobReader, device_names, job_cgroup, valid_path
from gpudisk_top.collect.cgscan import ChangedScan
from gpudisk_top.collect.diskstats import DiskCounters
from gpudisk_top.collect.roots import Roots
from gpudisk_top.model.cgjob import interval, job_interval, share_pct

JOB = "/system.slice/slurmstepd.scope/job_7/step_0"
DEVICES = {"254:0": "vda", "7:0": "loop0"}


def _write(path, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def _io_line(dev: str, rbytes: int, wbytes: int = 0, rios: int = 0, wios: int = 0) -> str:
    return f"{dev} rbytes={rbytes} wbytes={wbytes} rios={rios} wios={wios} dbytes=0 dios=0\n"


class Tree:
    """A cgroup v2 tree under tmp/sys/fs/cgroup: a cgroup's files written as the kernel
    prints them."""

    def __init__(self, tmp):
        self.sysfs = str(tmp / "sys")
        self.root = os.path.join(self.sysfs, "fs", "cgroup")
        _write(os.path.join(self.root, "cgroup.controllers"), "cpuset cpu io memory pids\n")
        _write(os.path.join(self.root, "cgroup.procs"), "")
        self.roots = Roots(sysfs=self.sysfs)

    def cgroup(self, path: str, *, usage: int = 0, io: str | None = None, memory: bool = True,
               psi_us: int | None = 0, throttled: tuple[int, int, int] | None = None,
               pids=()) -> str:
        d = os.path.join(self.root, path.strip("/"))
        os.makedirs(d, exist_ok=True)
        cpu = f"usage_usec {usage}\nuser_usec {usage * 3 // 4}\nsystem_usec {usage // 4}\n"
        if throttled is not None:
            cpu += "nr_periods {}\nnr_throttled {}\nthrottled_usec {}\n".format(*throttled)
        _write(os.path.join(d, "cpu.stat"), cpu)
        if io is not None:
            _write(os.path.join(d, "io.stat"), io)
        if memory:
            _write(os.path.join(d, "memory.stat"),
                   "anon 1048576\nfile 8388608\nkernel 4096\nfile_dirty 2097152\n"
                   "file_writeback 0\nsock 0\n")
        if psi_us is not None:
            for name in ("cpu.pressure", "io.pressure", "memory.pressure"):
                _write(os.path.join(d, name),
                       f"some avg10=0.00 avg60=0.00 avg300=0.00 total={psi_us}\n"
                       f"full avg10=0.00 avg60=0.00 avg300=0.00 total={psi_us // 2}\n")
        _write(os.path.join(d, "cgroup.procs"), "".join(f"{p}\n" for p in pids))
        return d


@pytest.fixture()
def tree(tmp_path):
    return Tree(tmp_path)


def test_a_jobs_totals_and_its_interval(tree):
    tree.cgroup(JOB, usage=1_000_000, io=_io_line("254:0", 0) + _io_line("7:0", 4096, rios=1),
                throttled=(100, 10, 5_000))
    reader = CgJobReader(tree.roots)
    before = reader.read([JOB], DEVICES)
    tree.cgroup(JOB, usage=1_500_000, psi_us=250_000, throttled=(200, 60, 105_000),
                io=_io_line("254:0", 10 * 2**20, 2**20, 2560, 16) + _io_line("7:0", 4096, rios=1))
    after = reader.read([JOB], DEVICES)
    raw = after[JOB]
    assert raw.io["vda"].dev == "254:0" and raw.io["vda"].rbytes == 10 * 2**20
    assert raw.memory == {"anon": 2**20, "file": 8 * 2**20, "file_dirty": 2 * 2**20,
                          "file_writeback": 0}
    assert set(raw.psi) == {"cpu", "io", "memory"}
    iv = interval(before[JOB], raw, 2.0)
    assert iv.cpu_pct == pytest.approx(25.0)                 # 0.5 s of CPU in 2 s
    assert iv.user_pct + iv.system_pct == pytest.approx(25.0, abs=0.01)
    assert iv.throttled_periods_pct == pytest.approx(50.0)    # 50 of 100 periods
    assert iv.throttled_ms_s == pytest.approx(50.0)
    assert iv.psi_pct["io"] == pytest.approx((12.5, 6.25))
    assert iv.io["vda"].read_kb_s == pytest.approx(5120.0) and iv.io["vda"].r_s == 1280
    assert iv.io["vda"].write_kb_s == pytest.approx(512.0) and iv.io["loop0"].read_kb_s == 0
    assert iv.read_kb_s == pytest.approx(5120.0)
    assert iv.memory_kb["file_dirty"] == 2048
    assert share_pct(iv.io["vda"].read_kb_s, 10240.0) == pytest.approx(50.0)
    assert share_pct(1.0, 0.0) is None and share_pct(20.0, 10.0) == 100.0


def test_a_device_the_node_does_not_list_is_counted_from_the_next_interval(tree):
    tree.cgroup(JOB, usage=10, io=_io_line("254:0", 4096) + _io_line("259:3", 2**30))
    reader = CgJobReader(tree.roots)
    first = reader.read([JOB], DEVICES)[JOB]
    assert set(first.io) == {"vda"} and first.io_unlisted == 1
    # the node lists it now (hot-plugged): its line is kept from this sample on
    tree.cgroup(JOB, usage=20, io=_io_line("254:0", 8192) + _io_line("259:3", 2**30 + 2**20))
    devices = dict(DEVICES, **{"259:3": "nvme1n1"})
    second = reader.read([JOB], devices)[JOB]
    iv = interval(first, second, 1.0)
    assert "nvme1n1" not in iv.io and iv.io["vda"].read_kb_s == 4.0
    tree.cgroup(JOB, usage=30, io=_io_line("254:0", 8192) + _io_line("259:3", 2**30 + 3 * 2**20))
    third = reader.read([JOB], devices)[JOB]
    assert interval(second, third, 1.0).io["nvme1n1"].read_kb_s == 2048.0


def test_a_name_given_to_another_device_is_not_its_neighbour(tree):
    tree.cgroup(JOB, usage=10, io=_io_line("254:0", 4096))
    reader = CgJobReader(tree.roots)
    first = reader.read([JOB], DEVICES)[JOB]
    # vda went away; another device is vda now, under other numbers
    tree.cgroup(JOB, usage=20, io=_io_line("254:0", 4096) + _io_line("254:16", 2**20))
    second = reader.read([JOB], {"254:16": "vda"})[JOB]
    assert second.io["vda"].dev == "254:16"
    assert interval(first, second, 1.0).io == {}


def test_counters_that_go_back_give_no_rate(tree):
    tree.cgroup(JOB, usage=5_000_000, io=_io_line("254:0", 2**30), psi_us=900)
    reader = CgJobReader(tree.roots)
    first = reader.read([JOB], DEVICES)[JOB]
    # the cgroup made again under the same path (the test's tree keeps its directory:
    # its inode is the same, as a reused kernfs id would be): usage back to 0
    tree.cgroup(JOB, usage=1_000, io=_io_line("254:0", 4096), psi_us=0)
    second = reader.read([JOB], DEVICES)[JOB]
    assert second.inode == first.inode
    assert interval(first, second, 1.0) is None
    # a device's counters back alone (its queue made again): that device has no rate
    tree.cgroup(JOB, usage=2_000, io=_io_line("254:0", 0), psi_us=10)
    third = reader.read([JOB], DEVICES)[JOB]
    iv = interval(second, third, 1.0)
    assert iv is not None and iv.io == {} and iv.cpu_pct == pytest.approx(0.1)


def test_a_cgroup_made_again_has_another_inode_and_no_interval(tree):
    d = tree.cgroup(JOB, usage=10)
    reader = CgJobReader(tree.roots)
    first = reader.read([JOB], DEVICES)[JOB]
    keep = os.path.join(str(tree.sysfs), "keep")    # holds the old inode: not reused
    os.rename(d, keep)
    tree.cgroup(JOB, usage=500)
    second = reader.read([JOB], DEVICES)[JOB]
    assert second.inode != first.inode
    assert interval(first, second, 1.0) is None
    shutil.rmtree(os.path.join(tree.root, JOB.strip("/")))
    assert reader.read([JOB], DEVICES) == {}                 # gone: left out
    assert interval(second, None, 1.0) is None


def test_a_job_moved_to_another_cgroup_has_no_interval_until_the_next(tree):
    other = "/system.slice/slurmstepd.scope/job_7/step_1"
    tree.cgroup(JOB, usage=10)
    tree.cgroup(other, usage=900_000)
    reader = CgJobReader(tree.roots)
    first = reader.read([JOB, other], DEVICES)
    tree.cgroup(other, usage=1_900_000)
    second = reader.read([JOB, other], DEVICES)
    assert job_interval(JOB, other, first, second, 1.0) is None
    assert job_interval(other, other, first, second, 1.0).cpu_pct == pytest.approx(100.0)
    assert job_interval(None, JOB, first, second, 1.0) is None


def test_paths_and_counts_are_bounded(tree, monkeypatch):
    for bad in ("", "/", "a/b", "/a/../b", "/a//b", "/a/./b", "/a\0b", "/" + "x" * 5000, None, 7):
        assert not valid_path(bad), bad
    tree.cgroup(JOB, usage=1, io="".join(_io_line(f"8:{i}", i) for i in range(20)))
    monkeypatch.setattr(cgjob, "MAX_DEVICES", 4)
    monkeypatch.setattr(cgjob, "MAX_CGROUPS", 2)
    many = {f"8:{i}": f"sd{i}" for i in range(20)}
    reader = CgJobReader(tree.roots)
    raw = reader.read(["/a/../b", JOB, JOB, "/nope", "/more"], many)
    assert set(raw) == {JOB} and len(raw[JOB].io) == 4 and raw[JOB].io_unlisted == 16
    assert reader.refused == 2                              # "/a/../b" and past MAX_CGROUPS
    # a file past the byte bound is not read: the cgroup has no io figures
    tree.cgroup(JOB, usage=2, io=_io_line("8:0", 1) * 2000)
    monkeypatch.setattr(cgjob, "MAX_STAT_BYTES", 4096)
    assert CgJobReader(tree.roots).read([JOB], many)[JOB].io == {}


def test_missing_files_are_looked_for_again_later(tree):
    tree.cgroup(JOB, usage=1, memory=False, psi_us=None)
    reader = CgJobReader(tree.roots)
    raw = reader.read([JOB], DEVICES, now_s=0.0)[JOB]
    assert raw.io == {} and raw.memory == {} and raw.psi == {}
    tree.cgroup(JOB, usage=2, io=_io_line("254:0", 4096))      # the controllers on, later
    assert reader.read([JOB], DEVICES, now_s=1.0)[JOB].io == {}    # not looked for yet
    later = reader.read([JOB], DEVICES, now_s=1.0 + cgjob.MISSING_RECHECK_S)[JOB]
    assert later.io["vda"].rbytes == 4096 and later.memory["file_dirty"] == 2 * 2**20


def test_no_cgroup_v2_tree_reads_nothing(tmp_path):
    reader = CgJobReader(Roots(sysfs=str(tmp_path)))
    assert reader.read([JOB], DEVICES) == {} and "no cgroup v2 tree" in reader.reason


def test_device_names_and_the_jobs_cgroup():
    disks = {"vda": DiskCounters.zero(254, 0), "loop0": DiskCounters.zero(7, 0)}
    assert device_names(disks) == {"254:0": "vda", "7:0": "loop0"}
    ranks = [f"{JOB}/user/task_{i}" for i in range(4)]
    assert job_cgroup(ranks) == JOB + "/user"
    assert job_cgroup(ranks[:1]) == ranks[0]
    assert job_cgroup(["/kubepods.slice/a", "/system.slice/b"]) is None
    assert job_cgroup(["/system.slice/a.service", "/system.slice/b.service"]) is None
    assert job_cgroup(["/docker/abc", "/docker/abc"]) == "/docker/abc"
    assert job_cgroup([]) is None and job_cgroup([None, "rel"]) is None


# ---------------------------------------------------------------- the I/O scan's io rule
@pytest.fixture()
def sleepers():
    procs = [subprocess.Popen(["sleep", "60"]) for _ in range(4)]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()


class Asked:
    def __init__(self):
        self.asked: set[int] = set()

    def __call__(self, pid):
        self.asked.add(pid)
        return pid


def test_the_io_rule_reads_a_cgroup_again_only_when_its_io_stat_moved(tree, sleepers):
    agent, reader_pid, old_fs, job = sleepers
    tree.cgroup("system.slice", usage=100, io=_io_line("254:0", 0))
    tree.cgroup("system.slice/agent.service", usage=100, io="", pids=[agent])
    tree.cgroup("system.slice/reader.service", usage=100, io=_io_line("254:0", 0), pids=[reader_pid])
    # no memory controller: its writeback is the root's, so its io.stat cannot say
    tree.cgroup("system.slice/nomem.service", usage=100, io="", memory=False, pids=[old_fs])
    tree.cgroup("job.scope", usage=100, pids=[job])            # no io.stat: the io controller off
    read = Asked()
    scan = ChangedScan(tree.roots, read, rule="io")
    assert scan.narrowed
    first = scan.scan()
    assert {agent, reader_pid, old_fs, job} <= set(first)
    assert scan.io_ruled_last == 3          # system.slice, agent, reader; not nomem, job.scope
    # every cgroup ran (their usage moved); only the reader's io.stat moved
    tree.cgroup("system.slice", usage=900, io=_io_line("254:0", 2**20))
    tree.cgroup("system.slice/agent.service", usage=400, io="", pids=[agent])
    tree.cgroup("system.slice/reader.service", usage=400, io=_io_line("254:0", 2**20), pids=[reader_pid])
    tree.cgroup("system.slice/nomem.service", usage=100, io="", memory=False, pids=[old_fs])
    tree.cgroup("job.scope", usage=200, pids=[job])
    read.asked.clear()
    second = scan.scan()
    assert second == first                                   # the values (pids) carried
    ours = {agent, reader_pid, old_fs, job}
    assert read.asked & ours == {reader_pid, job}            # nomem did not run: carried
    with pytest.raises(ValueError):
        ChangedScan(tree.roots, read, rule="disk")
