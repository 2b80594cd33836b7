"""Disk rates from two diskstats samples: `iostat -x` formulas, and a check that drops an
interval no device could have produced.

Formulas.  Every formula below is the one in sysstat 12.6.1 (the Debian/Ubuntu package
that tests/test_iostat_reference.py runs): iostat.c write_ext_stat() and
write_json_ext_stat(), and rd_stats.c compute_ext_disk_stats(), with `itv` the interval in
1/100 s and S_VALUE(m, n, p) = (n - m) / p * 100 (common.h).  Differences are taken in the
counter's own C type, so a wrapped counter gives the number 12.6.1 prints:
  - the *_ticks fields are `unsigned int`: differences are modulo 2**32;
  - ios, merges and sectors are `unsigned long`: differences are modulo 2**64.
rates() and device_rates() are exactly that, for every input (the public API).

Where sysstat >= 12.7.3 differs.  Commits c43167c and 3442cec ("iostat: Try to avoid
negative values", sysstat issue #355, in 12.7.3 and every later release) print 0.0 for a
column whose counter went down, e.g. iostat.c write_json_ext_stat():
    ioi->rd_ios < ioj->rd_ios ? 0.0 : S_VALUE(ioj->rd_ios, ioi->rd_ios, itv)
and rd_stats.c compute_ext_disk_stats():
    xds->util = sdc->tot_ticks < sdp->tot_ticks ? 0.0 : S_VALUE(sdp->tot_ticks, sdc->tot_ticks, itv);
That is applied to r/s w/s d/s f/s, the kB/s and rqm/s columns, aqu-sz and %util, while
%rrqm, the awaits and the request sizes still take the wrapped difference (only their
`ios - ios ?` test became `ios > ios ?`).  So 12.7.3+ prints a mix of zeros and garbage
for a counter that went down, and prints %util and aqu-sz 0.00 when a 32-bit tick
counter wraps for real (after 49.7 days of busy time), where 12.6.1 is right.  We follow
12.6.1's arithmetic and do not copy the zeros.

Flag and drop (our own rule).  A zero is as wrong as 9.2e18 for an interval whose
counters cannot be trusted, and would reach the detector, alerts and Prometheus as a
real value.  implausible() says, in one line, why one device's interval is physically
impossible (a counter went down, more busy time than wall time, more requests or bytes
than any device moves); checked_rates() leaves such a device out of the rates and returns
the reason, and the Model shows it as n/a with that reason (model/snapshot.py).
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, fields
from typing import NamedTuple

from gpudisk_top.collect.diskstats import MASK32, MASK64, DiskCounters
from gpudisk_top.model.vocab import mb_s


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

    @property
    def rmb_s(self) -> float:
        """iostat -m's rMB/s (vocab.DISK_MB)."""
        return mb_s(self.rkb_s)

    @property
    def wmb_s(self) -> float:
        return mb_s(self.wkb_s)


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


def await_ms(wait_ms: float, ios: float) -> float:
    """iostat's await: the milliseconds requests waited (queue and service) over the
    requests completed, 0 for none (iostat.c: `ios ? ticks / ios : 0.0`).  The one
    formula: each r_await, w_await, d_await and f_await here, an interval's reads and
    writes together (record/derived.py) and a window's (report) are this of their sums.
    Raises nothing."""
    return wait_ms / ios if ios else 0.0


def _rqm_pct(merges: int, ios: int) -> float:
    # iostat.c: %rrqm = merges / (merges + ios) * 100, with the sum an unsigned long
    total = (merges + ios) & MASK64
    return merges / total * 100.0 if total else 0.0


def _base(cur: DiskCounters, prev: DiskCounters | None) -> DiskCounters:
    """What cur is compared against: prev, or zeros for a device that just appeared (iostat
    starts a device it has not seen with zeroed stats: add_list_device() memsets them)
    or one that was removed and created again (is_reset)."""
    if prev is None or is_reset(cur, prev):
        return _ZERO
    return prev


