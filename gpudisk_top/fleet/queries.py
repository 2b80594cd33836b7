"""Every PromQL expression the fleet view sends, in one place.

The cost is fixed by construction:

  table_query      ONE instant query per refresh, whatever the number of nodes: a
                   name-regex selector for the node-level series (verdict, since, GPUs
                   starved, last sample, per-GPU utilization, the disks' and network
                   mounts' evidence), `or` the targets that fail their scrapes (`up == 0`,
                   marked with the label fleet_down="1": those of the exporters' own
                   Prometheus job, --exporter-job, and those of any other job that held a
                   gpudisk-top node in the hour), `or` the last hour's last-sample
                   timestamp of the nodes seen in the last hour but not now (marked
                   fleet_seen="1").
  spark_query      ONE instant subquery at most once a minute: each node's mean GPU
                   utilization over the last hour, one point a minute.
  timeline_query   ONE range query, only for the node opened (Enter): its verdicts, GPUs
                   and disks over the window.

Why every element that `or` adds carries a label of its own (fleet_down, fleet_seen):
PromQL's `a or b` keeps all of `a` and those elements of `b` whose label set, the metric
name left out, matches no element of `a`; VictoriaMetrics's MetricsQL goes further and,
where a series of `a` has no value at the query's time (a stopped node's series, marked
stale) and one of `b` matches it, answers that series of `a` under its own name with
`b`'s value (it fills `a`'s gaps from `b`): a stale node's gpus_starved would read its
last-sample timestamp.  An element with a label no series of `a` has matches nothing on
either backend and comes through as itself.  Which nodes are stale is then said in the
query: the last hour's last sample `unless` the node's last sample now.
"""

from __future__ import annotations

from gpudisk_top.fleet.labels import check_label
from gpudisk_top.model.vocab import (DISK, GPU, GPUS_STARVED, LAST_SAMPLE, MOUNT, PROM_PREFIX,
                                     STATE_SINCE, VERDICT_INFO)

# The numbers of a device the verdict blames (fleet/model.py DeviceEvidence's fields,
# vocab.DISK's names): a disk's own ...
EVIDENCE_DISK = tuple(DISK[f] for f in ("r_await_ms", "aqu_sz", "util_pct", "rkb_s"))
# ... and a network or FUSE mount's as a disk's (model/mounts.py like_disk): (its metric,
# the field it fills, its rank) where rank 0 is preferred: the mount's own latency where it
# keeps one, else the job's; FUSE's waiting requests, else the transport's backlog
EVIDENCE_MOUNT = ((MOUNT["exec_ms"], "r_await_ms", 0), (MOUNT["job_read_ms"], "r_await_ms", 1),
                  (MOUNT["read_kb_s"], "rkb_s", 0), (MOUNT["waiting"], "aqu_sz", 0),
                  (MOUNT["backlog"], "aqu_sz", 1))
# The opened node's disks: (the exporter's metric, the vocab.TIMELINE row it adds to); IOPS
# and MB/s are reads + writes, as the local timeline's (model/history.py)
TIMELINE_DISK = ((DISK["util_pct"], "util_pct"), (DISK["r_await_ms"], "r_await_ms"),
                 (DISK["aqu_sz"], "aqu_sz"), (DISK["r_s"], "iops"), (DISK["w_s"], "iops"),
                 (DISK["rkb_s"], "mb_s"), (DISK["wkb_s"], "mb_s"))
GPU_UTIL = GPU["util_pct"]

# The series of one node the table reads (families.py): the node's verdict and GPUs, and
# the evidence of the devices a verdict may blame
TABLE_FAMILIES = (VERDICT_INFO, STATE_SINCE, GPUS_STARVED, LAST_SAMPLE, GPU_UTIL.prom,
                  *(m.prom for m in EVIDENCE_DISK), *(m.prom for m, _, _ in EVIDENCE_MOUNT))
# The opened node's timeline: the local timeline's rows (model/history.py Column: the
# state, GPU utilization, and per disk vocab.TIMELINE's util, r_await, IOPS, MB/s, aqu-sz)
TIMELINE_FAMILIES = (VERDICT_INFO, GPU_UTIL.prom, *(m.prom for m, _ in TIMELINE_DISK))
P = PROM_PREFIX
DOWN_LABEL = "fleet_down"          # marks the `up == 0` elements of the table's answer
SEEN_LABEL = "fleet_seen"          # marks the stale nodes' last-hour elements
EXPORTER_JOB = "gpudisk-top"       # the exporters' Prometheus job (the alert rules' too)
STALE_WINDOW = "1h"                # a node not seen for longer is gone from the table
SPARK_WINDOW_S = 3600
SPARK_STEP_S = 60

def quote(value: str) -> str:
    """A PromQL string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def matchers(filters: dict[str, str]) -> str:
    """'a="x",b="y"' (equality matchers, sorted), or ''."""
    return ",".join(f"{check_label(k)}={quote(v)}" for k, v in sorted(filters.items()))


def _names(families) -> str:
    return P + "(" + "|".join(families) + ")"


def _sel(name_or_regex: str, filters: dict[str, str], regex: bool = False) -> str:
    inner = matchers(filters)
    if regex:
        return "{" + f"__name__=~{quote(name_or_regex)}" + (f",{inner}" if inner else "") + "}"
    return name_or_regex + ("{" + inner + "}" if inner else "")


def table_query(filters: dict[str, str] | None = None,
                exporter_job: str = EXPORTER_JOB) -> str:
    """The table's one instant query.  filters: label -> value, applied to every
    selector (so a job's view asks only for its nodes); exporter_job: the Prometheus job
    that scrapes the exporters."""
    f = filters or {}
    last = _sel(P + LAST_SAMPLE, f)
    seen = f"max_over_time({last}[{STALE_WINDOW}])"
    # the failing targets of the exporters' own job, whether or not any of them was ever
    # seen (a whole job down is what most needs showing), and those of any other job that
    # held gpudisk-top nodes in the hour (not every failing target of the server); marked
    # so that they always come through
    own = _sel("up", dict(f, job=exporter_job)) if "job" not in f else _sel("up", f)
    down = (f"label_replace(({own} == 0) or ({_sel('up', f)} == 0 and on (job) {seen}), "
            f"{quote(DOWN_LABEL)}, \"1\", \"\", \"\")")
    stale = f"label_replace({seen} unless {last}, {quote(SEEN_LABEL)}, \"1\", \"\", \"\")"
    return f"{_sel(_names(TABLE_FAMILIES), f, regex=True)} or {down} or {stale}"


def spark_query(group_by: str, filters: dict[str, str] | None = None) -> str:
    """The last hour's mean GPU utilization per node, a point a minute (instant
    subquery: a matrix)."""
    return (f"avg by ({check_label(group_by)}) "
            f"({_sel(P + 'gpu_utilization_ratio', filters or {})})"
            f"[{SPARK_WINDOW_S // 60}m:{SPARK_STEP_S}s]")


def timeline_query(group_by: str, value: str, filters: dict[str, str] | None = None) -> str:
    """One node's timeline rows (a range query): the targets whose group_by label is
    `value` ('' for those without it: labels.label_value turns a row's name into it)."""
    f = dict(filters or {}, **{check_label(group_by): value})
    return _sel(_names(TIMELINE_FAMILIES), f, regex=True)


def timeline_step_s(window_s: float, width: int) -> float:
    """One column per step: the local timeline's one column per second, or coarser when
    the window is wider than the columns (whole seconds: steps line up across
    refreshes)."""
    return float(max(1, -(-int(window_s) // max(1, int(width)))))
