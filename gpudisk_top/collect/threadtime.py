"""A process's wait for a CPU and its blocked time on block I/O, summed over its threads.

/proc/PID/schedstat and field 42 of /proc/PID/stat are the leading thread's alone
(fs/proc/base.c: proc_pid_schedstat shows the task the PID names; do_task_stat sums utime
and stime over the thread group but prints the leader's delayacct_blkio_ticks), so a
trainer with a pin-memory thread, or a DataLoader worker with decode threads, would show
only its main loop's waits.  ThreadTimes adds its other threads' figures, from
<procfs>/PID/task/TID/schedstat and .../stat, to the leading thread's.

What it costs, per sample:
  - nothing for a process of one thread (stat field 20, num_threads, is 1): its leading
    thread's figures are the process's, read as before;
  - none of its threads' files when none of them but the leading one ran since the last
    sample: the process's CPU clock (clock_gettime of a process's CPUCLOCK_SCHED clock, which
    the kernel lets anyone read: the ns all its threads ran, those that exited included;
    one system call) less the leading thread's on-CPU ns (its schedstat, read anyway) did
    not move.  A thread's figures only move when it is put on a CPU, where it runs (a
    thread dequeued while it waits, and a thread woken from a read, have their time added
    before they run: they are read when they have, one sample late at most; and where the
    leading thread ran between the two reads a moved figure may, in a coincidence to the
    nanosecond, be read one sample late).  Only where the procfs read is our own (its PIDs
    are the clock's);
  - else per other thread, one pread of its schedstat, on a file kept open; its stat (for
    field 42) only while delay accounting is on, and only when that schedstat moved.  The kernel
    adds a task's blocked time when it is woken from the wait (try_to_wake_up ->
    delayacct_blkio_end), and a woken task is put on a CPU before it can wait again, which
    moves its schedstat (pcount, the third field, counts every time it is): a thread whose
    schedstat reads as before has no blocked time that a later read will not find (one
    sample late at most: woken, not yet run);
  - its task directory is listed only when num_threads changed or a thread's file stopped
    reading (it exited: one thread that exits and another that starts in one interval
    leave the count alone, but the exited one's file no longer reads).

A thread that exits takes its counters with it: its figures as last read are kept, so the
process's sums never go down (a rate is never lost), and its time between that read and its
exit is not counted.  A thread that starts and exits between two samples is not seen.  At
most THREADS_MAX threads of a process are followed (the time of the others is not counted:
a lower bound), and at most FDS_MAX files are kept open over all processes (the others are
opened at each read).
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass, field

from gpudisk_top.collect.pidfiles import (PidStat, parse_pid_stat, parse_schedstat,
                                          parse_schedstat_on_cpu)
# the rule of which files may be kept open and read again with pread is roots.py's
from gpudisk_top.collect.roots import _PSEUDO_FS, _fs_type, open_source_file, read_fd

THREADS_MAX = 256          # threads followed per process, besides the leading one
# a schedstat line is "<ns> <ns> <count>\n", at most 62 bytes; a stat line some 300 bytes,
# at most some 1,100: a read shorter than these is the whole file (a single_open seq_file
# makes its text whole, and a regular file of a --procfs copy is read to its end); a
# longer one is read on with the one read loop (roots.read_fd), to FILE_MAX_BYTES
SCHEDSTAT_READ = 256
STAT_READ = 4096
FILE_MAX_BYTES = 65536


def _fds_max() -> int:
    """Files kept open for threads: a share of this process's fd limit (many run under the
    default soft limit of 1,024), 512 at most."""
    try:
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        soft = 1024
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(0, min(512, soft // 4))


@dataclass(slots=True)
class _Thread:
    tid: int
    base: str                      # <procfs>/PID/task/TID/
    sched_fd: int | None = None
    stat_fd: int | None = None
    sched: bytes | None = None     # its schedstat as last read
    run_delay_ns: int = 0
    blkio_ticks: int = 0
    blkio_stale: bool = True       # field 42 not read since its schedstat moved


@dataclass(slots=True)
class _Process:
    start_ticks: int
    task_dir: str
    listed: int = -1               # how many threads the last listing found (-1: list)
    threads: dict[int, _Thread] = field(default_factory=dict)
    # the figures of its threads that exited, as last read
    gone_run_delay_ns: int = 0
    gone_blkio_ticks: int = 0
    # at the last read of every thread: the ns its other threads ran (its CPU clock less
    # the leading thread's), and whether field 42 was read too
    others_ns: int | None = None
    read_blkio: bool = False
    # the sums of its other threads' figures, those that exited included, as last read
    run_delay_ns: int = 0
    blkio_ticks: int = 0


class ThreadTimes:
    """Keeps each multi-threaded process's threads and their files between samples.
    Thread-compatible, not shared between threads."""

    def __init__(self, proc_dir: str, own_pids: bool, fds_max: int | None = None) -> None:
        """own_pids: the procfs is this process's own (its PIDs name what the CPU clocks
        name): threads that did not run are not read."""
        self._proc_dir = proc_dir          # <procfs>/, with its trailing separator
        self._own_pids = own_pids
        self._procs: dict[int, _Process] = {}
        self.fds_max = _fds_max() if fds_max is None else fds_max
        self._fds_open = 0

    def add(self, pid: int, st: PidStat, schedstat: str | None, run_delay_ns: int | None,
            blkio_ticks: int | None, delayacct: bool) -> tuple[int | None, int | None]:
        """(run_delay_ns, blkio_ticks) of the whole process, given its leading thread's
        (a None stays None: where the leading thread's figure is not measured, the
        process's is not either), its stat line and the text of its schedstat.  Never
        raises."""
        p = self._procs.get(pid)
        if p is None:
            if st.threads is None or st.threads <= 1:
                return run_delay_ns, blkio_ticks      # one thread: the leader's is all
            p = self._procs[pid] = _Process(st.start_ticks, f"{self._proc_dir}{pid}/task")
        elif p.start_ticks != st.start_ticks:         # the PID was reused
            self.forget(pid)
            return self.add(pid, st, schedstat, run_delay_ns, blkio_ticks, delayacct)
        if run_delay_ns is None and blkio_ticks is None:
            return None, None
        blkio = delayacct and blkio_ticks is not None
        others = self._others_ns(pid, schedstat)
        if (others is None or others != p.others_ns or st.threads != p.listed
                or blkio != p.read_blkio):
            if st.threads != p.listed:
                self._list(pid, p)
            gone = self._read(p, list(p.threads.values()), run_delay_ns is not None, blkio)
            if gone:
                for t in gone:
                    self._bury(p, t)
                self._read(p, self._list(pid, p), run_delay_ns is not None, blkio)
            p.others_ns, p.read_blkio = others, blkio
            p.run_delay_ns = p.gone_run_delay_ns + sum(t.run_delay_ns for t in p.threads.values())
            p.blkio_ticks = p.gone_blkio_ticks + sum(t.blkio_ticks for t in p.threads.values())
        return (None if run_delay_ns is None else run_delay_ns + p.run_delay_ns,
                None if blkio_ticks is None else blkio_ticks + p.blkio_ticks)

    def _others_ns(self, pid: int, schedstat: str | None) -> int | None:
        """The ns the process's threads but the leading one ran (None: not known)."""
        if not self._own_pids or schedstat is None:
            return None
        main_ns = parse_schedstat_on_cpu(schedstat)
        try:
            # MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED) (include/linux/posix-timers.h)
            total_ns = time.clock_gettime_ns(((~pid) << 3) | 2)
        except (OSError, OverflowError):
            return None                    # exited meanwhile
        return None if main_ns is None else total_ns - main_ns

    def pids(self) -> list[int]:
        """The processes whose threads are followed."""
        return list(self._procs)

    def forget(self, pid: int) -> None:
        """Close the files of a process that exited or is no longer followed."""
        p = self._procs.pop(pid, None)
        if p is not None:
            for t in p.threads.values():
                self._close(t)

    def close(self) -> None:
        for pid in list(self._procs):
            self.forget(pid)

    def __del__(self) -> None:
        # the collector that owns it has no close(): its fds go with it
        try:
            self.close()
        except Exception:   # noqa: BLE001  (at interpreter exit, os may be gone already)
            pass

    # ------------------------------------------------------------------ threads
    def _list(self, pid: int, p: _Process) -> list[_Thread]:
        """Follow the threads its task directory holds now (the ones no longer there
        exited); the new ones, whose files are yet to be read."""
        try:
            names = os.listdir(p.task_dir)
        except OSError:
            return []                      # exited: its stat read a moment ago
        tids = {int(name) for name in names if name.isdigit()}
        for tid in [tid for tid in p.threads if tid not in tids]:
            self._bury(p, p.threads[tid])
        new = []
        for tid in sorted(tids):
            if tid != pid and tid not in p.threads and len(p.threads) < THREADS_MAX:
                t = p.threads[tid] = _Thread(tid, f"{p.task_dir}/{tid}/")
                new.append(t)
        p.listed = len(names)
        return new

    def _bury(self, p: _Process, t: _Thread) -> None:
        """A thread that exited: its figures as last read stay in the process's sums."""
        p.gone_run_delay_ns += t.run_delay_ns
        p.gone_blkio_ticks += t.blkio_ticks
        self._close(t)
        p.threads.pop(t.tid, None)

    def _read(self, p: _Process, threads: list[_Thread], sched: bool,
              blkio: bool) -> list[_Thread]:
        """Read each thread's figures that can have moved; the threads that exited.
        sched: its schedstat is read (the leading thread's could be), which also says
        whether its stat can have moved; blkio: field 42 is wanted."""
        gone = []
        for t in threads:
            if sched:
                data = self._pread(t, True)
                if data is None:
                    gone.append(t)
                    continue
                if data != t.sched:
                    t.sched = data
                    t.blkio_stale = True
                    value = parse_schedstat(data.decode("ascii", "replace"))
                    if value is not None:
                        if value < t.run_delay_ns:
                            # another thread under a reused TID (a file opened afresh
                            # at each read): the one before it exited
                            p.gone_run_delay_ns += t.run_delay_ns
                            p.gone_blkio_ticks += t.blkio_ticks
                            t.blkio_ticks = 0
                        t.run_delay_ns = value
            if blkio and (t.blkio_stale or not sched):
                data = self._pread(t, False)
                if data is None:
                    gone.append(t)
                    continue
                st = parse_pid_stat(data.decode("utf-8", "replace"))
                if st is not None and st.blkio_ticks is not None:
                    t.blkio_ticks, t.blkio_stale = max(t.blkio_ticks, st.blkio_ticks), False
        return gone

    # ------------------------------------------------------------------ files
    def _pread(self, t: _Thread, sched: bool) -> bytes | None:
        """The thread's schedstat (sched) or stat; None when it does not read (it
        exited: a kept file of an exited thread reads ESRCH)."""
        fd = t.sched_fd if sched else t.stat_fd
        size = SCHEDSTAT_READ if sched else STAT_READ
        if fd is not None:
            try:
                data = os.pread(fd, size, 0)
                return data if len(data) < size else read_fd(fd, t.base, FILE_MAX_BYTES)
            except OSError:
                return None
        path = t.base + ("schedstat" if sched else "stat")
        try:
            fd = open_source_file(path)
        except OSError:
            return None
        try:
            data = read_fd(fd, path, FILE_MAX_BYTES)
        except OSError:
            os.close(fd)
            return None
        if self._fds_open < self.fds_max and _fs_type(fd) in _PSEUDO_FS:
            self._fds_open += 1
            if sched:
                t.sched_fd = fd
            else:
                t.stat_fd = fd
        else:
            os.close(fd)        # a copy on a disk may be replaced: read afresh each time
        return data

    def _close(self, t: _Thread) -> None:
        for fd in (t.sched_fd, t.stat_fd):
            if fd is not None:
                self._fds_open -= 1
                try:
                    os.close(fd)
                except OSError:
                    pass
        t.sched_fd = t.stat_fd = None
