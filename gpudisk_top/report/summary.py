"""The postmortem of a recording window.

build() returns a Summary: `data` is the JSON report (an API: keys are added, never
renamed or removed; README "Report JSON"), `series` what the text report charts.

Two ways to the same numbers:
  - recorded summaries (format v2, record/derived.py): what the recorder's model and
    detector made of every interval, summed by the minute.  Used when they were made by
    this version's model and detector with the thresholds asked for: a day reads in well
    under a second.  Intervals at the edges of the window are replayed one by one, and
    samples without summaries (a recorder killed before writing its last ones) are
    replayed as below;
  - replaying the raw samples through Replay (the model and the detector), in one
    process, one pass over each stretch of a steady clock.
The window is the index ranges Recording.ranges() gives (one per stretch of a wall clock
that never went back), so the work is bounded by the samples in it, never by its span: a
gap of months between two sessions costs nothing, and a clock that stepped back reads
each stretch in recorded order.  Summaries are used when the window is one such stretch.
Both add intervals up with derived.add_interval, so their device and state figures agree;
their episodes can differ where the detector's learned baselines matter: the summaries
hold what the recorder's detector decided from its session's start, a replay warms its
detector up WARMUP_S before the window.
"""

from __future__ import annotations

import bisect
import itertools
import math
import operator
from dataclasses import dataclass, field

from gpudisk_top import __version__
from gpudisk_top.model import MODEL_VERSION
from gpudisk_top.verdict.detect import STATES, UNAVAILABLE, Episode, Thresholds
from gpudisk_top.verdict.detect.states import gpu_ranges
from gpudisk_top.model.select import DEFAULT_KINDS, DeviceFilter
from gpudisk_top.model.snapshot import Model
from gpudisk_top.model.vocab import episode_json, iso_time
from gpudisk_top.record import derived, sources
from gpudisk_top.record.derived import GPU_STATES, add_interval
from gpudisk_top.record.v2.summary import DiskSums, Stretch
from gpudisk_top.verdict.ledger import NO_PRICE, Ledger, Price
from gpudisk_top.report import ledger as report_ledger
from gpudisk_top.report.health import HealthSeries, episode_health, health_section
from gpudisk_top.record.reader import Recording
from gpudisk_top.verdict.gaps import previous_sample
from gpudisk_top.session.replay import Replay

BUCKETS = 240          # chart resolution: buckets of the window's samples
RECORDED = f"recorded summaries, model v{MODEL_VERSION}"
RECOMPUTED = "recomputed"
GAP_MIN_S = 60.0       # the charts mark a jump forward of the clock longer than this
GAP_INTERVALS = 10     # and than this many intervals
# A summary block gives the charts one point (its mean): a window of fewer blocks than
# this is charted from its samples instead (the model replayed, the recorded verdicts
# kept), or a 60 s recording would chart 2 points and hide a 10 s episode.  Replaying
# costs about a millisecond a sample, so the bound keeps it near a second.
MIN_CHART_BLOCKS = 20


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
class _DiskChart:
    buckets_wait: list[float] = field(default_factory=lambda: [0.0] * BUCKETS)
    buckets_ios: list[float] = field(default_factory=lambda: [0.0] * BUCKETS)


@dataclass
class Series:
    """The window's samples in BUCKETS buckets (Axis) for the charts; _summary() adds
    where the ticks, the episodes and the gaps fall while the recording is open."""

    axis: Axis
    gpu_util_sum: list[float] = field(default_factory=lambda: [0.0] * BUCKETS)
    gpu_util_n: list[int] = field(default_factory=lambda: [0] * BUCKETS)
    gpu_util_min: list[float | None] = field(default_factory=lambda: [None] * BUCKETS)
    disks: dict[str, _DiskChart] = field(default_factory=dict)
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
            d = self.disks[name] = _DiskChart()
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
            into = self.disks.setdefault(name, _DiskChart())
            into.buckets_wait = [a + b for a, b in zip(into.buckets_wait, d.buckets_wait)]
            into.buckets_ios = [a + b for a, b in zip(into.buckets_ios, d.buckets_ios)]


