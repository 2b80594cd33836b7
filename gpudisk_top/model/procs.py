"""Per-process I/O and CPU rates of GPU processes and their descendants, from two
ProcIoRaw samples (see gpudisk_top.collect.procio).

rchar/wchar count every read()/write() byte, page cache hits included; read_bytes and
write_bytes count what the process made the block layer fetch or write back.  A
DataLoader whose rchar_kb_s is high and read_kb_s low reads from the page cache.
cpu_pct is pidstat's %CPU: 100 is one CPU fully busy, so a process can exceed 100;
sys_pct is the part of it in the kernel (pidstat's %system, stime).

Where a process's time went, in % of the interval: cpu_wait_pct runnable but waiting for a
CPU (schedstat's run_delay; pidstat -w's and perf sched's "wait time"), io_wait_pct
blocked on block I/O (delay accounting's blkio delay, what iotop calls IO>; None while
kernel.task_delayacct is off, and for a process whose leading thread was forked before it
was on: collect/procio.py).

"The process's time" is all its threads' (collect/threadtime.py; ProcIoRaw.run_delay_ns),
as cpu_pct is: each is thread-time over the interval, 100 being one thread for the whole
of it, so a process whose threads wait at once goes past 100 (three decode threads each
waiting 80 % of the time for a CPU: 240), as one whose threads run at once does past 100
%CPU.  The figures are not cut here: verdict/detect/cpu.py names a trainer's or loaders'
own sums ("waiting 240% of the time for a CPU").  Where a loader's interval is split into
shares that add up to 100 (model/loaders.py, _share), the split is of one thread's worth
of its time, in order: on a CPU (cpu_pct, at most 100), then waiting for one (at most what
that left), then blocked on reads (at most what those left), asleep the rest.  So a
multi-threaded loader whose threads together run a CPU's worth shows 100 % on a CPU
whatever they waited, and one whose threads both run and wait has its wait cut to what
running left: the CPU is given its share first, as for a single thread.  Those outside the
job (the busiest others, ProcIoRaw.root_pid None) are the leading thread's alone: they are
followed for their CPU time.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from gpudisk_top.collect.sample import ProcIoRaw


def _default_clk_tck() -> int:
    try:
        return os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError):
        return 100


@dataclass(slots=True)
class ProcView:
    """One process over one interval.  A rate is None where either sample lacks its
    counter (permission denied, a new or exited process) or the counter went down (the
    PID was reused)."""

    pid: int
    root_pid: int | None
    name: str | None
    cmdline: str | None
    read_kb_s: float | None
    write_kb_s: float | None
    rchar_kb_s: float | None
    wchar_kb_s: float | None
    cpu_pct: float | None
    devices: tuple[str, ...] | None
    cpu_wait_pct: float | None = None
    io_wait_pct: float | None = None
    reads_s: float | None = None          # read system calls a second
    state: str | None = None              # at the end of the interval: R, S, D, ...
    cgroup: str | None = None             # its cgroup path, when it could be read
    mounts: tuple[str, ...] = ()          # network and FUSE mounts its files live on
    blocked_on: str | None = None         # the one it was in a read() of, at the end
    direct_reads: bool | None = None      # a data file of it open with O_DIRECT (ProcIoRaw)
    data_kb: int | None = None            # its data files read through the page cache
    sys_pct: float | None = None          # of cpu_pct, in the kernel (stime)


def _rate(cur: int | None, prev: int | None, interval_s: float,
          scale: float) -> float | None:
    if cur is None or prev is None or cur < prev:
        return None
    return (cur - prev) / scale / interval_s


def proc_views(cur: dict[int, ProcIoRaw], prev: dict[int, ProcIoRaw] | None,
               interval_s: float, clk_tck: int | None = None) -> dict[int, ProcView]:
    """A view of every process in cur, keyed like cur (the PID under --procfs).

    clk_tck is USER_HZ, the unit of cpu_ticks (os.sysconf("SC_CLK_TCK") by default).
    Never raises; without prev or a valid interval every rate is None.
    """
    if clk_tck is None:
        clk_tck = _default_clk_tck()
    valid = math.isfinite(interval_s) and interval_s > 0
    tick_scale = clk_tck / 100.0
    out: dict[int, ProcView] = {}
    for pid, c in cur.items():
        p = prev.get(pid) if prev is not None and valid else None
        if p is not None and p.root_pid != c.root_pid:
            p = None  # a PID reused, or a process that moved to another GPU tree
        if p is None:
            out[pid] = ProcView(pid, c.root_pid, c.name, c.cmdline,
                                None, None, None, None, None, c.devices, state=c.state,
                                cgroup=c.cgroup, mounts=c.mounts, blocked_on=c.blocked_on,
                                direct_reads=c.direct_reads, data_kb=c.data_kb)
            continue
        # positional, in ProcView field order: this runs for every job process every
        # second (the time accounting's budget is 0.1 % of a core for 64 of them)
        out[pid] = ProcView(
            pid, c.root_pid, c.name, c.cmdline,
            _rate(c.read_bytes, p.read_bytes, interval_s, 1024.0),
            _rate(c.write_bytes, p.write_bytes, interval_s, 1024.0),
            _rate(c.rchar, p.rchar, interval_s, 1024.0),
            _rate(c.wchar, p.wchar, interval_s, 1024.0),
            _rate(c.cpu_ticks, p.cpu_ticks, interval_s, tick_scale),
            c.devices,
            _rate(c.run_delay_ns, p.run_delay_ns, interval_s, 1e7),
            _rate(c.blkio_ticks, p.blkio_ticks, interval_s, tick_scale),
            _rate(c.syscr, p.syscr, interval_s, 1.0),
            c.state,
            c.cgroup,
            c.mounts,
            c.blocked_on,
            c.direct_reads,
            c.data_kb,
            _rate(c.sys_ticks, p.sys_ticks, interval_s, tick_scale),
        )
    return out


def _sum(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def cache_served_pct(read_kb_s: float | None, rchar_kb_s: float | None,
                     remote: bool) -> float | None:
    """Of the bytes read through read() and friends (rchar), the share that made no block
    I/O (read_bytes): served by the page cache.  None without reads, and for processes
    with files on a network or FUSE mount, whose reads never count in read_bytes (they
    would all look cached).  rchar also counts pipes and sockets: a process that reads
    much from them reads as better cached than it is."""
    if remote or read_kb_s is None or not rchar_kb_s:
        return None
    return max(0.0, min(100.0, 100.0 * (1.0 - read_kb_s / rchar_kb_s)))


def tree_totals(views: dict[int, ProcView], root_pid: int) -> dict:
    """Totals over the GPU process with host PID root_pid and its descendants.

    Returns {"read_kb_s", "rchar_kb_s", "write_kb_s", "wchar_kb_s", "cpu_pct": the sum of
    the known values, None if none is known; "cache_pct": cache_served_pct() of the tree;
    "devices": the sorted union of devices; "nprocs": how many processes the tree has}.
    """
    members = [v for v in views.values() if v.root_pid == root_pid]
    devices: set[str] = set()
    for v in members:
        devices.update(v.devices or ())
    read_kb_s, rchar_kb_s = _sum([v.read_kb_s for v in members]), _sum([v.rchar_kb_s for v in members])
    return {
        "cache_pct": cache_served_pct(read_kb_s, rchar_kb_s, any(v.mounts for v in members)),
        "read_kb_s": read_kb_s,
        "rchar_kb_s": rchar_kb_s,
        "write_kb_s": _sum([v.write_kb_s for v in members]),
        "wchar_kb_s": _sum([v.wchar_kb_s for v in members]),
        "cpu_pct": _sum([v.cpu_pct for v in members]),
        "devices": tuple(sorted(devices)),
        "nprocs": len(members),
    }
