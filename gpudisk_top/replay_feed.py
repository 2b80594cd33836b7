"""Replay: a recording fed through the same model, detector and history as live mode.

ReplayFeed has the attributes the dashboard reads from a live Feed (history, detector,
interval_s, last_update_mono, last_error) plus a position: seek(i) rebuilds the detector
and the timeline from a warm-up before i (so verdicts are recomputed from the raw
counters by the current model, and a step back equals a fresh seek), step() moves one
sample forward.  UI-free.

Samples are stepped through in recorded order, never by wall time, and the detector
starts afresh where Replay's does (record.replay.breaks(): a new session, a clock step),
so the screen, `report` and `export` agree on a recording whose clock stepped.
Episodes are remembered with the sample where each began, so n/N land on it even when the
wall clock went back.
"""

from __future__ import annotations

import time

from gpudisk_top.feed import INTERVALS_S, SelfStats, Update
from gpudisk_top.model.detect import Detector, Thresholds
from gpudisk_top.model.history import History
from gpudisk_top.model.snapshot import Model
from gpudisk_top.record.replay import breaks

WARMUP_SAMPLES = 300      # samples replayed before the position: baselines, hysteresis, timeline
SPEEDS = (1, 10, 60)


class ReplayFeed:
    def __init__(self, recording, thresholds: Thresholds | None = None,
                 history_capacity: int = 3600) -> None:
        self.rec = recording
        self.thresholds = thresholds
        self.capacity = history_capacity
        self.interval_s = float(recording.header.get("interval_s") or 1.0)
        self.last_update_mono: float | None = None
        self.last_error: str | None = None
        self.index = -1
        self.detector = Detector(thresholds)
        self.history = History(history_capacity)
        self._last = None
        self._past: list = []      # episodes of the detectors a break replaced
        self._starts: dict[int, int] = {}   # id(episode) -> the sample where it began
        self._life = 0             # the first sample the current detector was fed
        self._seq = 0
        self._self = SelfStats()   # the header's "self": this replaying process's cost

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
    @property
    def episodes(self) -> list:
        """Every episode since the last seek's warm-up, across detector restarts."""
        return self._past + self.detector.episodes

    def _restart(self, i: int) -> None:
        det = self.detector
        if det.episodes:
            if self._last is not None:
                det.close(self._last.wall_s)
            self._past.extend(det.episodes)
        self.detector = Detector(self.thresholds)
        self._life = i

    def _onset(self, ep, i: int, life: int) -> int:
        """The sample where an episode that opened at sample i began: the first at or
        after its start time, a few samples back (`enter_intervals`), never before the
        detector's first sample (wall times are compared only within a detector's life,
        where the clock did not step)."""
        j = i
        while j > life and self.rec.wall_s(j - 1) >= ep.start_wall_s:
            j -= 1
        return j

    def _feed(self, i: int) -> Update:
        sample = self.rec.sample(i)
        if self._last is not None and breaks(self.rec, i, self._last, sample):
            self._restart(i)
        last = None if (self._last is None or self.rec.starts_session(i)) else self._last
        model = Model.new(sample, last)
        verdict = None
        if last is not None:
            before = len(self.detector.episodes)
            verdict = self.detector.feed(model)
            for ep in self.detector.episodes[before:]:
                self._starts[id(ep)] = self._onset(ep, i, self._life)
            self.history.append(model, verdict)
        self._last = sample
        self.index = i
        self._seq += 1
        pending = self.detector.pending
        self.last_update_mono = time.monotonic()
        return Update(seq=self._seq, model=model, verdict=verdict,
                      episodes=self.episodes,
                      pending_intervals=pending[1] if pending else 0)

    def seek(self, i: int, warmup: int = WARMUP_SAMPLES) -> Update:
        """Show sample i: replay from `warmup` samples before it with a fresh detector."""
        i = min(max(0, i), len(self.rec) - 1)
        self.detector = Detector(self.thresholds)
        self.history = History(self.capacity)
        self._last = None
        self._past = []
        self._starts = {}
        start = max(0, i - warmup)
        self._life = start
        update = None
        for j in range(start, i + 1):
            update = self._feed(j)
        return self._with_self(update)

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
    def next_episode_index(self, direction: int) -> int | None:
        """The sample where the next (+1) or previous (-1) starvation episode starts, as
        the current model finds it from here on (forward) or in the warm-up (backward)."""
        here = self.index
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
        """The samples where episodes begin, found replaying [lo - warm-up, hi] with
        scratch detectors (afresh at each break, as _feed)."""
        det = Detector(self.thresholds)
        life = max(0, lo - WARMUP_SAMPLES)
        last = None
        starts: list[int] = []
        for j in range(life, hi + 1):
            sample = self.rec.sample(j)
            if last is not None and breaks(self.rec, j, last, sample):
                det, life = Detector(self.thresholds), j
            if last is not None and not self.rec.starts_session(j):
                before = len(det.episodes)
                det.feed(Model.new(sample, last))
                starts += [self._onset(ep, j, life) for ep in det.episodes[before:]]
                if stop_after is not None and any(k > stop_after for k in starts):
                    return sorted(k for k in starts if k > stop_after)
            last = sample
        if stop_after is not None:
            return sorted(k for k in starts if k > stop_after)
        return sorted(starts)


__all__ = ["ReplayFeed", "SPEEDS", "INTERVALS_S"]