def device_rates(cur: DiskCounters, prev: DiskCounters | None, interval_s: float) -> DiskRates:
    """Rates of one device, as iostat 12.6.1 prints them.  prev None (a device that just
    appeared) compares against zeros, as sysstat does for a device it has not seen before."""
    return _rates_from(cur, _base(cur, prev), interval_s)


class DiskDeltas(NamedTuple):
    """One device's counter differences over one interval, the integers its rates are
    made of: the kernel's names, *_ticks in milliseconds, each taken in the counter's C
    type (wrapped) against the base iostat compares with (_base(): zeros for a device that
    appeared or was created again).  What the recorder's summaries add up."""

    rd_ios: int
    wr_ios: int
    dc_ios: int
    fl_ios: int
    rd_merges: int
    wr_merges: int
    dc_merges: int
    rd_sectors: int
    wr_sectors: int
    dc_sectors: int
    rd_ticks: int
    wr_ticks: int
    dc_ticks: int
    fl_ticks: int
    tot_ticks: int
    rq_ticks: int


def _deltas(cur: DiskCounters, prev: DiskCounters) -> DiskDeltas:
    """The counter differences of cur against prev as it is (already _base()'s choice)."""
    return DiskDeltas(
        (cur.rd_ios - prev.rd_ios) & MASK64,
        (cur.wr_ios - prev.wr_ios) & MASK64,
        (cur.dc_ios - prev.dc_ios) & MASK64,
        (cur.fl_ios - prev.fl_ios) & MASK64,
        (cur.rd_merges - prev.rd_merges) & MASK64,
        (cur.wr_merges - prev.wr_merges) & MASK64,
        (cur.dc_merges - prev.dc_merges) & MASK64,
        (cur.rd_sectors - prev.rd_sectors) & MASK64,
        (cur.wr_sectors - prev.wr_sectors) & MASK64,
        (cur.dc_sectors - prev.dc_sectors) & MASK64,
        (cur.rd_ticks - prev.rd_ticks) & MASK32,
        (cur.wr_ticks - prev.wr_ticks) & MASK32,
        (cur.dc_ticks - prev.dc_ticks) & MASK32,
        (cur.fl_ticks - prev.fl_ticks) & MASK32,
        (cur.tot_ticks - prev.tot_ticks) & MASK32,
        (cur.rq_ticks - prev.rq_ticks) & MASK32,
    )


def _rates_from(cur: DiskCounters, prev: DiskCounters, interval_s: float) -> DiskRates:
    """device_rates() against prev as it is (already _base()'s choice)."""
    return _rates_of(_deltas(cur, prev), interval_s)


def _rates_of(d: DiskDeltas, interval_s: float) -> DiskRates:
    """The rates of one interval's counter differences."""
    return _rates_at(d, _itv_cs(interval_s))


def _rates_at(d: DiskDeltas, itv: float) -> DiskRates:
    """_rates_of() with the interval already in 1/100 s (_itv_cs())."""
    # S_VALUE(m, n, itv) = (n - m) / itv * 100, written out below for each counter
    (rd_ios, wr_ios, dc_ios, fl_ios, rd_merges, wr_merges, dc_merges, rd_sectors,
     wr_sectors, dc_sectors, rd_ticks, wr_ticks, dc_ticks, fl_ticks, tot_ticks, rq_ticks) = d

    # Positional, in DiskRates field order (this runs for every device every second).
    # Sectors are 512 bytes whatever the device's block size: kB/s = sectors/s / 2.
    # aqu-sz = S_VALUE(rq_ticks) / 1000 and %util = S_VALUE(tot_ticks) / 10: both in ms.
    return DiskRates(
        rd_ios / itv * 100.0,
        rd_sectors / itv * 100.0 / 2,
        rd_merges / itv * 100.0,
        _rqm_pct(rd_merges, rd_ios),
        await_ms(rd_ticks, rd_ios),
        rd_sectors / rd_ios / 2 if rd_ios else 0.0,
        wr_ios / itv * 100.0,
        wr_sectors / itv * 100.0 / 2,
        wr_merges / itv * 100.0,
        _rqm_pct(wr_merges, wr_ios),
        await_ms(wr_ticks, wr_ios),
        wr_sectors / wr_ios / 2 if wr_ios else 0.0,
        dc_ios / itv * 100.0,
        dc_sectors / itv * 100.0 / 2,
        dc_merges / itv * 100.0,
        _rqm_pct(dc_merges, dc_ios),
        await_ms(dc_ticks, dc_ios),
        dc_sectors / dc_ios / 2 if dc_ios else 0.0,
        fl_ios / itv * 100.0,
        await_ms(fl_ticks, fl_ios),
        rq_ticks / itv * 100.0 / 1000.0,
        tot_ticks / itv * 100.0 / 10.0,
    )


