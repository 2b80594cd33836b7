"""Replay: a recording fed through the same model, detector and history as live mode.

ReplayFeed has the attributes the dashboard reads from a live Feed (history, detector,
interval_s, last_update_mono, last_error) plus a position: seek(i) rebuilds the detector
and the timeline from a warm-up before i (so verdicts are recomputed from the raw
counters by the current model, and a step back equals a fresh seek), step() moves one
sample forward.  UI-free.
"""

from __future__ import annotations

import time

from gpudisk_top.feed import INTERVALS_S, SelfStats, Update
from gpudisk_top.model.detect import Detector, Thresholds
from gpudisk_top.model.history import History
from gpudisk_top.model.snapshot import Model

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
    def _feed(self, i: int) -> Update:
        sample = self.rec.sample(i)
        last = None if (self._last is None or self.rec.starts_session(i)) else self._last
        model = Model.new(sample, last)
        verdict = None
        if last is not None:
            verdict = self.detector.feed(model)
            self.history.append(model, verdict)
        self._last = sample
        self.index = i
        self._seq += 1
        pending = self.detector.pending
        self.last_update_mono = time.monotonic()
        return Update(seq=self._seq, model=model, verdict=verdict,
                      episodes=list(self.detector.episodes),
                      pending_intervals=pending[1] if pending else 0)

    def seek(self, i: int, warmup: int = WARMUP_SAMPLES) -> Update:
        """Show sample i: replay from `warmup` samples before it with a fresh detector."""
        i = min(max(0, i), len(self.rec) - 1)
        self.detector = Detector(self.thresholds)
        self.history = History(self.capacity)
        self._last = None
        start = max(0, i - warmup)
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
        here = self.rec.wall_s(self.index)
        if direction < 0:
            starts = [e.start_wall_s for e in self.detector.episodes if e.start_wall_s < here - 1e-6]
            if starts:
                return self.rec.seek(max(starts))
            # further back than the warm-up: scan backwards a window at a time
            lo = self.index
            while lo > 0:
                hi, lo = lo, max(0, lo - 3600)
                found = self._episodes_between(lo, hi)
                before = [s for s in found if s < here - 1e-6]
                if before:
                    return self.rec.seek(max(before))
            return None
        found = self._episodes_between(self.index, len(self.rec) - 1, stop_after=here)
        return self.rec.seek(found[0]) if found else None

    def _episodes_between(self, lo: int, hi: int, stop_after: float | None = None) -> list[float]:
        """Episode start times found replaying [lo - warm-up, hi] with a scratch detector."""
        det = Detector(self.thresholds)
        last = None
        starts: list[float] = []
        for j in range(max(0, lo - WARMUP_SAMPLES), hi + 1):
            sample = self.rec.sample(j)
            if last is not None and not self.rec.starts_session(j):
                det.feed(Model.new(sample, last))
                new = [e.start_wall_s for e in det.episodes if e.start_wall_s not in starts]
                starts.extend(new)
                if stop_after is not None and any(s > stop_after + 1e-6 for s in starts):
                    return sorted(s for s in starts if s > stop_after + 1e-6)
            last = sample
        if stop_after is not None:
            return sorted(s for s in starts if s > stop_after + 1e-6)
        return sorted(starts)


__all__ = ["ReplayFeed", "SPEEDS", "INTERVALS_S"]
