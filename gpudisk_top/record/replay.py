"""Replay: a recording's raw samples fed through today's model and detector.

    rec = Recording.open(path)
    replay = Replay(rec, thresholds)
    for model, verdict in replay.models(start_s, end_s):   # what the live screen showed
        ...
    replay.episodes        # the detector's episodes over that window
    for i, model, verdict in replay.run([(lo, hi)]): ...    # by sample index

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
from collections.abc import Iterator

from gpudisk_top.model.detect import Detector, Episode, Thresholds, Verdict
from gpudisk_top.model.snapshot import Model
from gpudisk_top.record.reader import Recording

WARMUP_S = 600.0
# A wall clock that moved this much more or less than the monotonic clock between two
# samples stepped (NTP after boot, a VM resumed, a suspended host): beyond NTP's slewing
# (at most 0.5 ms a second) and a late sample, well inside what would skew an episode.
CLOCK_STEP_S = 10.0


def clock_stepped(last, sample) -> bool:
    """Did the wall clock step between two consecutive samples of a session?"""
    return abs((sample.wall_s - last.wall_s) - (sample.mono_s - last.mono_s)) > CLOCK_STEP_S


def breaks(rec: Recording, i: int, last, sample) -> bool:
    """Must the detector start afresh at sample i, fed right after `last` (the sample
    before it)?  At a session's first sample, and where the wall clock stepped.  The one
    rule for Replay and the replay screen (which also start afresh after samples they did
    not feed)."""
    return rec.starts_session(i) or (last is not None and clock_stepped(last, sample))


class Replay:
    def __init__(self, recording: Recording, thresholds: Thresholds | None = None,
                 warmup_s: float | None = WARMUP_S) -> None:
        self.recording = recording
        self.thresholds = thresholds
        self.warmup_s = warmup_s
        self.detector: Detector | None = None
        self.breaks_at: list[int] = []       # the last pass's samples where breaks() held
        self._retired: list[Episode] = []    # episodes of the detectors a break replaced
        self._episodes: list[Episode] = []

    @property
    def episodes(self) -> list[Episode]:
        """The last pass's episodes that reach into its window."""
        return list(self._episodes)

    @property
    def all_episodes(self) -> list[Episode]:
        """Every episode the last pass's detectors found, warm-up included, in order."""
        return self._retired + (self.detector.episodes if self.detector is not None else [])

    @property
    def open_at_end(self) -> bool:
        """Is the last detector's latest episode still open?"""
        det = self.detector
        return det is not None and bool(det.episodes) and det.episodes[-1].end_wall_s is None

    def close(self, end_wall_s: float) -> None:
        if self.detector is not None:
            self.detector.close(end_wall_s)

    def models(self, start_s: float | None = None, end_s: float | None = None,
               close: bool = True) -> Iterator[tuple[Model, Verdict]]:
        """(Model, Verdict) for every sample with start_s <= wall_s <= end_s, in recorded
        order, each Model the interval from the sample before it (the first of a session
        has no rates).  With close, an episode still open at the end is closed there."""
        ranges = self.recording.ranges(start_s, end_s)
        for _, model, verdict in self.run(ranges, start_s, close):
            yield model, verdict

    def run(self, ranges: list[tuple[int, int]], since_s: float | None = None,
            close: bool = True) -> Iterator[tuple[int, Model, Verdict]]:
        """(index, Model, Verdict) for the samples of each (first, last) index range, in
        order; each range is warmed up over the samples of its clock's stretch up to
        warmup_s before it (before max(since_s, its first sample's time)), or from the
        start (warmup_s None).  `episodes` keeps those that end at or after since_s."""
        rec = self.recording
        self.detector = None
        self.breaks_at = []
        self._retired = []
        self._episodes = []
        prev = None            # the sample last fed
        fed = -1               # its index
        last_wall = None       # the last sample yielded
        for lo, hi in ranges:
            begin = self._warm_start(lo, fed, since_s)
            continuous = prev is not None and begin == fed + 1
            last = prev if continuous else None
            if not continuous and begin > 0 and not rec.starts_session(begin):
                last = rec.sample(begin - 1)       # gives the first interval its rates
            for i, sample in rec.samples(begin, hi + 1):
                broke = breaks(rec, i, last, sample)
                if broke:
                    self.breaks_at.append(i)
                if self.detector is None or (i == begin and not continuous) or broke:
                    self._restart(prev)
                if rec.starts_session(i):
                    last = None     # a new recorder run: no interval ends at its first sample
                model = Model.new(sample, last)
                verdict = self.detector.feed(model)
                last = prev = sample
                fed = i
                if i < lo:
                    continue
                last_wall = sample.wall_s
                yield i, model, verdict
        if close and last_wall is not None:
            self.close(last_wall)
        first = since_s if since_s is not None else float("-inf")
        self._episodes = [e for e in self.all_episodes
                          if e.end_wall_s is None or e.end_wall_s >= first]

    def _restart(self, last) -> None:
        """A fresh detector; the one before ends its open episode at the last sample fed."""
        if self.detector is not None:
            if last is not None:
                self.detector.close(last.wall_s)
            self._retired.extend(self.detector.episodes)
        self.detector = Detector(self.thresholds)

    def _warm_start(self, lo: int, fed: int, since_s: float | None) -> int:
        """Where to start feeding for a range that starts at lo: not before the samples
        already fed, and within lo's stretch of a steady clock."""
        if self.warmup_s is None:
            return fed + 1
        rec = self.recording
        a, _ = rec.run_of(lo)
        ref = rec.wall_s(lo) if since_s is None else min(rec.wall_s(lo), since_s)
        begin = bisect.bisect_left(rec._idx.walls, ref - self.warmup_s, a, lo)
        return max(begin, fed + 1)
