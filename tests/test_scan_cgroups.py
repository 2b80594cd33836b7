"""The node's scans narrowed by cgroups (collect/cgscan.py): they find what reading every
process finds, reading only the processes of cgroups that ran.

On this machine's real /proc and real cgroup v2 tree (made under it for the test, with
real busy and sleeping processes moved in; SIGSTOP freezes the busy ones before each
scan, so that both scans see the same figures), and on the whole machine; and the rules
(what is carried over, what is read again) on a cgroup tree written by the test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from gpudisk_top.collect.cgscan import ChangedScan, cgroup2_root
from gpudisk_top.collect.ioscan import IoScan
from gpudisk_top.collect.pidfiles import parse_pid_stat
from gpudisk_top.collect.procio import ProcIoCollector
from gpudisk_top.collect.roots import Roots, read_text

BUSY = "while True: pass"


def _stat_ticks(pid: int):
    text = read_text(f"/proc/{pid}/stat")
    st = parse_pid_stat(text) if text else None
    return None if st is None else (st.cpu_ticks, st.start_ticks)


class Counted:
    """read_fn with the PIDs it was asked for, per scan."""

    def __init__(self, read_fn):
        self.read_fn = read_fn
        self.asked: set[int] = set()

    def __call__(self, pid):
        self.asked.add(pid)
        return self.read_fn(pid)


# ---------------------------------------------------------------- a tree the test writes
def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def _cgroup(sys_root: str, rel: str, usage: int | None, pids: list[int]) -> None:
    base = os.path.join(sys_root, "fs", "cgroup", rel)
    os.makedirs(base, exist_ok=True)
    if rel == "":
        _write(os.path.join(base, "cgroup.controllers"), "cpu io memory\n")
    if usage is not None:
        _write(os.path.join(base, "cpu.stat"),
               f"usage_usec {usage}\nuser_usec {usage}\nsystem_usec 0\n")
    _write(os.path.join(base, "cgroup.procs"), "".join(f"{p}\n" for p in pids))


@pytest.fixture()
def sleepers():
    procs = [subprocess.Popen(["sleep", "60"]) for _ in range(5)]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_what_is_read_again_and_what_is_carried_over(tmp_path, sleepers):
    a, b, c, d, e = sleepers
    sys_root = str(tmp_path / "sys")
    _cgroup(sys_root, "", None, [])
    _cgroup(sys_root, "system.slice", 100, [])
    _cgroup(sys_root, "system.slice/one.service", 50, [a, b])
    _cgroup(sys_root, "system.slice/two.service", 50, [c])
    _cgroup(sys_root, "job.scope", 7, [d])
    read = Counted(_stat_ticks)
    scan = ChangedScan(Roots(sysfs=sys_root), read)
    assert scan.narrowed, scan.reason
    ours = set(sleepers)

    def of_ours(values):
        return {pid: v for pid, v in values.items() if pid in ours}

    first = of_ours(scan.scan())
    # the first scan reads every process, listed or not (e: in no cgroup written here)
    assert set(first) == ours and ours <= read.asked
    assert first == {pid: _stat_ticks(pid) for pid in ours}

    read.asked.clear()
    assert of_ours(scan.scan()) == first
    # nothing ran: only the root's processes and the unlisted (all of /proc but a-d)
    assert not read.asked & {a, b, c, d} and e in read.asked
    assert scan.read_last == len(read.asked)

    read.asked.clear()
    _cgroup(sys_root, "system.slice/one.service", 51, [a, b])    # one.service ran
    _cgroup(sys_root, "system.slice", 101, [])                   # (its parent counts it)
    _cgroup(sys_root, "job.scope", 7, [d, c])                    # c moved in, asleep
    _cgroup(sys_root, "system.slice/two.service", 50, [])
    assert of_ours(scan.scan()) == first
    # one.service's processes are read again; c did not run, wherever it is now
    assert {a, b} <= read.asked and not read.asked & {c, d}

    read.asked.clear()
    assert of_ours(scan.scan(skip={a})) == {pid: v for pid, v in first.items() if pid != a}
    assert a not in read.asked
    read.asked.clear()
    assert of_ours(scan.scan()) == first              # its cgroup did not run: carried
    assert a not in read.asked
    _cgroup(sys_root, "system.slice/one.service", 52, [a, b])
    _cgroup(sys_root, "system.slice", 102, [])
    scan.scan(skip={a})                               # read again, a skipped ...
    read.asked.clear()
    assert of_ours(scan.scan()) == first
    assert a in read.asked and b not in read.asked    # ... so there is no a to carry


def test_a_process_that_exited_is_not_carried_over(tmp_path):
    sleeper = subprocess.Popen(["sleep", "60"])
    sys_root = str(tmp_path / "sys")
    _cgroup(sys_root, "", None, [])
    _cgroup(sys_root, "one.service", 50, [sleeper.pid])
    scan = ChangedScan(Roots(sysfs=sys_root), _stat_ticks)
    assert sleeper.pid in scan.scan()
    sleeper.kill()
    sleeper.wait()
    # its cgroup (written by the test) neither moved nor lost it: the procfs says it is gone
    assert sleeper.pid not in scan.scan()


def test_without_a_cgroup_v2_tree_every_process_is_read(tmp_path, sleepers):
    os.makedirs(tmp_path / "sys" / "fs" / "cgroup" / "cpu")     # cgroup v1 alone
    read = Counted(_stat_ticks)
    scan = ChangedScan(Roots(sysfs=str(tmp_path / "sys")), read)
    assert not scan.narrowed and "no cgroup v2" in scan.reason
    scan.scan()
    read.asked.clear()
    scan.scan()
    assert set(sleepers) <= read.asked


def test_another_namespaces_procfs_is_not_narrowed(tmp_path):
    _cgroup(str(tmp_path / "sys"), "", None, [])
    proc = tmp_path / "proc"
    proc.mkdir()
    os.symlink("1", proc / "self")
    scan = ChangedScan(Roots(procfs=str(proc), sysfs=str(tmp_path / "sys")), _stat_ticks)
    assert not scan.narrowed and "PID namespace" in scan.reason


# ---------------------------------------------------------------- the real tree
@pytest.fixture()
def real_cgroups():
    """Cgroups under the real v2 tree: a/ (busy and sleeping processes), a/inner/ (one
    busy), b/ (sleepers only), c/ (empty, where a process moves); removed after."""
    root = cgroup2_root(Roots())
    if root is None:
        pytest.skip("no cgroup v2 tree under /sys/fs/cgroup")
    base = os.path.join(root, f"gdt-test-{os.getpid()}")
    dirs = {name: os.path.join(base, name) for name in ("a", "a/inner", "b", "c")}
    procs: list[subprocess.Popen] = []
    try:
        for path in dirs.values():
            os.makedirs(path)

        def start(argv, where):
            p = subprocess.Popen(argv)
            procs.append(p)
            with open(os.path.join(dirs[where], "cgroup.procs"), "w") as f:
                f.write(str(p.pid))
            return p.pid

        busy = [start([sys.executable, "-c", BUSY], "a"),
                start([sys.executable, "-c", BUSY], "a/inner")]
        for pid in busy:
            os.kill(pid, signal.SIGSTOP)
        sleeping = [start(["sleep", "60"], "a")] + [start(["sleep", "60"], "b")
                                                      for _ in range(3)]
        mover = start([sys.executable, "-c", BUSY], "a")
        os.kill(mover, signal.SIGSTOP)
        _settled([dirs["b"]], sleeping)
        yield dirs, busy, sleeping, mover
    finally:
        for p in procs:
            p.kill()
            p.wait()
        for path in sorted(dirs.values(), reverse=True) + [base]:
            for _ in range(50):
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)


def _settled(cgroups: list[str], sleepers: list[int]) -> None:
    """Wait until the sleepers are asleep: a `sleep` moved into its cgroup while it still
    starts (on a loaded machine) runs there a moment later."""
    def usage():
        return [read_text(os.path.join(c, "cpu.stat")) for c in cgroups]
    deadline = time.monotonic() + 20
    last = None
    while time.monotonic() < deadline:
        now = usage()
        states = [read_text(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()[0]
                  for pid in sleepers]
        if now == last and all(st == "S" for st in states):
            return
        last = now
        time.sleep(0.3)
    raise AssertionError(f"the sleepers of {cgroups} did not settle")


def _run(pids: list[int], seconds: float) -> None:
    for pid in pids:
        os.kill(pid, signal.SIGCONT)
    time.sleep(seconds)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    time.sleep(0.05)


@pytest.mark.root(reason="makes cgroups and moves processes into them")
def test_the_narrowed_search_finds_the_same_busiest_with_the_same_figures(real_cgroups):
    dirs, busy, sleeping, mover = real_cgroups
    ours = set(busy) | set(sleeping) | {mover}
    narrowed, full = ProcIoCollector(Roots()), ProcIoCollector(Roots())
    full._others_stats.narrowed = False
    assert narrowed._others_stats.narrowed, narrowed._others_stats.reason
    job = {os.getpid()}
    for c in (narrowed, full):
        c._find_others(job, 0.0)
    read = Counted(narrowed._others_stats.read)
    narrowed._others_stats.read = read
    before: dict = {}
    for round_ in range(3):
        if round_ == 0:
            _run(busy, 0.3)                   # both busy ones, in a/ and in a/inner/
        elif round_ == 1:
            _run([busy[1]], 0.3)              # only a/inner/'s: a/ counts its subtree
        else:
            _run([mover], 0.3)                # ran in a/, then moves into the idle c/
            with open(os.path.join(dirs["c"], "cgroup.procs"), "w") as f:
                f.write(str(mover))
        read.asked.clear()
        for c in (narrowed, full):
            c._find_others(job, float(round_ + 1))
        got, want = narrowed._others_scan[1], full._others_scan[1]
        # our processes are frozen: their figures read the same whenever read
        assert {p: got.get(p) for p in ours} == {p: want.get(p) for p in ours}
        assert all(p in got for p in ours)
        # the sleepers of b/ were not read again; a/'s processes were (its usage counts
        # a/inner/'s), and a/inner/'s only when it ran
        assert not read.asked & set(sleeping[1:])
        assert sleeping[0] in read.asked
        assert (busy[1] in read.asked) == (round_ < 2)
        # and the busiest: ours, found alike where the machine's own do not outrank them
        moved = {p: got[p][0] - before[p][0] for p in ours} if round_ else None
        before = dict(got)
        if moved is not None:
            ran = {p for p, d in moved.items() if d > 0}
            assert ran == ({busy[1]} if round_ == 1 else {mover})
            for p in ran:
                assert (p in narrowed._others) == (p in full._others)
    assert mover in read.asked      # moved into an idle cgroup: read there


@pytest.mark.root(reason="makes cgroups and moves processes into them")
def test_the_narrowed_io_scan_finds_the_same_counters(real_cgroups):
    dirs, busy, sleeping, mover = real_cgroups
    narrowed, full = IoScan(Roots()), IoScan(Roots())
    full._files.narrowed = False
    narrowed.run(0.0, keep=True)
    full.run(0.0, keep=True)
    _run(busy, 0.2)
    narrowed.run(1.0, keep=True)
    full.run(1.0, keep=True)
    ours = set(busy) | set(sleeping) | {mover}
    assert {p: narrowed._last.get(p) for p in ours} == {p: full._last.get(p) for p in ours}
    assert all(p in narrowed._last for p in ours)


@pytest.mark.root(reason="reads every process's stat, as the scans do")
def test_on_the_whole_machine_what_is_carried_over_is_what_a_full_read_finds():
    """Every process of this machine: a value carried over (its cgroup did not run
    since it was read) equals a full read made between the two scans; every process
    alive through the scan is in it."""
    read = Counted(_stat_ticks)
    scan = ChangedScan(Roots(), read)
    if not scan.narrowed:
        pytest.skip(scan.reason)
    scan.scan()
    time.sleep(0.5)
    between = {int(n): _stat_ticks(int(n)) for n in os.listdir("/proc") if n.isdigit()}
    read.asked.clear()
    got = scan.scan()
    after = {int(n) for n in os.listdir("/proc") if n.isdigit()}
    for pid, value in got.items():
        if pid not in read.asked and pid in between:
            assert value == between[pid], pid
    alive = {pid for pid, v in between.items() if v is not None and pid in after}
    assert alive <= set(got)
