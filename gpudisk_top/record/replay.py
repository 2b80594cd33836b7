"""Replay: a recording's raw samples fed through today's model and detector.

    rec = Recording.open(path)
    replay = Replay(rec, thresholds)
    for model, verdict in replay.models(start_s, end_s):   # what the live screen showed
        ...
    replay.episodes        # the detector's episodes over that window

Nothing derived is stored in a recording, so a fix in the model or the detector changes
what old recordings show.  The detector learns as it goes (device baselines, peaks), so a
window's verdicts depend on where the detector starts: models() starts it `warmup_s`
before the window (default 10 minutes) and yields nothing for the warm-up, which is what
a screen opened at that time would have learned; pass warmup_s=None to start at the
beginning of the recording.  Each recorder run (session) starts with no previous sample,
as the live tool did.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpudisk_top.model.detect import Detector, Episode, Thresholds, Verdict
from gpudisk_top.model.snapshot import Model
from gpudisk_top.record.reader import Recording

WARMUP_S = 600.0


class Replay:
    def __init__(self, recording: Recording, thresholds: Thresholds | None = None,
                 warmup_s: float | None = WARMUP_S) -> None:
        self.recording = recording
        self.thresholds = thresholds
        self.warmup_s = warmup_s
        self.detector: Detector | None = None
        self._episodes: list[Episode] = []

    @property
    def episodes(self) -> list[Episode]:
        """The last models() pass's episodes that reach into its window."""
        return list(self._episodes)

    def models(self, start_s: float | None = None, end_s: float | None = None,
               close: bool = True) -> Iterator[tuple[Model, Verdict]]:
        """(Model, Verdict) for every sample with start_s <= wall_s <= end_s, each Model
        the interval from the sample before it (the first of a session has no rates).
        With close, an episode still open at the end is closed there."""
        rec = self.recording
        det = Detector(self.thresholds)
        self.detector = det
        self._episodes = []
        if not len(rec):
            return
        lo = 0 if start_s is None else rec.seek(start_s)
        first = lo
        if self.warmup_s is None:
            first = 0
        elif start_s is not None:
            first = min(lo, rec.seek(start_s - self.warmup_s))
        # the sample before the first one fed gives the first interval its rates
        begin = max(0, first - 1)
        last = None
        last_wall = None
        win_start = start_s if start_s is not None else float("-inf")
        for i, sample in rec.samples(begin):
            if end_s is not None and sample.wall_s > end_s:
                break
            if rec.starts_session(i):
                last = None  # a new recorder run: no interval ends at its first sample
            if i < first:
                last = sample
                continue
            model = Model.new(sample, last)
            verdict = det.feed(model)
            last = sample
            if sample.wall_s < win_start:
                continue
            last_wall = sample.wall_s
            yield model, verdict
        if close and last_wall is not None:
            det.close(last_wall)
        self._episodes = [e for e in det.episodes
                          if (e.end_wall_s is None or e.end_wall_s >= win_start)]