@dataclass
class Summary:
    data: dict
    series: Series
    episodes: list[Episode]
    warnings: list[str]
    # per episode: the (first, last) sample indexes of the stretch of a steady clock it
    # was found in (Recording.ranges: wall times alone are ambiguous after a step back)
    spans: list[tuple[int, int]] = field(default_factory=list)
    # the window's stall ledger where every sample of it was replayed or read from
    # summaries that carry it (else None)
    ledger: Ledger | None = None
    # per stretch of a steady clock (axis.ranges): its intervals' losses to a cause
    # (_Partial.losses), in order, for the by-episode split of the window's ledger
    losses: dict = field(default_factory=dict)


@dataclass
class _Partial:
    """What one piece of the window accumulates; pieces are summed in order."""

    stretch: Stretch = field(default_factory=Stretch)
    series: Series | None = None
    episodes: list[Episode] = field(default_factory=list)
    open_at_end: bool = False           # its last episode was still open at the piece's end
    # per episode (by its place in `episodes`): its intervals inside the piece, for one
    # that a piece before already counted up to this piece's start
    inside: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    replayed: int = 0                   # samples replayed from raw counters
    breaks_first: bool = False          # its first sample starts a session or follows a clock step
    health: HealthSeries = field(default_factory=HealthSeries)   # the disks' health readings
    ledger: Ledger | None = None        # its intervals' stall ledger
    # (wall time, cause, lost GPU-seconds) of each interval counted to a cause that loses
    # time, in order: the window's by-episode split where summaries were read
    losses: list = field(default_factory=list)


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


def _pass(rec: Recording, lo: int, hi: int, clip_s, since_s, series: Series, thresholds,
          dev_filter: DeviceFilter) -> _Partial:
    """Replay samples lo..hi (the detector warmed up before since_s, or before lo) into a
    _Partial; intervals that begin before clip_s count only from clip_s."""
    part = _Partial(series=series, ledger=Ledger())
    s = part.stretch
    select = _Selector(dev_filter)
    known_warnings = len(rec.warnings)
    replay = Replay(rec, thresholds)
    inside: dict[int, int] = {}
    for i, model, verdict in replay.run([(lo, hi)], since_s, close=False):
        series.at(i)
        add_interval(s, model, verdict.state, verdict.gpus, clip_s=clip_s, selected=select,
                     series=series)
        part.health.add_sample(model.sample)
        part.ledger.add(verdict.loss)
        report_ledger.note_loss(part.losses, verdict.loss)
        ep = verdict.episode
        if ep is not None and verdict.raw_state == ep.state:
            inside[id(ep)] = inside.get(id(ep), 0) + 1
    part.replayed = s.samples
    part.breaks_first = lo in replay.breaks_at
    if replay.detector is not None and s.last_s is not None:
        part.open_at_end = replay.open_at_end
        replay.close(s.last_s)
        first = since_s if since_s is not None else float("-inf")
        part.episodes = [e for e in replay.all_episodes if e.end_wall_s >= first]
        part.inside = {k: inside.get(id(e), 0) for k, e in enumerate(part.episodes)}
    part.warnings = rec.warnings[known_warnings:]
    return part


