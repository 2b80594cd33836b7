"""The device's read latency as the readers' queue grows: the what-if's one model of the
device (verdict/whatif/solver.py asks it a read's blocked time at each speed).

rho(x) is the device's read latency at the queue depth the readers make over now:
lat(q) = A + B q through the stored probe's two points (QD1: 1/iops1; QD32: 32/iops32),
so iops(q) = q / lat(q) is exact at QD1 and QD32; q = the others' queue + the loaders'
reads a second x their latency (Little), solved for the latency; the curve gives the
growth, lat(q at x) / lat(q now), the interval's blocked time the level.  Without a probe
(or with one the device's rates contradict: verdict/ceiling.py) it is flat: `estimated`.
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


class Device:
    """The device's read latency at speed x with `workers` readers: lat = A + S q and q =
    the others' queue + the loaders' reads a second x lat (Little), solved for lat.  What
    does not depend on x or the readers is worked out once an interval."""

    def __init__(self, p: Pipeline, removed_q: float = 0.0):
        # without the probe's curve (or without reads) a read's blocked time stays as it is
        self.curve = not (p.b <= 0 or not p.reads_s or lat_ms(p, 1) is None)
        if not self.curve:
            return
        self.p = p
        self.reads_s = p.reads_s
        per_read_s = p.b * p.loaders / p.reads_s       # a loader's blocked time a read, now
        self.others_q = max(0.0, p.device_aqu - p.reads_s * per_read_s)
        self.slope_s = (lat_ms(p, 2) - lat_ms(p, 1)) / 1000.0
        self.least_s = lat_ms(p, 1) / 1000.0
        self._others(self.others_q)
        self.now_s = self.lat_s(1.0, p.loaders)
        if removed_q > 0:
            # now stays the interval's (the queue the job waited in); the speeds after are
            # solved at the queue without the neighbour's part
            self._others(max(0.0, self.others_q - removed_q))

    def _others(self, others_q: float) -> None:
        """The figures that follow the others' queue depth `others_q`."""
        self.others_q = others_q
        base_s = self.least_s - self.slope_s
        self.free_s = base_s + self.slope_s * others_q   # the latency with none of theirs
        self.most_s: dict[int, float] = {}

    def lat_s(self, x: float, workers: int) -> float:
        """The latency at speed x with `workers` readers, in s."""
        most_s = self.most_s.get(workers)
        if most_s is None:                                  # every reader in a read
            most_s = self.most_s[workers] = lat_ms(self.p, workers + self.others_q) / 1000.0
        rate = self.reads_s * x
        lat_s = most_s if self.slope_s * rate >= 1 else min(
            most_s, self.free_s / (1 - self.slope_s * rate))
        return max(lat_s, self.least_s)

    def rho(self, x: float, workers: int) -> float:
        """A read's blocked time at speed x over now (1 without the probe's curve): the
        curve gives how the latency grows with the queue, the interval its level."""
        return self.lat_s(x, workers) / self.now_s if self.curve else 1.0
