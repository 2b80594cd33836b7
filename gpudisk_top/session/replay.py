"""Replay: a recording's raw samples fed through today's model and detector, the one
engine behind `report`, `export` (Replay: iterate a window) and the replay screen
(ReplayFeed: seek and step), each sample through model.step.Stepper as live mode does.

    rec = Recording.open(path)
    replay = Replay(rec, thresholds)
    for model, verdict in replay.models(start_s, end_s):   # what the live screen showed
        ...
    replay.episodes        # the detector's episodes over that window
    replay.stepper.ledger  # the stall ledger of every sample fed, warm-up included
    for i, model, verdict, loss in replay.run([(lo, hi)]): ...    # by sample index

Nothing derived is stored in a recording, so a fix in the model or the detector changes
what old recordings show.  The detector learns as it goes (device baselines, peaks), so a
window's verdicts depend on where the detector starts: models() starts it `warmup_s`
before the window (default 10 minutes) and yields nothing for the warm-up, which is what
a screen opened at that time would have learned; pass warmup_s=None to start at the
beginning of the recording.

Samples are fed in recorded order, never by wall time: a window is the index ranges
Recording.ranges() gives, and a wall clock that stepped back or forward does not reorder
or drop anything.  A detector only ever sees consecutive samples of one recorder run
over a steady clock: each session starts with no previous sample and a fresh detector,
as the live tool did, and so does a clock step inside a session (breaks()), since an
episode's start and end are wall times, and one across a step would last weeks or less
than nothing.  The episode open at a break ends at the last sample before it.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator

from gpudisk_top.verdict.detect import Detector, Episode, Thresholds, Verdict
from gpudisk_top.verdict.ledger import IntervalLoss
from gpudisk_top.model.history import History
from gpudisk_top.model.snapshot import Model
from gpudisk_top.verdict.step import Stepper, StepperViews, clock_stepped
from gpudisk_top.record.reader import Recording
from gpudisk_top.session.live import SelfStats, Update

# how far before a position the detector starts (its device baselines, peaks and
# hysteresis): what a screen opened then would have learned.  The one warm-up of report,
# export and the replay screen.
WARMUP_S = 600.0


def breaks(rec: Recording, i: int, last, sample) -> bool:
    """Must the detector start afresh at sample i, fed right after `last` (the sample
    before it)?  At a session's first sample, and where the wall clock stepped.  The one
    rule for Replay and the replay screen (which also start afresh after samples they did
    not feed)."""
    return rec.starts_session(i) or (last is not None and clock_stepped(last, sample))


def warm_start(rec: Recording, lo: int, warmup_s: float | None, after: int = -1,
               since_s: float | None = None) -> int:
    """Where to start feeding to show sample lo: warmup_s before it (before since_s when
    that is earlier), within lo's stretch of a steady clock (Recording.run_of), and after
    `after` (the sample last fed).  warmup_s None: right after `after` (from the start of
    the recording when nothing was fed)."""
    if warmup_s is None:
        return after + 1
    a, _ = rec.run_of(lo)
    ref = rec.wall_s(lo) if since_s is None else min(rec.wall_s(lo), since_s)
    begin = bisect.bisect_left(rec.walls, ref - warmup_s, a, lo)
    return max(begin, after + 1)


def prime_at(rec: Recording, stepper: Stepper, start: int) -> None:
    """Ready `stepper` to feed from sample `start`: the sample before it gives the first
    interval its rates, unless `start` begins a session.  The one rule for Replay and the
    replay screen."""
    stepper.prime(rec.sample(start - 1) if start > 0 and not rec.starts_session(start) else None)


class Replay:
    def __init__(self, recording: Recording, thresholds: Thresholds | None = None,
                 warmup_s: float | None = WARMUP_S) -> None:
        self.recording = recording
        self.thresholds = thresholds
        self.warmup_s = warmup_s
        self.stepper: Stepper | None = None
        self.breaks_at: list[int] = []       # the last pass's samples where breaks() held
        self._episodes: list[Episode] = []

    @property
    def detector(self) -> Detector | None:
        return self.stepper.detector if self.stepper is not None else None

    @property
    def episodes(self) -> list[Episode]:
        """The last pass's episodes that reach into its window."""
        return list(self._episodes)

    @property
    def all_episodes(self) -> list[Episode]:
        """Every episode the last pass's detectors found, warm-up included, in order."""
        return self.stepper.episodes if self.stepper is not None else []

    @property
    def open_at_end(self) -> bool:
        """Is an episode still open (of any job's detector)?"""
        return self.stepper is not None and bool(self.stepper.open_episodes)

    def close(self, end_wall_s: float) -> None:
        if self.stepper is not None:
            self.stepper.close(end_wall_s)

    def models(self, start_s: float | None = None, end_s: float | None = None,
               close: bool = True) -> Iterator[tuple[Model, Verdict]]:
        """(Model, Verdict) for every sample with start_s <= wall_s <= end_s, in recorded
        order, each Model the interval from the sample before it (the first of a session
        has no rates): what the screens showed (run() gives each interval's loss too).
        With close, an episode still open at the end is closed there."""
        ranges = self.recording.ranges(start_s, end_s)
        for _, model, verdict, _loss in self.run(ranges, start_s, close):
            yield model, verdict

    def run(self, ranges: list[tuple[int, int]], since_s: float | None = None,
            close: bool = True) -> Iterator[tuple[int, Model, Verdict, IntervalLoss]]:
        """(index, Model, Verdict, IntervalLoss) for the samples of each (first, last)
        index range, in order; each range is warmed up over the samples of its clock's
        stretch up to warmup_s before it (before max(since_s, its first sample's time)), or
        from the start (warmup_s None).  `episodes` keeps those that end at or after
        since_s; the stepper's ledger counts the warm-up too, each episode by its id."""
        rec = self.recording
        stepper = self.stepper = Stepper(self.thresholds)
        self.breaks_at = []
        self._episodes = []
        fed = -1               # the index of the sample last fed
        last_wall = None       # the last sample yielded
        for lo, hi in ranges:
            begin = warm_start(rec, lo, self.warmup_s, fed, since_s)
            continuous = fed >= 0 and begin == fed + 1
            if not continuous:
                stepper.restart()
                prime_at(rec, stepper, begin)
            for i, sample in rec.samples(begin, hi + 1):
                broke = breaks(rec, i, stepper.last, sample)
                if broke:
                    self.breaks_at.append(i)
                    if i != begin or continuous:
                        stepper.restart()
                stepper.cadence_s = rec.interval_at(i)     # the gap rule's (verdict/gaps.py)
                model, verdict, loss = stepper.step(sample, fresh=rec.starts_session(i))
                fed = i
                if i < lo:
                    continue
                last_wall = sample.wall_s
                yield i, model, verdict, loss
        if close and last_wall is not None:
            self.close(last_wall)
        first = since_s if since_s is not None else float("-inf")
        self._episodes = [e for e in self.all_episodes
                          if e.end_wall_s is None or e.end_wall_s >= first]