def _merge_episodes(parts: list[_Partial], bounds: list[float]) -> list[Episode]:
    """Episodes of consecutive pieces of a window read from summaries (runs of summary
    blocks, and the samples between them that have none, replayed) as one list.  A
    replayed piece's detector was warmed up before its start, so an episode that went on across a boundary shows in both pieces: the
    earlier one closed at its last sample, the later one begun before the boundary.  They
    are joined; an episode that ended within the warm-up belongs to the piece before.  A
    piece that starts at a break (a session's start, a clock step: Replay restarts its
    detector there) joins nothing: the piece before closed its episodes at its end."""
    merged: list[Episode] = []
    carried_open = False
    for k, part in enumerate(parts):
        boundary = bounds[k]
        if k > 0 and part.breaks_first:
            merged.extend(part.episodes)
            carried_open = part.open_at_end
            continue
        for place, e in enumerate(part.episodes):
            if k > 0 and e.end_wall_s is not None and e.end_wall_s < boundary:
                last = merged[-1] if merged else None
                if carried_open and last is not None and last.state == e.state \
                        and e.start_wall_s <= last.end_wall_s and e.end_wall_s >= last.start_wall_s:
                    # the piece before closed it at its last sample, still open there; this
                    # piece's detector saw it end, just before the boundary: it ended then
                    last.end_wall_s = e.end_wall_s
                    last.intervals += part.inside.get(place, 0)
                    carried_open = False
                continue                                   # the piece before reported it
            if k > 0 and e.start_wall_s < boundary:
                last = merged[-1] if merged else None
                if carried_open and last is not None and last.state == e.state:
                    last.end_wall_s = e.end_wall_s
                    last.last_wall_s = e.last_wall_s
                    # the piece's detector, warmed up before its start, counted the
                    # intervals before it too: add only those inside the piece
                    last.intervals += part.inside.get(place, e.intervals)
                    for attr in ("gpus", "devices", "processes"):
                        have = getattr(last, attr)
                        have.extend(x for x in getattr(e, attr) if x not in have)
                    last.gpus.sort()
                    last.reason, last.advice = e.reason or last.reason, e.advice or last.advice
                    last.culprits = e.culprits if e.reason else last.culprits
                    last.whatif = e.whatif if e.reason else last.whatif
                    if e.min_util_pct is not None:
                        last.min_util_pct = e.min_util_pct if last.min_util_pct is None \
                            else min(last.min_util_pct, e.min_util_pct)
                    carried_open = False
                    continue
                # the piece before had not opened it yet (too few intervals before its end):
                # keep the start the warmed-up detector found, after what is already listed
                if last is not None and last.end_wall_s is not None:
                    e.start_wall_s = max(e.start_wall_s, last.end_wall_s)
            merged.append(e)
            carried_open = False
        carried_open = part.open_at_end
    for i, e in enumerate(merged, 1):
        e.id = i
    return merged


def build(rec: Recording, start_s: float | None = None, end_s: float | None = None,
          thresholds=None, dev_filter: DeviceFilter | None = None,
          recompute: bool = False, price: Price = NO_PRICE) -> Summary:
    """The report over the samples with start_s <= wall_s <= end_s, from the recorded
    summaries when they fit (see the module's doc), else (or with recompute) by
    replaying the raw samples in one pass per stretch of a steady clock, the detector
    warmed up WARMUP_S before the window.  The caller checks that the window holds samples.
    price: [ledger] of the config, for the cost of the GPU time lost."""
    dev_filter = dev_filter or DeviceFilter()
    ranges = rec.ranges(start_s, end_s)
    axis = Axis(ranges)
    result = None
    if not recompute and len(ranges) == 1:
        lo, hi = ranges[0]
        plan = _fast_plan(rec, lo, hi, thresholds)
        if plan is not None:
            result = _build_fast(rec, plan, lo, hi, start_s, axis, thresholds, dev_filter)
    if result is None:
        result = _build_replay(rec, ranges, start_s, axis, thresholds, dev_filter)
    _add_ledger(result, rec, start_s, end_s, thresholds, price)
    return result


