"""The jobs of a recording window (model/jobs.py, issue 37): what each job that ran did over
it, added up interval by interval from the step's verdict of that job and its part of the
stall ledger, whether the window is replayed or read from the recorder's summaries
(session/summaries.py Piece feeds it both ways, so the two agree).

Per job: its identity (the latest seen: id, source, name, cgroup; every GPU and, up to
MAX_PIDS, every GPU process it had), when it was first and last seen in the window, its
intervals, the seconds of its intervals in each state of its own verdict, and its own
stall ledger (verdict/ledger.py: only its GPUs, no idle GPU: the node counts those).
Its episodes are the window's, by their job_id.

Bounded: MAX_JOBS jobs a window keeps (a node that ran a sweep of thousands of short
runs); the ones after are counted in `left_out`, never kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudisk_top.verdict.ledger import IntervalLoss, Ledger

MAX_JOBS = 4096
MAX_PIDS = 64


@dataclass
class JobTally:
    """One job over a window (or a piece of one)."""

    id: str
    source: str
    name: str
    cgroup: str | None = None
    gpus: list[int] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    first_s: float | None = None
    last_s: float | None = None
    intervals: int = 0
    # seconds of its intervals (their length, as its ledger counts them) in each state
    states: dict[str, float] = field(default_factory=dict)
    ledger: Ledger = field(default_factory=Ledger)

    def seen(self, source: str, name: str, cgroup: str | None, gpus, pids) -> None:
        """Its identity in a later interval: the latest name, every GPU and process."""
        self.source, self.name, self.cgroup = source, name, cgroup
        self.gpus.extend(g for g in gpus if g not in self.gpus)
        self.gpus.sort()
        if len(self.pids) < MAX_PIDS:
            self.pids.extend(p for p in pids if p not in self.pids)
            del self.pids[MAX_PIDS:]

    def add(self, wall_s: float, state: str, loss: IntervalLoss) -> None:
        """One interval of the job: its verdict's state and its loss."""
        if self.first_s is None or wall_s < self.first_s:
            self.first_s = wall_s
        if self.last_s is None or wall_s > self.last_s:
            self.last_s = wall_s
        self.intervals += 1
        self.states[state] = self.states.get(state, 0.0) + loss.interval_s
        self.ledger.add(loss)

    def merge(self, other: "JobTally") -> None:
        """A later piece's figures of the same job."""
        self.seen(other.source, other.name, other.cgroup, other.gpus, other.pids)
        for attr, pick in (("first_s", min), ("last_s", max)):
            mine, theirs = getattr(self, attr), getattr(other, attr)
            setattr(self, attr, theirs if mine is None else mine if theirs is None
                    else pick(mine, theirs))
        self.intervals += other.intervals
        for state, sec in other.states.items():
            self.states[state] = self.states.get(state, 0.0) + sec
        self.ledger.merge(other.ledger)


@dataclass
class JobTallies:
    """The jobs of a window (or a piece), in the order they were first seen."""

    jobs: dict[str, JobTally] = field(default_factory=dict)
    left_out: set = field(default_factory=set)      # ids of jobs past MAX_JOBS

    def job(self, job_id: str, source: str, name: str, cgroup, gpus, pids) -> JobTally | None:
        """The tally of a job seen in an interval (its identity updated); None for one
        past MAX_JOBS."""
        t = self.jobs.get(job_id)
        if t is None:
            if len(self.jobs) >= MAX_JOBS:
                if len(self.left_out) < MAX_JOBS:
                    self.left_out.add(job_id)
                return None
            t = self.jobs[job_id] = JobTally(job_id, source, name)
        t.seen(source, name, cgroup, gpus, pids)
        return t

    def merge(self, other: "JobTallies") -> None:
        for job_id, t in other.jobs.items():
            mine = self.jobs.get(job_id)
            if mine is not None:
                mine.merge(t)
            elif len(self.jobs) < MAX_JOBS:
                self.jobs[job_id] = t
            elif len(self.left_out) < MAX_JOBS:
                self.left_out.add(job_id)
        for job_id in other.left_out:
            if job_id not in self.jobs and len(self.left_out) < MAX_JOBS:
                self.left_out.add(job_id)

    def ordered(self) -> list[JobTally]:
        """By first seen, then lowest GPU, then id: the same order on every surface."""
        return sorted(self.jobs.values(),
                      key=lambda t: (t.first_s if t.first_s is not None else float("inf"),
                                     t.gpus[:1], t.id))


__all__ = ["MAX_JOBS", "JobTallies", "JobTally"]
