"""Per-process I/O counters of GPU processes and all their descendants.

DataLoader workers are child processes of the training process, so the data a GPU waits
for is read by its descendants: every one of them gets a ProcIoRaw with its /proc/PID/io
counters, CPU time, and the block devices its open files and file mappings live on.

Costs per collect():
  - finding descendants: <procfs>/PID/task/*/children of each tree member where the
    kernel has them (CONFIG_PROC_CHILDREN), else one read of every <procfs>/*/stat;
  - per tree member: stat and io (two small reads), cmdline once per process; of one
    with several threads, each other thread's schedstat too (and its stat while delay
    accounting is on, when the schedstat moved): the waits of all its threads
    (collect/threadtime.py);
  - devices: an os.stat of every fd and a read of maps (FD_SCAN_LIMIT fds at most), the
    costly part: at most every DEVICES_REFRESH_S per process, and then only when its
    fd table or address space changed size (the count of its fds, one stat of its fd
    directory; its vsize, already in its stat line) or DEVICES_RECHECK_S went by: a
    sleeping worker's files do not change every second.  A file closed and another
    opened in its place, with the address space the same size, shows within
    DEVICES_RECHECK_S;
  - a file whose text did not change since the last sample is not parsed again (a
    sleeping process's stat, io and schedstat read the same every second).
"""

from __future__ import annotations

import os
import platform
import stat as stat_mod
import time
from dataclasses import dataclass, field

from gpudisk_top.collect.cgscan import ChangedScan
from gpudisk_top.collect.pidmap import read_cmdline
from gpudisk_top.collect import diskstats
from gpudisk_top.collect.host import parse_process_cgroup
from gpudisk_top.collect.mounts import REMOTE_KINDS, MountTable
from gpudisk_top.collect.pidfiles import (PidStat, parse_maps_devices, parse_pid_io,
                                          parse_pid_stat, parse_schedstat)
from gpudisk_top.collect.roots import FileCache, Roots, read_bytes, read_text
from gpudisk_top.collect.sample import ProcIoRaw
from gpudisk_top.collect.threadtime import ThreadTimes

DEVICES_REFRESH_S = 5.0
DEVICES_RECHECK_S = 60.0  # ... and a process whose fd count and vsize did not change
OTHERS_REFRESH_S = 5.0  # how often the busiest processes outside the job are looked for
OTHERS_TOP = 5          # how many of them are followed
OTHERS_CONTENDED = 0.10  # ... and only while tasks waited for a CPU this share of the time
TREES_REFRESH_S = 5.0   # how often GPU processes' descendants are looked for afresh
DEV_NAMES_REFRESH_S = 30.0
FD_SCAN_LIMIT = 8192
# a regular file this large, open on a block device, counts as data (a dataset's file or
# shard, a memmap), not a log or a lock file; a block device opened directly always does
DATA_FILE_MIN_BYTES = 1 << 20
DATA_FDINFO_LIMIT = 64   # data files whose fdinfo is read per device scan (workers open
                         # their shards alike: 64 say how they read)
# O_DIRECT as /proc/PID/fdinfo/N `flags:` shows it (octal): 040000 on x86-64 and most
# architectures, 0200000 on arm64, arm and mips' 0100000 (include/uapi/asm-generic/fcntl.h
# and each arch's fcntl.h)
O_DIRECT_FLAG = {"aarch64": 0o200000, "arm64": 0o200000, "armv7l": 0o200000,
                 "mips": 0o100000, "mips64": 0o100000}.get(platform.machine(), 0o40000)
# read(), pread64(), readv(), preadv(), preadv2() by architecture (the kernel's syscall
# tables: arch/x86/entry/syscalls/syscall_64.tbl; include/uapi/asm-generic/unistd.h for
# arm64 and the other generic ones): what a process blocked in a file read sleeps in
READ_SYSCALLS = {"x86_64": {0, 17, 19, 295, 327},
                 "aarch64": {63, 65, 67, 69, 286}}.get(platform.machine(), set())


def _clk_tck() -> int:
    try:
        return os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError):
        return 100