def _add_ledger(result: Summary, rec: Recording, start_s, end_s, thresholds,
                price: Price) -> None:
    """data["ledger"]: the window's GPU time lost (report/ledger.py), as the replay or
    the recorded summaries counted it; where summaries written before they carried the
    ledger were read, replayed for it when the window is not too long.  data["ledger"]
    ["counted_from"] says which."""
    why_not = None
    if result.ledger is not None:
        how = (report_ledger.FROM_REPLAY if result.data.get("derived") == RECOMPUTED
               else report_ledger.FROM_SUMMARIES)
    elif result.data["samples"] <= report_ledger.REPLAY_MAX_SAMPLES:
        # read from summaries (one stretch of a steady clock) that predate the ledger
        result.ledger, losses = report_ledger.replay_ledger(rec, start_s, end_s, thresholds)
        result.losses = {span: losses for span in set(result.spans)} or {None: losses}
        how = report_ledger.FROM_OLD_SUMMARIES
    else:
        why_not = (f"the window holds more than {report_ledger.REPLAY_MAX_SAMPLES} samples "
                   "and its recorded summaries were written before they carried the "
                   "ledger: report --recompute, or a shorter --from/--to, counts it")
    # each episode's lost time is its intervals' in the window (the pieces read from
    # summaries and replayed each counted part of one; a replay's warm-up counted what
    # was before the window), stretch by stretch of a steady clock
    counted = []
    if result.ledger is not None:
        for span, losses in result.losses.items():
            got = [e for e, sp in zip(result.data["episodes"], result.spans) if sp == span]
            counted += report_ledger.episodes_lost(got, losses)
    result.data["ledger"] = report_ledger.section(result.ledger, result.data["episodes"],
                                                  counted, price, why_not)
    if result.ledger is not None:
        result.data["ledger"]["counted_from"] = how
    for e, row in zip(result.data["episodes"], result.data["ledger"].get("by_episode") or ()):
        e["lost_gpu_s"] = row["lost_gpu_s"]      # the ledger's count, whichever path


def _build_replay(rec, ranges, start_s, axis, thresholds, dev_filter) -> Summary:
    """Every sample of the window replayed, one pass (Replay) per range: a range is a
    stretch of a steady clock, apart in time from the others, so each range's episodes
    are its own.  A range's first interval is clipped to the window unless the sample
    before it is in the window (the clock stepped back there)."""
    parts = []
    episodes: list[Episode] = []
    where: list[int] = []          # the range of each episode, for the charts
    for r, (lo, hi) in enumerate(ranges):
        after_step = r > 0 and ranges[r - 1][1] == lo - 1
        part = _pass(rec, lo, hi, None if after_step else start_s, start_s, Series(axis),
                     thresholds, dev_filter)
        parts.append(part)
        episodes += part.episodes
        where += [r] * len(part.episodes)
    for i, e in enumerate(episodes, 1):
        e.id = i
    return _summary(rec, parts, episodes, axis, RECOMPUTED, where=where)


# ---------------------------------------------------------------------------- recorded summaries
def _fast_plan(rec: Recording, lo: int, hi: int, thresholds) -> list | None:
    """Samples lo..hi (a window within one stretch of a steady clock) as pieces: ("sum",
    [(first index, SummaryBlock, session)...]) where summaries cover them, ("replay",
    first, last) where they do not; None when summaries cannot be used (format v1,
    another model or thresholds)."""
    if rec.version < 2 or hi < lo:
        return None
    t = thresholds if thresholds is not None else Thresholds()
    for k in range(rec.session_index(lo), rec.session_index(hi) + 1):
        if not derived.usable(rec.sessions[k].header.get("derived"), t):
            return None
    blocks = [(g, b, sno) for g, b, sno in rec.summaries() if g + b.n > lo and g <= hi]
    if not blocks or any(_stepped(rec, g, b) for g, b, _ in blocks):
        return None
    pieces: list = []
    i = lo
    for g, b, sno in blocks:
        if g > i:
            pieces.append(("replay", i, g - 1))
        if pieces and pieces[-1][0] == "sum":
            pieces[-1][1].append((g, b, sno))
        else:
            pieces.append(("sum", [(g, b, sno)]))
        i = g + b.n
    if i <= hi:
        pieces.append(("replay", i, hi))
    return pieces


def reads_summaries(rec: Recording, thresholds=None) -> bool:
    """Would build() over the whole recording add its recorded summaries up (well under a
    second for a day) rather than replay every sample?  The replay screen asks, to know
    the recording's episodes at once or to find them in the background."""
    ranges = rec.ranges()
    return len(ranges) == 1 and _fast_plan(rec, *ranges[0], thresholds) is not None


