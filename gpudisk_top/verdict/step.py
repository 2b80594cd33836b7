"""The one per-interval step: a raw sample and the one before it -> Model -> Verdict.

Every path that turns samples into verdicts takes this step, and only this one: the live
dashboard (session/live.py), `serve`, `record --listen/--push`, the recorder's summaries
(record/derived.py), the replay screen and `report`/`export` (session/replay.py).  So
the rules below hold everywhere, and the replay screen, `report` and the live screen
agree about the same moment (the warm-up a replay takes is session/replay.py's):

  - The first sample of a session (no sample before it, or the first of a recorder run)
    has no interval: Model.new gives it no rates, and the detector judges it on its
    GPUs only (Detector.feed).  It is fed like any other.
  - A detector only sees consecutive samples over a steady wall clock: it starts afresh
    at a new session and where the wall clock stepped (clock_stepped), and the episode
    open there ends at the last sample fed.
  - An interval that is a gap in sampling (verdict/gaps.py: far past the session's cadence,
    or a monotonic clock that outran the wall clock) is not an interval: the detector
    starts afresh at the sample after it, which has no interval (as a session's first),
    and the gap goes to the ledger with its length (IntervalLoss.gap_s), never as GPU time.
  - Each verdict's interval is counted in the stall ledger (verdict/ledger.py): the step
    returns its IntervalLoss beside the verdict (Step.loss), `ledger` is the running
    total since the Stepper was made or last forgot, its lost time by cause and by
    episode id (a restart keeps counting; the job's healthy level carries over: a new job
    is told by its new GPU processes).  Nothing is written back into the verdict or its
    episode: what an episode lost is the ledger's (Ledger.lost_of).
  - Episode ids are the Stepper's: numbered on across the detectors a restart or a gap
    starts and the detectors of its jobs, so that an id names one episode in `episodes`
    and in the ledger, until forget().
  - Every job on the node (model/jobs.py) has its own detector, healthy level and ledger
    (JobTrack), fed its own GPUs and processes; the devices' saturation is assessed once
    for all of them (one baseline a device).  The node's verdict is the worst of its jobs'
    (verdict/jobs.py), carrying each job's in Verdict.jobs; the node's loss sums theirs
    (IntervalLoss.parts) beside its idle GPUs.  A job seen no more ends there: its open
    episode closes at the end of the last interval it was seen in, its track is kept in
    `ended` (MAX_ENDED of them) for the report and the exporter.  With no job, the node's
    own detector judges it (idle, or no GPU readable).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from gpudisk_top.verdict import gaps
from gpudisk_top.verdict.detect import Detector, Episode, Thresholds, Verdict
from gpudisk_top.verdict.gaps import CLOCK_STEP_S
from gpudisk_top.verdict.jobs import node_verdict
from gpudisk_top.verdict.ledger import Accountant, IntervalLoss, Ledger, node_loss
from gpudisk_top.model.jobs import JobInfo
from gpudisk_top.model.snapshot import Model

MAX_ENDED = 256      # ended jobs kept (a sweep of short runs must not grow memory)


def clock_stepped(last, sample) -> bool:
    """Did the wall clock step between two consecutive samples of a session?"""
    return abs((sample.wall_s - last.wall_s) - (sample.mono_s - last.mono_s)) > CLOCK_STEP_S


class Step(NamedTuple):
    """One interval through the step: its Model, the detector's Verdict on it, and the
    stall ledger's count of it (verdict/ledger.py IntervalLoss; its gap_s says a gap)."""

    model: Model
    verdict: Verdict
    loss: IntervalLoss


@dataclass
class JobTrack:
    """One job's own diagnosis over the Stepper's life: its detector, healthy level and
    ledger, its latest verdict and loss, when it was first and last seen."""

    info: JobInfo
    detector: Detector
    accountant: Accountant = field(default_factory=Accountant)
    ledger: Ledger = field(default_factory=Ledger)
    retired: list[Episode] = field(default_factory=list)
    verdict: Verdict | None = None
    loss: IntervalLoss | None = None
    first_wall_s: float | None = None
    last_wall_s: float | None = None
    ended_wall_s: float | None = None

    @property
    def episodes(self) -> list[Episode]:
        return self.retired + self.detector.episodes