@dataclass(slots=True)
class _Known:
    start_ticks: int
    cmdline: str | None
    paths: tuple[str, str]            # its io and schedstat files: built once, read every sample
    cgroup: str | None = None         # read once: a process seldom moves
    devices: tuple[str, ...] | None = None
    devices_at: float | None = None   # monotonic seconds of the last device scan
    mount_devs: dict = field(default_factory=dict)  # st_dev -> mountpoint: the network and
                                                    # FUSE mounts its files live on
    direct_reads: bool | None = None  # its data files opened with O_DIRECT (_data_files)
    data_kb: int | None = None
    devices_key: tuple | None = None  # (fd count, vsize) at the last device scan
    checked_at: float = 0.0           # monotonic seconds devices_key was last compared
    # the last text of its io and schedstat files and what it parsed into: the same text
    # is not parsed again
    io_text: str | None = None
    io: dict = field(default_factory=dict)
    sched_text: str | None = None
    run_delay_ns: int | None = None


class ProcIoCollector:
    """Collects ProcIoRaw for GPU process trees; keeps per-PID caches between calls."""

    def __init__(self, roots: Roots, devices_refresh_s: float = DEVICES_REFRESH_S,
                 files: FileCache | None = None, mount_table: MountTable | None = None) -> None:
        self.roots = roots
        self.mount_table = mount_table or MountTable(roots)
        self.devices_refresh_s = devices_refresh_s
        self.files = files or FileCache()
        self._trees_cache: tuple[float, dict, dict] | None = None  # (when, gpu_pids, members)
        self._known: dict[int, _Known] = {}
        # our own PID as this procfs shows it (None under another root's namespace)
        self._own_pid = os.getpid() if os.path.realpath(self.roots.procfs) == "/proc" else None
        self._dev_names: dict[tuple[int, int], str | None] = {}
        self._dev_names_at = 0.0
        self._children_files: bool | None = None  # None: not yet known
        # pid -> (its stat text, what it parsed into), of the processes read every sample
        self._stats: dict[int, tuple[str, PidStat]] = {}
        # the fd directory's size is its count of open fds (Linux 6.2+); None: not known yet
        self._fd_count_by_size: bool | None = None
        self._proc_dir = os.path.join(roots.procfs, "")
        # the job's processes' other threads (after _own_pid: whether our PIDs are its)
        self._threads = ThreadTimes(self._proc_dir, self._own_pid is not None)
        self.delayacct_on = False             # as the latest collect() found it
        # kernel.task_delayacct has been on, as far as we saw, since this many clock ticks
        # after boot (None: off, or not yet looked at): a task forked after it has its
        # accounting, one forked before it may read 0 for ever (see _blkio)
        self._acct_since_ticks: float | None = None
        self._acct_seen: bool | None = None   # what the previous collect() found
        self.delayacct_change: str | None = None  # set when it changed under us, node-wide
        self._others: list[int] = []          # the busiest processes outside the job
        self._others_scan: tuple[float, dict[int, int]] | None = None  # (when, pid -> ticks)
        # every process's stat, read afresh only where its cgroup ran (the state of one
        # carried over is as last read: only the first search, which reads all, uses it)
        self._others_stats = ChangedScan(roots, lambda pid: self._stat(pid, keep_open=False))
        self._followed: list[int] = []        # the busiest at block I/O (collect/ioscan.py)
        # the others read this sample for their CPU alone, their devices not looked at
        self._cpu_only: set[int] = set()
        # processes read since it was made (job members, the others, the followed): what
        # a slow cadence saves is counted here (collect/detail.py; tests/test_detail_cadence.py)
        self.processes_read = 0

    def delayacct(self) -> bool:
        """Whether the kernel accounts the time tasks spend blocked on block I/O now.
        Linux 5.14+ has the switch kernel.task_delayacct (off by default); before it,
        accounting is on unless the kernel was booted with `nodelayacct`.  Unknown (a
        --procfs copy with neither file) counts as off: field 42 then means nothing."""
        text = self.files.read(self.roots.proc("sys", "kernel", "task_delayacct"))
        if text is not None:
            return text.strip() == "1"
        cmdline = self.files.read(self.roots.proc("cmdline"))
        return cmdline is not None and "nodelayacct" not in cmdline.split()

    # ------------------------------------------------------------------ public
    def collect(self, gpu_pids: dict[int, int]) -> dict[int, ProcIoRaw]:
        """ProcIoRaw of every GPU process and every descendant, keyed by local PID.

        gpu_pids maps the local PID of each GPU compute process to its host PID.  A
        process that has exited is left out; one whose io or fds cannot be read has None
        there.  Never raises.
        """
        now = time.monotonic()
        if now - self._dev_names_at > DEV_NAMES_REFRESH_S:
            self._dev_names.clear()  # a hot-plugged disk may reuse a MAJ:MIN
            self._dev_names_at = now

        trees = self._cached_trees(gpu_pids, now)
        self._cpu_only = set()       # collect_others says which, after this
        out: dict[int, ProcIoRaw] = {}
        delayacct = self.delayacct_on = self.delayacct() if trees else False
        if trees:
            self._delayacct_seen(delayacct)
        for pid, (root_host_pid, st) in trees.items():
            raw = self._one(pid, root_host_pid, st, now, delayacct)
            if raw is not None:
                out[pid] = raw
        if len(out) < len(trees):
            self._trees_cache = None  # a member exited: look for its replacement next time
        for pid in list(self._known):
            if pid not in out and pid not in self._others and pid not in self._followed:
                del self._known[pid]  # exited, or no longer under a GPU process
                self._stats.pop(pid, None)
                self.files.forget(self.roots.proc(str(pid)) + os.sep)
        for pid in self._threads.pids():
            if pid not in out:
                self._threads.forget(pid)
        return out

    def close(self) -> None:
        """Close the files kept open on the job's threads now, not when the garbage
        collector gets to this collector (its scan's reader refers back to it)."""
        self._threads.close()

    def _delayacct_seen(self, on: bool) -> None:
        """Keep when accounting was first seen on (continuously since), and say when it
        was switched while we run: the sysctl is node-wide, anyone may flip it."""
        if on and self._acct_since_ticks is None:
            uptime = self.files.read(self.roots.proc("uptime"))
            try:
                self._acct_since_ticks = float(uptime.split()[0]) * _clk_tck()
            except (AttributeError, IndexError, ValueError):
                self._acct_since_ticks = float("inf")   # no clock: trust moved values only
        elif not on:
            self._acct_since_ticks = None
        if self._acct_seen is not None and on != self._acct_seen:
            self.delayacct_change = (
                "kernel.task_delayacct was switched on while running (it is node-wide): "
                "the blocked time of loaders started before is still estimated" if on else
                "kernel.task_delayacct was switched off while running (it is node-wide): "
                "the loaders' blocked time is estimated from now on")
        self._acct_seen = on

    def _blkio(self, st: PidStat) -> int | None:
        """Field 42, where it can be believed.  A task's delay accounting is set up at
        fork only while kernel.task_delayacct is on (include/linux/delayacct.h
        delayacct_tsk_init): a task forked before it was switched on reads 0 for ever,
        blocked as it may be.  So 0 counts only for a task forked after we saw it on;
        a value that has moved shows the task is accounted, whenever it started."""
        ticks = st.blkio_ticks
        if ticks is None or self._acct_since_ticks is None:
            return None
        if ticks > 0 or st.start_ticks > self._acct_since_ticks:
            return ticks
        return None

    def _cached_trees(self, gpu_pids: dict[int, int], now: float):
        """The GPU process trees, found afresh at most every TREES_REFRESH_S: finding a
        process's descendants may read every /proc/PID/stat, and DataLoader workers come
        and go at epoch boundaries, not every second.  A new GPU process or a member that
        exited triggers a new search at once."""
        cached = self._trees_cache
        if cached is not None and cached[1] == gpu_pids and now - cached[0] < TREES_REFRESH_S:
            return {pid: (root, None) for pid, (root, _st) in cached[2].items()}
        trees = self._trees(gpu_pids)
        self._trees_cache = (now, dict(gpu_pids), trees)
        return trees

    # ------------------------------------------------------------------ the others
    def collect_others(self, job: dict[int, ProcIoRaw], contended: bool,
                       slow_s: float | None = None) -> dict[int, ProcIoRaw]:
        """The processes outside the job that took the most CPU lately, as ProcIoRaw with
        no root_pid: who the CPUs went to when the job's loaders wait for one.

        Finding them reads every <procfs>/*/stat whose cgroup ran since the last search
        (collect/cgscan.py; every one without a cgroup v2 tree: a few ms on a busy node),
        so it is done at most every OTHERS_REFRESH_S (slow_s where the caller gives
        one: every job healthy, collect/detail.py) and only while `contended` (the
        caller saw tasks waiting for a CPU); between searches the ones found are read
        like job members."""
        now = time.monotonic()
        every = slow_s or OTHERS_REFRESH_S
        if job and contended and (self._others_scan is None
                                  or now - self._others_scan[0] >= every):
            self._find_others(set(job), now)
        if not job:
            self._others = []
        out: dict[int, ProcIoRaw] = {}
        for pid in self._others:
            if pid in job:
                continue
            raw = self._one(pid, None, None, now, devices=False)
            if raw is not None:
                out[pid] = raw
        self._cpu_only = {pid for pid in out if self._known[pid].devices_at is None}
        return out

    def follow(self, pids: list[int], already: dict[int, ProcIoRaw]) -> dict[int, ProcIoRaw]:
        """ProcIoRaw of the processes that an I/O scan found busiest (collect/ioscan.py),
        with the devices their files live on: who is loading a disk.  Kept until the
        next call; one already read this sample (the job's, `already`) is not read twice,
        unless it was read for its CPU alone (one of the others, collect_others): a process
        that both holds a CPU and loads a disk (fio at a deep queue) is read again with its
        devices, or it would never be named as the disk's reader."""
        now = time.monotonic()
        self._followed = [pid for pid in pids if pid not in already or pid in self._cpu_only]
        out: dict[int, ProcIoRaw] = {}
        for pid in self._followed:
            raw = self._one(pid, None, None, now)
            if raw is not None:
                out[pid] = raw
        return out

    def _find_others(self, job: set[int], now: float) -> None:
        """Every process's CPU time outside the job (collect/cgscan.py reads only those
        of cgroups that ran since the last search): the OTHERS_TOP that used the most
        since the last search."""
        ticks: dict[int, tuple[int, int]] = {}   # pid -> (cpu ticks, start ticks)
        runnable: list[tuple[int, int]] = []     # (cpu ticks, pid) of those in state R
        stats = self._others_stats.scan(job)
        for pid, st in stats.items():
            ticks[pid] = (st.cpu_ticks, st.start_ticks)
            if st.state == "R":
                runnable.append((st.cpu_ticks, pid))
        last = self._others_scan
        self._others_scan = (now, ticks)
        if last is None:
            # no earlier search to compare with (a --once, a fresh start): follow those
            # runnable now, which a process that takes the CPUs is at most moments, so
            # that the next sample has their CPU time (the next search corrects the pick)
            runnable.sort(reverse=True)
            self._others = [pid for _, pid in runnable[:OTHERS_TOP]]
            return
        used = []
        for pid, (cpu, start) in ticks.items():
            before = last[1].get(pid)
            if before is not None and before[1] == start and cpu > before[0]:
                used.append((cpu - before[0], pid))
        used.sort(reverse=True)
        self._others = [pid for _, pid in used[:OTHERS_TOP]]

    # ------------------------------------------------------------------ trees
    def _stat(self, pid: int, keep_open: bool = True) -> PidStat | None:
        """keep_open: a member read every sample keeps its file open; the scan of every
        process does not (it would hold a file of every process on the node)."""
        path = f"{self._proc_dir}{pid}/stat"     # not os.path.join: this runs per process
        if not keep_open:
            text = read_text(path)
            return parse_pid_stat(text) if text is not None else None
        text = self.files.read(path)
        if text is None:
            return None
        cached = self._stats.get(pid)
        if cached is not None and cached[0] == text:
            return cached[1]       # the same line parses the same
        st = parse_pid_stat(text)
        if st is not None:
            self._stats[pid] = (text, st)
        return st

    def _trees(self, gpu_pids: dict[int, int]) -> dict[int, tuple[int, PidStat | None]]:
        """local PID -> (host PID of its GPU ancestor, its stat when already read).

        Another GPU process roots its own tree, even when it descends from a GPU process.
        """
        members: dict[int, tuple[int, PidStat | None]] = {
            pid: (host_pid, None) for pid, host_pid in gpu_pids.items()}
        # the ppid scan, made at most once per call, and only without children files
        children_of = self._scan_children() if self._children_files is False else None
        for root, host_pid in gpu_pids.items():
            stack = [root]
            while stack:
                pid = stack.pop()
                found = None
                if children_of is None:
                    kids = self._children_from_files(pid)
                    if kids is None:
                        children_of = self._scan_children()
                    else:
                        found = [(kid, None) for kid in kids]
                if found is None:
                    found = children_of.get(pid, ())
                for child, st in found:
                    if child not in members:
                        members[child] = (host_pid, st)
                        stack.append(child)
        return members

    def _children_from_files(self, pid: int) -> list[int] | None:
        """Children through task/*/children; None when the kernel has no such files or
        they cannot be read (then the ppid scan is used)."""
        task_dir = self.roots.proc(str(pid), "task")
        try:
            tids = os.listdir(task_dir)
        except OSError:
            return [] if self._children_files else None  # exited: no children to find
        kids: list[int] = []
        for tid in tids:
            try:
                children = read_bytes(os.path.join(task_dir, tid, "children"))
                kids.extend(int(v) for v in children.split())
            except FileNotFoundError:
                if not os.path.isdir(os.path.join(task_dir, tid)):
                    continue  # the thread exited meanwhile
                self._children_files = False  # CONFIG_PROC_CHILDREN is off
                return None
            except (OSError, ValueError):
                return None  # no ptrace access to this process: the scan still works
        self._children_files = True
        return kids

    def _scan_children(self) -> dict[int, list[tuple[int, PidStat]]]:
        """ppid -> [(pid, stat)] from every <procfs>/*/stat (world-readable)."""
        children: dict[int, list[tuple[int, PidStat]]] = {}
        try:
            names = os.listdir(self.roots.procfs)
        except OSError:
            return children
        for name in names:
            if not name.isdigit():
                continue
            st = self._stat(int(name), keep_open=False)
            if st is not None:
                children.setdefault(st.ppid, []).append((int(name), st))
        return children

    # ------------------------------------------------------------------ one process
    def _one(self, pid: int, root_host_pid: int | None, st: PidStat | None,
             now: float, delayacct: bool = False, devices: bool = True) -> ProcIoRaw | None:
        """devices=False: not the devices its files live on (the busiest processes outside
        the job are followed for their CPU; scanning their fds would cost more)."""
        if st is None:
            st = self._stat(pid)
        if st is None:
            return None  # exited
        self.processes_read += 1
        known = self._known.get(pid)
        if known is None or known.start_ticks != st.start_ticks:
            base = f"{self._proc_dir}{pid}/"
            cgroup_text = read_text(base + "cgroup")
            known = _Known(st.start_ticks, read_cmdline(self.roots, pid),
                           (base + "io", base + "schedstat"),
                           parse_process_cgroup(cgroup_text) if cgroup_text else None)
            self._known[pid] = known
        if devices and (known.devices_at is None
                        or now - known.checked_at >= self.devices_refresh_s):
            key = (self._fd_count(pid), st.vsize_bytes)
            if (known.devices_at is None or key != known.devices_key
                    or now - known.devices_at >= DEVICES_RECHECK_S):
                known.devices, known.mount_devs, data = self._devices(pid, now)
                known.direct_reads, known.data_kb = data
                known.devices_at, known.devices_key = now, key
            known.checked_at = now

        io_text = self.files.read(known.paths[0])
        if io_text != known.io_text:
            known.io_text = io_text
            known.io = parse_pid_io(io_text) if io_text is not None else {}
        io = known.io
        sched = self.files.read(known.paths[1])
        if sched != known.sched_text:
            known.sched_text = sched
            known.run_delay_ns = parse_schedstat(sched) if sched is not None else None
        # field 42 reads 0 while delay accounting is off, and for ever for a task forked
        # before it was on: that is "not measured"
        run_delay_ns, blkio_ticks = known.run_delay_ns, self._blkio(st) if delayacct else None
        if root_host_pid is not None:
            # a job's process: the waits of all its threads (collect/threadtime.py); the
            # others outside the job are followed for their CPU time alone
            run_delay_ns, blkio_ticks = self._threads.add(pid, st, sched, run_delay_ns,
                                                          blkio_ticks, delayacct)
        return ProcIoRaw(
            pid=pid,
            ppid=st.ppid,
            root_pid=root_host_pid,
            name=st.comm,
            cmdline=known.cmdline,
            rchar=io.get("rchar"),
            wchar=io.get("wchar"),
            read_bytes=io.get("read_bytes"),
            write_bytes=io.get("write_bytes"),
            cpu_ticks=st.cpu_ticks,
            sys_ticks=st.sys_ticks,
            devices=known.devices,
            mounts=tuple(sorted(set(known.mount_devs.values()))),
            blocked_on=self._blocked_on(pid, known.mount_devs, st.state),
            state=st.state,
            run_delay_ns=run_delay_ns,
            blkio_ticks=blkio_ticks,
            syscr=io.get("syscr"),
            cgroup=known.cgroup,
            direct_reads=known.direct_reads,
            data_kb=known.data_kb,
        )

    # ------------------------------------------------------------------ devices
    def _fd_count(self, pid: int) -> int | None:
        """How many fds the process has open: the size of its fd directory on Linux 6.2+
        (one stat), else the length of its listing; None when it cannot be read."""
        fd_dir = f"{self._proc_dir}{pid}/fd"
        try:
            if self._fd_count_by_size is None:
                # our own fd table is never empty: a size of 0 is a kernel before 6.2 (or
                # a copy of a procfs), where the size says nothing
                self._fd_count_by_size = os.stat(f"{self._proc_dir}self/fd").st_size > 0
        except OSError:
            self._fd_count_by_size = False
        try:
            if self._fd_count_by_size:
                return os.stat(fd_dir).st_size
            return len(os.listdir(fd_dir))
        except OSError:
            return None

    def _blocked_on(self, pid: int, mount_devs: dict, state: str) -> str | None:
        """The network or FUSE mount (of `mount_devs`) whose file the process is in a read()
        of at this moment: /proc/PID/syscall gives the system call it sleeps in and its
        arguments, the first of which is the fd (proc(5)).  Only asked of a sleeping
        process with files on such a mount: one small read, and a stat of the fd."""
        if not mount_devs or state not in ("S", "D"):
            return None
        text = read_text(f"{self._proc_dir}{pid}/syscall")
        fields = text.split() if text else []
        if len(fields) < 2 or not fields[0].isdigit() or int(fields[0]) not in READ_SYSCALLS:
            return None
        try:
            st = os.stat(f"{self._proc_dir}{pid}/fd/{int(fields[1], 16)}")
        except (OSError, ValueError):
            return None
        return mount_devs.get((os.major(st.st_dev), os.minor(st.st_dev)))

    def _devices(self, pid: int, now: float) -> tuple[tuple[str, ...] | None, dict, tuple]:
        """Kernel names of the block devices under the process's open files and file
        mappings (None when neither its fds nor its maps can be read), the network
        and FUSE mounts among them (collect/mounts.py): {st_dev: mountpoint}, and
        (direct_reads, data_kb) of its data files (_data_files)."""
        devs: set[tuple[int, int]] = set()
        data: dict[tuple[int, int], tuple[str, int]] = {}   # (st_dev, st_ino) -> (fd, size)
        readable = False
        fd_dir = self.roots.proc(str(pid), "fd")
        try:
            # our own fds are never followed: one is the recording, and a stat() of it
            # on a stalled output would hold the sampling loop (record/queued.py)
            fds = [] if pid == self._own_pid else os.listdir(fd_dir)
            readable = True
        except OSError:
            fds = []
        for fd in fds[:FD_SCAN_LIMIT]:
            try:
                s = os.stat(os.path.join(fd_dir, fd))
            except PermissionError:
                # the fd directory may list while following its links needs ptrace
                # access: then the fds say nothing
                readable = False
                break
            except OSError:
                continue  # closed meanwhile, or a dangling target
            devs.add((os.major(s.st_dev), os.minor(s.st_dev)))
            if stat_mod.S_ISBLK(s.st_mode):
                # a block device opened directly: its data lives on that device itself
                devs.add((os.major(s.st_rdev), os.minor(s.st_rdev)))
                data.setdefault((s.st_rdev, -1), (fd, 0))
            elif (stat_mod.S_ISREG(s.st_mode) and os.major(s.st_dev) != 0
                  and s.st_size >= DATA_FILE_MIN_BYTES):
                data.setdefault((s.st_dev, s.st_ino), (fd, s.st_size))
        maps = read_text(self.roots.proc(str(pid), "maps"))
        if maps is not None:
            readable = True
            devs |= parse_maps_devices(maps)
        if not readable:
            return None, {}, (None, None)
        names = {self._dev_name(major, minor) for major, minor in devs if major != 0}
        names.discard(None)
        table = self.mount_table.of(pid, now) if any(major == 0 for major, _ in devs) else {}
        mounts = {d: table[d].mountpoint for d in devs
                  if d in table and table[d].kind in REMOTE_KINDS}
        return tuple(sorted(names)), mounts, self._data_files(pid, data.values())

    def _data_files(self, pid: int, files) -> tuple[bool | None, int | None]:
        """(direct_reads, data_kb) of a process's data files (regular files of at least
        DATA_FILE_MIN_BYTES on a block device, block devices opened directly): whether
        one of them is open with O_DIRECT (its fdinfo `flags:`, octal), which the page
        cache cannot serve, and the KiB of those read through the page cache (their
        sizes: the working set the cache would have to hold; of the first
        DATA_FDINFO_LIMIT, so a lower bound past them).  (None, None) without data files;
        only their fdinfo is read, one small file each."""
        direct, buffered_bytes, known = False, 0, False
        for fd, size in list(files)[:DATA_FDINFO_LIMIT]:
            text = read_text(f"{self._proc_dir}{pid}/fdinfo/{fd}")
            flags = next((line.split(":", 1)[1] for line in (text or "").splitlines()
                          if line.startswith("flags:")), None)
            try:
                value = int(flags, 8) if flags is not None else None
            except ValueError:
                value = None
            if value is None:
                continue          # closed meanwhile, or no access
            known = True
            if value & O_DIRECT_FLAG:
                direct = True
            else:
                buffered_bytes += size
        if not known:
            return None, None
        return direct, buffered_bytes // 1024 if buffered_bytes else None

    def _dev_name(self, major: int, minor: int) -> str | None:
        key = (major, minor)
        if key not in self._dev_names:
            try:
                link = os.readlink(self.roots.sys("dev", "block", f"{major}:{minor}"))
                self._dev_names[key] = os.path.basename(link) or None
            except OSError:
                # no sysfs (a container): /proc/diskstats names every block device by its
                # numbers too; a number it lacks is not a block device (a char device)
                self._dev_names[key] = self._diskstats_names().get(key)
        return self._dev_names[key]

    def _diskstats_names(self) -> dict[tuple[int, int], str]:
        counters = diskstats.parse(read_text(self.roots.proc("diskstats")) or "")
        return {(c.major, c.minor): name for name, c in counters.items()}