_ZERO = DiskCounters.zero()
_ZERO_DELTAS = DiskDeltas(*([0] * len(DiskDeltas._fields)))
_ZERO_RATES = (0.0,) * len(RATE_FIELDS)


def rates(prev: dict[str, DiskCounters], cur: dict[str, DiskCounters],
          interval_s: float) -> dict[str, DiskRates]:
    """Rates for every device in `cur` over `interval_s` seconds, as iostat 12.6.1 prints
    them, impossible intervals included (checked_rates() drops those).

    A device missing from `cur` (it vanished) has no entry, as iostat skips a device that
    no longer exists; one missing from `prev` (it appeared) is compared against zeros.
    Never raises for wrapped or reset counters or a zero interval: every number is finite
    and non-negative.
    """
    return {name: device_rates(c, prev.get(name), interval_s) for name, c in cur.items()}


# ------------------------------------------------------------------ what a device can do
# Requests (or merges) per second, per kind (read, write, discard, flush).  The fastest
# block devices complete about 1e7 requests a second (a PCIe 5.0 NVMe drive about 3e6
# 4 KiB reads; null_blk, which completes in memory, about 1e7 on a large machine), and
# a dm or md stripe over a dozen of them stays under 1e8.  A merge is a bio the block
# layer folded into a request, which costs it as much as a request, so merges get the
# same ceiling.  Ten times anything measured: a real interval never comes near it.
MAX_OPS_S = 1e8
# Bytes read, or written, per second.  Data read or written crosses PCIe and memory: a
# PCIe 5.0 x16 link carries 6.3e10 B/s and a two-socket server has about ten of them,
# below its memory bandwidth (~1e12 B/s).  Discards get no byte ceiling: they move no
# data, and one request can trim a whole device in milliseconds (their d/s is still
# bounded by MAX_OPS_S).  Writes include REQ_OP_WRITE_ZEROES (the kernel's
# op_stat_group() counts it as a write); a device that zeroes by offload faster than
# this would see that interval dropped, with this ceiling as the reason.
MAX_DATA_BYTES_S = 1e12
# %util: io_ticks (tot_ticks) counts the time with at least one request in flight, so it
# cannot grow by more than the wall time.  Two things let it look a little longer than
# our interval: the kernel counts it in jiffies (jiffies_to_msecs(), 10 ms at HZ=100),
# so each of the two reads may be up to a jiffy late or early (20 ms); and we stamp
# each sample's clock just before reading diskstats (collect/sampler.py), so a sampler
# thread delayed between the two in one sample and not in the other sees a longer
# kernel interval than it measured (10 %: 100 ms at 1 s, 25 ms at the dashboard's
# shortest 0.25 s).  Beyond that, the kernel's own accounting added time from before the
# interval (update_io_ticks() adds the whole time since its last stamp when a request
# completes: on kernels that do not also bring io_ticks up to date when diskstats is
# read, a request in flight across our read lands whole in the next interval, and a race
# on that stamp reported on LKML in February 2026 gave %util 100.30 on a nearly idle
# disk), or the read was not one consistent snapshot; either way %util means nothing
# for that interval.
BUSY_SLACK_FACTOR = 1.1
BUSY_SLACK_MS = 20.0
# A 32-bit tick counter's modular difference above 2**31 is a decrease, not a wrap: to
# advance that far for real, requests completing in one interval would need 24.8 days
# of summed time (rd_ticks adds each request's whole duration when it completes).
TICK_HALF_RANGE = 1 << 31

