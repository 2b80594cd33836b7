"""An episode's phases: one stretch of one cause, told apart by what it blames.

An episode (detector.py) is one starved state held with hysteresis.  Within it the cause
can change while the state does not: a loader job's reads are latency-bound for a minute,
then a neighbour's fio saturates the same disk for 35 s, then the job is latency-bound
again.  Each of those is a phase: its kind, the devices it blames, the processes or jobs
outside the job that read them (the one with the largest share of the device's reads,
where it has at least MAJOR_SHARE_PCT), each with its time span and, in the stall ledger, its lost GPU-seconds
(verdict/ledger.py, Ledger.lost_of_phase: counted by phase_at, never written here).

A new phase begins where a new signature (kind, devices, major culprits) has held for
`enter` consecutive intervals (the detector's enter_intervals), at the start of the
interval where it reached that count: a culprit named for one interval does not split
an episode, and the intervals already counted to a phase stay in it.  The culprits of a
phase are summed over its intervals: who, for how many seconds, with what mean share.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudisk_top.verdict.detect.evidence import Culprit
from gpudisk_top.verdict.whatif import WhatIf

# the culprit with the largest share of the blamed device's reads makes a phase's cause
# where it has at least this much (the others are still summed among the phase's
# culprits): a pip install reading 5 % beside the job is not a change of cause, a fio
# taking 90 % is; two neighbours whose shares cross each other change it only where one
# holds the lead for the hysteresis's intervals
MAJOR_SHARE_PCT = 25.0
# bounds: an episode's phases live in memory and in every summary block of a recording
# that the episode touches; a cause that flips every few intervals all day must not grow
# them without end.  Past MAX_PHASES no new phase begins (the last goes on, its culprits
# summed); a phase keeps its MAX_CULPRIT_SUMS culprits that cost most.
MAX_PHASES = 12
MAX_CULPRIT_SUMS = 8


def culprit_key(c: Culprit) -> str:
    """Who a culprit is across intervals: its job, else its process."""
    return f"job:{c.job_id}" if c.job_id else f"pid:{c.pid}"


@dataclass
class CulpritSum:
    """One culprit over a phase: the latest interval's Culprit, the seconds it was named,
    and the sums behind its mean share of the device's reads and its mean read rate."""

    culprit: Culprit
    seconds: float = 0.0
    intervals: int = 0
    share_sum_pct: float = 0.0
    shares: int = 0                  # intervals with a share (a device with no read rate has none)
    read_kb_sum: float = 0.0

    @property
    def key(self) -> str:
        return culprit_key(self.culprit)

    @property
    def mean_share_pct(self) -> float | None:
        return self.share_sum_pct / self.shares if self.shares else None

    @property
    def mean_read_kb_s(self) -> float | None:
        return self.read_kb_sum / self.intervals if self.intervals else None

    def add(self, c: Culprit, seconds: float) -> None:
        self.culprit = c
        self.seconds += seconds
        self.intervals += 1
        if c.read_share_pct is not None:
            self.share_sum_pct += c.read_share_pct
            self.shares += 1
        self.read_kb_sum += c.read_kb_s or 0.0

    def summed(self) -> Culprit:
        """The culprit over the phase (or episode): its mean share and read rate."""
        c = self.culprit
        share = self.mean_share_pct
        return Culprit(pid=c.pid, name=c.name, device=c.device,
                       read_share_pct=None if share is None else round(share, 1),
                       read_kb_s=self.mean_read_kb_s, job_id=c.job_id, job_name=c.job_name,
                       pids=tuple(c.pids))

    def merged(self, other: "CulpritSum") -> "CulpritSum":
        """Two sums of one culprit (two phases' of an episode) as one, latest culprit the other's."""
        return CulpritSum(other.culprit, self.seconds + other.seconds,
                          self.intervals + other.intervals,
                          self.share_sum_pct + other.share_sum_pct, self.shares + other.shares,
                          self.read_kb_sum + other.read_kb_sum)

    def as_json(self) -> dict:
        """A culprit as verdict_json writes one (its mean share), and the seconds named."""
        c = self.summed()
        return {**c.as_json(), "seconds": round(self.seconds, 3),
                "clause": f"{c.clause()} for {self.seconds:.0f} s"}


@dataclass
class Phase:
    """One stretch of an episode with one cause (see the module's doc)."""

    start_wall_s: float
    last_wall_s: float                        # end of its latest interval in the state
    kind: str | None = None
    devices: list[str] = field(default_factory=list)
    culprits: list[CulpritSum] = field(default_factory=list)
    # where the next phase began; None for an episode's last phase, which ends where the
    # episode does (one figure, whichever way the episode's end was found)
    end_wall_s: float | None = None
    intervals: int = 0
    util_sum_pct: float = 0.0
    util_n: int = 0
    # the same over its own cause's intervals only (not those of a next cause still under
    # the hysteresis): its pace, as the measured neighbour fix reads it (before.py)
    own_util_sum_pct: float = 0.0
    own_util_n: int = 0
    reason: str = ""                          # the detail of its latest interval
    advice: str | None = None
    whatif: list[WhatIf] = field(default_factory=list)   # its latest interval's, best first
    # what makes its cause, fixed where it began (signature_of its first interval): the
    # devices then blamed and its leading culprit's key (culprit_key), if any
    cause_devices: list[str] = field(default_factory=list)
    cause_culprits: list[str] = field(default_factory=list)

    @property
    def mean_util_pct(self) -> float | None:
        return self.util_sum_pct / self.util_n if self.util_n else None

    @property
    def own_mean_util_pct(self) -> float | None:
        return self.own_util_sum_pct / self.own_util_n if self.own_util_n else None

    def end_s(self, episode_end_s: float | None = None) -> float:
        """Where it ended: the next phase's start, else the episode's end (episode_end_s),
        else its latest interval's end."""
        if self.end_wall_s is not None:
            return self.end_wall_s
        return episode_end_s if episode_end_s is not None else self.last_wall_s

    def duration_s(self, episode_end_s: float | None = None) -> float:
        return max(0.0, self.end_s(episode_end_s) - self.start_wall_s)

    def signature(self) -> tuple:
        """Its cause as signature_of says an interval's: fixed where it began (the
        culprits it sums may come and go within it, below the hysteresis)."""
        return (self.kind, tuple(self.cause_devices), frozenset(self.cause_culprits))


