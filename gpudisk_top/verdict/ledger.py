"""The stall ledger: the GPU time a job did not use, by cause, interval by interval.

The one owner of the rule; the Stepper (verdict/step.py) takes it after each verdict, so
the dashboard, `serve`, `--once`, `report`, `export` and the recorder's replays count
alike, and a recording is re-counted from its raw samples exactly as its verdicts are.
Nothing here imports Textual.

Per interval (model.interval_s > 0, at least one GPU readable), per GPU:

  - A GPU with no compute process (find_job's rule, job.job_gpus) is idle: its whole
    interval counts as idle GPU-seconds, never as lost to a cause.  A lost GPU or one
    whose utilization cannot be read counts nowhere.
  - A GPU of the job, at utilization u (0-1, model/gpu.py: the mean of NVML's samples in
    the interval), leaves unused = interval_s x (1 - u) GPU-seconds.  That is the
    ledger's total: every unused GPU-second of the job, to the interval's state.
  - The reference R is the job's own healthy level where it is known: the median of the
    mean utilization of its job GPUs over its healthy intervals (verdict and raw state
    both healthy), each rounded to 0.1 %, once MIN_HEALTHY_INTERVALS of them were seen;
    else R = 1 (100 %).  The level is the job's: it starts afresh when the GPU processes
    are all new (no PID in common with the job before).
  - In a starved state (the verdict's state: with hysteresis, as every screen shows it)
    the cause gets lost = interval_s x max(0, R - u); the rest of the unused time,
    interval_s x (1 - max(u, R)), is "healthy": what the job leaves unused when it runs
    well.  In the healthy state all of it is "healthy".
  - So for every interval: the causes' lost + healthy = unused, exactly, and a
    starved interval never counts more than the job lost below its own healthy level.

The cause is the verdict's state (CAUSE_OF_STATE: undiagnosed-stall counts as
"undiagnosed"), and what it blames:
  disk-starved      the device (kernel name) or the network/FUSE mountpoint it waits on
  checkpoint-stall  the device it writes to, where one is named
  cpu-starved       the kind: own, others, throttled, trainer
  straggler         the GPUs that lag ("GPU 3"); the node one waits on is not known here
  undiagnosed       nothing
the interval's own evidence when the raw state is the verdict's, else the episode's.
A starved interval's lost time also goes to its episode: IntervalLoss.episode_id is the
verdict's episode (the one open then, whose state the verdict has, held through the exit
hysteresis), and the Ledger keeps lost time by that id (Ledger.lost_of).  Nothing is
written back into the verdict or the episode: they are the detector's, this is below it.

A gap in sampling (verdict/gaps.py: the sampler frozen, a host suspended, a recording's
clock that jumped) is no interval: nothing of it is counted, and the ledger keeps it
apart (Ledger.gaps, gap_count, gap_s) so that every surface says it with its length.

On a shared node (several jobs, model/jobs.py) each job is counted on its own GPUs, with
its own healthy level and its verdict's cause (Accountant.account(model, verdict, info),
one Accountant a job: verdict/step.py's JobTrack); the node's IntervalLoss sums its jobs'
(node_loss: the parts kept in IntervalLoss.parts, each counted to its own cause by
Ledger.add) beside the GPUs no job uses (idle).  A GPU two jobs share counts in both.

What it does not see: a straggler's peers spin in NCCL at high utilization (NVML counts
a spinning kernel as busy), so straggler time counts only the lagging GPUs' unused time;
the intervals before an episode opens (enter_intervals) show healthy and count so.

Cost: a few multiplications per GPU and interval, a 1001-bin count per job for the
median (bench/bench_ledger.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from gpudisk_top.verdict.detect.states import STARVED_STATES
from gpudisk_top.verdict.detect.job import job_gpus
from gpudisk_top.verdict.detect.phases import phase_at
from gpudisk_top.model.gpu import unreadable_reason
from gpudisk_top.model.present import pct
from gpudisk_top.model.timefmt import duration
from gpudisk_top.model.vocab import LEDGER, cost_text, gpu_hours, iso_time

# The cause label of each state the ledger counts a job's unused time to, in the order
# every surface lists them (the Prometheus label values of gpudisk_top_gpu_seconds_total)
CAUSE_OF_STATE = {
    "disk-starved": "disk-starved",
    "cpu-starved": "cpu-starved",
    "checkpoint-stall": "checkpoint-stall",
    "straggler": "straggler",
    "undiagnosed-stall": "undiagnosed",
    "healthy": "healthy",
}
CAUSES = tuple(CAUSE_OF_STATE.values())
HEALTHY = "healthy"
LOST_CAUSES = CAUSES[:-1]          # the causes a job loses time to (not "healthy")
# the word a one-line split names a cause by ("lost 3.20 GPU-h: disk sdb 2.90, cpu 0.30")
CAUSE_WORD = {"disk-starved": "disk", "cpu-starved": "cpu", "checkpoint-stall": "checkpoint",
              "straggler": "straggler", "undiagnosed": "undiagnosed", "healthy": "healthy"}
# healthy intervals of a job before its median is its reference
MIN_HEALTHY_INTERVALS = 30
# the gaps a ledger lists one by one (the longest kept); more are counted and summed
GAPS_LISTED = 10
_BINS = 1001                       # 0.0 % to 100.0 % by 0.1 %

# what each surface says of the reference (ledger_json "reference", report, dashboard)
REF_FULL = "100%"
REF_HEALTHY = "healthy median"


@dataclass(frozen=True)
class Price:
    """[ledger] in the config: what one GPU-hour costs (no default: no cost shown) and
    the currency's word, as the user wrote them."""

    gpu_hour_cost: float | None = None
    currency: str = ""

    def cost(self, gpu_s: float) -> float | None:
        return None if self.gpu_hour_cost is None else gpu_s / 3600.0 * self.gpu_hour_cost

    def text(self, gpu_s: float) -> str | None:
        """'12.80 USD', None without a price."""
        return cost_text(gpu_s, self.gpu_hour_cost, self.currency)