_FIELD_INDEX = {f: i for i, f in enumerate(DiskCounters._fields)}
# ios, merges and sectors: `unsigned long`, 64 bits on the 64-bit kernels GPU nodes run.
# Going down is never a wrap: 2**64 sectors is 9.4e21 bytes, 300 years at
# MAX_DATA_BYTES_S, and 2**64 requests take 5,800 years at MAX_OPS_S.  (A 32-bit
# kernel's counters wrap at 2**32, which this rule would flag; sysstat >= 12.7.3 prints
# 0 for those too.)
_U64_NAMES = ("rd_ios", "rd_merges", "rd_sectors", "wr_ios", "wr_merges", "wr_sectors",
              "dc_ios", "dc_merges", "dc_sectors", "fl_ios")
# the millisecond counters; ios_pgr (requests in flight) is a reading, not a counter
_TICK_NAMES = ("rd_ticks", "wr_ticks", "dc_ticks", "fl_ticks", "tot_ticks", "rq_ticks")
# (these run for every device every second: C-level getters, then Python only to word
# the reason of an interval that fails)
_u64_of = operator.itemgetter(*(_FIELD_INDEX[f] for f in _U64_NAMES))
_ticks_of = operator.itemgetter(*(_FIELD_INDEX[f] for f in _TICK_NAMES))
_TICK_DELTAS = slice(DiskDeltas._fields.index("rd_ticks"), None)
_ops_of = operator.attrgetter("r_s", "w_s", "d_s", "f_s", "rrqm_s", "wrqm_s", "drqm_s")
_data_of = operator.attrgetter("rkb_s", "wkb_s")
# (attribute, iostat column, ceiling in the attribute's unit)
_CEILINGS = (
    ("r_s", "r/s", MAX_OPS_S), ("w_s", "w/s", MAX_OPS_S), ("d_s", "d/s", MAX_OPS_S),
    ("f_s", "f/s", MAX_OPS_S), ("rrqm_s", "rrqm/s", MAX_OPS_S),
    ("wrqm_s", "wrqm/s", MAX_OPS_S), ("drqm_s", "drqm/s", MAX_OPS_S),
    ("rkb_s", "rkB/s", MAX_DATA_BYTES_S / 1024), ("wkb_s", "wkB/s", MAX_DATA_BYTES_S / 1024),
)


def implausible(cur: DiskCounters, prev: DiskCounters | None, interval_s: float,
                r: DiskRates) -> str | None:
    """None, or one line saying why this device's interval is physically impossible.

    cur and prev are the device's counters (prev None: it just appeared), r the rates
    device_rates() made of them.  A device that appeared, or that sysstat's reset test
    says was created again, is compared against zeros as iostat does; the same ceilings
    then catch one that appears with counters it gathered since boot (a line that a torn
    read lost and the next read has again).  Never raises.
    """
    base = _base(cur, prev)
    return _implausible(cur, prev, base, _itv_cs(interval_s), r, _deltas(cur, base))


