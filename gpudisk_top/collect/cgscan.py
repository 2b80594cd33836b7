"""A scan of every process that reads only the processes that ran since the last scan.

The node's scans (the busiest processes outside the job, collect/procio.py; the busiest
at block I/O, collect/ioscan.py) read one file of every process every few seconds: on a
node of 2,000 processes that is ~2,000 opens and reads, most of them of processes that
did not run at all in between (a sleeping daemon's stat and io read the same for hours).

What a process's /proc/PID/stat (utime + stime) and /proc/PID/io (its counters) say
changes only while the process runs: the kernel charges CPU time to the task on the CPU,
and a task's I/O counters are only ever charged to `current` (task_io_account_read,
task_io_account_write: block reads at submit_bio, writes when it dirties pages, network
filesystems' reads in its own read path).  And whatever a task runs is charged, at the
same moment, to its cgroup and every ancestor's (cgroup v2 `cpu.stat` usage_usec: the
subtree's; it is there whether or not the cpu controller is enabled).  So a cgroup whose
usage did not move since the last scan holds no process whose figures moved: the scan
carries its subtree's figures over without a look inside, and reads only the processes
of cgroups that ran (and of cgroups new since), and every process no cgroup listed (one
listdir of the procfs finds them: zombies, processes of a cgroup namespace we do not see,
one moved meanwhile; it also drops those that exited).  A process moved, asleep, from one
cgroup to another keeps its figures: it did not run.  The root cgroup's own processes
(kernel threads) are always read: its usage is the node's, counted by ticks, not theirs.

What this returns is what reading every process would return, as of when each cgroup's
usage was read, with two exceptions: a process moved to another cgroup, run there and
moved on again between two scans (nothing does that but a hand at cgroup.procs), and a
cgroup's time growing by less than the microsecond usage_usec counts in (a wake that
sleeps again at once), in which a process's CPU time may cross a clock tick unseen: one
tick, for a process that used next to nothing, which the next read of it counts.

Used only where the cgroup v2 tree is under the Roots' sysfs (`fs/cgroup`, or
`fs/cgroup/unified` on a systemd hybrid) and the procfs shows our own PID namespace (the
PIDs cgroup.procs lists are ours); elsewhere (cgroup v1 only, no /sys in a container,
another namespace's procfs) every process is read, as before.  A cgroup's processes are
listed in cgroup.procs; a threaded cgroup's are listed at its threaded domain, whose
usage counts theirs.

Costs per scan: one listdir of the procfs; the root's cgroup.procs and a read of each of
its processes; a cpu.stat of each child of a cgroup that ran, and of those that ran a
scandir, their cgroup.procs and a read of each of their processes.

The io rule (rule="io", the I/O scan's, collect/ioscan.py): a process's block I/O counters
move only with its cgroup's io.stat, which is recursive as usage_usec is: a block read is
charged to /proc/PID/io's read_bytes in submit_bio and, at the same moment, to the
submitting task's cgroup's io.stat (its io css: the cgroup, or its nearest ancestor with
the io controller on); writeback is charged to the cgroup that dirtied the pages where the
memory controller is on too.  So where a cgroup has io.stat and memory.stat, its subtree is
read again only when its io.stat moved, not whenever it ran: the daemons and agents that
wake every second but read nothing are carried over.  Elsewhere (no io.stat: the io
controller off there, or on v1 as on a hybrid host; no memory.stat: writeback is charged
to the root) the cpu rule decides.  What it returns is what reading every process finds
for block reads; a process that only dirties pages is found when they are written back
and charged to its cgroup (cgroup writeback: ext4, xfs, btrfs), its growth then counted
whole, not lost; on a filesystem without cgroup writeback, at its cgroup's next I/O.
"""

from __future__ import annotations

import errno
import os
from typing import Callable, Generic, TypeVar

from gpudisk_top.collect.roots import Roots, read_bytes

T = TypeVar("T")

MAX_IO_STAT_BYTES = 64 * 1024    # ~100 bytes a device; past it, the cpu rule decides
RULES = ("cpu", "io")


def cgroup2_root(roots: Roots) -> str | None:
    """Where the cgroup v2 tree is mounted under the Roots' sysfs: fs/cgroup (the unified
    layout) or fs/cgroup/unified (systemd's hybrid); None on cgroup v1 alone or without
    /sys."""
    for path in (roots.sys("fs", "cgroup"), roots.sys("fs", "cgroup", "unified")):
        if os.path.exists(os.path.join(path, "cgroup.controllers")):
            return path
    return None


def _usage_usec(data: bytes) -> int | None:
    """usage_usec of a cpu.stat text; None when it is not there."""
    for line in data.split(b"\n"):
        if line.startswith(b"usage_usec "):
            try:
                return int(line[11:])
            except ValueError:
                return None
    return None


def _cpu_marker(path: str) -> int | None:
    """The cpu rule's: the cgroup's usage_usec.  Raises OSError (removed meanwhile)."""
    return _usage_usec(read_bytes(os.path.join(path, "cpu.stat"), 65536))


def _io_marker(path: str) -> bytes | int | None:
    """The io rule's: the cgroup's io.stat as read (any counter moved, any device new:
    it differs), where it has io.stat and memory.stat; else the cpu rule's.  Raises
    OSError (removed meanwhile)."""
    try:
        data = read_bytes(os.path.join(path, "io.stat"), MAX_IO_STAT_BYTES)
    except OSError as err:
        if err.errno not in (errno.ENOENT, errno.EFBIG):
            raise
        return _cpu_marker(path)
    if not os.path.exists(os.path.join(path, "memory.stat")):
        return _cpu_marker(path)
    return b"io.stat\n" + data