SPEEDS = (1, 10, 60)


class ReplayFeed(StepperViews):
    """The replay screen's source: what the dashboard reads from a live Feed (history,
    detector, interval_s, last_update_mono, last_error), plus a position.

    seek(i) replays from warm_start() before i with a fresh Stepper, so verdicts are
    recomputed from the raw counters by the current model and a step back equals a fresh
    seek; step() moves one sample forward.  The detector starts afresh where Replay's does
    (breaks()), so the screen, `report` and `export` agree about every moment.  Episodes
    are remembered with the sample where each began, so n/N land on it even when the wall
    clock went back.  know() gives it the whole recording's episodes (the screen asks
    report's summary for them when it opens): then `known` lists them from the start and
    n/N go from one to the next; until then n/N find them by replaying ahead.  UI-free.
    """

    def __init__(self, recording: Recording, thresholds: Thresholds | None = None,
                 history_capacity: int = 3600) -> None:
        self.rec = recording
        self.thresholds = thresholds
        self.capacity = history_capacity
        # the session header's interval: what a sample that does not say its own was
        # taken at (recorded before samples said it, or by a recorder that never changes it)
        self.header_interval_s = float(recording.header.get("interval_s") or 1.0)
        self.interval_s = self.header_interval_s   # the shown sample's (_feed)
        self.last_update_mono: float | None = None
        self.last_error: str | None = None
        self.index = -1
        self.stepper = Stepper(thresholds)
        self.history = History(history_capacity)
        self._starts: dict[int, int] = {}   # id(episode) -> the sample where it began
        self._life = 0             # the first sample the current detector was fed
        self._seq = 0
        self._self = SelfStats()   # the header's "self": this replaying process's cost
        # the recording's episodes, each with the sample where it began (know()); None
        # until known
        self._known: list[tuple[Episode, int]] | None = None

    def __len__(self) -> int:
        return len(self.rec)

    # the live Feed's controls, as replay understands them
    def start(self) -> None:
        pass

    def stop(self, timeout_s: float = 0.0) -> None:
        pass

    def set_interval(self, interval_s: float) -> None:
        pass  # a recording's interval is what it was recorded at

    def step_interval(self, direction: int) -> float:
        return self.interval_s

    # ------------------------------------------------------------------ position
    def _onset(self, ep: Episode, i: int, life: int) -> int:
        """The sample where an episode that opened at sample i began: the first at or
        after its start time, a few samples back (`enter_intervals`), never before the
        detector's first sample (wall times are compared only within a detector's life,
        where the clock did not step)."""
        j = i
        while j > life and self.rec.wall_s(j - 1) >= ep.start_wall_s:
            j -= 1
        return j

    def _feed_one(self, stepper: Stepper, i: int,
                  life: int) -> tuple[Model, Verdict, list[tuple[Episode, int]], int]:
        """Sample i through `stepper`: its Model, Verdict, the episodes it opened with the
        samples where they began, and the detector's (new) first sample."""
        sample = self.rec.sample(i)
        if stepper.last is not None and breaks(self.rec, i, stepper.last, sample):
            stepper.restart()
            life = i
        before = stepper.next_id
        stepper.cadence_s = self.rec.interval_at(i)        # the gap rule's (verdict/gaps.py)
        model, verdict, _loss = stepper.step(sample, fresh=self.rec.starts_session(i))
        opened = [(ep, self._onset(ep, i, life)) for ep in stepper.episodes if ep.id >= before]
        return model, verdict, opened, life

    def _feed(self, i: int) -> Update:
        model, verdict, opened, self._life = self._feed_one(self.stepper, i, self._life)
        self.interval_s = model.sample.interval_s or self.header_interval_s
        for ep, j in opened:
            self._starts[id(ep)] = j
        self.history.append(model, verdict)
        self.index = i
        self._seq += 1
        self.last_update_mono = time.monotonic()
        return Update(seq=self._seq, model=model, verdict=verdict, episodes=self.episodes,
                      pending_intervals=self.stepper.pending_intervals)

    def seek(self, i: int) -> Update:
        """Show sample i: replay from the warm-up before it with a fresh detector."""
        i = min(max(0, i), len(self.rec) - 1)
        self.stepper = Stepper(self.thresholds)
        self.history = History(self.capacity)
        self._starts = {}
        start = self._life = warm_start(self.rec, i, WARMUP_S)
        prime_at(self.rec, self.stepper, start)
        update = None
        for j in range(start, i + 1):
            update = self._feed(j)
        return self._with_self(update)

    def shown_at(self, i: int) -> int:
        """Where to open the screen asked for sample i: i, unless i is the first sample of
        a session (no interval ends there: no rates, nothing to judge the disks by) and the
        session goes on, then the interval after it.  Clamped to the recording."""
        i = min(max(0, i), len(self.rec) - 1)
        if (self.rec.starts_session(i) and i + 1 < len(self.rec)
                and not self.rec.starts_session(i + 1)):
            return i + 1
        return i

    def seek_time(self, wall_s: float) -> Update:
        return self.seek(self.rec.index_at(wall_s))

    def step(self) -> Update | None:
        """One sample forward; None at the end of the recording."""
        if self.index + 1 >= len(self.rec):
            return None
        return self._with_self(self._feed(self.index + 1))

    def _with_self(self, update: Update) -> Update:
        update.self_cpu_pct, update.self_rss_mb = self._self.read()
        return update

    def back(self, n: int = 1) -> Update:
        return self.seek(self.index - n)

    # ------------------------------------------------------------------ episodes
    def know(self, episodes: list[Episode], spans: list[tuple[int, int]] | None = None) -> None:
        """The whole recording's episodes (report's summary of it) and, per episode, the
        (first, last) samples of the stretch of a steady clock it was found in (wall times
        alone are ambiguous once the clock went back over itself): each is placed at the
        first sample of its stretch at or after its start."""
        rec = self.rec
        known = []
        for k, ep in enumerate(episodes):
            if spans is not None and k < len(spans):
                a, b = spans[k]
                onset = min(b, bisect.bisect_left(rec.walls, ep.start_wall_s, a, b + 1))
            else:
                onset = rec.index_at(ep.start_wall_s)
            known.append((ep, onset))
        self._known = sorted(known, key=lambda x: x[1])

    @property
    def known(self) -> list[Episode] | None:
        """The recording's episodes from know(), in order; None before."""
        return None if self._known is None else [ep for ep, _ in self._known]

    def onset_of(self, episode: Episode) -> int:
        """The sample where a known episode began (else the one its start time shows)."""
        for ep, onset in self._known or ():
            if ep is episode:
                return onset
        return self.rec.index_at(episode.start_wall_s)

    def next_episode_index(self, direction: int) -> int | None:
        """The sample where the next (+1) or previous (-1) starvation episode starts: of the
        known episodes (know()), the next or previous one whose confirmation (its start and
        `enter_intervals`, where the screen lands on it) is beyond this sample; before they
        are known, as the current model finds them from here on (forward) or in the
        warm-up (backward)."""
        here = self.index
        if self._known is not None:
            enter = (self.thresholds or Thresholds()).enter_intervals
            lands = [(min(len(self.rec) - 1, onset + enter), onset) for _, onset in self._known]
            if direction > 0:
                return next((onset for at, onset in lands if at > here), None)
            return next((onset for at, onset in reversed(lands) if at < here), None)
        if direction < 0:
            starts = [self._starts[id(e)] for e in self.episodes
                      if id(e) in self._starts and self._starts[id(e)] < here]
            if starts:
                return max(starts)
            # further back than the warm-up: scan backwards a window at a time
            lo = self.index
            while lo > 0:
                hi, lo = lo, max(0, lo - 3600)
                before = [j for j in self._episodes_between(lo, hi) if j < here]
                if before:
                    return max(before)
            return None
        found = self._episodes_between(self.index, len(self.rec) - 1, stop_after=here)
        return found[0] if found else None

    def _episodes_between(self, lo: int, hi: int, stop_after: int | None = None) -> list[int]:
        """The samples where episodes begin, found replaying [warm-up before lo, hi] with
        a scratch Stepper (afresh at each break, as _feed)."""
        scratch = Stepper(self.thresholds)
        life = warm_start(self.rec, lo, WARMUP_S)
        prime_at(self.rec, scratch, life)
        starts: list[int] = []
        for j in range(life, hi + 1):
            _, _, opened, life = self._feed_one(scratch, j, life)
            starts += [k for _, k in opened]
            if stop_after is not None and any(k > stop_after for k in starts):
                break
        if stop_after is not None:
            return sorted(k for k in starts if k > stop_after)
        return sorted(starts)


__all__ = ["Replay", "ReplayFeed", "SPEEDS", "WARMUP_S", "breaks", "warm_start"]
