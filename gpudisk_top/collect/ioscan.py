"""Who is doing block I/O on this node: every process's /proc/PID/io, now and then.

iotop, atop and glances answer "who is loading this disk?" by reading every process's I/O
counters.  So does this scan, at a slower rate than sampling: it only finds the processes
that read or wrote since the last scan (read_bytes, write_bytes: what they made the block
layer fetch or write back); the sampler then follows those few every sample like the GPU
job's processes (collect/procio.py), which gives them rates, devices and a cgroup.

Costs per scan: the io.stat of the node's cgroups (dozens), and one open+read of the io
file of each process whose cgroup's io.stat moved since the last scan (collect/cgscan.py's
io rule: a block read is charged to the process and to its cgroup's io.stat at the same
moment; where a cgroup has no io.stat, as on a hybrid host, of each process whose cgroup
ran: its counters move only while it runs; where there is no cgroup v2 tree, of every
process: about 6 us a process here, 0.5 ms for 72 processes, ~6 ms for 1,000), but for
the processes whose io file the sample read a moment
before (the job's, and those it read as holding the CPUs: the sampler hands their
counters over).  The files are not kept open: that would hold a file of every process on
the node.  Another user's io file needs root (ptrace access):
unreadable ones are skipped, and visibility.py says so.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from gpudisk_top.collect.cgscan import ChangedScan
from gpudisk_top.collect.roots import Roots, read_bytes

SCAN_S = 5.0         # how often the node is scanned while nobody looks at the I/O view
SCAN_OPEN_S = 2.0    # ... and while the I/O view is open (new readers show sooner)
FOLLOW_TOP = 16      # how many of the busiest processes are followed between scans


def read_io_bytes(data: bytes) -> int | None:
    """read_bytes + write_bytes of one /proc/PID/io text; None when garbled."""
    total = 0
    found = 0
    for line in data.split(b"\n"):
        if line.startswith(b"read_bytes:") or line.startswith(b"write_bytes:"):
            try:
                total += int(line.split(b":", 1)[1])
            except ValueError:
                return None
            found += 1
    return total if found == 2 else None


class IoScan:
    """Finds the processes doing the most block I/O between two scans.

        scan = IoScan(roots)
        scan.due(now_s, view_open)     # time for a scan?
        scan.run(now_s)                # -> the busiest PIDs since the last scan, busiest first
    """

    def __init__(self, roots: Roots, top: int = FOLLOW_TOP) -> None:
        self.roots = roots
        self.top = top
        self._proc_dir = os.path.join(roots.procfs, "")
        self._last: dict[int, int] | None = None   # pid -> read_bytes + write_bytes
        self._last_s: float | None = None
        self.busiest: list[int] = []               # as the last scan found them
        self.counters: dict[int, bytes] = {}       # pid -> its io file, if the scan kept them
        self._scans = 0
        # every process's io file, read afresh only where its cgroup's io.stat moved (or,
        # without one, where its cgroup ran: collect/cgscan.py)
        self._files = ChangedScan(roots, self._read, rule="io")
        self._read_now: Mapping[int, int] = {}     # run()'s read_now, during the scan

    def _read(self, pid: int) -> tuple[int, bytes | None] | None:
        """(read_bytes + write_bytes, the io file) of one process; None when it exited,
        is another user's (needs root) or is garbled.  A process in run()'s read_now is
        not read again: (its total, None)."""
        total = self._read_now.get(pid)
        if total is not None:
            return total, None
        try:
            data = read_bytes(f"{self._proc_dir}{pid}/io", 4096)
        except OSError:
            return None
        total = read_io_bytes(data)
        return None if total is None else (total, data)

    def due(self, now_s: float, view_open: bool, slow_s: float | None = None) -> bool:
        """The first scan only counts; the second comes at the next sample, so that the
        busiest are known from the start; then one every SCAN_S (SCAN_OPEN_S), or every
        slow_s where the caller gives one (every job healthy: collect/detail.py)."""
        if self._last_s is None or self._scans == 1:
            return True
        every = SCAN_OPEN_S if view_open else (slow_s or SCAN_S)
        return now_s - self._last_s >= every

    def run(self, now_s: float, keep: bool = False, read_now: Mapping[int, int] = {}) -> list[int]:
        """Read every process's counters; the `top` PIDs whose block I/O grew since the
        last scan, busiest first ([] on the first scan: nothing to compare with).
        keep: also keep each process's io file as read (`counters`), until the next scan,
        but for those of read_now: {pid: read_bytes + write_bytes} of processes whose io
        file the caller read a moment ago, in this sample (the job's): not read twice.
        Their totals are as the sample read them, before the scan: I/O done in between
        is counted at the next scan, not lost."""
        counts: dict[int, int] = {}
        kept: dict[int, bytes] = {}
        self._read_now = read_now
        try:
            scanned = self._files.scan()
        finally:
            self._read_now = {}
        for pid, (total, data) in scanned.items():
            counts[pid] = total
            if keep and total and pid not in read_now:
                if data is None:   # carried over from a scan that took it from a sample
                    read = self._read(pid)
                    data = read[1] if read is not None else None
                if data is not None:
                    kept[pid] = data
        last, self._last, self._last_s = self._last, counts, now_s
        self.counters = kept
        self._scans += 1
        if last is None:
            self.busiest = []
            return self.busiest
        # a new PID's counters all grew since the last scan; so did those of a PID reused
        # meanwhile, whose counters went down (a reuse with higher counters is under-counted
        # for one scan, which only delays it)
        grown = []
        for pid, total in counts.items():
            before = last.get(pid, 0)
            growth = total - before if total >= before else total
            if growth > 0:
                grown.append((growth, pid))
        grown.sort(reverse=True)
        self.busiest = [pid for _, pid in grown[:self.top]]
        return self.busiest
