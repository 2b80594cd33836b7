"""What the fleet screen and `fleet --once` get of one refresh: the types, none of the
building (fleet/table.py builds a FleetView, fleet/jobs.py judges its JobGroups,
fleet/timeline.py builds a NodeTimeline).

  FleetView.rows     NodeRow per node (the --by label's value), in screen order: starved
                     first (more GPUs starved first, then the longest starved), then the
                     nodes that stopped reporting (stale), fail their scrapes (down) or
                     read no GPU (unavailable), then straggler (GPUs waiting on peers),
                     undiagnosed-stall, healthy, idle.  NodeRow.evidence_text is the
                     device column's text; spark_pct the last hour's mean GPU
                     utilization, a value a minute.
  FleetView.jobs     JobGroup per value of the job label (nodes of one training job side
                     by side), each with its straggler (or None) and a one-line reason
                     (fleet/jobs.py judge_job: the straggler rule, the alert rules' own
                     definitions).
  QueryCost          the queries a refresh sent, their series and round trips.
  DeviceEvidence     a blamed device's numbers, under the disk table's names.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable

from gpudisk_top.fleet import trust
from gpudisk_top.model import busy_tier
from gpudisk_top.fleet.ledger import lost_json, lost_total
from gpudisk_top.fleet.promapi import QueryResult
from gpudisk_top.fleet.queries import LEDGER_WINDOW_S
from gpudisk_top.verdict.detect import OWN_CAUSE_STATES, UNAVAILABLE, Thresholds
from gpudisk_top.model.vocab import DISK, DISK_MB, mb_s

STALE = "stale"        # seen in the last hour, not now
DOWN = "down"          # its target fails scrapes (up == 0) and it was not seen in the hour
# the device column of a node in state unavailable (why: its gpudisk_top_gpus_unavailable_info)
NO_GPU_TEXT = "no GPU can be read there (no driver, NVML error or hang)"
GPU_LOW_PCT = Thresholds().gpu_low_util_pct    # below it a GPU waits (the detector's default
KEY_SEP = "\x1f"        # NodeRow.key's: between a node and its job's id (a control
                         # character: in no label value the fleet shows, textsafe escapes it)


@dataclass
class QueryCost:
    """Queries sent, series they returned, and their round trips' total."""

    queries: int = 0
    series: int = 0
    elapsed_ms: float = 0.0

    def add(self, result: QueryResult | None) -> "QueryCost":
        if result is not None:
            self.queries += 1
            self.series += len(result.series)
            self.elapsed_ms += result.elapsed_s * 1000.0
        return self

    def __add__(self, other: "QueryCost") -> "QueryCost":
        return QueryCost(self.queries + other.queries, self.series + other.series,
                         self.elapsed_ms + other.elapsed_ms)

    def text(self) -> str:
        return (f"{self.queries} quer{'y' if self.queries == 1 else 'ies'}, "
                f"{self.series} series, {self.elapsed_ms:.0f} ms")


@dataclass
class DeviceEvidence:
    """A device the verdict blames (a disk, or a network mount by its mountpoint), under
    the disk table's names and in its units (vocab.DISK: r_await_ms, aqu_sz, util_pct,
    rkb_s; a mount's numbers as a disk's, model/mounts.py like_disk); None where the node
    does not export the number."""

    device: str
    mountpoint: str = ""
    dev_class: str = ""
    r_await_ms: float | None = None
    aqu_sz: float | None = None
    util_pct: float | None = None
    rkb_s: float | None = None

    def _parts(self, full: bool) -> list[str]:
        # each figure as the node's own dashboard and --once read it (Metric.text)
        parts = []
        if self.r_await_ms is not None:
            parts.append(f"r_await {DISK['r_await_ms'].text(self.r_await_ms)} ms")
        if self.aqu_sz is not None:
            parts.append(f"aqu-sz {DISK['aqu_sz'].text(self.aqu_sz)}")
        if full and self.util_pct is not None:
            parts.append(f"%util {DISK['util_pct'].text(self.util_pct)}")
        if full and self.rkb_s is not None and not parts:
            parts.append(f"read {DISK_MB['rmb_s'].text(mb_s(self.rkb_s))} MB/s")
        return parts

    @property
    def text(self) -> str:
        """'sdb r_await 48.20 ms, aqu-sz 31.00, %util 99.60'."""
        parts = self._parts(full=True)
        return f"{self.device} {', '.join(parts)}" if parts else self.device

    @property
    def short(self) -> str:
        """'r_await 48.20 ms, aqu-sz 31.00' (the straggler line's: the latency and the
        queue)."""
        return ", ".join(self._parts(full=False))

    def to_json(self) -> dict:
        """Its fields, and under LEGACY_EVIDENCE_KEYS the names fleet --once --json gave
        them before they took the disk table's (the JSON's keys are an API: added, never
        removed)."""
        d = asdict(self)
        d.update({old: d[new] for old, new in LEGACY_EVIDENCE_KEYS.items()})
        return d


