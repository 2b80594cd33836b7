"""The fleet's table, from Prometheus's answers: build_view() turns the table's one instant
query (queries.table_query), the sparkline query and the ledger query into a FleetView
(fleet/view.py): one NodeRow a node, in screen order (row_order), the worst of its scrape
targets speaking for it, its last hour's sparkline (spark_values), its job groups
(fleet/jobs.py) and its lost GPU time (fleet/ledger.py).  A pure function of QueryResults
(promapi.py): no I/O, no clock, no Textual; tests feed it Prometheus JSON captured from a
real server.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpudisk_top.fleet import trust
from gpudisk_top.fleet.edge import MAX_GPUS, check_value, gpu_index, label_list
from gpudisk_top.fleet.jobs import job_groups
from gpudisk_top.fleet.labels import node_name
from gpudisk_top.fleet.ledger import apply_ledger
from gpudisk_top.fleet.nodejobs import TargetJobs, is_job_series, job_rows
from gpudisk_top.fleet.promapi import QueryResult, Series
from gpudisk_top.fleet.queries import (BUSY_LABEL, DOWN_LABEL, EVIDENCE_DISK, EVIDENCE_MOUNT, GPU_UTIL,
                                       JOB_STATE_LABEL, P, REC_GPU_UTIL_SUM, REC_GPUS,
                                       REC_GPUS_READ, RULES_LABEL, SEEN_LABEL, SPARK_STEP_S,
                                       SPARK_WINDOW_S)
from gpudisk_top.fleet.view import (DOWN, GPU_LOW_PCT, STALE, DeviceEvidence, FleetView,
                                    NodeRow, QueryCost)
from gpudisk_top.verdict.detect import OWN_CAUSE_STATES, UNAVAILABLE
from gpudisk_top.model import busy_tier
from gpudisk_top.model.present import natural_key
from gpudisk_top.model.vocab import GPUS_STARVED, LAST_SAMPLE, STATE_SINCE, VERDICT_INFO

# screen order, by tier: the nodes starved by their own cause (OWN_CAUSE_STATES) first,
# then those that give no data: not reporting, or reading no GPU (a broken driver, not idle)
_TIER = {**{s: 0 for s in OWN_CAUSE_STATES}, STALE: 1, DOWN: 1, UNAVAILABLE: 1,
         trust.BAD_DATA: 1, "straggler": 2,
         "undiagnosed-stall": 3, "healthy": 4, "idle": 5}
SPARK_POINTS = SPARK_WINDOW_S // SPARK_STEP_S


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
    jobs: TargetJobs | None = None         # the jobs it names (nodejobs.py), if any
    busy: dict[str, int] = field(default_factory=dict)   # tier -> its GPUs on it

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


_DISK = {m.prom_name: m for m in EVIDENCE_DISK}
_MOUNT = {m.prom_name: (m, field, rank) for m, field, rank in EVIDENCE_MOUNT}
# the labels a series has beyond its target's
_OWN = {"__name__", "gpu", "uuid", "device", "mountpoint", "class", "fstype", "source",
        "state", "kind", "devices", "gpus", DOWN_LABEL, SEEN_LABEL, JOB_STATE_LABEL,
        "job_id", "job_name", "job_source"}


def _member_key(labels: dict[str, str]) -> tuple[str, str]:
    return labels.get("job", ""), labels.get("instance", "")


def _collect(table: QueryResult, group_by: str,
             now_s: float) -> dict[str, dict[tuple, _Member]]:
    nodes: dict[str, dict[tuple, _Member]] = {}
    preferred: dict[int, set] = {}      # id(member) -> mount fields set by a preferred source
    busy = []                           # the tiers' counts: a target's, once it is known
    for s in table.series:
        lab = s.labels
        if RULES_LABEL in lab:          # whether the recording rules are loaded: source.py's
            continue
        if BUSY_LABEL in lab:
            busy.append(s)
            continue
        m = nodes.setdefault(node_name(lab, group_by), {}).setdefault(_member_key(lab), _Member())
        # the stale nodes' last hour (queries.table_query): max_over_time's answer, which
        # Prometheus gives without a metric name and VictoriaMetrics with the sample's
        name = "" if SEEN_LABEL in lab else s.name
        value = _finite(s.value)
        if is_job_series(name, lab):
            # a job's (nodejobs.py reads them); its state's mark first: a comparison may
            # have dropped its name
            if m.jobs is None:
                m.jobs = TargetJobs()
            if ((JOB_STATE_LABEL not in lab and not check_value(name, s.value, now_s))
                    or not m.jobs.take(name, lab, value)):
                m.bad_series += 1
            continue
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
            gpu = gpu_index(lab.get("gpu"))
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
    for s in busy:
        m = nodes.get(node_name(s.labels, group_by), {}).get(_member_key(s.labels))
        if m is None:
            continue                    # no row of its own: a count names no node
        value = s.value
        if value is None or not math.isfinite(value) or not 0 < value <= MAX_GPUS:
            m.bad_series += 1
            continue
        tier = busy_tier.known(s.labels.get("source"))
        m.busy[tier] = m.busy.get(tier, 0) + int(value)
    return nodes


def _target(labels: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in labels.items() if k not in _OWN}


def _rows(node: str, keyed: dict[tuple[str, str], _Member]) -> list[NodeRow]:
    """The node's row, or a row a job where its one scrape target names jobs (a row
    that gathers several targets, --by cluster, stays one)."""
    row, members = _row(node, keyed)
    if len(members) != 1:
        return [row]
    (m,) = members
    return job_rows(row, m.jobs if m.live else None, m.gpu_util)


def _row(node: str, keyed: dict[tuple[str, str], _Member]) -> tuple[NodeRow, list[_Member]]:
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
    # (a recorded node that names jobs has its per-GPU series too, for its jobs' rows:
    # its records count its GPUs, not both)
    rec = [m for m in members if m.live and m.gpus_count]
    per_gpu = [m for m in members if not (m.live and m.gpus_count)]
    utils = [v for m in per_gpu for v in m.gpu_util.values() if v is not None]
    read = len(utils) + sum(m.gpus_read for m in rec)
    util_sum = sum(utils) + sum(m.gpu_util_sum_pct for m in rec if m.gpus_read)
    row = NodeRow(node=node, labels=labels or {}, state=state,
                  gpus_total=sum(len(m.gpu_util) for m in per_gpu) + sum(m.gpus_count for m in rec),
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
    for m in members:
        if m.live:
            for tier, n in m.busy.items():
                row.busy_sources[tier] = row.busy_sources.get(tier, 0) + n
    if len(members) == 1:
        row.gpu_util_by_gpu = dict(sorted(worst.gpu_util.items()))
    if worst.live:
        v = worst.verdict
        row.kind = v.get("kind") or None
        row.devices = label_list(v.get("devices"))
        row.gpus = [g for g in map(gpu_index, label_list(v.get("gpus"))) if g is not None]
        row.since_s = worst.since_s
        row.gpus_starved = sum(m.gpus_starved or 0 for m in members if m.live)
        for dev in row.devices:
            ev = worst.disks.get(dev) or worst.mounts.get(dev)
            row.evidence.append(ev if ev is not None else DeviceEvidence(dev))
    return row, members


def row_order(row: NodeRow) -> tuple:
    tier = _TIER.get(row.state, 6)
    if tier == 0:
        since = row.since_s if row.since_s is not None else math.inf
        return (tier, -row.gpus_starved, since, natural_key(row.node), row.job_id)
    return (tier, 0, 0.0, natural_key(row.node), row.job_id)


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
    rows = [r for node, members in collected.items() for r in _rows(node, members)]
    # each live target's GPUs now: its lost time's bound (ledger.py)
    gpus = {i: m.gpus_count or len(m.gpu_util) for keyed in collected.values()
            for (_job, i), m in keyed.items() if m.live}
    if spark is not None and spark.ok and spark.series:
        ends = [t for s in spark.series for t, _ in s.values[-1:]
                if check_value("", t, now_s)]
        end = max(ends) if ends else now_s
        sparks = {node_name(s.labels, group_by): spark_values(s, end) for s in spark.series}
        for row in rows:
            row.spark_pct = sparks.get(row.node, []) if row.spark_of_node else []
    rows.sort(key=row_order)
    view.rows = rows
    view.jobs = job_groups(rows, job_label, gpu_low_pct)
    apply_ledger(view, ledger, gpus)
    return view
