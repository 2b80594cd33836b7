"""The fleet as rows, job groups and one node's timeline, from Prometheus's answers.

Pure functions of QueryResults (promapi.py): build_view() turns the table's one instant
query (queries.table_query) and the sparkline query into a FleetView; build_timeline()
turns one node's range query into a NodeTimeline.  No I/O, no clock, no Textual: tests
feed them Prometheus JSON captured from a real server.

What the UI gets
  FleetView.rows     NodeRow per node (the --by label's value), in screen order: starved
                     first (more GPUs starved first, then the longest starved), then the
                     nodes that stopped reporting (stale), fail their scrapes (down) or
                     read no GPU (unavailable), then straggler (GPUs waiting on peers),
                     undiagnosed-stall, healthy, idle.  NodeRow.evidence_text is the
                     device column's text; spark_pct the last hour's mean GPU
                     utilization, a value a minute.
  FleetView.jobs     JobGroup per value of the job label (nodes of one training job side
                     by side), each with its straggler (or None) and a one-line reason
                     (judge_job: the straggler rule, the alert rules' own definitions).
  NodeTimeline       the opened node's window as a model.history.History of Columns, the
                     very objects the local dashboard's timeline draws: the UI hands
                     (history, gpus, disks, named) to ui.widgets.timeline.Timeline.show()
                     and gets the same rows, glyphs, shading and time axis.  One column per
                     step_s (1 s when the window fits the width, as the local timeline's
                     one column per sample).  A column where the node did not report has
                     state "" (drawn blank) and no GPU or disk values.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Callable

from gpudisk_top.fleet import trust
from gpudisk_top.fleet.labels import node_name
from gpudisk_top.fleet.ledger import apply_ledger, lost_json, lost_total
from gpudisk_top.fleet.promapi import QueryResult, Series
from gpudisk_top.fleet.queries import (DOWN_LABEL, EVIDENCE_DISK, EVIDENCE_MOUNT, GPU_UTIL,
                                       LEDGER_WINDOW_S, P, REC_GPU_UTIL_SUM, REC_GPUS,
                                       REC_GPUS_READ, RULES_LABEL, SEEN_LABEL, SPARK_STEP_S,
                                       SPARK_WINDOW_S, TIMELINE_DISK)
from gpudisk_top.verdict.detect import OWN_CAUSE_STATES, STATES, UNAVAILABLE, Thresholds
from gpudisk_top.model.disk import BUSY_SLACK_FACTOR, MAX_DATA_BYTES_S
from gpudisk_top.model.history import Column, History
from gpudisk_top.model.present import natural_key
from gpudisk_top.model.vocab import (DISK, DISK_MB, GPUS_STARVED, LAST_SAMPLE, STATE_SINCE,
                                     TIMELINE, VERDICT_INFO, mb_s)

STALE = "stale"        # seen in the last hour, not now
DOWN = "down"          # its target fails scrapes (up == 0) and it was not seen in the hour
# screen order, by tier: the nodes starved by their own cause (OWN_CAUSE_STATES) first,
# then those that give no data: not reporting, or reading no GPU (a broken driver, not idle)
_TIER = {**{s: 0 for s in OWN_CAUSE_STATES}, STALE: 1, DOWN: 1, UNAVAILABLE: 1,
         trust.BAD_DATA: 1, "straggler": 2,
         "undiagnosed-stall": 3, "healthy": 4, "idle": 5}
# the device column of a node in state unavailable (why: its gpudisk_top_gpus_unavailable_info)
NO_GPU_TEXT = "no GPU can be read there (no driver, NVML error or hang)"
GPU_LOW_PCT = Thresholds().gpu_low_util_pct    # below it a GPU waits (the detector's default
SPARK_POINTS = SPARK_WINDOW_S // SPARK_STEP_S


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
        d["evidence"] = [e.to_json() for e in self.evidence]
        d.pop("gpu_util_by_gpu")
        d["gpu_util_by_gpu"] = {str(k): v for k, v in sorted(self.gpu_util_by_gpu.items())}
        d["evidence_text"] = self.evidence_text
        d.update(lost_json(d.pop("lost_by_cause")))
        return d


@dataclass
class JobGroup:
    """The nodes of one training job (a value of the job label), in screen order;
    straggler: the node that holds the others back, or None; waiting: the nodes that
    wait on it (empty without one); reason: one line why (or why none), without a clock;
    since_s: when the state of the node the reason names began (Unix s; None when it
    names none).  describe() puts that time in the line; role() says which a node is."""

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

    @property
    def lost_gpu_s(self) -> float | None:
        return lost_total(self.lost_by_cause)

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
        return {"job": self.job, "nodes": [r.node for r in self.nodes],
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
        return next((j for j in self.jobs if j.job == name), None)

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


# ---------------------------------------------------------------------------- building
@dataclass
class _Member:
    """One scrape target's series (a row may gather several when --by names a label
    that several targets share)."""

    labels: dict[str, str] | None = None
    verdicts: list[dict[str, str]] = field(default_factory=list)   # its verdict_info's labels
    since_s: float | None = None
    gpus_starved: int | None = None
    last_sample_s: float | None = None
    seen_s: float | None = None            # max_over_time's: seen in the last hour
    down: bool = False
    bad_series: int = 0                    # dropped by check_value
    gpu_util: dict[int, float | None] = field(default_factory=dict)
    # the recording rules' (queries.RECORDED): its GPUs, those read, their sum (percent)
    gpus_count: int = 0
    gpus_read: int = 0
    gpu_util_sum_pct: float = 0.0
    disks: dict[str, DeviceEvidence] = field(default_factory=dict)
    mounts: dict[str, DeviceEvidence] = field(default_factory=dict)

    @property
    def verdict(self) -> dict[str, str] | None:
        return trust.one_verdict(self.verdicts)

    @property
    def live(self) -> bool:
        return bool(self.verdicts)

    @property
    def state(self) -> str:
        if self.live:
            return self.verdict.get("state") or "healthy"
        if self.seen_s is not None or self.last_sample_s is not None:
            return STALE
        return DOWN


def _finite(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) else None


# ---------------------------------------------------------------------------- the edge
# What an exporter may say, checked here once for the table and the timeline alike: a
# number outside its metric's physical range (a negative await, a GPU at -500 % or 1e308,
# a state begun in the year 31,000) is not shown as given, it is dropped and counted
# (NodeRow.bad_series), and the rest of the node's row and the table stand.
TIMESTAMP_SPAN_S = 10 * 365.25 * 86400      # timestamps within 10 years of now
MAX_GPUS = 4096
_RATIO = (0.0, 1.0)
_TIMESTAMPS = {"", P + STATE_SINCE, P + LAST_SAMPLE}
# a device's number, by its unit in the model: what can be true of it in base units
_BOUNDS = {"%": (0.0, BUSY_SLACK_FACTOR), "ms": (0.0, TIMESTAMP_SPAN_S), "requests": (0.0, 1e9),
           "/s": (0.0, 1e8), "kB/s": (0.0, MAX_DATA_BYTES_S)}
_RANGES = {P + GPUS_STARVED: (0.0, MAX_GPUS), GPU_UTIL.prom_name: _RATIO,
           REC_GPUS: (0.0, MAX_GPUS), REC_GPUS_READ: (0.0, MAX_GPUS),
           REC_GPU_UTIL_SUM: (0.0, MAX_GPUS),
           **{m.prom_name: _BOUNDS[m.unit] for m in (
               *EVIDENCE_DISK, *(m for m, _, _ in EVIDENCE_MOUNT), *(m for m, _ in TIMELINE_DISK))}}


def check_value(name: str, value: float | None, now_s: float) -> bool:
    """True when `value` of the metric `name` ("" for max_over_time's timestamp) can be
    true: a timestamp within TIMESTAMP_SPAN_S of now_s, any other number of a metric we
    read within its range.  NaN (Prometheus's "no value") passes: it is shown as none.
    Never raises."""
    if value is None or math.isnan(value):
        return True
    if name in _TIMESTAMPS:
        return abs(value - now_s) <= TIMESTAMP_SPAN_S
    lo, hi = _RANGES.get(name, (-math.inf, math.inf))
    return math.isfinite(value) and lo <= value <= hi


def _index(text: str | None) -> int | None:
    """A GPU's index from a label: ASCII digits only ('²' and '٣' are digits to
    str.isdigit, not to int or to us), at most MAX_GPUS."""
    if not text or not text.isascii() or not text.isdigit() or len(text) > 6:
        return None
    n = int(text)
    return n if n < MAX_GPUS else None


_DISK = {m.prom_name: m for m in EVIDENCE_DISK}
_MOUNT = {m.prom_name: (m, field, rank) for m, field, rank in EVIDENCE_MOUNT}
# the labels a series has beyond its target's
_OWN = {"__name__", "gpu", "uuid", "device", "mountpoint", "class", "fstype", "source",
        "state", "kind", "devices", "gpus", DOWN_LABEL, SEEN_LABEL}


def _member_key(labels: dict[str, str]) -> tuple[str, str]:
    return labels.get("job", ""), labels.get("instance", "")


def _collect(table: QueryResult, group_by: str,
             now_s: float) -> dict[str, dict[tuple, _Member]]:
    nodes: dict[str, dict[tuple, _Member]] = {}
    preferred: dict[int, set] = {}      # id(member) -> mount fields set by a preferred source
    for s in table.series:
        lab = s.labels
        if RULES_LABEL in lab:          # whether the recording rules are loaded: source.py's
            continue
        m = nodes.setdefault(node_name(lab, group_by), {}).setdefault(_member_key(lab), _Member())
        # the stale nodes' last hour (queries.table_query): max_over_time's answer, which
        # Prometheus gives without a metric name and VictoriaMetrics with the sample's
        name = "" if SEEN_LABEL in lab else s.name
        value = _finite(s.value)
        if not check_value(name, s.value, now_s):
            m.bad_series += 1
            m.labels = m.labels or _target(lab)
            if name != GPU_UTIL.prom_name:
                continue
            value = None                    # the GPU is there; its number is not
        if DOWN_LABEL in lab:
            m.down = True
            m.labels = m.labels or _target(lab)
            continue
        if not name:                                   # seen in the hour, not live now
            m.seen_s = value
            m.labels = m.labels or _target(lab)
        elif name == P + VERDICT_INFO:
            m.verdicts.append(lab)
        elif name == P + STATE_SINCE:
            m.since_s = value
        elif name == P + GPUS_STARVED:
            m.gpus_starved = int(value) if value is not None else None
            m.labels = _target(lab)
        elif name == P + LAST_SAMPLE:
            m.last_sample_s = value
            m.labels = _target(lab)
        elif name == GPU_UTIL.prom_name:
            gpu = _index(lab.get("gpu"))
            if gpu is None:
                m.bad_series += 1
            else:
                m.gpu_util[gpu] = None if value is None else GPU_UTIL.from_base(value)
        elif name == REC_GPUS:
            m.gpus_count = int(value or 0)
            m.labels = m.labels or _target(lab)
        elif name == REC_GPUS_READ:
            m.gpus_read = int(value or 0)
        elif name == REC_GPU_UTIL_SUM:
            m.gpu_util_sum_pct = GPU_UTIL.from_base(value or 0.0)
        elif name in _DISK:
            dev = lab.get("device", "")
            ev = m.disks.setdefault(dev, DeviceEvidence(dev, lab.get("mountpoint", ""),
                                                        lab.get("class", "")))
            metric = _DISK[name]
            setattr(ev, metric.field, None if value is None else metric.from_base(value))
        elif name in _MOUNT:
            mp = lab.get("mountpoint", "")
            ev = m.mounts.setdefault(mp, DeviceEvidence(mp, mp, lab.get("fstype", "")))
            metric, attr, rank = _MOUNT[name]
            done = preferred.setdefault(id(ev), set())
            if value is not None and (rank == 0 or attr not in done):
                setattr(ev, attr, metric.from_base(value))
                if rank == 0:
                    done.add(attr)
    return nodes


def _target(labels: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in labels.items() if k not in _OWN}


def _split(text: str | None) -> list[str]:
    return [t for t in (text or "").split(",") if t]


def _row(node: str, keyed: dict[tuple[str, str], _Member]) -> NodeRow:
    members, scrapes = trust.one_per_instance(keyed)
    # the worst member speaks for the row (one member unless --by groups several targets)
    worst = min(members, key=lambda m: (_TIER.get(m.state, 6), -(m.gpus_starved or 0)))
    state = worst.state
    labels = None
    for m in members:
        if m.labels is not None:
            labels = dict(m.labels) if labels is None else {
                k: v for k, v in labels.items() if m.labels.get(k) == v}
    # the mean over every GPU of the row: each read GPU's (the raw series) and the
    # recording rules' sums and counts, these of the live members only (a rule evaluated
    # before a node's series went stale still holds its GPUs until the next evaluation)
    utils = [v for m in members for v in m.gpu_util.values() if v is not None]
    rec = [m for m in members if m.live]
    read = len(utils) + sum(m.gpus_read for m in rec)
    util_sum = sum(utils) + sum(m.gpu_util_sum_pct for m in rec if m.gpus_read)
    row = NodeRow(node=node, labels=labels or {}, state=state,
                  gpus_total=sum(len(m.gpu_util) for m in members) + sum(m.gpus_count for m in rec),
                  gpu_util_pct=util_sum / read if read else None,
                  stale=state in (STALE, DOWN),
                  members=sorted({instance for _job, instance in keyed}, key=natural_key),
                  bad_series=sum(m.bad_series for m in members))
    if row.bad_series:
        row.doubts[trust.SERIES] = f"{row.bad_series} series dropped"
    verdicts = next(filter(None, map(trust.verdicts_doubt, (m.verdicts for m in members))), None)
    for key, doubt in ((trust.VERDICTS, verdicts), (trust.SCRAPES, scrapes)):
        if doubt:
            row.doubts[key] = doubt
    seen = [t for m in members for t in (m.last_sample_s, m.seen_s) if t is not None]
    row.last_seen_s = max(seen) if seen else None
    if len(members) == 1:
        row.gpu_util_by_gpu = dict(sorted(worst.gpu_util.items()))
    if worst.live:
        v = worst.verdict
        row.kind = v.get("kind") or None
        row.devices = _split(v.get("devices"))
        row.gpus = [g for g in map(_index, _split(v.get("gpus"))) if g is not None]
        row.since_s = worst.since_s
        row.gpus_starved = sum(m.gpus_starved or 0 for m in members if m.live)
        for dev in row.devices:
            ev = worst.disks.get(dev) or worst.mounts.get(dev)
            row.evidence.append(ev if ev is not None else DeviceEvidence(dev))
    return row


def row_order(row: NodeRow) -> tuple:
    tier = _TIER.get(row.state, 6)
    if tier == 0:
        since = row.since_s if row.since_s is not None else math.inf
        return (tier, -row.gpus_starved, since, natural_key(row.node))
    return (tier, 0, 0.0, natural_key(row.node))


def spark_values(series: Series, end_s: float) -> list[float | None]:
    """SPARK_POINTS values (percent), one a minute, the last ending at end_s."""
    out: list[float | None] = [None] * SPARK_POINTS
    start = end_s - SPARK_WINDOW_S
    for t, v in series.values:
        if (not start < t <= end_s + 1e-6 or not math.isfinite(v)
                or not check_value(GPU_UTIL.prom_name, v, t)):
            continue
        i = min(SPARK_POINTS - 1, int((t - start - 1e-6) // SPARK_STEP_S))
        out[i] = GPU_UTIL.from_base(v)
    return out


def build_view(table: QueryResult, spark: QueryResult | None, now_s: float,
               group_by: str = "instance", job_label: str = "training_job", *,
               url: str = "", cost: QueryCost | None = None,
               gpu_low_pct: float = GPU_LOW_PCT, ledger: QueryResult | None = None) -> FleetView:
    """The view of one refresh: table is queries.table_query's answer, spark the
    sparkline query's and ledger queries.ledger_query's (the latest ones; None: none
    yet).  cost: this refresh's (default: the table's and spark's).  Never raises for
    what Prometheus returned: a failed table query gives a view with its error and no
    rows."""
    if cost is None:
        cost = QueryCost().add(table).add(spark)
    view = FleetView(wall_s=now_s, error=None if table.ok else table.error, cost=cost,
                     url=url, group_by=group_by, job_label=job_label)
    if not table.ok:
        return view
    view.data_wall_s = now_s
    collected = _collect(table, group_by, now_s)
    rows = [_row(node, members) for node, members in collected.items()]
    # each live target's GPUs now: its lost time's bound (ledger.py)
    gpus = {i: len(m.gpu_util) + m.gpus_count for keyed in collected.values()
            for (_job, i), m in keyed.items() if m.live}
    if spark is not None and spark.ok and spark.series:
        ends = [t for s in spark.series for t, _ in s.values[-1:]
                if check_value("", t, now_s)]
        end = max(ends) if ends else now_s
        sparks = {node_name(s.labels, group_by): spark_values(s, end) for s in spark.series}
        for row in rows:
            row.spark_pct = sparks.get(row.node, [])
    rows.sort(key=row_order)
    view.rows = rows
    view.jobs = job_groups(rows, job_label, gpu_low_pct)
    apply_ledger(view, ledger, gpus)
    return view


# ---------------------------------------------------------------------------- jobs
def job_groups(rows: list[NodeRow], job_label: str,
               gpu_low_pct: float = GPU_LOW_PCT) -> list[JobGroup]:
    """A JobGroup per value of job_label among the rows (rows without it are in none),
    those with a straggler first, then by name."""
    by_job: dict[str, list[NodeRow]] = {}
    for r in rows:
        job = r.labels.get(job_label)
        if job:
            by_job.setdefault(job, []).append(r)
    groups = [judge_job(job, nodes, job_label, gpu_low_pct) for job, nodes in by_job.items()]
    groups.sort(key=lambda g: (g.straggler is None, natural_key(g.job)))
    return groups


def judge_job(job: str, nodes: list[NodeRow], job_label: str = "training_job",
              gpu_low_pct: float = GPU_LOW_PCT) -> JobGroup:
    """The straggler rule, on the alert rules' definitions (examples/prometheus-rules.yml).

    A node is *starved* when its own cause holds its GPUs back (OWN_CAUSE_STATES:
    disk-starved, cpu-starved, checkpoint-stall); *running* when it reports and is not
    idle (the rules' gpudisk_top:job_nodes:count).  In a job of 2+ nodes:
    - two or more starved and at least half of the running nodes starved: no straggler,
      a shared cause (their storage, a class of disks, the checkpoint volume) holds the
      job back, not one node (the rules' FleetNodesStarved);
    - else the straggler is a starved node (undiagnosed-stall only when none is starved)
      while at least half of the other reporting nodes wait (NodeRow.waits: not starved
      themselves, local state straggler or GPUs under gpu_low_pct); of several, the one
      with the lowest GPU utilization, then the longest in its state."""
    group = JobGroup(job=job, nodes=list(nodes))
    live = [r for r in nodes if not r.stale]
    gone = len(nodes) - len(live)
    tail = f"; {gone} stopped reporting" if gone else ""
    if len(nodes) < 2:
        group.reason = f"one node{tail}"
        return group
    starved = [r for r in live if r.starved]
    running = [r for r in live if r.state != "idle"]
    if len(starved) >= 2 and 2 * len(starved) >= len(running):
        group.reason = (f"{len(starved)} of {len(running)} nodes starved (a shared cause: "
                        f"{_shared(starved)}){tail}")
        return group
    candidates = starved or [r for r in live if r.state == "undiagnosed-stall"]
    if not candidates:
        waiting = sum(r.waits(gpu_low_pct) for r in live)
        group.reason = (f"no node starved of data; {waiting} of {len(live)} wait" if waiting
                        else "no node starved of data") + tail
        return group
    pick = min(candidates, key=lambda r: (
        r.gpu_util_pct if r.gpu_util_pct is not None else math.inf,
        r.since_s if r.since_s is not None else math.inf, natural_key(r.node)))
    others = [r for r in live if r is not pick]
    waiting = [r for r in others if r.waits(gpu_low_pct)]
    where = f" on {','.join(pick.devices)}" if pick.devices else ""
    ev = "; ".join(e.short for e in pick.evidence if e.short)
    what = f"{pick.state}{where}{f' ({ev})' if ev else ''}"
    if not others or 2 * len(waiting) < len(others):
        head = f"{pick.node} is {what}"
        group.reason = f"{head}, but only {len(waiting)} of {len(others)} other nodes wait{tail}"
    else:
        group.straggler, group.waiting = pick, waiting
        by_state = sum(r.state == "straggler" for r in waiting)
        utils = [r.gpu_util_pct for r in waiting
                 if r.state != "straggler" and r.gpu_util_pct is not None]
        how = []
        if by_state:
            # their own detectors say they wait on peers (the local state straggler);
            # "straggler" is left to the node that holds them back
            how.append(f"{by_state} by their own verdict")
        if utils and by_state < len(waiting):
            how.append(f"GPU {sum(utils) / len(utils):.0f}%")
        head = f"{pick.node} holds {job_label}={job} back: {what}"
        group.reason = (f"{head}; {len(waiting)} of {len(others)} other nodes wait "
                        f"({', '.join(how)}){tail}")
    if pick.since_s is not None:
        group.since_s, group._since_at = pick.since_s, len(head)
    return group


def _shared(starved: list[NodeRow]) -> str:
    """'3 disk-starved on /mnt/ds, 1 cpu-starved': the starved nodes by state and the
    devices their verdicts blame, the most first."""
    counts: dict[str, int] = {}
    for r in starved:
        key = r.state + (f" on {','.join(r.devices)}" if r.devices else "")
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{n} {key}" for key, n in sorted(counts.items(), key=lambda kv: -kv[1]))


# ---------------------------------------------------------------------------- timeline
# each exporter family of the timeline: the TIMELINE row it adds to
_TL_DISK = {m.prom_name: TIMELINE[row] for m, row in TIMELINE_DISK}
_SUMMED = ("iops", "mb_s")          # the local timeline's: reads + writes


@dataclass
class NodeTimeline:
    """One node's window, drawn as the local timeline draws its own (see the module's
    docstring).  history: a History with one Column per step from start_s to end_s;
    gpus: its GPU indexes; disks: (device, display name) as Timeline.show() takes them;
    named: the devices the latest verdict names (their rows first); error: the range
    query's one-line error (then the history is empty); cost: that query's."""

    node: str
    start_s: float
    end_s: float
    step_s: float
    history: History
    gpus: list[int] = field(default_factory=list)
    disks: list[tuple[str, str]] = field(default_factory=list)
    named: list[str] = field(default_factory=list)
    error: str | None = None
    cost: QueryCost = field(default_factory=QueryCost)

    @property
    def times(self) -> list[float]:
        return [c.wall_s for c in self.history.columns]

    @property
    def states(self) -> list[str]:
        return [c.state for c in self.history.columns]


def timeline_window(now_s: float, window_s: float, step_s: float) -> tuple[float, float]:
    """(start_s, end_s): whole steps, the end at or before now_s, so that the columns of
    two refreshes line up."""
    end = math.floor(now_s / step_s) * step_s
    n = max(1, int(round(window_s / step_s)))
    return end - (n - 1) * step_s, end


def build_timeline(result: QueryResult, node: str, start_s: float, end_s: float,
                   step_s: float) -> NodeTimeline:
    """One node's NodeTimeline from queries.timeline_query's range answer."""
    n = max(1, int(round((end_s - start_s) / step_s)) + 1)
    history = History(capacity=n)
    tl = NodeTimeline(node=node, start_s=start_s, end_s=end_s, step_s=step_s,
                      history=history, error=None if result.ok else result.error,
                      cost=QueryCost().add(result))
    if not result.ok:
        return tl
    state: list[str] = [""] * n
    state_rank: list[int] = [99] * n
    latest_devices: tuple[float, list[str]] = (-math.inf, [])
    gpu: dict[int, list[list[float]]] = {}
    disk: dict[str, dict[str, list[float | None]]] = {}
    order = {s: i for i, s in enumerate(reversed(STATES))}    # the worst wins a tie

    def index(t: float) -> int | None:
        if not start_s - step_s < t < end_s + step_s:       # NaN and ±inf too
            return None
        i = int(round((t - start_s) / step_s))
        return i if 0 <= i < n else None

    for s in result.series:
        name, lab = s.name, s.labels
        if name == P + VERDICT_INFO:
            st = lab.get("state", "")
            for t, _v in s.values:
                i = index(t)
                if i is not None and order.get(st, 99) < state_rank[i]:
                    state[i], state_rank[i] = st, order.get(st, 99)
                if t > latest_devices[0]:
                    latest_devices = (t, _split(lab.get("devices")))
        elif name == GPU_UTIL.prom_name:
            g = _index(lab.get("gpu"))
            if g is None:
                continue
            cells = gpu.setdefault(g, [[] for _ in range(n)])
            for t, v in s.values:
                i = index(t)
                if i is not None and math.isfinite(v) and check_value(name, v, t):
                    cells[i].append(GPU_UTIL.from_base(v))
        elif name in _TL_DISK:
            # the row's unit from the family's base unit (bytes/s become the row's MB/s)
            row_metric = _TL_DISK[name]
            metric = row_metric.field
            rows = disk.setdefault(lab.get("device", ""), {})
            cells = rows.setdefault(metric, [None] * n)
            for t, v in s.values:
                i = index(t)
                if i is not None and math.isfinite(v) and check_value(name, v, t):
                    add = row_metric.from_base(v)
                    cells[i] = add if cells[i] is None or metric not in _SUMMED else cells[i] + add
    fields = [m.field for m in TIMELINE]
    for i in range(n):
        col = Column(wall_s=start_s + i * step_s, interval_s=step_s, state=state[i],
                     raw_state=state[i], episode=None)
        for g, cells in gpu.items():
            if cells[i]:
                col.gpu_util[g] = sum(cells[i]) / len(cells[i])
        for dev, rows in disk.items():
            values = tuple(rows.get(f, [None] * n)[i] for f in fields)
            if any(v is not None for v in values):
                col.disk[dev] = values
        history.add(col)
    tl.gpus = sorted(gpu)
    tl.disks = [(d, d) for d in sorted(disk, key=natural_key)]
    tl.named = [d for d in latest_devices[1] if d in disk]
    return tl
