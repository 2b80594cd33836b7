"""The files of /proc/PID that a process's readings come from, text into values: its stat
line (PidStat), schedstat's run delay, io's counters and the devices of maps' file-backed
data mappings.  Pure functions of the text (proc(5)'s formats), one a file; a garbled file
is None or is skipped, never an exception.  collect/procio.py reads the files (and
collect/sampler.py reads io with the same parser).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class PidStat:
    """What one /proc/PID/stat line says that we use."""

    comm: str
    ppid: int
    cpu_ticks: int      # utime + stime
    start_ticks: int    # starttime: tells a reused PID from the process we cached
    state: str = "?"    # R running, S sleeping, D uninterruptible (mostly: waiting on I/O)
    blkio_ticks: int | None = None   # delayacct_blkio_ticks (field 42; kernels >= 2.6.18)
    vsize_bytes: int | None = None   # field 23: what its address space maps (a new mapping
                                     # of a data file changes it)
    sys_ticks: int | None = None     # stime (field 15): of cpu_ticks, the kernel's part
    threads: int | None = None       # num_threads (field 20): collect/threadtime.py lists
                                     # a process's threads again only when it changed


def parse_pid_stat(text: str) -> PidStat | None:
    """Parse /proc/PID/stat.  comm may hold spaces and parentheses, so the fields are
    taken after the last ')'.  None when garbled."""
    open_paren = text.find("(")
    close_paren = text.rfind(")")
    if open_paren < 0 or close_paren < open_paren:
        return None
    rest = text[close_paren + 1:].split()
    # rest[0] is state (field 3); ppid is field 4, utime 14, stime 15, num_threads 20,
    # starttime 22, delayacct_blkio_ticks 42 (proc(5))
    try:
        return PidStat(
            comm=text[open_paren + 1:close_paren],
            ppid=int(rest[1]),
            cpu_ticks=int(rest[11]) + int(rest[12]),
            start_ticks=int(rest[19]),
            state=rest[0],
            blkio_ticks=int(rest[39]) if len(rest) > 39 else None,
            vsize_bytes=int(rest[20]) if len(rest) > 20 else None,
            sys_ticks=int(rest[12]),
            threads=int(rest[17]) if len(rest) > 17 else None,
        )
    except (IndexError, ValueError):
        return None


def parse_schedstat(text: str) -> int | None:
    """run_delay (ns spent runnable, waiting for a CPU) from /proc/PID/schedstat:
    "<on-CPU ns> <run-queue ns> <timeslices>" (Documentation/scheduler/sched-stats.rst)."""
    parts = text.split()
    try:
        return int(parts[1])
    except (IndexError, ValueError):
        return None


def parse_schedstat_on_cpu(text: str) -> int | None:
    """The ns a task spent on a CPU (sum_exec_runtime), schedstat's first field."""
    parts = text.split()
    try:
        return int(parts[0])
    except (IndexError, ValueError):
        return None


def parse_pid_io(text: str) -> dict[str, int]:
    """/proc/PID/io: "rchar: 123" lines -> {"rchar": 123, ...}; a garbled line is skipped."""
    parts = text.split()
    out: dict[str, int] = {}
    for i in range(0, len(parts) - 1, 2):
        key, value = parts[i], parts[i + 1]
        if key.endswith(":"):
            try:
                out[key[:-1]] = int(value)
            except ValueError:
                continue
    return out


def parse_maps_devices(text: str) -> set[tuple[int, int]]:
    """(major, minor) of every file-backed data mapping in /proc/PID/maps.

    The dev field is "MAJ:MIN" in hex; inode 0 is an anonymous mapping.  A file mapped
    executable anywhere is code (the interpreter, shared libraries, CUDA kernels): every
    process maps those from the root disk, so they would name it as the place every job
    reads its data from.  Only files never mapped executable count (datasets read with
    mmap, numpy memmaps, memory-mapped checkpoints)."""
    data: dict[tuple[str, str], tuple[int, int]] = {}
    code: set[tuple[str, str]] = set()
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 5 or parts[4] == "0":
            continue
        major, sep, minor = parts[3].partition(":")
        if not sep:
            continue
        key = (parts[3], parts[4])  # (dev, inode): one file
        if "x" in parts[1]:
            code.add(key)
            continue
        try:
            data[key] = (int(major, 16), int(minor, 16))
        except ValueError:
            continue
    return {dev for key, dev in data.items() if key not in code}
