"""How often the processes are read: every sample while something needs them, every
DETAIL_SLOW_S while nothing does (issue 41).

The per-process detail (the job's processes' stat, io, schedstat, fds and devices, the
busiest others, the followed busiest readers) is most of a sample's cost on a large node,
and the detector needs it only to say why a job is starved.  So a Sampler given a
DetailCadence reads it every sample only while

  - its caller's last verdict asks for it (`wanted`: a job starved, an episode open;
    session/detail.py sets it from the step),
  - this sample's cheap figures, read before the processes, say the interval may be
    starved (`needs(sample, last)`: a job's GPU under the detector's busy threshold, a
    device the job reads with a queue; verdict/detail.py owns that rule and its
    thresholds, which this layer cannot import), so that the first starved interval
    already has the processes read at its end,
  - the set of GPU processes changed, the I/O view is open, or the session has fewer than
    two reads (the first interval has rates);

and otherwise every DETAIL_SLOW_S.  A sample that does not read them carries the last
read's processes (the same dict) and says how old they are (Sample.procs_age_s);
model/detail.py is the one rule for what rates such an interval shows.  No cadence
(Sampler.detail None, the default: --once, the tests' bare samplers): every sample.
"""

from __future__ import annotations

DETAIL_SLOW_S = 5.0     # the processes' cadence while every job is healthy

FIRST = "the session's first reads"
EVERY = "an interval as long as the cadence"
ASKED = "the last verdict"
CADENCE = "the slow cadence"


class DetailCadence:
    """When a Sampler reads every process (see the module's doc).

    needs(sample, last) -> str | None: why this sample's cheap figures need the processes
    (None: they do not); it must not raise (verdict/detail.py DetailWatch)."""

    def __init__(self, needs=None, slow_s: float = DETAIL_SLOW_S) -> None:
        self.needs = needs
        self.slow_s = slow_s
        self.wanted = False              # set by the caller from its last verdict
        self.reads = 0                   # samples that read the processes
        self.last_read_mono: float | None = None
        self.reason: str | None = None   # why the latest sample read them; None: it did not

    def due(self, sample, last, interval_s: float, changed: bool, io_view: bool) -> str | None:
        """Why `sample` reads every process (and it is counted as read), or None: it
        carries the last read.  changed: its GPU processes are not the last read's."""
        if self.reads < 2 or last is None or self.last_read_mono is None:
            why = FIRST
        elif interval_s >= self.slow_s:
            why = EVERY       # (the dashboard's + to 5 s or more): no slower cadence to keep
        elif changed:
            why = "new GPU processes"
        elif io_view:
            why = "the I/O view"
        elif self.wanted:
            why = ASKED
        else:
            why = self.needs(sample, last) if self.needs is not None else None
            # a sample a little early on the grid still counts as the cadence's
            if why is None and sample.mono_s - self.last_read_mono >= self.slow_s - interval_s / 2:
                why = CADENCE
        self.reason = why
        if why is not None:
            self.reads += 1
            self.last_read_mono = sample.mono_s
        return why

    @staticmethod
    def read_age_s(why: str) -> float | None:
        """Sample.procs_age_s of a sample that read the processes because of `why`: 0.0
        for the slow cadence's own read, None for one that every sample would make."""
        return 0.0 if why == CADENCE else None

    def carried_age_s(self, mono_s: float) -> float:
        """Sample.procs_age_s of a sample at mono_s that carries the last read."""
        return max(0.0, mono_s - self.last_read_mono)