def _stepped(rec: Recording, g: int, b) -> bool:
    """Must a summary block be replayed: did the wall clock step forward within its
    intervals (the recorder's detector ran across the step, and an episode across it
    would last the step: the replay starts afresh), or did it count a gap as time?"""
    return derived.replay_block(rec, g, b)


def _build_fast(rec, plan, lo_global, hi_global, start_s, axis, thresholds, dev_filter) -> Summary:
    blocks = sum(len(piece[1]) for piece in plan if piece[0] == "sum")
    per_sample = blocks < MIN_CHART_BLOCKS
    parts: list[_Partial] = []
    boundaries: list[float] = []
    for k, piece in enumerate(plan):
        if piece[0] == "replay":
            _, a, z = piece
            # a replay that starts where the window does keeps its clip and warm-up
            s_a = start_s if a == lo_global else rec.wall_s(a)
            part = _pass(rec, a, z, start_s if a == lo_global else None, s_a,
                         Series(axis), thresholds, dev_filter)
            boundaries.append(rec.wall_s(a) if s_a is None else s_a)
        else:
            first_g = piece[1][0][0]
            a = max(first_g, lo_global)
            part = _sum_piece(rec, piece[1], lo_global, hi_global, start_s, axis, dev_filter,
                              per_sample)
            boundaries.append(start_s if a == lo_global and start_s is not None else rec.wall_s(a))
        parts.append(part)
    episodes = _merge_episodes(parts, boundaries)
    replayed = sum(p.replayed for p in parts)
    return _summary(rec, parts, episodes, axis, RECORDED, replayed)


def _sum_piece(rec: Recording, blocks, lo: int, hi: int, start_s, axis: Axis,
               dev_filter: DeviceFilter, per_sample: bool = False) -> _Partial:
    """A run of summary blocks, cut to [lo, hi]: whole blocks are added as they are,
    intervals of a block the window cuts are replayed one by one (the model only: their
    verdicts are the recorded ones); with per_sample, every block's are (the same sums,
    the charts' points per sample: MIN_CHART_BLOCKS)."""
    series = Series(axis)
    # the blocks' recorded ledger, cut as the window cuts them; None where a block was
    # written before summaries carried it (then report/ledger.py replays the window)
    ledger = Ledger() if all(b.ledger is not None for _, b, _ in blocks) else None
    part = _Partial(series=series, ledger=ledger)
    s = part.stretch
    select = _Selector(dev_filter)
    records: dict[tuple, tuple] = {}   # (session, episode id) -> (record, block, first index)
    last_block = None
    for g, b, sno in blocks:
        a, z = max(g, lo), min(g + b.n - 1, hi)
        for r in b.episodes:
            records[(sno, r["id"])] = (r, b, g, sno)
        if a > z:
            continue
        last_block = (g, b, sno)
        if ledger is not None:
            for j in range(a - g, z - g + 1):
                code = b.state[j]
                loss = derived.loss_of(b.ledger[j], rec.wall_s(g + j),
                                       STATES[code] if code < len(STATES) else "idle")
                ledger.add(loss)
                report_ledger.note_loss(part.losses, loss)
        whole = (not per_sample and a == g and z == g + b.n - 1
                 and not (start_s is not None and a == lo))
        if whole:
            _add_block(s, series, rec, g, b, select)
            part.health.add(h for _, h in b.health)
            continue
        part.replayed += z - a + 1
        for i in range(a, z + 1):
            j = i - g
            last = previous_sample(rec, i)       # None after a gap, as the step has it
            model = Model.new(rec.sample(i), last)
            part.health.add_sample(model.sample)
            state = STATES[b.state[j]] if b.state[j] < len(STATES) else "idle"
            gpus = [k for k in range(b.gpus[j].bit_length()) if b.gpus[j] >> k & 1]
            series.at(i)
            add_interval(s, model, state, gpus, clip_s=start_s if i == lo else None,
                         selected=select, series=series)
    if last_block is not None:
        g, b, _ = last_block
        piece_hi = min(hi, g + b.n - 1)        # where this piece ends (a replay may follow)
        part.episodes, sessions, part.open_at_end = _episodes(rec, records, last_block, lo,
                                                              piece_hi, start_s)
        first = max(lo, blocks[0][0])
        for place, (e, sno) in enumerate(zip(part.episodes, sessions)):
            if e.start_wall_s < rec.wall_s(first):
                part.inside[place] = _count_inside(blocks, e, sno, first, piece_hi)
    return part