NO_PRICE = Price()


@dataclass(frozen=True)
class IntervalLoss:
    """One interval's count (GPU-seconds).  cause None: nothing lost to a cause (idle,
    no GPU readable, no interval)."""

    wall_s: float
    interval_s: float
    state: str
    cause: str | None = None        # CAUSES; "healthy" for a healthy interval
    blamed: str | None = None       # see the module's docstring
    job_gpus: int = 0               # the job's GPUs counted
    unused_gpu_s: float = 0.0       # interval_s x (1 - u), summed over the job's GPUs
    lost_gpu_s: float = 0.0         # to `cause` (0 for a healthy interval)
    healthy_gpu_s: float = 0.0      # unused - lost
    idle_gpu_s: float = 0.0         # GPUs with no job process
    job_gpu_s: float = 0.0          # interval_s x the job's GPUs counted
    reference_pct: float | None = None   # the job's healthy level used; None: 100 %
    # the verdict's episode (Episode.id, the Stepper's numbering) where it lost time to it
    episode_id: int | None = None
    # the index of that episode's phase the interval belongs to (verdict/detect/phases.py
    # phase_at: by time, the one rule live and in a recording's summaries)
    phase: int | None = None
    # a gap in sampling ended at this sample (verdict/gaps.py): its length, counted nowhere
    gap_s: float | None = None
    # on a shared node: the job this loss is of (model/jobs.py JobInfo.id); a node's loss
    # of several jobs holds each job's in `parts` (its figures are their sums, its cause the
    # worst job's), and a Ledger counts the causes of the parts
    job_id: str | None = None
    parts: tuple = ()


class HealthyLevel:
    """The median utilization of one job's healthy intervals, to 0.1 %, in bounded
    memory (a count per 0.1 %)."""

    def __init__(self) -> None:
        self.pids: frozenset[int] = frozenset()
        self.counts = [0] * _BINS
        self.n = 0
        self._median: float | None = None

    def job(self, pids: frozenset[int]) -> None:
        """The job now runs these GPU processes: a job with none of the last one's PIDs
        is another job, whose level is learned afresh."""
        if pids and not (pids & self.pids):
            self.counts = [0] * _BINS
            self.n = 0
            self._median = None
        if pids:
            self.pids = pids

    def add(self, util_pct: float) -> None:
        self.counts[min(_BINS - 1, max(0, round(util_pct * 10)))] += 1
        self.n += 1
        self._median = None

    @property
    def pct(self) -> float | None:
        """The reference in %, None until MIN_HEALTHY_INTERVALS healthy intervals."""
        if self.n < MIN_HEALTHY_INTERVALS:
            return None
        if self._median is None:
            lo_rank, hi_rank = (self.n - 1) // 2, self.n // 2
            lo = hi = None
            seen = 0
            for i, c in enumerate(self.counts):
                seen += c
                if lo is None and seen > lo_rank:
                    lo = i
                if seen > hi_rank:
                    hi = i
                    break
            self._median = (lo + hi) / 20.0      # the mean of the two middle bins, in %
        return self._median