def _pids(data: bytes) -> list[int]:
    """The PIDs of a cgroup.procs text (0: a process of another PID namespace)."""
    try:
        return [pid for pid in map(int, data.split()) if pid > 0]
    except ValueError:
        return []


class ChangedScan(Generic[T]):
    """read(pid) of every process under the procfs, reading only those that may have
    changed since the last scan (see the module's docstring).

        scan = ChangedScan(roots, read)    # read: pid -> T, or None (unreadable, exited)
        values = scan.scan(skip)           # {pid: T} of every process not in skip

    A process read as None (exited, unreadable: another user's, without root) is left
    out; that is carried over too, as a value is (what may read a process's files does
    not change while it does not run).  rule: "cpu" (a cgroup's processes are read
    again when it ran: for what moves while a process runs) or "io" (when its io.stat
    moved, where it has one: for block I/O counters; the module's docstring).  `narrowed`
    says whether cgroups narrow the scan; `reason` why not; `read_last` how many
    processes the last scan read; `io_ruled_last` how many cgroups the io rule decided.
    Raises ValueError for a rule it does not know.
    """

    def __init__(self, roots: Roots, read: Callable[[int], T | None], rule: str = "cpu") -> None:
        if rule not in RULES:
            raise ValueError(f"rule is one of {', '.join(RULES)}, not {rule!r}")
        self.roots = roots
        self.read = read
        self._marker = _io_marker if rule == "io" else _cpu_marker
        self.io_ruled_last = 0
        self._cg_root = cgroup2_root(roots)
        self.reason: str | None = None
        if self._cg_root is None:
            self.reason = "no cgroup v2 tree under " + roots.sys("fs", "cgroup")
        elif not self._our_namespace():
            self.reason = roots.procfs + " is not our PID namespace's procfs"
        self.narrowed = self.reason is None
        # (cgroup path, its inode) -> (its rule's marker when its processes were read:
        # usage_usec or io.stat (None: the root, always read), {pid: value} as read
        # then, its children's keys)
        self._seen: dict[tuple[str, int], tuple[int | bytes | None, dict[int, T | None], list]] = {}
        self.read_last = 0

    def _our_namespace(self) -> bool:
        try:
            return os.path.basename(os.path.realpath(self.roots.proc("self"))) == str(os.getpid())
        except OSError:
            return False

    def _carry(self, key, seen: dict, carried: dict) -> None:
        """Carry a cgroup's subtree over as last read: its entries and their values."""
        stack = [key]
        while stack:
            key = stack.pop()
            entry = self._seen.get(key)
            if entry is not None:
                seen[key] = entry
                carried.update(entry[1])
                stack.extend(entry[2])

    def _listdir_pids(self) -> list[int]:
        try:
            return [int(name) for name in os.listdir(self.roots.procfs) if name.isdigit()]
        except OSError:
            return []

    def scan(self, skip=frozenset()) -> dict[int, T]:
        """{pid: read(pid)} of every process under the procfs but those in `skip`."""
        if not self.narrowed:
            out = {}
            for pid in self._listdir_pids():
                if pid not in skip:
                    value = self.read(pid)
                    if value is not None:
                        out[pid] = value
            self.read_last = len(out)
            return out
        seen: dict[tuple[str, int], tuple[int | bytes | None, dict[int, T | None], list]] = {}
        fresh: dict[int, T | None] = {}      # read now: of cgroups that ran
        carried: dict[int, T | None] = {}    # as last read: of cgroups that did not
        reads = 0
        io_ruled = 0
        stack = [(self._cg_root, 0)]
        while stack:
            key = stack.pop()
            path = key[0]
            before = self._seen.get(key)
            try:
                # the root's usage is the node's (and its own processes are kernel
                # threads whose time no file of it counts): it is always read
                usage = None if path == self._cg_root else self._marker(path)
            except OSError:
                continue   # removed meanwhile: its processes are found unlisted
            if isinstance(usage, bytes):
                io_ruled += 1
            if usage is not None and before is not None and before[0] == usage:
                self._carry(key, seen, carried)   # nothing in its subtree ran
                continue
            try:
                with os.scandir(path) as it:
                    children = [(entry.path, entry.inode()) for entry in it
                                if entry.is_dir(follow_symlinks=False)]
                pids = _pids(read_bytes(os.path.join(path, "cgroup.procs")))
            except OSError as err:
                if err.errno != errno.EOPNOTSUPP:
                    continue   # removed meanwhile
                pids = []      # a threaded cgroup: its processes are its domain's
            stack.extend(children)
            values: dict[int, T | None] = {}
            for pid in pids:
                if pid not in skip:
                    values[pid] = fresh[pid] = self.read(pid)
                    reads += 1
            seen[key] = (usage, values, children)
        present = self._listdir_pids()
        out: dict[int, T] = {}
        for pid in present:
            if pid in skip:
                continue
            if pid in fresh:
                value = fresh[pid]
            elif pid in carried:
                value = carried[pid]
            else:                 # in no cgroup we list: a zombie, one moving
                value = self.read(pid)
                reads += 1
            if value is not None:
                out[pid] = value
        self._seen = seen
        self.read_last = reads
        self.io_ruled_last = io_ruled
        return out