def _count_inside(blocks, e: Episode, sno: int, a: int, z: int) -> int:
    """An episode's intervals in its state among samples a..z of a run of summary blocks."""
    n = 0
    for g, b, s in blocks:
        if s != sno:
            continue
        for j in range(max(0, a - g), min(b.n, z - g + 1)):
            if b.episode[j] == e.id and b.raw[j] < len(STATES) and STATES[b.raw[j]] == e.state:
                n += 1
    return n


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


def _episodes(rec: Recording, records: dict, last_block, lo: int, hi: int, start_s):
    """The recorded episodes that reach into [lo, hi], as a replay of that window shows
    them: one still open at hi ends there.  Returns (episodes, the session of each, whether
    the last one is open at hi)."""
    g_hi, b_hi, sno_hi = last_block
    j_hi = hi - g_hi
    open_id = b_hi.episode[j_hi] if 0 <= j_hi < b_hi.n else 0
    first_wall = start_s if start_s is not None else float("-inf")
    out = []
    open_at_end = False
    for (sno, eid), (r, b, g, _) in records.items():
        opened = rec.global_index(sno, r["opened_at"])
        if opened is None or opened > hi:
            continue
        e = derived.episode_from(r)
        if sno == sno_hi and eid == open_id:
            # open at the window's end: close it there, count its intervals so far
            e.end_wall_s = rec.wall_s(hi)
            e.intervals, last_i = _intervals_until(rec, records, sno, eid, e.state, r, hi)
            e.last_wall_s = rec.wall_s(last_i)
            open_at_end = True
        elif e.end_wall_s is None:
            # its session ended (a recorder stopped) with it open: it ends there
            last_i = _session_last(rec, sno, hi)
            e.end_wall_s = rec.wall_s(last_i)
        if e.end_wall_s < first_wall:
            continue
        out.append((e, sno))
    out.sort(key=lambda x: (x[0].start_wall_s, x[1], x[0].id))
    if open_at_end and out and out[-1][0].end_wall_s != rec.wall_s(hi):
        open_at_end = False
    return [e for e, _ in out], [sno for _, sno in out], open_at_end


def _intervals_until(rec, records, sno, eid, state, r, hi):
    """An episode's interval count up to index hi, and the last interval in its state."""
    n = r["intervals_at_open"]
    opened = rec.global_index(sno, r["opened_at"])
    last_i = opened
    for g, b, s in _blocks_of(rec, sno):
        for j in range(b.n):
            i = g + j
            if i <= opened or i > hi:
                continue
            if b.episode[j] == eid and STATES[b.raw[j]] == state:
                n += 1
                last_i = i
    return n, last_i


def _blocks_of(rec, sno):
    return [(g, b, s) for g, b, s in rec.summaries() if s == sno]


def _session_last(rec: Recording, sno: int, hi: int) -> int:
    firsts = rec.session_firsts
    nxt = firsts[sno + 1] - 1 if sno + 1 < len(firsts) else len(rec) - 1
    return min(nxt, hi)