# the fleet's JSON names of its first version for DeviceEvidence's fields
LEGACY_EVIDENCE_KEYS = {"read_await_ms": "r_await_ms", "queue_size": "aqu_sz",
                        "read_kb_s": "rkb_s"}


# a row's tier where the rows' differ: after its GPU figure (S: GPM SM activity, U:
# utilization.gpu, ~: a node of both)
BUSY_MARK = {"SM": "S", "util": "U", "SM+util": "~"}


def busy_head(rows) -> str | None:
    """The tier the reporting rows with GPUs share ("SM", "util", "SM+util"): the GPU
    column's header names it; None where they differ (each row is then marked,
    BUSY_MARK); "util" with no such row."""
    tags = {r.busy_tag for r in rows if r.gpus_total and not r.stale}
    if not tags:
        return "util"
    return tags.pop() if len(tags) == 1 else None


@dataclass
class NodeRow:
    """One node of the table.

    node: the --by label's value; labels: the target's labels (job, instance, the
    training job's ...); state: the node's detector state, or "stale" (seen in the last
    hour, not now) or "down" (its target fails scrapes, not seen in the hour); kind: what
    the verdict blames (saturated, latency-bound, remote-mount, throttled, own, others) or
    None; devices and gpus: those the verdict names; gpus_starved (the exporter's: GPUs
    starved by the node's own cause, OWN_CAUSE_STATES) / gpus_total; gpu_util_pct:
    the mean over its GPUs now; since_s: when the state began (Unix s); last_seen_s: its
    latest sample (Unix s); stale: not reporting now (state stale or down); evidence: the
    named devices' numbers; spark_pct: the last hour's mean GPU utilization, a value a
    minute (None: no data that minute); members: the instances of the scrape targets the
    row gathers (one, unless --by names a label several targets share)."""

    node: str
    labels: dict[str, str] = field(default_factory=dict)
    state: str = "healthy"
    kind: str | None = None
    devices: list[str] = field(default_factory=list)
    gpus: list[int] = field(default_factory=list)
    gpus_starved: int = 0
    gpus_total: int = 0
    gpu_util_pct: float | None = None
    since_s: float | None = None
    last_seen_s: float | None = None
    stale: bool = False
    evidence: list[DeviceEvidence] = field(default_factory=list)
    spark_pct: list[float | None] = field(default_factory=list)
    gpu_util_by_gpu: dict[int, float | None] = field(default_factory=dict)
    members: list[str] = field(default_factory=list)
    bad_series: int = 0
    # each figure doubted or left out, and why (trust.py, ledger.py): said in the row
    doubts: dict[str, str] = field(default_factory=dict)
    # GPU-seconds lost in the last 24 hours, by cause (LOST_CAUSES; apply_ledger); None:
    # not asked yet, or the node exports no ledger counters
    lost_by_cause: dict[str, float] | None = None
    # the job this row is of, as the node's exporter names it (issue 37: a row a node and
    # job, fleet/nodejobs.py); '' for a node that names no job (an older exporter, or no
    # GPU process): the row is the node's
    job_id: str = ""
    job_name: str = ""
    job_source: str = ""
    # the node's last-hour sparkline is this row's: a job row only when the job holds
    # every GPU of its node (not in --json)
    spark_of_node: bool = True
    # its GPUs by the tier of their busy figure (model/busy_tier.py: gpm-sm-active,
    # utilization), as its exporter counts them; {} from an exporter older than the
    # series: utilization (a job's row: its node's)
    busy_sources: dict[str, int] = field(default_factory=dict)

    @property
    def busy_tag(self) -> str:
        """The tier of its GPU figure: "SM", "util", or "SM+util" for a node of both."""
        tags = [busy_tier.tag(t) for t in busy_tier.TAG if self.busy_sources.get(t)]
        return "+".join(tags) if tags else busy_tier.tag(None)

    @property
    def key(self) -> str:
        """The row's identity in a view: the node's name, and its job's id after a
        separator no label value shows (a node of two jobs has two rows)."""
        return f"{self.node}{KEY_SEP}{self.job_id}" if self.job_id else self.node

    @property
    def lost_gpu_s(self) -> float | None:
        return lost_total(self.lost_by_cause)

    @property
    def bad_data_text(self) -> str:
        """What the row doubts, in words (trust.doubts_text): 'bad data from its exporter
        (2 series dropped)' when the exporter gave numbers outside their range
        (check_value), ...; '' when nothing."""
        return trust.doubts_text(self.doubts)

    @property
    def evidence_text(self) -> str:
        """'sdb r_await 48.20 ms, aqu-sz 31.00, %util 99.60' (several devices: '; '-joined);
        NO_GPU_TEXT for a node in state unavailable; '' when the verdict names no device."""
        if self.state == UNAVAILABLE and not self.evidence:
            return NO_GPU_TEXT
        return "; ".join(e.text for e in self.evidence)

    @property
    def starved(self) -> bool:
        """Reporting, and starved by its own cause (OWN_CAUSE_STATES), as the alert rules'
        gpudisk_top:node_starved:bool."""
        return self.state in OWN_CAUSE_STATES and not self.stale

    def waits(self, gpu_low_pct: float = GPU_LOW_PCT) -> bool:
        """Its GPUs wait on a peer: reporting, not starved itself, and the local state
        straggler or a mean GPU utilization under gpu_low_pct."""
        return not self.stale and not self.starved and self.state != trust.BAD_DATA and (
            self.state == "straggler"
            or (self.gpu_util_pct is not None and self.gpu_util_pct < gpu_low_pct))

    def to_json(self) -> dict:
        d = asdict(self)
        d.pop("spark_of_node")
        d["evidence"] = [e.to_json() for e in self.evidence]
        d.pop("gpu_util_by_gpu")
        d["gpu_util_by_gpu"] = {str(k): v for k, v in sorted(self.gpu_util_by_gpu.items())}
        d["evidence_text"] = self.evidence_text
        d["busy_tag"] = self.busy_tag
        d.update(lost_json(d.pop("lost_by_cause")))
        return d