def lead_culprit(culprits: list[Culprit]) -> Culprit | None:
    """The culprit with the largest share of the blamed device's reads, if any."""
    shares = [c for c in culprits if c.read_share_pct is not None]
    return max(shares, key=lambda c: c.read_share_pct, default=None)


def signature_of(raw) -> tuple:
    """An interval's (verdict/detect/states.py IntervalState) cause: its kind, the devices
    it blames, its leading culprit (none under MAJOR_SHARE_PCT)."""
    lead = lead_culprit(raw.culprits)
    major = {culprit_key(lead)} if lead is not None and lead.read_share_pct >= MAJOR_SHARE_PCT \
        else set()
    return (raw.kind, tuple(raw.devices), frozenset(major))


class PhaseSplitter:
    """Where an episode's next phase begins: one per episode, fed each interval in its
    state (extend)."""

    def __init__(self, enter: int) -> None:
        self.enter = max(1, enter)
        self._pending: tuple | None = None
        self._count = 0

    def extend(self, phases: list[Phase], raw, start_s: float, end_s: float) -> None:
        """Add one interval of the episode's state (raw: its IntervalState) to the last
        phase, or begin a new one where the new cause has held `enter` intervals."""
        sig = signature_of(raw)
        if not phases:
            phases.append(_begin(sig, start_s, end_s))
        elif sig != phases[-1].signature():
            if sig == self._pending:
                self._count += 1
            else:
                self._pending, self._count = sig, 1
            if self._count >= self.enter and len(phases) < MAX_PHASES:
                phases[-1].end_wall_s = start_s
                phases.append(_begin(sig, start_s, end_s))
                self._pending, self._count = None, 0
        else:
            self._pending, self._count = None, 0
        _add(phases[-1], raw, end_s - start_s, end_s, own=sig == phases[-1].signature())


def _begin(sig: tuple, start_s: float, end_s: float) -> Phase:
    kind, devices, culprits = sig
    return Phase(start_s, end_s, kind, list(devices), cause_devices=list(devices),
                 cause_culprits=sorted(culprits))


def _add(p: Phase, raw, seconds: float, end_s: float, own: bool) -> None:
    """One interval into a phase; own: of the phase's cause (not one of a new cause still
    below the hysteresis), whose evidence and predictions are then the phase's."""
    p.intervals += 1
    p.last_wall_s = end_s
    p.devices.extend(d for d in raw.devices if d not in p.devices)
    if raw.gpu_util_pct is not None:
        p.util_sum_pct += raw.gpu_util_pct
        p.util_n += 1
        if own:
            p.own_util_sum_pct += raw.gpu_util_pct
            p.own_util_n += 1
    sums = {s.key: s for s in p.culprits}
    for c in raw.culprits:
        s = sums.get(culprit_key(c))
        if s is None:
            s = CulpritSum(c)
            p.culprits.append(s)
        s.add(c, seconds)
    p.culprits.sort(key=lambda s: -s.seconds * (s.mean_share_pct or 0.0))
    del p.culprits[MAX_CULPRIT_SUMS:]
    if own or not p.reason:
        p.reason, p.advice, p.whatif = raw.detail, raw.advice, list(raw.whatif)


def phase_at(phases: list[Phase], wall_s: float) -> int | None:
    """The index of the phase the interval ending at wall_s belongs to (the last one that
    began before it ended); None for an episode with no phase."""
    k = None
    for i, p in enumerate(phases):
        if p.start_wall_s < wall_s - 1e-6 or i == 0:
            k = i
    return k


def culprits_over(phases: list[Phase]) -> list[CulpritSum]:
    """Every culprit of the phases summed over them, the one that cost most first."""
    out: dict[str, CulpritSum] = {}
    for p in phases:
        for s in p.culprits:
            have = out.get(s.key)
            out[s.key] = s if have is None else have.merged(s)
    return sorted(out.values(), key=lambda s: -s.seconds * (s.mean_share_pct or 0.0))


def phases_from(records) -> list[Phase]:
    """Phases as dataclasses.asdict wrote them (a recording's summary block): those that
    do not read back are left out (a damaged or hostile file loses only them).  WhatIf
    and Culprit are rebuilt by their own fields."""
    out = []
    for d in records or ():
        try:
            p = Phase(**{**d, "culprits": [], "whatif": []})
            p.culprits = [CulpritSum(**{**s, "culprit": _culprit(s["culprit"])})
                          for s in d.get("culprits") or ()]
            p.whatif = [WhatIf(**w) for w in d.get("whatif") or ()]
            p.devices = [str(x) for x in p.devices]
            float(p.start_wall_s), float(p.last_wall_s)
        except (TypeError, KeyError, ValueError):
            continue
        out.append(p)
    return out


def _culprit(d: dict) -> Culprit:
    return Culprit(**{**d, "pids": tuple(d.get("pids") or ())})


__all__ = ["CulpritSum", "MAJOR_SHARE_PCT", "Phase", "PhaseSplitter", "culprit_key", "lead_culprit",
           "culprits_over", "phase_at", "phases_from", "signature_of"]
