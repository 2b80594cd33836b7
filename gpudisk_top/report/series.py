"""The report's charts over a window: where each sample falls along them (Axis, by its
rank among the window's samples, so a gap of months takes no room), the samples in
BUCKETS buckets (Series), and where the ticks, the episodes and the gaps fall (place()).
"""

from __future__ import annotations

import bisect
import itertools
import operator
from dataclasses import dataclass, field

from gpudisk_top.record.reader import Recording
from gpudisk_top.verdict.detect import Episode

BUCKETS = 240          # chart resolution: buckets of the window's samples
GAP_MIN_S = 60.0       # the charts mark a jump forward of the clock longer than this
GAP_INTERVALS = 10     # and than this many intervals


class Axis:
    """Where each sample of the window falls along the charts: by its rank among the
    window's samples in recorded order.  For a steady recording that is its time; a gap
    of months, or a clock that stepped back, takes no room, and bucketing costs what the
    samples do (a bisection over the window's ranges)."""

    def __init__(self, ranges: list[tuple[int, int]]) -> None:
        self.ranges = list(ranges)
        self.los = [lo for lo, _ in self.ranges]
        self.offsets = []
        n = 0
        for lo, hi in self.ranges:
            self.offsets.append(n)
            n += hi - lo + 1
        self.n = n

    def rank(self, i: int) -> int:
        k = max(0, bisect.bisect_right(self.los, i) - 1)
        return self.offsets[k] + i - self.los[k]

    def x(self, rank: float) -> float:
        """A rank's place on [0, BUCKETS]."""
        return 0.0 if self.n <= 1 else rank / (self.n - 1) * BUCKETS

    def bucket(self, i: int) -> int:
        return min(BUCKETS - 1, int(self.x(self.rank(i))))

    def index_of_rank(self, rank: int) -> int:
        k = max(0, bisect.bisect_right(self.offsets, rank) - 1)
        return self.los[k] + rank - self.offsets[k]


@dataclass
class DiskChart:
    buckets_wait: list[float] = field(default_factory=lambda: [0.0] * BUCKETS)
    buckets_ios: list[float] = field(default_factory=lambda: [0.0] * BUCKETS)


@dataclass
class Series:
    """The window's samples in BUCKETS buckets (Axis) for the charts; place() adds
    where the ticks, the episodes and the gaps fall while the recording is open."""

    axis: Axis
    gpu_util_sum: list[float] = field(default_factory=lambda: [0.0] * BUCKETS)
    gpu_util_n: list[int] = field(default_factory=lambda: [0] * BUCKETS)
    gpu_util_min: list[float | None] = field(default_factory=lambda: [None] * BUCKETS)
    disks: dict[str, DiskChart] = field(default_factory=dict)
    here: int = 0                       # the bucket of the interval being added (at())
    ticks: list[tuple[float, float]] = field(default_factory=list)    # (x, wall time)
    span_s: float = 0.0                 # the window's wall-clock span, for the tick labels
    marks: list[tuple[float, float, str]] = field(default_factory=list)   # episodes: x0, x1, state
    gaps: list[float] = field(default_factory=list)   # x of a gap or a clock step

    def at(self, i: int) -> None:
        """The next add_util()/add_disk() are sample i's (derived.add_interval passes a
        wall time, which does not place a sample when the clock stepped)."""
        self.here = self.axis.bucket(i)

    def xs(self) -> list[float]:
        return [b + 0.5 for b in range(BUCKETS)]

    def add_util(self, wall_s: float, total: float, n: int, low: float | None, b: int | None = None) -> None:
        b = self.here if b is None else b
        self.gpu_util_sum[b] += total
        self.gpu_util_n[b] += n
        if low is not None:
            cur = self.gpu_util_min[b]
            self.gpu_util_min[b] = low if cur is None else min(cur, low)

    def add_disk(self, name: str, wall_s: float, wait_ms: float, ios: float, b: int | None = None) -> None:
        d = self.disks.get(name)
        if d is None:
            d = self.disks[name] = DiskChart()
        b = self.here if b is None else b
        d.buckets_wait[b] += wait_ms
        d.buckets_ios[b] += ios

    def merge(self, other: "Series") -> None:
        for b in range(BUCKETS):
            self.gpu_util_sum[b] += other.gpu_util_sum[b]
            self.gpu_util_n[b] += other.gpu_util_n[b]
            low = other.gpu_util_min[b]
            if low is not None:
                cur = self.gpu_util_min[b]
                self.gpu_util_min[b] = low if cur is None else min(cur, low)
        for name, d in other.disks.items():
            into = self.disks.setdefault(name, DiskChart())
            into.buckets_wait = [a + b for a, b in zip(into.buckets_wait, d.buckets_wait)]
            into.buckets_ios = [a + b for a, b in zip(into.buckets_ios, d.buckets_ios)]


def place(rec: Recording, series: Series, episodes: list[Episode], where: list[int],
           interval_s) -> None:
    """Where the charts' ticks, episodes and gaps fall, while the recording is open.  A
    gap is a step back of the clock, or a jump forward of more than GAP_INTERVALS
    intervals (at least GAP_MIN_S): time is not to scale across it."""
    axis = series.axis
    if not axis.n:
        return
    walls = rec.walls
    ranks = [(axis.n - 1) * k / 4 for k in range(5)]
    series.ticks = [(axis.x(r), walls[axis.index_of_rank(round(r))]) for r in ranks]
    lows = [walls[lo] for lo, _ in axis.ranges]
    highs = [walls[hi] for _, hi in axis.ranges]
    series.span_s = max(highs) - min(lows)

    def x_of(wall_s: float, r: int) -> float:
        # an episode's times are placed in the range it was found in (its walls sorted)
        (lo, hi), off = axis.ranges[r], axis.offsets[r]
        i = min(hi, bisect.bisect_left(walls, wall_s, lo, hi + 1))
        return axis.x(off + i - lo)

    for e, r in zip(episodes, where):
        end = e.end_wall_s if e.end_wall_s is not None else e.last_wall_s
        series.marks.append((x_of(e.start_wall_s, r), x_of(end, r), e.state))
    gap_s = max(GAP_MIN_S, GAP_INTERVALS * float(interval_s or 1.0))
    for k, ((lo, hi), off) in enumerate(zip(axis.ranges, axis.offsets)):
        if k:
            series.gaps.append(axis.x(off - 0.5))
        # C-level passes over the wall times: what is left is one step per gap
        jumps = map(gap_s.__lt__, map(operator.sub, walls[lo + 1:hi + 1], walls[lo:hi]))
        for j in itertools.compress(range(hi - lo), jumps):
            series.gaps.append(axis.x(off + j + 0.5))
