"""A job's interval from its cgroup's totals at two samples (collect/cgjob.py): its CPU,
throttling, pressure, per-device I/O rates and page cache, and its share of a device.

The rules for input that does not pair (each gives no figure for this interval, never a
negative rate or another cgroup's figure; the next interval has one):
  - a cgroup at one sample and not the other (made, removed, not readable): no interval;
  - a job whose cgroup path changed between the samples (moved, or its first GPU process
    is another now): no interval (job_interval), its new cgroup's counters are counted
    from the next;
  - a cgroup made again under the same path (its inode changed), or whose usage_usec
    went back (a new cgroup with the inode reused): no interval;
  - any other counter that went back: that figure is None;
  - a device in one sample's io.stat and not the other's, or under another MAJ:MIN (a
    device the node did not list yet: collect/cgjob.py leaves its line out; a name given
    to another device since): that device has no rate this interval.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gpudisk_top.collect.cgjob import CgJobRaw


@dataclass(frozen=True, slots=True)
class CgDeviceRates:
    """A job cgroup's I/O on one device over an interval."""

    read_kb_s: float
    write_kb_s: float
    r_s: float
    w_s: float


@dataclass(frozen=True, slots=True)
class CgJobInterval:
    """A job cgroup over one interval.  cpu_pct: % of one CPU (usage_usec); user_pct,
    system_pct: of it; throttled_periods_pct: the share of its cpu.max periods it was
    throttled in (None without a limit or periods); throttled_ms_s: throttled time a
    second; psi_pct: resource -> (some %, full % or None) of the interval's wall time;
    io: device name -> rates (io_read False: the cgroup has no io.stat, so no rate is n/a
    rather than no I/O); memory_kb: its page cache and anon at the interval's end
    (gauges: anon, file, file_dirty, file_writeback).  A None is a figure the interval
    cannot give (see the module's docstring)."""

    path: str
    elapsed_s: float
    cpu_pct: float
    user_pct: float | None = None
    system_pct: float | None = None
    throttled_periods_pct: float | None = None
    throttled_ms_s: float | None = None
    psi_pct: dict[str, tuple[float, float | None]] = field(default_factory=dict)
    io: dict[str, CgDeviceRates] = field(default_factory=dict)
    memory_kb: dict[str, int] = field(default_factory=dict)
    io_read: bool = True

    @property
    def read_kb_s(self) -> float:
        """Its reads, every device it read, KB/s."""
        return sum(d.read_kb_s for d in self.io.values())

    @property
    def write_kb_s(self) -> float:
        """Its writes, every device it wrote, KB/s."""
        return sum(d.write_kb_s for d in self.io.values())


def _delta(after: Mapping[str, int], before: Mapping[str, int], key: str) -> int | None:
    a, b = after.get(key), before.get(key)
    if a is None or b is None or a < b:
        return None
    return a - b


def interval(before: CgJobRaw | None, after: CgJobRaw | None,
             elapsed_s: float) -> CgJobInterval | None:
    """The cgroup's interval between two reads of it; None where they do not pair (see
    the module's docstring) or elapsed_s is not positive.  Never raises."""
    if before is None or after is None or not elapsed_s > 0:
        return None
    if before.path != after.path or before.inode != after.inode:
        return None
    usage = _delta(after.cpu, before.cpu, "usage_usec")
    if usage is None:
        return None             # went back: a cgroup made again, its inode reused
    elapsed_us = elapsed_s * 1e6
    user, system = _delta(after.cpu, before.cpu, "user_usec"), _delta(after.cpu, before.cpu, "system_usec")
    periods = _delta(after.cpu, before.cpu, "nr_periods")
    throttled = _delta(after.cpu, before.cpu, "nr_throttled")
    throttled_us = _delta(after.cpu, before.cpu, "throttled_usec")
    psi = {}
    for resource, a in after.psi.items():
        b = before.psi.get(resource)
        if b is None or a.some_us < b.some_us:
            continue
        full = (None if a.full_us is None or b.full_us is None or a.full_us < b.full_us
                else 100.0 * (a.full_us - b.full_us) / elapsed_us)
        psi[resource] = (100.0 * (a.some_us - b.some_us) / elapsed_us, full)
    io = {}
    for name, a in after.io.items():
        b = before.io.get(name)
        if b is None or b.dev != a.dev:
            continue            # not listed before, or another device under the name now
        deltas = (a.rbytes - b.rbytes, a.wbytes - b.wbytes, a.rios - b.rios, a.wios - b.wios)
        if min(deltas) < 0:
            continue            # went back: the device's queue made again
        io[name] = CgDeviceRates(deltas[0] / 1024 / elapsed_s, deltas[1] / 1024 / elapsed_s,
                                 deltas[2] / elapsed_s, deltas[3] / elapsed_s)
    return CgJobInterval(
        path=after.path, elapsed_s=elapsed_s,
        cpu_pct=100.0 * usage / elapsed_us,
        user_pct=None if user is None else 100.0 * user / elapsed_us,
        system_pct=None if system is None else 100.0 * system / elapsed_us,
        throttled_periods_pct=(100.0 * throttled / periods
                               if periods and throttled is not None else None),
        throttled_ms_s=None if throttled_us is None else throttled_us / 1000 / elapsed_s,
        psi_pct=psi, io=io,
        memory_kb={k: v // 1024 for k, v in after.memory.items()},
        io_read="io.stat" not in after.lacking)


def job_interval(path_before: str | None, path_after: str | None,
                 before: Mapping[str, CgJobRaw], after: Mapping[str, CgJobRaw],
                 elapsed_s: float) -> CgJobInterval | None:
    """A job's interval: its cgroup at both samples (path_before, path_after: where the
    job was at each) from the two samples' reads; None where the job moved (the paths
    differ) or the cgroup's reads do not pair.  Never raises."""
    if path_before is None or path_before != path_after:
        return None
    return interval(before.get(path_before), after.get(path_after), elapsed_s)


def share_pct(part_kb_s: float | None, whole_kb_s: float | None) -> float | None:
    """A job's share of a device's traffic (its cgroup's KB/s over the device's, from
    diskstats, in the same interval): None where the device moved nothing; at most 100
    (the two are read a moment apart)."""
    if part_kb_s is None or not whole_kb_s or whole_kb_s <= 0:
        return None
    return min(100.0, max(0.0, 100.0 * part_kb_s / whole_kb_s))
