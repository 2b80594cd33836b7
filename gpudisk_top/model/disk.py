"""Disk rates from two diskstats samples, with sysstat 12.x `iostat -x` semantics.

Every formula below is the one in sysstat's iostat.c (write_ext_stat, write_plain_ext_stat)
and common.c (compute_ext_disk_stats), with `itv` the interval in 1/100 s and
S_VALUE(m, n, p) = (n - m) / p * 100.  Differences are taken in the counter's own C type,
so a wrapped counter gives the same number iostat prints:
  - the *_ticks fields are `unsigned int`: differences are modulo 2**32;
  - ios, merges and sectors are `unsigned long`: differences are modulo 2**64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from gpudisk_top.collect.diskstats import MASK32, MASK64, DiskCounters


@dataclass(slots=True)
class DiskRates:
    """One device over one interval; each attribute means what the iostat -x column means."""

    r_s: float
    rkb_s: float
    rrqm_s: float
    rrqm_pct: float
    r_await_ms: float
    rareq_kb: float
    w_s: float
    wkb_s: float
    wrqm_s: float
    wrqm_pct: float
    w_await_ms: float
    wareq_kb: float
    d_s: float
    dkb_s: float
    drqm_s: float
    drqm_pct: float
    d_await_ms: float
    dareq_kb: float
    f_s: float
    f_await_ms: float
    aqu_sz: float
    util_pct: float

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


RATE_FIELDS = tuple(f.name for f in fields(DiskRates))


def _itv_cs(interval_s: float) -> float:
    """The interval in 1/100 s; a zero interval counts as 1/100 s, as sysstat's
    get_interval() does ("Paranoia checking": `if (!itv) itv = 1;`)."""
    if not math.isfinite(interval_s) or interval_s <= 0:
        return 1.0
    return interval_s * 100.0


def is_reset(cur: DiskCounters, prev: DiskCounters) -> bool:
    """sysstat's test for a device that was removed and inserted again (iostat.c
    write_stats, "Try to detect if device has been removed then inserted again"): fewer
    I/Os than before, and every sector counter that was non-zero went down.  Such a device
    is then compared against zeros, not against its old counters."""
    # the sums are unsigned long in C, so they wrap modulo 2**64 too
    return (
        (cur.rd_ios + cur.wr_ios + cur.dc_ios + cur.fl_ios) & MASK64
        < (prev.rd_ios + prev.wr_ios + prev.dc_ios + prev.fl_ios) & MASK64
        and (not prev.rd_sectors or cur.rd_sectors < prev.rd_sectors)
        and (not prev.wr_sectors or cur.wr_sectors < prev.wr_sectors)
        and (not prev.dc_sectors or cur.dc_sectors < prev.dc_sectors)
    )


def _rqm_pct(merges: int, ios: int) -> float:
    # iostat.c: %rrqm = merges / (merges + ios) * 100, with the sum an unsigned long
    total = (merges + ios) & MASK64
    return merges / total * 100.0 if total else 0.0


def device_rates(cur: DiskCounters, prev: DiskCounters | None, interval_s: float) -> DiskRates:
    """Rates of one device.  prev None (a device that just appeared) compares against
    zeros, as sysstat does for a device it has not seen before (its stats start zeroed)."""
    if prev is None or is_reset(cur, prev):
        prev = _ZERO
    itv = _itv_cs(interval_s)
    # S_VALUE(m, n, itv) = (n - m) / itv * 100, written out below for each counter
    rd_ios = (cur.rd_ios - prev.rd_ios) & MASK64
    wr_ios = (cur.wr_ios - prev.wr_ios) & MASK64
    dc_ios = (cur.dc_ios - prev.dc_ios) & MASK64
    fl_ios = (cur.fl_ios - prev.fl_ios) & MASK64
    rd_merges = (cur.rd_merges - prev.rd_merges) & MASK64
    wr_merges = (cur.wr_merges - prev.wr_merges) & MASK64
    dc_merges = (cur.dc_merges - prev.dc_merges) & MASK64
    rd_sectors = (cur.rd_sectors - prev.rd_sectors) & MASK64
    wr_sectors = (cur.wr_sectors - prev.wr_sectors) & MASK64
    dc_sectors = (cur.dc_sectors - prev.dc_sectors) & MASK64
    rd_ticks = (cur.rd_ticks - prev.rd_ticks) & MASK32
    wr_ticks = (cur.wr_ticks - prev.wr_ticks) & MASK32
    dc_ticks = (cur.dc_ticks - prev.dc_ticks) & MASK32
    fl_ticks = (cur.fl_ticks - prev.fl_ticks) & MASK32
    tot_ticks = (cur.tot_ticks - prev.tot_ticks) & MASK32
    rq_ticks = (cur.rq_ticks - prev.rq_ticks) & MASK32

    # Positional, in DiskRates field order (this runs for every device every second).
    # Sectors are 512 bytes whatever the device's block size: kB/s = sectors/s / 2.
    # aqu-sz = S_VALUE(rq_ticks) / 1000 and %util = S_VALUE(tot_ticks) / 10: both in ms.
    return DiskRates(
        rd_ios / itv * 100.0,
        rd_sectors / itv * 100.0 / 2,
        rd_merges / itv * 100.0,
        _rqm_pct(rd_merges, rd_ios),
        rd_ticks / rd_ios if rd_ios else 0.0,
        rd_sectors / rd_ios / 2 if rd_ios else 0.0,
        wr_ios / itv * 100.0,
        wr_sectors / itv * 100.0 / 2,
        wr_merges / itv * 100.0,
        _rqm_pct(wr_merges, wr_ios),
        wr_ticks / wr_ios if wr_ios else 0.0,
        wr_sectors / wr_ios / 2 if wr_ios else 0.0,
        dc_ios / itv * 100.0,
        dc_sectors / itv * 100.0 / 2,
        dc_merges / itv * 100.0,
        _rqm_pct(dc_merges, dc_ios),
        dc_ticks / dc_ios if dc_ios else 0.0,
        dc_sectors / dc_ios / 2 if dc_ios else 0.0,
        fl_ios / itv * 100.0,
        fl_ticks / fl_ios if fl_ios else 0.0,
        rq_ticks / itv * 100.0 / 1000.0,
        tot_ticks / itv * 100.0 / 10.0,
    )


_ZERO = DiskCounters.zero()


def rates(prev: dict[str, DiskCounters], cur: dict[str, DiskCounters],
          interval_s: float) -> dict[str, DiskRates]:
    """Rates for every device in `cur` over `interval_s` seconds.

    A device missing from `cur` (it vanished) has no entry, as iostat skips a device that
    no longer exists; one missing from `prev` (it appeared) is compared against zeros.
    Never raises for wrapped or reset counters or a zero interval: every number is finite
    and non-negative.
    """
    return {name: device_rates(c, prev.get(name), interval_s) for name, c in cur.items()}