class Stepper:
    """Model.new and a Detector for each job, fed one sample at a time.

        stepper = Stepper(thresholds, cadence_s=1.0)             # the session's interval
        model, verdict, loss = stepper.step(sample)              # live
        model, verdict, loss = stepper.step(sample, fresh=True)  # a recorder run's first
        stepper.restart()                                  # a new session, a clock step
        stepper.prime(sample)                              # the next interval starts here
        stepper.episodes                                   # every detector's, by id
        stepper.jobs, stepper.ended                        # JobTrack by job id; ended ones
    """

    def __init__(self, thresholds: Thresholds | None = None,
                 cadence_s: float | None = None) -> None:
        self.thresholds = thresholds
        # the session's sampling interval, for the gap rule (verdict/gaps.py) where a sample
        # does not say its own; a replay sets it per session (Recording.interval_at)
        self.cadence_s = cadence_s
        self._ids = itertools.count(1)
        self.next_id = 1                  # the id the next episode will have
        self.node = self._detector()      # the node's, where no job runs; its saturation
        self.last = None                  # the sample last fed
        # episodes of the node detectors restart() replaced, and those of jobs forgotten
        self.retired: list[Episode] = []
        self.accountant = Accountant()
        self.ledger = Ledger()
        self.jobs: dict[str, JobTrack] = {}
        self.ended: list[JobTrack] = []
        self._worst: Detector | None = None

    def _next(self) -> int:
        self.next_id = next(self._ids) + 1
        return self.next_id - 1

    def _detector(self) -> Detector:
        return Detector(self.thresholds, ids=self._next)

    def step(self, sample, fresh: bool = False) -> Step:
        """The Model of the interval ending at `sample`, the detector's Verdict on it and
        the ledger's count of it.  fresh: the sample starts a session (no interval ends at
        it).  After a gap (verdict/gaps.py) the sample starts afresh too, and its loss says
        the gap."""
        gap_s = None if fresh else gaps.between(self.last, sample, self.cadence_s)
        if gap_s is not None:
            self._new_detectors()
            fresh = True
        model = Model.new(sample, None if fresh else self.last)
        self._end_jobs(model)
        sats = self.node.assess_devices(model)
        if not model.jobs:
            verdict = self.node.feed(model, None, sats)
            loss = self.accountant.account(model, verdict)
            self._worst = self.node
        else:
            verdicts, losses = [], []
            for info in model.jobs:
                track = self.jobs.get(info.id) or self._revive(info.id)
                if track is None:
                    track = self.jobs[info.id] = JobTrack(info, self._detector(),
                                                          first_wall_s=model.wall_s)
                track.info, track.last_wall_s = info, model.wall_s
                v = track.verdict = track.detector.feed(model, info, sats)
                track.loss = track.accountant.account(model, v, info)
                track.ledger.add(track.loss)
                verdicts.append(v)
                losses.append(track.loss)
            verdict = node_verdict(verdicts)
            self._worst = self.jobs[verdict.job.id].detector
            worst = losses[[v.job.id for v in verdicts].index(verdict.job.id)]
            loss = node_loss(model, verdict.state, worst, losses)
        if gap_s is not None:
            loss = replace(loss, gap_s=gap_s)
        self.ledger.add(loss)
        self.last = sample
        return Step(model, verdict, loss)

    def _end_jobs(self, model: Model) -> None:
        """Jobs not in this interval ended: their open episode closes where they were last
        seen; they move to `ended`."""
        seen = {info.id for info in model.jobs}
        for job_id in [j for j in self.jobs if j not in seen]:
            track = self.jobs.pop(job_id)
            track.ended_wall_s = track.last_wall_s
            track.detector.close(track.last_wall_s)
            self.ended.append(track)
        for old in self.ended[:-MAX_ENDED]:
            # a job past the bound is forgotten, its episodes kept as their bare facts (id,
            # state, times: ~0.5 kB each) so that counts of episodes never go down
            self.retired.extend(replace(e, culprits=[], whatif=[], processes=[], reason="",
                                        advice=None,
                                        phases=[replace(p, whatif=[], reason="", advice=None)
                                                for p in e.phases])
                                for e in old.episodes)
        del self.ended[:-MAX_ENDED]

    def _revive(self, job_id: str) -> JobTrack | None:
        """A job seen again after it was missed (its processes gone from NVML's list for
        a while, a job id reused): the same track goes on, its ledger and level too."""
        for i, track in enumerate(self.ended):
            if track.info.id == job_id:
                del self.ended[i]
                track.ended_wall_s = None
                self.jobs[job_id] = track
                return track
        return None

    def prime(self, sample) -> None:
        """Start the next interval at `sample` without judging it: a replay that begins
        feeding mid-session gives its first interval the rates from the sample before
        (None: the next sample fed has no interval, as at a session's start)."""
        self.last = sample

    def restart(self) -> None:
        """Fresh detectors and fresh counts of the jobs' healthy levels (a new session
        learns them afresh, as the recorder that wrote it did); those before end their open
        episodes at the last sample fed; the ledgers' running totals go on."""
        self._new_detectors()
        self.accountant = Accountant()
        for track in self.jobs.values():
            track.accountant = Accountant()

    def _new_detectors(self) -> None:
        """Fresh detectors; those before end their open episode at the last sample fed
        (a gap keeps the jobs' healthy levels: the jobs are the same)."""
        end = self.last.wall_s if self.last is not None else None
        if self.node.episodes:
            if end is not None:
                self.node.close(end)
            self.retired.extend(self.node.episodes)
        self.node = self._detector()
        for track in self.jobs.values():
            if end is not None:
                track.detector.close(end)
            track.retired.extend(track.detector.episodes)
            track.detector = self._detector()

    def forget(self) -> None:
        """Start over: no sample before the next one, no episodes (a replay's seek)."""
        self._ids = itertools.count(1)
        self.next_id = 1
        self.node = self._detector()
        self.last = None
        self.retired = []
        self.accountant = Accountant()
        self.ledger = Ledger()
        self.jobs, self.ended = {}, []
        self._worst = None

    def close(self, end_wall_s: float) -> None:
        """End every open episode at end_wall_s (the end of a recording or a window)."""
        for det in self.detectors:
            det.close(end_wall_s)

    @property
    def detector(self) -> Detector:
        """The detector of the node's verdict: the worst job's, else the node's own."""
        return self._worst or self.node

    @property
    def detectors(self) -> list[Detector]:
        return [self.node, *(t.detector for t in self.jobs.values())]

    @property
    def tracks(self) -> list[JobTrack]:
        """Every job seen, ended ones first, in the order they were first seen."""
        return [*self.ended, *self.jobs.values()]

    @property
    def episodes(self) -> list[Episode]:
        """Every episode of every detector, by id (the order they opened)."""
        eps = self.retired + self.node.episodes
        for track in self.tracks:
            eps += track.episodes
        return sorted(eps, key=lambda e: e.id)

    @property
    def open_episodes(self) -> list[Episode]:
        return [d.open_episode for d in self.detectors if d.open_episode is not None]

    def job_ledger(self, job_id: str) -> Ledger | None:
        for track in self.tracks:
            if track.info.id == job_id:
                return track.ledger
        return None

    @property
    def pending_intervals(self) -> int:
        """How long the raw starved state has held without an episode yet."""
        pending = self.detector.pending
        return pending[1] if pending else 0


class StepperViews:
    """`detector` and `episodes` read through self.stepper: what the screens ask of the
    live feed and the replay feed alike."""

    stepper: Stepper

    @property
    def detector(self) -> Detector:
        return self.stepper.detector

    @property
    def episodes(self) -> list[Episode]:
        """Every episode of this feed's detectors (since the last seek, in replay)."""
        return self.stepper.episodes