def _blamed(verdict, cause: str) -> str | None:
    raw = verdict.raw
    own = raw is not None and raw.state == verdict.state
    if cause in ("disk-starved", "checkpoint-stall"):
        devices = (raw.devices if own and raw.devices else None) or verdict.devices
        return devices[0] if devices else None
    if cause == "cpu-starved":
        return (raw.kind if own and raw.kind else None) or verdict.kind
    if cause == "straggler":
        gpus = (raw.gpus if own and raw.gpus else None) or verdict.gpus
        return ("GPU " + ",".join(str(g) for g in sorted(gpus))) if gpus else None
    return None


class Accountant:
    """Counts each interval: account(model, verdict) -> IntervalLoss.  Keeps the job's
    healthy level between intervals; one per Stepper."""

    def __init__(self) -> None:
        self.level = HealthyLevel()

    def account(self, model, verdict, info=None) -> IntervalLoss:
        """info: the job (model/jobs.py JobInfo) the verdict is of, on a shared node: only
        its GPUs are counted, and no idle GPU (the node's, node_loss)."""
        interval_s = model.interval_s
        state = verdict.state
        job_id = info.id if info is not None else None
        if interval_s <= 0 or unreadable_reason(model.gpu_status, model.gpus) is not None:
            return IntervalLoss(model.wall_s, max(0.0, interval_s), state, job_id=job_id)
        job = job_gpus(model, info)
        idle = 0 if info is not None else idle_gpus(model)
        utils = [min(100.0, max(0.0, g.util_pct)) / 100.0 for g in job if g.util_pct is not None]
        pids = frozenset(p.pid for g in job for p in g.processes)
        self.level.job(pids)
        cause = CAUSE_OF_STATE.get(state) if utils else None
        ref_pct = self.level.pct if cause is not None and cause != HEALTHY else None
        ref = 1.0 if ref_pct is None else ref_pct / 100.0
        unused = sum(interval_s * (1.0 - u) for u in utils)
        lost = 0.0
        if cause is not None and cause != HEALTHY:
            lost = sum(interval_s * max(0.0, ref - u) for u in utils)
        if state == HEALTHY and utils and verdict.raw_state == HEALTHY:
            self.level.add(sum(utils) / len(utils) * 100.0)
        episode = verdict.episode if cause is not None and state in STARVED_STATES else None
        return IntervalLoss(
            wall_s=model.wall_s, interval_s=interval_s, state=state, cause=cause,
            blamed=_blamed(verdict, cause) if cause is not None else None,
            job_gpus=len(utils), unused_gpu_s=unused, lost_gpu_s=lost,
            healthy_gpu_s=unused - lost, idle_gpu_s=idle * interval_s,
            job_gpu_s=len(utils) * interval_s,
            reference_pct=ref_pct, episode_id=episode.id if episode is not None else None,
            phase=phase_at(episode.phases, model.wall_s) if episode is not None else None,
            job_id=job_id)


def idle_gpus(model) -> int:
    """GPUs with no compute process (not lost): idle, whoever's job."""
    return sum(1 for g in model.gpus if not g.lost and not g.processes)


def node_loss(model, state: str, worst: IntervalLoss, parts: list[IntervalLoss]) -> IntervalLoss:
    """The node's interval of several jobs: their sums, the worst job's cause, blame and
    episode, the idle GPUs; a Ledger counts each part's cause."""
    if model.interval_s <= 0 or unreadable_reason(model.gpu_status, model.gpus) is not None:
        return replace(worst, state=state, job_id=None, parts=())
    return replace(worst, state=state, job_id=None, parts=tuple(parts),
                   job_gpus=sum(p.job_gpus for p in parts),
                   unused_gpu_s=sum(p.unused_gpu_s for p in parts),
                   lost_gpu_s=sum(p.lost_gpu_s for p in parts),
                   healthy_gpu_s=sum(p.healthy_gpu_s for p in parts),
                   job_gpu_s=sum(p.job_gpu_s for p in parts),
                   idle_gpu_s=idle_gpus(model) * model.interval_s)