# ---------------------------------------------------------------------------- the JSON
def _summary(rec: Recording, parts: list[_Partial], episodes: list[Episode], axis: Axis,
             how: str, replayed: int = 0, where: list[int] | None = None) -> Summary:
    """The JSON and the charts of the pieces added up; `where`: the range (of axis) each
    episode was found in (default: the first)."""
    series = Series(axis)
    states: dict[int, dict[str, float]] = {}
    gpu_info: dict[int, dict] = {}
    samples, covered, no_gpu_s = 0, 0.0, 0.0
    first_s = last_s = None
    devices: dict = {}
    disks: dict[str, DiskSums] = {}
    health = HealthSeries()
    for part in parts:
        health.merge(part.health)
        t = part.stretch
        samples += t.samples
        covered += t.covered_s
        no_gpu_s += t.no_gpu_s
        # the earliest and the latest sample: pieces are in recorded order, and a clock
        # that stepped back puts a later piece earlier
        if t.first_s is not None:
            first_s = t.first_s if first_s is None else min(first_s, t.first_s)
        if t.last_s is not None:
            last_s = t.last_s if last_s is None else max(last_s, t.last_s)
        for i, info in t.gpu_info.items():
            gpu_info.setdefault(i, info)
            per = states.setdefault(i, dict.fromkeys(GPU_STATES, 0.0))
            for k, v in t.states.get(i, {}).items():
                per[k] = per.get(k, 0.0) + v
        series.merge(part.series)
        for name, d in t.disks.items():
            into = disks.setdefault(name, DiskSums())
            for f in ("r_ios", "w_ios", "r_wait_ms", "w_wait_ms", "r_sectors", "w_sectors",
                      "busy_ms", "seconds", "intervals"):
                setattr(into, f, getattr(into, f) + getattr(d, f))
            if d.worst_ms > into.worst_ms:
                into.worst_ms, into.worst_at = d.worst_ms, d.worst_at
        devices = t.devices or devices
        for w in part.warnings:
            if w not in rec.warnings:
                rec.warnings.append(w)
    for per in states.values():      # no GPU could be read: each known GPU was unavailable
        per[UNAVAILABLE] += no_gpu_s
    for name in disks:
        series.disks.setdefault(name, _DiskChart())
    header = rec.header
    _place(rec, series, episodes, where or [0] * len(episodes), header.get("interval_s"))
    source = rec.source
    episodes_json = [episode_json(e) for e in episodes]
    data = {
        "version": __version__,
        "file": rec.path,
        "format_version": rec.version,
        "source": source.label,
        # not known to be live: a simulated session, or one whose header is damaged
        "simulated": source.kind != sources.LIVE,
        "source_kind": source.kind,
        "host_name": source.host_name if source.host_name is not None else header.get("host_name"),
        "kernel": header.get("kernel"),
        "recorded_by": header.get("tool_version"),
        "derived": how,
        "samples": samples,
        "start": iso_time(first_s) if first_s is not None else None,
        "end": iso_time(last_s) if last_s is not None else None,
        "start_s": first_s,
        "end_s": last_s,
        "duration_s": round(covered, 3),
        "interval_s": header.get("interval_s"),
        "segments": [{"start": iso_time(rec.wall_s(lo)), "end": iso_time(rec.wall_s(hi)),
                      "start_s": rec.wall_s(lo), "end_s": rec.wall_s(hi), "samples": hi - lo + 1}
                     for lo, hi in axis.ranges],
        "left_out": rec.left_out,
        "output_gaps": output_gaps(rec, first_s, last_s),
        "gpus": [gpu_info[i] for i in sorted(gpu_info)],
        "states": {str(i): {k: round(v, 3) for k, v in states[i].items()} for i in sorted(states)},
        "unavailable_s": round(no_gpu_s, 3),
        "episodes": episodes_json,
        "devices": _devices_json(disks, devices, episodes_json),
        "health": health_section(health),
        "warnings": list(rec.warnings),
    }
    for e in data["episodes"]:
        e["health"] = episode_health(health, devices, e)
    if how == RECORDED:
        data["replayed_samples"] = replayed
    losses: dict = {}
    if how == RECORDED:              # the pieces of one stretch
        losses[axis.ranges[0]] = [x for p in parts for x in p.losses]
    else:                            # a piece per stretch
        losses.update((r, p.losses) for r, p in zip(axis.ranges, parts))
    ledger = None
    if parts and all(p.ledger is not None for p in parts):
        ledger = Ledger()
        for p in parts:
            ledger.merge(p.ledger)
    return Summary(data=data, series=series, episodes=episodes, warnings=list(rec.warnings),
                   spans=[axis.ranges[r] for r in where or [0] * len(episodes)], ledger=ledger,
                   losses=losses)