def _implausible(cur: DiskCounters, prev: DiskCounters | None, base: DiskCounters,
                 itv: float, r: DiskRates, d: DiskDeltas) -> str | None:
    """implausible() of the rates r made of the differences d of cur against base (the
    interval itv in 1/100 s): the figures taken once for every device every second."""
    if prev is not None and cur.nfields != prev.nfields:
        # a running kernel prints every line of a device with the same number of fields
        return (f"its diskstats line had {cur.nfields} fields, {prev.nfields} the sample "
                "before: one of the two reads was cut or garbled")
    if base is not _ZERO:
        if any(map(operator.lt, _u64_of(cur), _u64_of(base))):
            name, was, now = next(x for x in zip(_U64_NAMES, _u64_of(base), _u64_of(cur))
                                  if x[2] < x[1])
            return (f"{name} went down from {was} to {now} and the device was not "
                    "created again (sysstat's test)")
        # d's tick differences are (now - was) & MASK32, in _TICK_NAMES' order
        if max(d[_TICK_DELTAS]) > TICK_HALF_RANGE:
            for name, was, now in zip(_TICK_NAMES, _ticks_of(base), _ticks_of(cur)):
                if (now - was) & MASK32 > TICK_HALF_RANGE:
                    return (f"{name} went down from {was} to {now} (a 32-bit wrap cannot "
                            "advance 2^31 ms in one interval)")
        fresh = ""
    else:
        # compared against zeros: nothing can be below zero, but a device created within
        # the interval cannot have gathered more than the interval allows either
        fresh = ("; compared against zeros, as a device that appeared or was created "
                 "again, so these counts are older than the interval")
    interval_ms = itv * 10.0
    busy_ms = d.tot_ticks      # (cur.tot_ticks - base.tot_ticks) & MASK32
    if busy_ms > interval_ms * BUSY_SLACK_FACTOR + BUSY_SLACK_MS:
        return (f"%util {r.util_pct:.6g}: {busy_ms} ms busy in a {interval_ms:.0f} ms "
                f"interval{fresh}")
    if fresh:
        for name, now in zip(_TICK_NAMES, _ticks_of(cur)):
            if now > TICK_HALF_RANGE:
                return f"{name} is {now} ms, more than 2^31 ms in one interval{fresh}"
    if max(_ops_of(r)) > MAX_OPS_S or max(_data_of(r)) > MAX_DATA_BYTES_S / 1024:
        for attr, column, ceiling in _CEILINGS:
            value = getattr(r, attr)
            if value > ceiling:
                return _beyond(column, value, ceiling) + fresh
    return None


def _beyond(column: str, value: float, ceiling: float) -> str:
    return f"{column} {value:.3g} is more than any device can do ({ceiling:.3g})"


def beyond_ceilings(ops_s=(), data_kb_s=()) -> str | None:
    """The disks' ceilings held against another source's rates (NFS, Lustre: a network
    filesystem's data also crosses PCIe and memory): ops_s and data_kb_s are (label,
    value) pairs, requests a second and kB a second; None (no value) passes.  Returns
    None, or one line naming the first value beyond MAX_OPS_S or MAX_DATA_BYTES_S (or
    not a finite number).  Never raises."""
    for pairs, ceiling in ((ops_s, MAX_OPS_S), (data_kb_s, MAX_DATA_BYTES_S / 1024)):
        for label, value in pairs:
            if value is not None and not (0 <= value <= ceiling):
                if value < 0:
                    return f"{label} {value:.3g} is below zero"
                return _beyond(label, value, ceiling)
    return None


def checked_rates(prev: dict[str, DiskCounters], cur: dict[str, DiskCounters],
                  interval_s: float) -> tuple[dict[str, DiskRates], dict[str, str]]:
    """rates(), less the devices whose interval is physically impossible: returns
    (rates, {device: one-line reason}), every device of `cur` in exactly one of the two.
    Never raises."""
    out, _, dropped = checked_intervals(prev, cur, interval_s)
    return out, dropped


def checked_intervals(prev: dict[str, DiskCounters], cur: dict[str, DiskCounters],
                      interval_s: float) -> tuple[dict[str, DiskRates], dict[str, DiskDeltas],
                                                  dict[str, str]]:
    """checked_rates() with the counter differences each kept device's rates were made
    of: (rates, deltas, dropped), rates and deltas with the same devices.  Never raises."""
    out: dict[str, DiskRates] = {}
    deltas: dict[str, DiskDeltas] = {}
    dropped: dict[str, str] = {}
    itv = _itv_cs(interval_s)
    for name, c in cur.items():
        p = prev.get(name)
        if c is p or c == p:
            # it did not move (the sampler hands the same object for the same line): every
            # difference is 0, so every rate is 0.0 and nothing can be implausible, which
            # the long way below finds too (tests/test_sample_cache.py)
            out[name] = DiskRates(*_ZERO_RATES)
            deltas[name] = _ZERO_DELTAS
            continue
        base = _base(c, p)
        d = _deltas(c, base)
        r = _rates_at(d, itv)
        why = _implausible(c, p, base, itv, r, d)
        if why is None:
            out[name] = r
            deltas[name] = d
        else:
            dropped[name] = why
    return out, deltas, dropped