@dataclass
class Ledger:
    """A running total of IntervalLoss: by cause (healthy included), by what each cause
    blames, idle apart.  Every figure only grows (the exporter's counters)."""

    by_cause: dict[str, float] = field(default_factory=lambda: dict.fromkeys(CAUSES, 0.0))
    # (cause, blamed) -> lost GPU-seconds; blamed None where nothing is named
    by_blame: dict[tuple[str, str | None], float] = field(default_factory=dict)
    idle_gpu_s: float = 0.0
    job_gpu_s: float = 0.0            # the job's GPUs' time counted (used and unused)
    seconds: float = 0.0              # the intervals counted, wall time
    intervals: int = 0
    # starved intervals counted against the job's healthy level and against 100 %
    against_level: int = 0
    against_full: int = 0
    # the latest reference a starved interval was counted against (None: only 100 %)
    reference_pct: float | None = None
    # gaps in sampling (verdict/gaps.py), counted nowhere above: how many, their seconds,
    # and the GAPS_LISTED longest as (wall time of the sample after it, length)
    gap_count: int = 0
    gap_s: float = 0.0
    gaps: list[tuple[float, float]] = field(default_factory=list)
    # episode id -> lost GPU-seconds (IntervalLoss.episode_id): the ids of the one Stepper
    # (or recorder session) whose intervals were added, so merge() leaves them out
    by_episode: dict[int, float] = field(default_factory=dict)
    # (episode id, phase index) -> lost GPU-seconds (IntervalLoss.phase), as by_episode
    by_phase: dict[tuple[int, int], float] = field(default_factory=dict)

    def add(self, loss: IntervalLoss | None) -> None:
        if loss is None:
            return
        if loss.gap_s is not None:
            self._add_gaps(1, loss.gap_s, [(loss.wall_s, loss.gap_s)])
        self.seconds += loss.interval_s
        self.intervals += 1
        self.idle_gpu_s += loss.idle_gpu_s
        self.job_gpu_s += loss.job_gpu_s
        for part in loss.parts or (loss,):
            self._add_cause(part)

    def _add_cause(self, loss: IntervalLoss) -> None:
        if loss.cause is None:
            return
        self.by_cause[HEALTHY] += loss.healthy_gpu_s
        if loss.cause != HEALTHY:
            self.by_cause[loss.cause] += loss.lost_gpu_s
            key = (loss.cause, loss.blamed)
            self.by_blame[key] = self.by_blame.get(key, 0.0) + loss.lost_gpu_s
            if loss.episode_id is not None:
                self.by_episode[loss.episode_id] = (self.by_episode.get(loss.episode_id, 0.0)
                                                    + loss.lost_gpu_s)
                if loss.phase is not None:
                    key = (loss.episode_id, loss.phase)
                    self.by_phase[key] = self.by_phase.get(key, 0.0) + loss.lost_gpu_s
            if loss.job_gpus:
                if loss.reference_pct is None:
                    self.against_full += 1
                else:
                    self.against_level += 1
                    self.reference_pct = loss.reference_pct

    def _add_gaps(self, count: int, seconds: float, listed) -> None:
        self.gap_count += count
        self.gap_s += seconds
        self.gaps = sorted([*self.gaps, *listed], key=lambda g: (-g[1], g[0]))[:GAPS_LISTED]

    def copy(self) -> "Ledger":
        """A copy that later add()s leave alone (the exporter's frame)."""
        return replace(self, by_cause=dict(self.by_cause), by_blame=dict(self.by_blame),
                       gaps=list(self.gaps), by_episode=dict(self.by_episode),
                       by_phase=dict(self.by_phase))

    def merge(self, other: "Ledger") -> None:
        """Add another ledger's counts (a report's sessions, one after another), all
        but by_episode: another Stepper's ids name other episodes."""
        for c, v in other.by_cause.items():
            self.by_cause[c] = self.by_cause.get(c, 0.0) + v
        for k, v in other.by_blame.items():
            self.by_blame[k] = self.by_blame.get(k, 0.0) + v
        self.idle_gpu_s += other.idle_gpu_s
        self.job_gpu_s += other.job_gpu_s
        self.seconds += other.seconds
        self.intervals += other.intervals
        self.against_level += other.against_level
        self.against_full += other.against_full
        if other.against_level:
            self.reference_pct = other.reference_pct
        self._add_gaps(other.gap_count, other.gap_s, other.gaps)

    @property
    def lost_gpu_s(self) -> float:
        """Lost to a cause (healthy's unused time is not)."""
        return sum(self.by_cause[c] for c in LOST_CAUSES)

    def lost_of(self, episode_id: int) -> float:
        """The GPU-seconds lost to one episode (by its id) in the intervals added."""
        return self.by_episode.get(episode_id, 0.0)

    def lost_of_phase(self, episode_id: int, phase: int) -> float:
        """The GPU-seconds lost to one phase (its index) of one episode."""
        return self.by_phase.get((episode_id, phase), 0.0)

    @property
    def unused_gpu_s(self) -> float:
        """Everything the job's GPUs left unused: the causes' and healthy's."""
        return sum(self.by_cause.values())

    @property
    def gpu_s(self) -> float:
        """Every GPU's time counted: the job's and the idle ones' (a share's whole)."""
        return self.job_gpu_s + self.idle_gpu_s

    def share_pct(self, gpu_s: float) -> float | None:
        """gpu_s as a share of all the GPU time counted, in %."""
        return gpu_s / self.gpu_s * 100.0 if self.gpu_s > 0 else None

    @property
    def by_device(self) -> dict[str, float]:
        """Disk-starved time by the device or mount blamed (unnamed ones left out)."""
        out: dict[str, float] = {}
        for (cause, blamed), v in self.by_blame.items():
            if cause == "disk-starved" and blamed is not None:
                out[blamed] = out.get(blamed, 0.0) + v
        return out

    def split(self) -> list[tuple[str, str | None, float]]:
        """(cause, blamed, lost GPU-seconds) with something lost, the largest first."""
        return ranked((c, b, v) for (c, b), v in self.by_blame.items())

    def below(self) -> str:
        """The reference in short, as the one-line account says it: 'below healthy
        96.0%' (the job's healthy median), 'below 100%'."""
        if self.against_level:
            return f"below healthy {pct(self.reference_pct, 1)}"
        return f"below {REF_FULL}"

    def reference(self) -> str:
        """Which reference the lost time was counted against, in words."""
        if self.against_level and self.against_full:
            return (f"the job's {REF_HEALTHY} {pct(self.reference_pct, 1)} "
                    f"({REF_FULL} in {self.against_full} intervals before it was known)")
        if self.against_level:
            return f"the job's {REF_HEALTHY} {pct(self.reference_pct, 1)}"
        return REF_FULL


    # ---------------------------------------------------------------- one voice
    def line(self, price: Price = NO_PRICE, most: int = 3) -> str:
        """The one-line account every text surface shows: 'lost 3.20 GPU-h below healthy
        96.0%: disk sdb 2.90, cpu own 0.30 (cost 12.80 USD)'; GPU-hours by Metric
        LEDGER_HOURS (lost_phrase, the fleet's words too)."""
        text = "lost " + lost_phrase(self.lost_gpu_s, self.split(), most, self.below())
        cost = price.text(self.lost_gpu_s)
        return text + (f" (cost {cost})" if cost is not None else "")

    def as_json(self, price: Price = NO_PRICE) -> dict:
        """`--once --json`'s and `report --json`'s "ledger": GPU-seconds (vocab LEDGER's
        keys), the reference, and cost where a price is set (else null)."""
        lost_key, idle_key = LEDGER["lost_gpu_s"].json_key, LEDGER["idle_gpu_s"].json_key
        return {
            lost_key: self.lost_gpu_s,
            "unused_gpu_s": self.unused_gpu_s,
            idle_key: self.idle_gpu_s,
            "job_gpu_s": self.job_gpu_s,
            "seconds": self.seconds,
            "intervals": self.intervals,
            "by_cause": {c: self.by_cause.get(c, 0.0) for c in CAUSES},
            "by_device": dict(sorted(self.by_device.items())),
            "split": [{"cause": c, "blamed": b, lost_key: v} for c, b, v in self.split()],
            "reference": {"text": self.reference(), "healthy_median_pct": self.reference_pct
                          if self.against_level else None,
                          "intervals_against_healthy_median": self.against_level,
                          "intervals_against_100_pct": self.against_full},
            "gpu_hour_cost": price.gpu_hour_cost,
            "currency": price.currency or None,
            "cost": price.cost(self.lost_gpu_s),
            "gaps": self.gaps_json(),
        }

    def gaps_json(self) -> dict:
        """"gaps": the gaps in sampling, counted nowhere: count, seconds in all, and the
        longest (GAPS_LISTED) each with the time of the sample after it."""
        return {"count": self.gap_count, "seconds": self.gap_s,
                "listed": [{"end": iso_time(w), "end_s": w, "gap_s": g} for w, g in self.gaps]}


