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

and otherwise every DETAIL_SLOW_S.  While the reads come at that slow cadence, the node's
scans that look beyond the job (who else does block I/O, collect/ioscan.py; who else
takes the CPUs, collect/procio.py) come every SCANS_SLOW_S instead of their own few
seconds: they name the neighbours a starved job's verdict blames, and on a large node a
scan reads hundreds of processes' files.  A read for any other reason (a job may be
starved) brings their own cadence back, so the first such read scans at once when the
last scan is older than that cadence: the neighbours of the first starved interval are
found as fresh as before.  A sample that does not read them carries the last
read's processes (the same dict) and says how old they are (Sample.procs_age_s);
model/detail.py is the one rule for what rates such an interval shows.  No cadence
(Sampler.detail None, the default: --once, the tests' bare samplers): every sample.
"""

from __future__ import annotations

DETAIL_SLOW_S = 5.0     # the processes' cadence while every job is healthy
SCANS_SLOW_S = 15.0     # the node's scans' cadence then (a multiple of DETAIL_SLOW_S)

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

    def scans_every_s(self) -> float | None:
        """How often the node's scans come while this sample's read is the slow
        cadence's (SCANS_SLOW_S); None: at their own cadence (a job may be starved, or
        this sample does not read the processes).  Less half a read's spacing: the
        reads come on the DETAIL_SLOW_S grid, a little early or late, and the scan
        belongs to the read nearest SCANS_SLOW_S after the last."""
        return SCANS_SLOW_S - self.slow_s / 2 if self.reason == CADENCE else None

    @staticmethod
    def read_age_s(why: str) -> float | None:
        """Sample.procs_age_s of a sample that read the processes because of `why`: 0.0
        for the slow cadence's own read, None for one that every sample would make."""
        return 0.0 if why == CADENCE else None

    def carried_age_s(self, mono_s: float) -> float:
        """Sample.procs_age_s of a sample at mono_s that carries the last read."""
        return max(0.0, mono_s - self.last_read_mono)