@dataclass
class JobGroup:
    """The rows of one training job (nodes, one row each), in screen order; job: its key
    in the view (the job id; 'ID@NODE' for a job of one node; the job label's value);
    by: how it was found (BY_ID, BY_NODE, or the job label's name); id, name, source:
    the exporters' job id, name and source ('' for a job label's group); straggler: the
    node that holds the others back, or None; waiting: the nodes that wait on it (empty
    without one); reason: one line why (or why none), without a clock; since_s: when the
    state of the node the reason names began (Unix s; None when it names none).
    describe() puts that time in the line; role() says which a node is.  (BY_ID and
    BY_NODE: fleet/labels.py.)"""

    job: str
    nodes: list[NodeRow] = field(default_factory=list)
    straggler: NodeRow | None = None
    waiting: list[NodeRow] = field(default_factory=list)
    reason: str = ""
    since_s: float | None = None
    _since_at: int | None = field(default=None, repr=False, compare=False)
    # the job's GPU-seconds lost in the last 24 hours, by cause: its series' (by the job
    # label on each, so a node's time in another job counts there), None: none
    lost_by_cause: dict[str, float] | None = None
    by: str = "training_job"
    id: str = ""
    name: str = ""
    source: str = ""

    @property
    def lost_gpu_s(self) -> float | None:
        return lost_total(self.lost_by_cause)

    @property
    def title(self) -> str:
        """What a person calls it: the exporters' name and id ('slurm 1001 (train.py)
        [slurm:1001]'), or LABEL=VALUE for a job label's group (unescaped: print through
        textsafe)."""
        if not self.id:
            return f"{self.by}={self.job}"
        return f"{self.name} [{self.id}]" if self.name and self.name != self.id else self.id

    def describe(self, clock: Callable[[float | None], str] | None = None) -> str:
        """The reason, with ' since <clock(since_s)>' after the named node's state when a
        clock is given (text and screens pass theirs: the model formats no local time)."""
        if clock is None or self._since_at is None:
            return self.reason
        at = self._since_at
        return f"{self.reason[:at]} since {clock(self.since_s)}{self.reason[at:]}"

    def role(self, row: NodeRow) -> str | None:
        """"straggler" for the node that holds the job back, "waiting" for a node that
        waits on it, None for the others (and for every node of a job without one)."""
        if self.straggler is None:
            return None
        if row.node == self.straggler.node:
            return "straggler"
        return "waiting" if any(r.node == row.node for r in self.waiting) else None

    def to_json(self) -> dict:
        return {"job": self.job, "by": self.by, "id": self.id or None,
                "name": self.name or None, "source": self.source or None,
                "nodes": [r.node for r in self.nodes],
                "straggler": self.straggler.node if self.straggler else None,
                "waiting": [r.node for r in self.waiting],
                "reason": self.reason, "since_s": self.since_s, **lost_json(self.lost_by_cause)}