def ranked(rows) -> list[tuple[str, str | None, float]]:
    """(cause, blamed, GPU-seconds) rows with something lost, the largest first (then in
    CAUSES' order, then by what they blame): the one order of every split."""
    return sorted((r for r in rows if r[2] > 0),
                  key=lambda r: (-r[2], CAUSES.index(r[0]), r[1] or ""))


def blame_word(cause: str, blamed: str | None) -> str:
    """'disk sdb', 'cpu own', 'checkpoint nvme2n1', 'undiagnosed'."""
    word = CAUSE_WORD[cause]
    return f"{word} {blamed}" if blamed else word


def lost_phrase(lost_gpu_s: float, rows, most: int = 3, qualifier: str = "") -> str:
    """GPU time lost by cause in words, the node's (Ledger.line) and the fleet's
    (fleet/ledger.py lost_text) alike: '3.20 GPU-h below 100%: disk sdb 2.90, cpu own
    0.30, other 0.10', '0.00 GPU-h'.  rows: (cause, blamed or None, GPU-seconds), ranked
    here, the `most` largest named and the rest as 'other'; qualifier follows the total
    (the reference)."""
    rows = ranked(rows)
    parts = [f"{blame_word(c, b)} {gpu_hours(v)}" for c, b, v in rows[:most]]
    rest = sum(v for _c, _b, v in rows[most:])
    if rest > 0:
        parts.append(f"other {gpu_hours(rest)}")
    text = f"{gpu_hours(lost_gpu_s)} GPU-h" + (f" {qualifier}" if qualifier else "")
    return f"{text}: {', '.join(parts)}" if parts else text


