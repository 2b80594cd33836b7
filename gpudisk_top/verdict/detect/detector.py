"""The starvation detector: fed one Model at a time, the same live and in replay.

Each interval gets a raw state (classify.py).  Episodes add hysteresis: one opens after
`enter_intervals` consecutive intervals of the same starved state (and starts where the
first of them started), and closes after `leave_intervals` consecutive intervals that are
not in its state (and ends where the first of those started).  The reported state is the
open episode's, else the last calm state (healthy or idle): a single dip raises nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudisk_top.verdict.detect.classify import Classifier
from gpudisk_top.verdict.detect.states import (STARVED_STATES, STATES, UNAVAILABLE, IntervalState,
                                               gpu_ranges)
from gpudisk_top.verdict.detect.evidence import Culprit
from gpudisk_top.verdict.detect.before import with_before
from gpudisk_top.verdict.detect.job import find_job
from gpudisk_top.verdict.detect.phases import CulpritSum, Phase, PhaseSplitter, culprits_over
from gpudisk_top.verdict.detect.saturation import Saturation, SaturationTracker
from gpudisk_top.verdict.detect.thresholds import Thresholds
from gpudisk_top.model.jobs import JobInfo
from gpudisk_top.model.present import pct
from gpudisk_top.model.snapshot import Model
from gpudisk_top.verdict.whatif import WhatIf


@dataclass
class Episode:
    # numbered from the detector's first_id on: the Stepper's one numbering of its
    # episodes (verdict/step.py), the key of the GPU time the ledger counts to each
    id: int
    state: str
    start_wall_s: float
    end_wall_s: float | None = None       # None while it is still open
    last_wall_s: float = 0.0              # end of the latest interval in this state
    gpus: list[int] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    processes: list[int] = field(default_factory=list)
    reason: str = ""                      # the evidence of its latest interval in state
    advice: str | None = None
    kind: str | None = None               # disk: saturated | latency-bound; cpu: own | others
    intervals: int = 0                    # intervals in this state
    min_util_pct: float | None = None
    culprits: list[Culprit] = field(default_factory=list)   # named in `reason`
    whatif: list[WhatIf] = field(default_factory=list)      # of its latest interval in state
    # the job it is of, on a node where jobs are told apart (model/jobs.py): its id and name
    job_id: str | None = None
    job_name: str | None = None
    # its stretches of one cause (verdict/detect/phases.py), in order: a neighbour's reads
    # that came and went are a phase of their own, with their culprits summed
    phases: list[Phase] = field(default_factory=list)

    @property
    def open(self) -> bool:
        return self.end_wall_s is None

    @property
    def mean_util_pct(self) -> float | None:
        """The mean utilization of its GPUs over its intervals in its state."""
        n = sum(p.util_n for p in self.phases)
        return sum(p.util_sum_pct for p in self.phases) / n if n else None

    def culprit_sums(self) -> list[CulpritSum]:
        """Who read the blamed devices over the whole episode, for how long, what share."""
        return culprits_over(self.phases)

    def duration_s(self, now_wall_s: float | None = None) -> float:
        end = self.end_wall_s if self.end_wall_s is not None else (now_wall_s or self.last_wall_s)
        return max(0.0, end - self.start_wall_s)


@dataclass
class Verdict:
    """One interval.  `state` has hysteresis; `raw_state` is this interval alone."""

    wall_s: float
    state: str
    raw_state: str
    gpus: list[int] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    processes: list[int] = field(default_factory=list)
    reason: str = ""
    advice: str | None = None
    raw_reason: str = ""
    kind: str | None = None               # the kind of starvation (IntervalState.kind)
    since_wall_s: float | None = None     # when `state` began (an episode: its start)
    episode: Episode | None = None
    saturation: dict[str, Saturation] = field(default_factory=dict)
    raw: IntervalState | None = None
    # the processes outside the job that `reason` names as reading the blamed device (an
    # undiagnosed stall's: a saturated device the job does not read), built once by
    # verdict/detect/evidence.py: what every surface says of "who"
    culprits: list[Culprit] = field(default_factory=list)
    # what each fix would gain, best first (verdict/whatif.py): the episode's latest interval
    # in its state, or this interval's when it is starved alone
    whatif: list[WhatIf] = field(default_factory=list)
    # the job this verdict is of (model/jobs.py JobInfo; None: the node with no job); the
    # node's verdict (the worst of its jobs', verdict/step.py) carries every job's in `jobs`
    job: JobInfo | None = None
    jobs: list["Verdict"] = field(default_factory=list)


@dataclass
class _Run:
    state: str
    start_wall_s: float
    count: int = 0


# the episode's mean utilization is said beside this interval's where they are this many
# points apart: 39% now beside 40% mean is one figure twice on a banner with no room for it
MEAN_APART_PT = 5.0


def _compose(s: IntervalState, seconds: float, mean_pct: float | None = None) -> str:
    """'GPU 0-3 at 18% for 12 s; <evidence>'; within an episode (mean_pct: its mean
    utilization), this interval's figure and the episode's own where they are apart: 'GPU
    0-3 at 5% now, 18% mean for 37 s; <evidence>'; for no readable GPU, why not."""
    if s.state == UNAVAILABLE:
        return s.detail
    if s.state not in STARVED_STATES:
        return ""
    head = gpu_ranges(s.gpus) if s.gpus else "GPUs"
    if s.gpu_util_pct is not None:
        head += f" at {pct(s.gpu_util_pct)}"
        if mean_pct is not None and abs(mean_pct - s.gpu_util_pct) >= MEAN_APART_PT:
            head += f" now, {pct(mean_pct)} mean"
    head += f" for {seconds:.0f} s"
    return f"{head}; {s.detail}" if s.detail else head