@dataclass
class FleetView:
    """One refresh.  wall_s: when it was built; rows, jobs: see the module's docstring;
    error: the query's one-line error (rows then are the last good ones, or empty);
    cost: this refresh's queries; url, group_by, job_label: what was asked; recorded:
    the table was read from the recording rules' series (examples/fleet-rules.yml)."""

    wall_s: float
    rows: list[NodeRow] = field(default_factory=list)
    jobs: list[JobGroup] = field(default_factory=list)
    error: str | None = None
    cost: QueryCost = field(default_factory=QueryCost)
    url: str = ""
    group_by: str = "instance"
    job_label: str = "training_job"
    data_wall_s: float | None = None      # when the rows were read (None: never)
    recorded: bool = False
    # the fleet's GPU-seconds lost in the last 24 hours, by cause (every node's series,
    # those without a row too: stopped for more than the table's hour); None: not asked
    # yet, or no ledger counters
    lost_by_cause: dict[str, float] | None = None
    # what was doubted of the nodes without a row (ledger.py), one line each
    doubts: list[str] = field(default_factory=list)

    def job(self, name: str) -> JobGroup | None:
        """The job `name` names: its key, else the one job of that id, else the one job
        of that name (None: none, or several)."""
        for field_of in (lambda j: j.job, lambda j: j.id, lambda j: j.name):
            found = [j for j in self.jobs if field_of(j) == name]
            if found:
                return found[0] if len(found) == 1 else None
        return None

    def only_job(self, name: str) -> None:
        """The job view's (--job): only the rows and the job group of the job `name`
        names (job()), and its GPU time lost as the total; none when it names none."""
        group = self.job(name)
        self.jobs = [group] if group is not None else []
        keys = {r.key for r in group.nodes} if group is not None else set()
        self.rows = [r for r in self.rows if r.key in keys]
        if self.lost_by_cause is not None:
            self.lost_by_cause = group.lost_by_cause if group is not None else None

    def to_json(self) -> dict:
        """The --once --json object (README's "Fleet" section lists the keys)."""
        return {"wall_s": self.wall_s, "prometheus": self.url, "group_by": self.group_by,
                "job_label": self.job_label, "error": self.error,
                "data_wall_s": self.data_wall_s, "recording_rules": self.recorded,
                "lost_24h": None if self.lost_by_cause is None else {
                    "window_s": LEDGER_WINDOW_S, "gpu_s": lost_total(self.lost_by_cause),
                    "by_cause": self.lost_by_cause},
                "nodes": [r.to_json() for r in self.rows],
                "jobs": [j.to_json() for j in self.jobs], "doubts": self.doubts,
                "cost": asdict(self.cost)}