def gaps_text(gaps: dict | None) -> str | None:
    """A ledger's gaps (Ledger.gaps_json) in words, as every text surface says them: 'not
    counted: 1 gap in sampling, 21 s (ending 2026-01-01T00:00:36.000+00:00)', 'not
    counted: 3 gaps in sampling, 2 h 10 min in all (the longest 2 h 00 min, ending ...)';
    None without a gap."""
    if not gaps or not gaps.get("count"):
        return None
    n, listed = gaps["count"], gaps.get("listed") or []
    many = n != 1
    text = f"not counted: {n} gap{'s' * many} in sampling, {duration(gaps['seconds'])}"
    text += " in all" if many else ""
    if listed:
        longest = f"the longest {duration(listed[0]['gap_s'])}, " if many else ""
        text += f" ({longest}ending {listed[0]['end']})"
    return text


def recovered_gpu_s(lost_gpu_s: float, best, reference_pct: float | None) -> float:
    """How much of an episode's lost time its best fix (verdict/whatif.py WhatIf, the
    prediction of its latest interval) would have recovered: its predicted rise of the
    GPUs' utilization over the rise to the reference, at most all of it."""
    if best is None or lost_gpu_s <= 0:
        return 0.0
    ref = 100.0 if reference_pct is None else reference_pct
    gap = ref - best.gpu_now_pct
    if gap <= 0:
        return 0.0
    return lost_gpu_s * min(1.0, max(0.0, (best.gpu_util_pct - best.gpu_now_pct) / gap))


def interval_loss(model, verdict) -> IntervalLoss:
    """One interval's loss counted against 100 % (no history): a job's verdict counts its
    own GPUs; the node's verdict of several jobs, each job's (node_loss)."""
    if not verdict.jobs:
        return Accountant().account(model, verdict, verdict.job)
    parts = [Accountant().account(model, jv, jv.job) for jv in verdict.jobs]
    ids = [jv.job.id for jv in verdict.jobs]
    return node_loss(model, verdict.state, parts[ids.index(verdict.job.id)], parts)


def ledger_of(model, verdict) -> Ledger:
    """One interval's ledger, counted against 100 % (`--once`: no history)."""
    ledger = Ledger()
    ledger.add(interval_loss(model, verdict))
    return ledger


__all__ = ["NO_PRICE", "Price", "Accountant", "CAUSES", "CAUSE_OF_STATE", "CAUSE_WORD", "HEALTHY", "HealthyLevel", "gaps_text",
           "IntervalLoss", "Ledger", "interval_loss", "node_loss", "LOST_CAUSES", "MIN_HEALTHY_INTERVALS", "blame_word",
           "ledger_of", "lost_phrase", "ranked", "recovered_gpu_s"]
