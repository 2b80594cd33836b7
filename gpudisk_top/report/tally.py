"""The report's tally of a window: what each piece of it adds up (the devices' and the
GPUs' time, the charts' buckets, the disks' health readings, the stall ledger), interval by
interval where samples are replayed and block by block where recorded summaries are read.
The reading itself (which piece is which, and the episodes) is session/summaries.py's;
Tally is its Piece with the hooks filled in (job_interval: each job's chart, which
`report --job` draws: the mean utilization of its GPUs, from its ledger's GPU time).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudisk_top.model.select import DEFAULT_KINDS, DeviceFilter
from gpudisk_top.model.snapshot import Model
from gpudisk_top.record.derived import (add_interval, block_gpu_verdicts, gpu_verdicts,
                                        mask_gpus, state_of)
from gpudisk_top.record.reader import Recording
from gpudisk_top.record.v2.summary import DiskSums, Stretch
from gpudisk_top.report.health import HealthSeries
from gpudisk_top.report.series import Series
from gpudisk_top.report.tiers import TierCount
from gpudisk_top.session.summaries import Piece
from gpudisk_top.verdict.gaps import previous_sample
from gpudisk_top.verdict.ledger import Ledger

# A summary block gives the charts one point (its mean): a window of fewer blocks than
# this is charted from its samples instead (the model replayed, the recorded verdicts
# kept), or a 60 s recording would chart 2 points and hide a 10 s episode.  Replaying
# costs about a millisecond a sample, so the bound keeps it near a second.
MIN_CHART_BLOCKS = 20


@dataclass
class Tally(Piece):
    """What one piece of the window adds up; pieces are summed in order (report/summary.py)."""

    stretch: Stretch = field(default_factory=Stretch)
    series: Series | None = None
    health: HealthSeries = field(default_factory=HealthSeries)   # the disks' health readings
    select: "_Selector | None" = None
    # job id -> chart bucket -> [busy GPU-seconds, GPU-seconds] of its GPUs
    job_util: dict = field(default_factory=dict)
    tiers: TierCount = field(default_factory=TierCount)   # each GPU's busy tier (tiers.py)
    _bucket_of: tuple = (-1, 0)          # (sample index, its chart bucket)

    def job_interval(self, i: int, tally, state: str, loss) -> None:
        """A job's interval: its tally (Piece), and its chart bucket: the GPU time its
        GPUs were busy, job_gpu_s - unused_gpu_s (verdict/ledger.py: interval x u each)."""
        super().job_interval(i, tally, state, loss)
        if loss.job_gpu_s > 0:
            if self._bucket_of[0] != i:       # every job of an interval: one bucket
                self._bucket_of = (i, self.series.axis.bucket(i))
            cell = self.job_util.setdefault(tally.id, {}).setdefault(
                self._bucket_of[1], [0.0, 0.0])
            cell[0] += loss.job_gpu_s - loss.unused_gpu_s
            cell[1] += loss.job_gpu_s

    def interval(self, i: int, model, verdict, loss, clip_s) -> None:
        """A replayed interval: its devices and GPUs, its chart bucket, its health
        readings and its loss."""
        series = self.series
        series.at(i)
        add_interval(self.stretch, model, verdict.state, verdict.gpus, clip_s=clip_s,
                     selected=self.select, series=series, by_gpu=gpu_verdicts(verdict))
        self.health.add_sample(model.sample)
        self.tiers.add(model)
        super().interval(i, model, verdict, loss, clip_s)     # its loss

    def blocks(self, rec: Recording, blocks, lo: int, hi: int, start_s,
               window_blocks: int) -> None:
        """A run of summary blocks, cut to [lo, hi]: whole blocks are added as they are,
        intervals of a block the window cuts are replayed one by one (the model only: their
        verdicts are the recorded ones); in a window of fewer than MIN_CHART_BLOCKS blocks,
        every block's are (the same sums, the charts' points per sample)."""
        per_sample = window_blocks < MIN_CHART_BLOCKS
        series = self.series
        # the blocks' recorded ledger (Piece.blocks); None where a block was written before
        # summaries carried it (then report/ledger.py replays the window)
        super().blocks(rec, blocks, lo, hi, start_s, window_blocks)
        s = self.stretch
        select = self.select
        for g, b, sno in blocks:
            a, z = max(g, lo), min(g + b.n - 1, hi)
            if a > z:
                continue
            whole = (not per_sample and a == g and z == g + b.n - 1
                     and not (start_s is not None and a == lo))
            if whole:
                _add_block(s, series, rec, g, b, select)
                self.health.add(h for _, h in b.health)
                self.tiers.skipped += z - a + 1
                continue
            self.replayed += z - a + 1
            for i in range(a, z + 1):
                j = i - g
                last = previous_sample(rec, i)       # None after a gap, as the step has it
                model = Model.new(rec.sample(i), last)
                self.health.add_sample(model.sample)
                self.tiers.add(model)
                series.at(i)
                add_interval(s, model, state_of(b.state[j]), mask_gpus(b.gpus[j]),
                             clip_s=start_s if i == lo else None, selected=select,
                             series=series, by_gpu=block_gpu_verdicts(b, j, model.jobs))


def new_tally(series: Series, dev_filter: DeviceFilter) -> Tally:
    """A piece's tally, charted on series (a fresh Series of the window's Axis)."""
    return Tally(series=series, ledger=Ledger(), select=_Selector(dev_filter))


class _Selector:
    """The device filter, applied interval by interval: (selected at all, only in the
    intervals in which the device had done I/O), per device identity."""

    def __init__(self, dev_filter: DeviceFilter) -> None:
        self.f = dev_filter
        self._cache: dict = {}

    def rule(self, info) -> tuple[bool, bool]:
        key = id(info)
        got = self._cache.get(key)
        if got is None or got[0] is not info:
            f = self.f
            if f.patterns:
                r = (f.matches_name(info), False)
            elif f.all_devices:
                r = (True, False)
            else:
                # model.select.DeviceFilter.selected(): iostat's "has done I/O" rule
                r = (info.kind in DEFAULT_KINDS and not info.hidden, True)
            got = self._cache[key] = (info, r)
        return got[1]

    def __call__(self, name, info, did_io: bool) -> bool:
        ok, io_only = self.rule(info)
        return ok and (did_io or not io_only)


def _add_block(s: Stretch, series: Series, rec: Recording, g: int, b, select: _Selector) -> None:
    """Add a whole summary block; its chart values are spread over the buckets its
    intervals fall in."""
    t = b.sums
    s.samples += t.samples
    if s.first_s is None:
        s.first_s = rec.wall_s(g)
    s.last_s = rec.wall_s(g + b.n - 1)
    for idx, info in t.gpu_info.items():
        if idx not in s.gpu_info:
            s.gpu_info[idx] = info
            s.states[idx] = {}
    for idx, per in t.states.items():
        into = s.states.setdefault(idx, {})
        for st, sec in per.items():
            into[st] = into.get(st, 0.0) + sec
    s.covered_s += t.covered_s
    s.no_gpu_s += t.no_gpu_s
    s.devices = t.devices or s.devices
    # the buckets of the block's intervals (most blocks fall in one)
    axis = series.axis
    b0, b1 = axis.bucket(g), axis.bucket(g + b.n - 1)
    if b0 == b1:
        shares = [(b0, 1.0)]
    else:
        counts: dict[int, int] = {}
        for i in range(g, g + b.n):
            k = axis.bucket(i)
            counts[k] = counts.get(k, 0) + 1
        shares = [(k, c / b.n) for k, c in counts.items()]
    if t.util_n:
        s.util_sum += t.util_sum
        s.util_n += t.util_n
        s.util_min = t.util_min if s.util_min is None else min(s.util_min, t.util_min)
        for k, f in shares:
            series.add_util(0.0, t.util_sum * f, round(t.util_n * f), t.util_min, b=k)
    for name, d in t.disks.items():
        info = t.devices.get(name)
        if info is None:
            continue
        ok, io_only = select.rule(info)
        if not ok or (io_only and not d.io_intervals):
            continue
        into = s.disks.get(name)
        if into is None:
            into = s.disks[name] = DiskSums()
        worst_at = d.worst_at
        d = DiskSums(**{**d.__dict__})
        if worst_at is not None:
            d.worst_at = rec.wall_s(g + int(worst_at))
        into.merge(d, io_only)
        wait, ios = d.r_wait_ms + d.w_wait_ms, d.r_ios + d.w_ios
        for k, f in shares:
            series.add_disk(name, 0.0, wait * f, ios * f, b=k)
