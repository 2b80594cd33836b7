"""Lustre client rates over one interval, from two LustreStatsRaw of the same file.

  read_ops_s             = d(read_bytes samples) / interval_s
  read_kb_s              = d(read_bytes sum) / 1024 / interval_s
  read_latency_ms_per_op = d(LAT sum) / d(LAT samples) / 1000, LAT the first of
                           `read` (llite 2.15+, LPROCFS_TYPE_LATENCY: time in the read
                           call) or `ost_read` (osc: time of a READ RPC) printed in
                           [usec] or [usecs]; None when neither is
and the same for write (write_bytes, `write` or `ost_write`).

What a sample is depends on the file: in llite read_bytes counts read() calls and the
bytes they asked for, page-cache hits included (Andreas Dilger, lustre-discuss, April
2018); in osc it counts READ RPCs and the bytes they carried.  So llite's read_kb_s is
what applications read and osc's is what the servers sent.

interval_s defaults to the difference of the two snapshot_time values, the kernel's own
clock at each read.  A counter printed in prev and absent in cur, or one that went down
(`lctl set_param llite.*.stats=clear`, a remount), gives None, never a negative rate; a
counter absent in both is zero (Lustre does not print a counter with no samples); either
is said in `dropped`.  A rate beyond what any device can carry (the disks' ceilings,
model/disk.py) cannot be real: that interval gives no rates, and `dropped` says why.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudisk_top.collect.lustre import LustreCounter, LustreStatsRaw
from gpudisk_top.model.disk import beyond_ceilings

_LATENCY_UNITS = frozenset(("usec", "usecs"))
_ZERO = LustreCounter(0, "", 0, 0, 0, 0)


@dataclass(slots=True)
class LustreRates:
    """One llite or osc stats file over one interval.  None: not computable."""

    name: str
    kind: str
    interval_s: float | None
    read_ops_s: float | None = None
    read_kb_s: float | None = None
    read_latency_ms_per_op: float | None = None
    write_ops_s: float | None = None
    write_kb_s: float | None = None
    write_latency_ms_per_op: float | None = None
    # why rates are missing: a counter went down or vanished (its rates are None), or
    # the interval is impossible (every rate None)
    dropped: str | None = None


def _pair(cur: LustreStatsRaw, prev: LustreStatsRaw, name: str
          ) -> tuple[LustreCounter, LustreCounter] | None:
    """(cur, prev) of one counter; None when it vanished or went down."""
    c, p = cur.counters.get(name), prev.counters.get(name)
    if c is None and p is not None:
        return None
    c, p = c or _ZERO, p or _ZERO
    if c.samples < p.samples:
        return None
    return c, p


def _sum_delta(pair) -> int | None:
    if pair is None:
        return None
    c, p = pair
    if c.sum is None or (p.sum is None and p.samples):
        return None
    d = c.sum - (p.sum or 0)
    return d if d >= 0 else None


def _latency_ms(cur: LustreStatsRaw, prev: LustreStatsRaw, names) -> float | None:
    for name in names:
        counter = cur.counters.get(name) or prev.counters.get(name)
        if counter is None or counter.unit not in _LATENCY_UNITS:
            continue
        pair = _pair(cur, prev, name)
        d_sum = _sum_delta(pair)
        if pair is None or d_sum is None:
            return None
        d_samples = pair[0].samples - pair[1].samples
        return d_sum / d_samples / 1000 if d_samples else None
    return None


def _bytes_rates(cur, prev, name, interval_s) -> tuple[float | None, float | None]:
    pair = _pair(cur, prev, name)
    if pair is None:
        return None, None
    ops_s = (pair[0].samples - pair[1].samples) / interval_s
    d_sum = _sum_delta(pair)
    return ops_s, (d_sum / 1024 / interval_s if d_sum is not None else None)


def lustre_rates(cur: LustreStatsRaw, prev: LustreStatsRaw,
                 interval_s: float | None = None) -> LustreRates:
    """The rates of one stats file between prev and cur.  interval_s: seconds between
    them, by default cur.snapshot_s - prev.snapshot_s.  Never raises; every rate is
    None when the interval is unknown or not above 0."""
    if interval_s is None and cur.snapshot_s is not None and prev.snapshot_s is not None:
        interval_s = cur.snapshot_s - prev.snapshot_s
    out = LustreRates(name=cur.name, kind=cur.kind, interval_s=interval_s)
    if interval_s is None or not interval_s > 0:
        return out
    out.read_ops_s, out.read_kb_s = _bytes_rates(cur, prev, "read_bytes", interval_s)
    out.write_ops_s, out.write_kb_s = _bytes_rates(cur, prev, "write_bytes", interval_s)
    out.read_latency_ms_per_op = _latency_ms(cur, prev, ("read", "ost_read"))
    out.write_latency_ms_per_op = _latency_ms(cur, prev, ("write", "ost_write"))
    why = beyond_ceilings((("read ops/s", out.read_ops_s), ("write ops/s", out.write_ops_s)),
                          (("read kB/s", out.read_kb_s), ("write kB/s", out.write_kb_s)))
    if why is not None:
        return LustreRates(name=cur.name, kind=cur.kind, interval_s=interval_s,
                           dropped=f"no rates this interval: {why}")
    out.dropped = _went_down(cur, prev)
    return out


def _went_down(cur: LustreStatsRaw, prev: LustreStatsRaw) -> str | None:
    """One line naming the first counter that went down or vanished, or None."""
    for name in ("read_bytes", "write_bytes", "read", "ost_read", "write", "ost_write"):
        c, p = cur.counters.get(name), prev.counters.get(name)
        if p is None:
            continue
        if c is None:
            return (f"{name} vanished (its statistics were cleared): what uses it is n/a "
                    "this interval")
        for field_name in ("samples", "sum"):
            now, was = getattr(c, field_name), getattr(p, field_name)
            if now is not None and was is not None and now < was:
                return (f"{name} {field_name} went down from {was} to {now} (its statistics "
                        "were cleared): what uses it is n/a this interval")
    return None
