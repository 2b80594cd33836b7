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
    starts (Detector's first_id), so that an id names one episode in `episodes` and in
    the ledger, until forget().
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from gpudisk_top.verdict import gaps
from gpudisk_top.verdict.detect import Detector, Episode, Thresholds, Verdict
from gpudisk_top.verdict.gaps import CLOCK_STEP_S
from gpudisk_top.verdict.ledger import Accountant, IntervalLoss, Ledger
from gpudisk_top.model.snapshot import Model


def clock_stepped(last, sample) -> bool:
    """Did the wall clock step between two consecutive samples of a session?"""
    return abs((sample.wall_s - last.wall_s) - (sample.mono_s - last.mono_s)) > CLOCK_STEP_S


class Step(NamedTuple):
    """One interval through the step: its Model, the detector's Verdict on it, and the
    stall ledger's count of it (verdict/ledger.py IntervalLoss; its gap_s says a gap)."""

    model: Model
    verdict: Verdict
    loss: IntervalLoss


class Stepper:
    """Model.new and a Detector, fed one sample at a time.

        stepper = Stepper(thresholds, cadence_s=1.0)             # the session's interval
        model, verdict, loss = stepper.step(sample)              # live
        model, verdict, loss = stepper.step(sample, fresh=True)  # a recorder run's first
        stepper.restart()                                  # a new session, a clock step
        stepper.prime(sample)                              # the next interval starts here
        stepper.episodes                                   # every detector's, in order
    """

    def __init__(self, thresholds: Thresholds | None = None,
                 cadence_s: float | None = None) -> None:
        self.thresholds = thresholds
        # the session's sampling interval, for the gap rule (verdict/gaps.py) where a sample
        # does not say its own; a replay sets it per session (Recording.interval_at)
        self.cadence_s = cadence_s
        self.detector = Detector(thresholds)
        self.last = None                  # the sample last fed
        self.retired: list[Episode] = []  # episodes of the detectors restart() replaced
        self.accountant = Accountant()
        self.ledger = Ledger()

    def step(self, sample, fresh: bool = False) -> Step:
        """The Model of the interval ending at `sample`, the detector's Verdict on it and
        the ledger's count of it.  fresh: the sample starts a session (no interval ends at
        it).  After a gap (verdict/gaps.py) the sample starts afresh too, and its loss says
        the gap."""
        gap_s = None if fresh else gaps.between(self.last, sample, self.cadence_s)
        if gap_s is not None:
            self._new_detector()
            fresh = True
        model = Model.new(sample, None if fresh else self.last)
        verdict = self.detector.feed(model)
        loss = self.accountant.account(model, verdict)
        if gap_s is not None:
            loss = replace(loss, gap_s=gap_s)
        self.ledger.add(loss)
        self.last = sample
        return Step(model, verdict, loss)

    def prime(self, sample) -> None:
        """Start the next interval at `sample` without judging it: a replay that begins
        feeding mid-session gives its first interval the rates from the sample before
        (None: the next sample fed has no interval, as at a session's start)."""
        self.last = sample

    def restart(self) -> None:
        """A fresh detector and a fresh count of the job's healthy level (a new session
        learns it afresh, as the recorder that wrote it did); the one before ends its open
        episode at the last sample fed; the ledger's running total goes on."""
        self._new_detector()
        self.accountant = Accountant()

    def _new_detector(self) -> None:
        """A fresh detector; the one before ends its open episode at the last sample fed
        (a gap keeps the job's healthy level: the job is the same)."""
        if self.detector.episodes:
            if self.last is not None:
                self.detector.close(self.last.wall_s)
            self.retired.extend(self.detector.episodes)
        # ids go on from the episodes before: one id, one episode of this Stepper
        self.detector = Detector(self.thresholds, first_id=len(self.retired) + 1)

    def forget(self) -> None:
        """Start over: no sample before the next one, no episodes (a replay's seek)."""
        self.detector = Detector(self.thresholds)
        self.last = None
        self.retired = []
        self.accountant = Accountant()
        self.ledger = Ledger()

    @property
    def episodes(self) -> list[Episode]:
        return self.retired + self.detector.episodes

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