class Detector:
    def __init__(self, thresholds: Thresholds | None = None, first_id: int = 1,
                 ids=None) -> None:
        """first_id: the id of its first episode (a Stepper numbers on across the
        detectors it starts); ids: where its episodes' ids come from instead, a callable
        giving the next (a Stepper's one numbering across the detectors of its jobs)."""
        self.t = thresholds or Thresholds()
        self.first_id = first_id
        self._ids = ids
        self._info: JobInfo | None = None
        self.tracker = SaturationTracker(self.t)
        self.classifier = Classifier(self.t)
        self.episodes: list[Episode] = []
        self._open: Episode | None = None
        self._phases: PhaseSplitter | None = None   # where the open episode's next phase begins
        self._run: _Run | None = None        # consecutive raw intervals of one starved state
        self._clear = 0                      # consecutive intervals out of the open state
        self._clear_start_s = 0.0
        self._calm = "idle"
        self._shown: tuple[str, float] | None = None   # (state, since) as last shown

    @property
    def open_episode(self) -> Episode | None:
        """The episode still open, if any."""
        return self._open

    @property
    def pending(self) -> tuple[str, int] | None:
        """(state, consecutive intervals) of the starved state building up, if any."""
        return (self._run.state, self._run.count) if self._run is not None else None

    # ------------------------------------------------------------------ per interval
    def assess_devices(self, model: Model) -> dict[str, Saturation]:
        h = model.host
        pressure = None
        if h is not None:
            values = [v for v in (h.psi_io_some_pct, h.cgroup_io_some_pct) if v is not None]
            pressure = max(values) if values else None
        out = {}
        for name, rates in model.disks.items():
            info = model.devices.get(name)
            dev_class = info.dev_class if info else "unknown"
            out[name] = self.tracker.assess(
                name, rates, dev_class, info.rotational if info else None, pressure,
                info.ceiling_iops if info else None, info.ceiling_mib_s if info else None,
                info.probed_read_ms if info else None)
        return out

    def feed(self, model: Model, info: JobInfo | None = None,
             sats: dict[str, Saturation] | None = None) -> Verdict:
        """Judge the interval ending at model.wall_s.  A model without rates (the first
        sample) is judged on its GPUs only.  `since_wall_s`: an episode's start, else the
        start of the first interval shown in this state.  info: the job to judge (its GPUs
        and processes only; None: every GPU process of the node); sats: the devices'
        saturation this interval where the caller assessed them once for every job."""
        self._info = info
        verdict = self._judge(model, sats)
        verdict.job = info
        if verdict.episode is not None:
            self._shown = (verdict.state, verdict.episode.start_wall_s)
        elif self._shown is None or self._shown[0] != verdict.state:
            self._shown = (verdict.state, model.wall_s - model.interval_s)
        verdict.since_wall_s = self._shown[1]
        return verdict

    def _judge(self, model: Model, sats) -> Verdict:
        if sats is None:
            sats = self.assess_devices(model)
        job = find_job(model, self._info)
        raw = self.classifier.classify(model, job, sats)
        if self._open is not None:
            # the job's own pace before a neighbour came: the neighbour fix, measured
            raw = with_before(raw, self._open.phases)
        start_s = model.wall_s - model.interval_s
        self._advance(raw, start_s, model.wall_s)
        run_s = (model.wall_s - self._run.start_wall_s) if self._run else model.interval_s
        raw_reason = _compose(raw, run_s)
        ep = self._open
        if ep is not None:
            if raw.state == ep.state:
                ep.reason = _compose(raw, model.wall_s - ep.start_wall_s, ep.mean_util_pct)
                ep.advice = raw.advice
                ep.culprits = list(raw.culprits)
                ep.whatif = list(raw.whatif)
            return Verdict(wall_s=model.wall_s, state=ep.state, raw_state=raw.state,
                           gpus=list(ep.gpus), devices=list(ep.devices),
                           processes=list(ep.processes), reason=ep.reason, advice=ep.advice,
                           raw_reason=raw_reason, kind=ep.kind, episode=ep, saturation=sats,
                           raw=raw, culprits=list(ep.culprits), whatif=list(ep.whatif))
        if raw.state not in STARVED_STATES:
            if raw.state != UNAVAILABLE:    # GPUs that come back are judged afresh
                self._calm = raw.state
            return Verdict(wall_s=model.wall_s, state=raw.state, raw_state=raw.state,
                           gpus=raw.gpus, devices=raw.devices, processes=raw.processes,
                           reason=raw_reason, raw_reason=raw_reason, saturation=sats, raw=raw)
        calm = self._calm if job.running or self._calm == "idle" else "healthy"
        if job.running and calm == "idle":
            calm = "healthy"
        return Verdict(wall_s=model.wall_s, state=calm, raw_state=raw.state,
                       raw_reason=raw_reason, saturation=sats, raw=raw)

    def _advance(self, raw: IntervalState, start_s: float, end_s: float) -> None:
        starved = raw.state in STARVED_STATES
        if starved:
            if self._run is not None and self._run.state == raw.state:
                self._run.count += 1
            else:
                self._run = _Run(raw.state, start_s, 1)
        else:
            self._run = None
        ep = self._open
        if ep is not None:
            if raw.state == ep.state:
                self._clear = 0
                self._extend(ep, raw, start_s, end_s)
                return
            if self._clear == 0:
                self._clear_start_s = start_s
            self._clear += 1
            if self._clear < self.t.leave_intervals:
                return
            self._end(ep, self._clear_start_s)
            self._open, self._clear = None, 0
        if self._run is not None and self._run.count >= self.t.enter_intervals:
            info = self._info
            ep = Episode(id=self._ids() if self._ids else self.first_id + len(self.episodes),
                         state=self._run.state, start_wall_s=self._run.start_wall_s,
                         job_id=info.id if info is not None else None,
                         job_name=info.name if info is not None else None)
            self.episodes.append(ep)
            self._open, self._clear = ep, 0
            self._phases = PhaseSplitter(self.t.enter_intervals)
            # its first phase begins where the episode does (the run's first interval)
            self._extend(ep, raw, self._run.start_wall_s, end_s)
            ep.intervals = self._run.count

    @staticmethod
    def _end(ep: Episode, end_wall_s: float) -> None:
        ep.end_wall_s = end_wall_s     # its last phase ends with it (phases.py Phase.end_wall_s)

    def _extend(self, ep: Episode, raw: IntervalState, start_s: float, end_s: float) -> None:
        self._phases.extend(ep.phases, raw, start_s, end_s)
        ep.intervals += 1
        ep.last_wall_s = end_s
        ep.kind = raw.kind or ep.kind
        for attr in ("gpus", "devices", "processes"):
            have = getattr(ep, attr)
            have.extend(x for x in getattr(raw, attr) if x not in have)
        ep.gpus.sort()
        if raw.gpu_util_pct is not None:
            ep.min_util_pct = raw.gpu_util_pct if ep.min_util_pct is None \
                else min(ep.min_util_pct, raw.gpu_util_pct)

    def close(self, end_wall_s: float) -> None:
        """End the open episode at end_wall_s (the end of a recording or a report window)."""
        if self._open is not None:
            self._end(self._open, end_wall_s)
            self._open = None


def one_interval(model: Model, thresholds: Thresholds | None = None,
                 info: JobInfo | None = None, sats=None) -> Verdict:
    """The verdict of a single interval (--once): its raw state, with no hysteresis, judged
    against class-default baselines; of the job `info` where given."""
    v = Detector(thresholds).feed(model, info, sats)
    raw = v.raw
    return Verdict(wall_s=v.wall_s, state=raw.state, raw_state=raw.state, gpus=raw.gpus,
                   devices=raw.devices, processes=raw.processes, reason=v.raw_reason,
                   advice=raw.advice, raw_reason=v.raw_reason, kind=raw.kind,
                   saturation=v.saturation, raw=raw, culprits=list(raw.culprits),
                   whatif=list(raw.whatif), job=info)


__all__ = ["Detector", "Episode", "Verdict", "STATES", "one_interval"]
