"""The device's read latency as the readers' queue grows: the what-if's one model of the
device (verdict/whatif/solver.py asks it a read's blocked time at each speed).

rho(x) is the device's read latency at the queue depth the readers make over now:
lat(q) = A + B q through the stored probe's two points (QD1: 1/iops1; QD32: 32/iops32),
so iops(q) = q / lat(q) is exact at QD1 and QD32; q = the others' queue + the loaders'
reads a second x their latency (Little), solved for the latency; the curve gives the
growth, lat(q at x) / lat(q now), the interval's blocked time the level.

Without a probe (or with one the device's rates contradict: verdict/ceiling.py) the
device is capped at what it was seen doing: lat(q) = max(L, q / R), L its latency now
(Little: aqu-sz / r/s), R the most it has read a second in this run (SaturationTracker's
peak, now included).  Up to R a read costs what it costs now; past it the device serves R
and no more, so the latency grows with the queue (Little against the seen ceiling).  A
floor on what the device can do, not its ceiling: `estimated`, and the basis says how to
measure it (seen_basis).  The old flat latency (every reader more was a reader served as
fast) predicted num_workers 2 -> 6 x2.32 where x1.37 was measured (issue 38).
A neighbour's reads stopped (the `neighbour` fix) take their part of the others' queue
away: the latency after is the curve's at the queue without it, over the latency now."""

from __future__ import annotations

from gpudisk_top.verdict.whatif.pipeline import Pipeline


def lat_ms(p: Pipeline, q: float) -> float | None:
    """The device's read latency at queue depth q, through the probe's QD1 and QD32
    points (lat = A + B q), in ms; None without a probe."""
    if not p.qd1_iops or not p.qd32_iops:
        return None
    lat1, lat32 = 1000.0 / p.qd1_iops, 32 * 1000.0 / p.qd32_iops
    slope = max(0.0, (lat32 - lat1) / 31.0)
    return lat1 - slope + slope * max(1.0, q)


def seen_r_s(p: Pipeline) -> float | None:
    """The reads a second an unprobed device is capped at (the most seen, now included),
    or None where it is probed or has no reads to go by (its latency then stays flat)."""
    if lat_ms(p, 1) is not None or not p.device_r_s or p.device_aqu <= 0:
        return None
    return max(p.seen_r_s, p.device_r_s)


def seen_basis(p: Pipeline) -> str | None:
    """"no probe of vda: capped at the 1,234 r/s it was seen doing; `gpudisk-top probe
    /data` measures it" (a contradicted probe's doubt in place of "no probe of vda"), or
    None where the device is not capped at what it was seen doing."""
    r_s = seen_r_s(p)
    if r_s is None:
        return None
    return (f"{unprobed(p)}: capped at the {r_s:,.0f} r/s it was seen doing; "
            f"`gpudisk-top probe {probe_target(p)}` measures it")


def unprobed(p: Pipeline) -> str:
    """'no probe of vda', or why its stored probe was not believed."""
    return p.probe_doubt or f"no probe of {p.device or 'the device'}"


def probe_target(p: Pipeline) -> str:
    return p.probe_target or (f"/dev/{p.device}" if p.device else "PATH")


class Device:
    """The device's read latency at speed x with `workers` readers: lat = A + S q and q =
    the others' queue + the loaders' reads a second x lat (Little), solved for lat; with
    no probe A = 0, S = 1 / the reads a second seen, at least the latency now.  What does
    not depend on x or the readers is worked out once an interval."""

    def __init__(self, p: Pipeline, removed_q: float = 0.0):
        self.seen_r_s = seen_r_s(p)
        # without a curve (or without reads) a read's blocked time stays as it is
        self.curve = not (p.b <= 0 or not p.reads_s
                          or (lat_ms(p, 1) is None and self.seen_r_s is None))
        if not self.curve:
            return
        self.p = p
        self.reads_s = p.reads_s
        per_read_s = p.b * p.loaders / p.reads_s       # a loader's blocked time a read, now
        self.others_q = max(0.0, p.device_aqu - p.reads_s * per_read_s)
        if self.seen_r_s is None:
            self.slope_s = (lat_ms(p, 2) - lat_ms(p, 1)) / 1000.0
            self.least_s = lat_ms(p, 1) / 1000.0
            self.base_s = self.least_s - self.slope_s
        else:
            self.slope_s = 1.0 / self.seen_r_s
            self.least_s = p.device_aqu / p.device_r_s     # Little: its latency now
            self.base_s = 0.0
            # the others' queue at least what their reads a second hold at that latency
            # (Little again): where the loaders' blocked time is more than the device's
            # latency, the queue less theirs says too little, and their reads could take
            # the others' share of the seen rate
            self.others_q = max(self.others_q,
                                max(0.0, p.device_r_s - p.reads_s) * self.least_s)
        self._others(self.others_q)
        self.now_s = self.lat_s(1.0, p.loaders)
        if removed_q > 0:
            # now stays the interval's (the queue the job waited in); the speeds after are
            # solved at the queue without the neighbour's part
            self._others(max(0.0, self.others_q - removed_q))

    def _others(self, others_q: float) -> None:
        """The figures that follow the others' queue depth `others_q`."""
        self.others_q = others_q
        self.free_s = self.base_s + self.slope_s * others_q   # the latency with none of theirs
        self.most_s: dict[int, float] = {}

    def lat_q_s(self, q: float) -> float:
        """The latency at queue depth q, in s."""
        if self.seen_r_s is not None:
            return max(self.least_s, q / self.seen_r_s)
        return lat_ms(self.p, q) / 1000.0

    def lat_s(self, x: float, workers: int) -> float:
        """The latency at speed x with `workers` readers, in s."""
        most_s = self.most_s.get(workers)
        if most_s is None:                                  # every reader in a read
            most_s = self.most_s[workers] = self.lat_q_s(workers + self.others_q)
        rate = self.reads_s * x
        lat_s = most_s if self.slope_s * rate >= 1 else min(
            most_s, self.free_s / (1 - self.slope_s * rate))
        return max(lat_s, self.least_s)

    def rho(self, x: float, workers: int) -> float:
        """A read's blocked time at speed x over now (1 without a curve): the curve gives
        how the latency grows with the queue, the interval its level."""
        return self.lat_s(x, workers) / self.now_s if self.curve else 1.0