def output_gaps(rec: Recording, first_s: float | None, last_s: float | None) -> list[dict]:
    """The times the recorder could not write (its output stalled: record/queued.py) that
    fall in the window: {"start", "end", "start_s", "end_s", "samples"} each, from the E
    frames' "gap" (checked here: a recording is read as untrusted input)."""
    out = []
    for session in rec.sessions:
        gap = session.end.get("gap") if isinstance(session.end, dict) else None
        if not isinstance(gap, dict):
            continue
        lo, hi, n = gap.get("from_s"), gap.get("to_s"), gap.get("samples")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                   for v in (lo, hi, n)) or hi < lo or n < 0:
            continue
        # after the window, unless it ended the recording (a stall until the recorder
        # stopped follows the last sample)
        after = last_s is not None and lo > last_s and session is not rec.sessions[-1]
        if (first_s is not None and hi < first_s) or after:
            continue
        out.append({"start": iso_time(lo), "end": iso_time(hi), "start_s": lo, "end_s": hi,
                    "samples": int(n)})
    return out


def _place(rec: Recording, series: Series, episodes: list[Episode], where: list[int],
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


def _mean(total: float, n: float) -> float | None:
    return round(total / n, 3) if n > 0 else None


def blamed_by(episodes: list[dict], listed, infos: dict) -> dict[str, list[dict]]:
    """The episodes that blame each listed device: those whose `devices` name it, or name
    a device over it that is not listed itself (a partition, where the list has its disk:
    the default filter lists disks).  Each episode once per device, in their order."""
    out: dict[str, list[dict]] = {}
    for e in episodes:
        named = []
        for name in e["devices"]:
            info = infos.get(name)
            if name not in listed and info is not None and info.parent in listed:
                name = info.parent
            if name in listed and name not in named:
                named.append(name)
        for name in named:
            out.setdefault(name, []).append(e)
    return out


def _devices_json(disks: dict[str, DiskSums], infos: dict, episodes: list[dict]) -> list[dict]:
    blamed = blamed_by(episodes, disks, infos)
    out = []
    for name, d in disks.items():
        eps = blamed.get(name, [])
        ios = d.r_ios + d.w_ios
        info = infos.get(name)
        out.append({
            "name": name,
            "display_name": info.display_name if info else name,
            "class": info.dev_class if info else "unknown",
            "mountpoints": list(info.mountpoints) if info else [],
            "await_ms": _mean(d.r_wait_ms + d.w_wait_ms, ios),
            "r_await_ms": _mean(d.r_wait_ms, d.r_ios),
            "w_await_ms": _mean(d.w_wait_ms, d.w_ios),
            "worst_await_ms": round(d.worst_ms, 3),
            "worst_at": iso_time(d.worst_at) if d.worst_at is not None else None,
            "r_s": _mean(d.r_ios, d.seconds),
            "w_s": _mean(d.w_ios, d.seconds),
            "rkb_s": _mean(d.r_sectors / 2, d.seconds),
            "wkb_s": _mean(d.w_sectors / 2, d.seconds),
            "util_pct": _mean(d.busy_ms / 10, d.seconds),
            "blamed_s": round(sum(e["duration_s"] for e in eps), 3),
            "blamed_by": [e["id"] for e in eps],
        })
    # the devices the episodes blame first, the most starved time first; then the worst
    # await (iostat's, over the window), then the worst interval's
    out.sort(key=lambda x: (-x["blamed_s"], -(x["await_ms"] or 0.0), -x["worst_await_ms"],
                            x["name"]))
    return out


def describe_gpus(indexes: list[int]) -> str:
    return gpu_ranges(indexes) if indexes else "-"


def finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)
