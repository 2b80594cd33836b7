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
                   With the recording rules of examples/fleet-rules.yml (recorded=True)
                   the node's GPUs are three recorded series (their count, how many read
                   a utilization, its sum) instead of one a GPU, and the last hour's last
                   sample is one recorded value instead of the hour's samples.  Either
                   form ends with `or` the count of the recorded GPU series (marked
                   fleet_rules="1"; absent without the rules): source.py switches form
                   on it.  The disks' and mounts' evidence comes only for the nodes
                   whose verdict names a device.  The jobs the nodes' exporters name
                   (issue 37) come in the same query: their job_info, job_gpus_starved
                   and job_ended series (one a job), and their one-hot job_state at 1
                   only (one a job, not one a state: marked JOB_STATE_LABEL); in the
                   recorded form, the per-GPU utilization of the nodes that name a job
                   other than 'unknown' too (a job's utilization is its own GPUs').
                   Each node's GPUs counted by the tier of their busy figure (issue 40:
                   gpu_busy_source_info, one element a node and tier, marked BUSY_LABEL;
                   none from an exporter older than the series: read as utilization).
  spark_query      ONE instant subquery at most once a minute: each node's mean GPU
                   utilization over the last hour, one point a minute.
  ledger_query     ONE instant query at most once a minute, with the sparkline's: each
                   node's GPU-seconds lost in the last 24 hours, by cause (the stall
                   ledger's counters' increase(), docs/ledger.md; cause="healthy" is not
                   lost), or the recording rule's record of it; `or` each job's own
                   counters' increase (by job_id; no record keeps them yet, so a day of
                   their samples is read, once a minute, in either form).
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
from gpudisk_top.verdict.ledger import HEALTHY
from gpudisk_top.model.busy_tier import PROM_BUSY_SOURCE
from gpudisk_top.model.jobs import UNKNOWN_ID
from gpudisk_top.model.metric import PROM_PREFIX
from gpudisk_top.model.vocab import (DISK, GPU, GPUS_STARVED, JOB_ENDED, JOB_GPUS_STARVED,
                                     JOB_INFO, JOB_LOST, JOB_STATE, LAST_SAMPLE, LEDGER, MOUNT,
                                     STATE_SINCE, VERDICT_INFO)

# The numbers of a device the verdict blames (fleet/view.py DeviceEvidence's fields,
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

# The opened node's timeline: the local timeline's rows (model/history.py Column: the
# state, GPU utilization, and per disk vocab.TIMELINE's util, r_await, IOPS, MB/s, aqu-sz)
TIMELINE_FAMILIES = (VERDICT_INFO, GPU_UTIL.prom, *(m.prom for m, _ in TIMELINE_DISK))
P = PROM_PREFIX
DOWN_LABEL = "fleet_down"          # marks the `up == 0` elements of the table's answer
JOB_STATE_LABEL = "fleet_job_state"   # marks a job's state now (its one-hot series at 1)
SEEN_LABEL = "fleet_seen"          # marks the stale nodes' last-hour elements
RULES_LABEL = "fleet_rules"        # marks the count of the recorded series (rules loaded)
BUSY_LABEL = "fleet_busy"          # marks a node's count of GPUs on a busy tier (`source`)
# examples/fleet-rules.yml's records (tests/test_examples.py checks the file records these)
REC_GPUS = "gpudisk_top:fleet_node_gpus:count"                # the node's GPUs
REC_GPUS_READ = "gpudisk_top:fleet_node_gpus_read:count"      # those read, in range
REC_GPU_UTIL_SUM = "gpudisk_top:fleet_node_gpu_utilization:sum"   # their utilization's sum
REC_LAST_SEEN = "gpudisk_top:fleet_node_last_sample:max1h"    # the hour's last sample
RECORDED = (REC_GPUS, REC_GPUS_READ, REC_GPU_UTIL_SUM, REC_LAST_SEEN)
# the ledger's: per node and cause, and per job and cause (for Grafana: the fleet sums
# its nodes' itself, by --job-label)
REC_NODE_LOST = "gpudisk_top:fleet_node_gpu_seconds_lost:increase24h"
REC_JOB_LOST = "gpudisk_top:fleet_job_gpu_seconds_lost:increase24h"
LEDGER_RECORDED = (REC_NODE_LOST, REC_JOB_LOST)
LOST_COUNTER = LEDGER["lost_gpu_s"].prom_name + "_total"    # the exporter's, by cause
LEDGER_WINDOW_S = 86400
# the table's own series of a node, read as exported in either form
NODE_FAMILIES = (VERDICT_INFO, STATE_SINCE, GPUS_STARVED, LAST_SAMPLE)
# each job's on a shared node (issue 37; an older exporter has none): what it is, how many
# of its GPUs its own cause starves, when it ended (kept for the exporter's retention);
# its state is read apart, only the one-hot series at 1 (JOB_STATE_LABEL)
JOB_FAMILIES = (JOB_INFO, JOB_GPUS_STARVED, JOB_ENDED)
JOB_LOST_COUNTER = P + JOB_LOST + "_total"      # the exporter's, by job and cause
EVIDENCE_FAMILIES = (*(m.prom for m in EVIDENCE_DISK), *(m.prom for m, _, _ in EVIDENCE_MOUNT))
EXPORTER_JOB = "gpudisk-top"       # the exporters' Prometheus job (the alert rules' too)
STALE_WINDOW = "1h"                # a node not seen for longer is gone from the table
SPARK_WINDOW_S = 3600
SPARK_STEP_S = 60

def quote(value: str) -> str:
    """A PromQL string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def matchers(filters: dict[str, str], negate: set[str] = frozenset()) -> str:
    """'a="x",b="y"' (equality matchers, sorted; != for the labels in `negate`), or ''."""
    return ",".join(f"{check_label(k)}{'!=' if k in negate else '='}{quote(v)}"
                    for k, v in sorted(filters.items()))


def _names(families) -> str:
    return P + "(" + "|".join(families) + ")"


def _sel(name_or_regex: str, filters: dict[str, str], regex: bool = False,
         negate: set[str] = frozenset()) -> str:
    inner = matchers(filters, negate)
    if regex:
        return "{" + f"__name__=~{quote(name_or_regex)}" + (f",{inner}" if inner else "") + "}"
    return name_or_regex + ("{" + inner + "}" if inner else "")


def table_query(filters: dict[str, str] | None = None,
                exporter_job: str = EXPORTER_JOB, recorded: bool = False) -> str:
    """The table's one instant query.  filters: label -> value, applied to every
    selector (so a job's view asks only for its nodes); exporter_job: the Prometheus job
    that scrapes the exporters; recorded: read examples/fleet-rules.yml's records."""
    f = filters or {}
    last = _sel(P + LAST_SAMPLE, f)
    if recorded:
        # one selector: the records carry the node's labels exactly, and `or` would drop
        # them as matching its gpus_starved
        node = _sel("|".join((_names((*NODE_FAMILIES, *JOB_FAMILIES)), *RECORDED[:3])), f,
                    regex=True)
        seen = _sel(REC_LAST_SEEN, f)
        # a job's GPU utilization is the mean of its own GPUs': the records sum the node's
        # whole, so the per-GPU series come too, of the nodes that name a job they can
        # tell ('unknown' alone is no job: fleet/nodejobs.py gives such a node one row)
        known = _sel(P + JOB_INFO, dict(f, job_id=UNKNOWN_ID), negate={"job_id"})
        node += f" or ({_sel(GPU_UTIL.prom_name, f)} and on (job, instance) {known})"
    else:
        node = _sel(_names((*NODE_FAMILIES, *JOB_FAMILIES, GPU_UTIL.prom)), f, regex=True)
        seen = f"max_over_time({last}[{STALE_WINDOW}])"
    # a job's state: its one-hot series at 1 only (not one a state), marked, since a
    # comparison may drop the metric name (MetricsQL) and the mark says what it is
    node += " or " + _mark(f"{_sel(P + JOB_STATE, f)} == 1", JOB_STATE_LABEL)
    # the devices' numbers only of the nodes whose verdict blames a device
    evidence = (f"({_sel(_names(EVIDENCE_FAMILIES), f, regex=True)} and on (job, instance) "
                f"{_sel(P + VERDICT_INFO, dict(f, devices=''), negate={'devices'})})")
    # the failing targets of the exporters' own job, whether or not any of them was ever
    # seen (a whole job down is what most needs showing), and those of any other job that
    # held gpudisk-top nodes in the hour (not every failing target of the server); marked
    # so that they always come through
    own = _sel("up", dict(f, job=exporter_job)) if "job" not in f else _sel("up", f)
    down = _mark(f"({own} == 0) or ({_sel('up', f)} == 0 and on (job) {seen})", DOWN_LABEL)
    stale = _mark(f"{seen} unless {last}", SEEN_LABEL)
    rules = _mark(f"count({_sel(REC_GPUS, f)})", RULES_LABEL)
    # the tiers, counted on the server: a node's one or two elements in either form
    busy = _mark(f"count without (gpu, uuid) ({_sel(P + PROM_BUSY_SOURCE, f)})", BUSY_LABEL)
    return f"{node} or {evidence} or {down} or {stale} or {rules} or {busy}"


def _mark(expr: str, label: str) -> str:
    """expr's elements with the label `label`="1" (so that `or` passes them as they are)."""
    return f"label_replace({expr}, {quote(label)}, \"1\", \"\", \"\")"


def spark_query(group_by: str, filters: dict[str, str] | None = None,
                recorded: bool = False) -> str:
    """The last hour's mean GPU utilization per node, a point a minute (instant
    subquery: a matrix); recorded: from examples/fleet-rules.yml's sum and count."""
    by, f = check_label(group_by), filters or {}
    if recorded:
        mean = (f"(sum by ({by}) ({_sel(REC_GPU_UTIL_SUM, f)}) "
                f"/ sum by ({by}) ({_sel(REC_GPUS_READ, f)}))")
    else:
        mean = f"avg by ({by}) ({_sel(GPU_UTIL.prom_name, f)})"
    return f"{mean}[{SPARK_WINDOW_S // 60}m:{SPARK_STEP_S}s]"


def ledger_query(filters: dict[str, str] | None = None, recorded: bool = False) -> str:
    """Each node's GPU-seconds lost in the last LEDGER_WINDOW_S, one series a cause
    (healthy left out: not lost); recorded: examples/fleet-rules.yml's record of it."""
    f = filters or {}
    # each job's own counters (issue 37), by job_id: a node's series of both kinds, told
    # apart by that label (increase() drops the metric name); read raw in either form
    # (no record keeps them yet: once a minute, a day of samples of each job's counters)
    jobs = _sel(JOB_LOST_COUNTER, dict(f, cause=HEALTHY), negate={"cause"})
    jobs = f"increase({jobs}[{LEDGER_WINDOW_S // 3600}h])"
    if recorded:
        return f"{_sel(REC_NODE_LOST, f)} or {jobs}"
    counter = _sel(LOST_COUNTER, dict(f, cause=HEALTHY), negate={"cause"})
    return f"increase({counter}[{LEDGER_WINDOW_S // 3600}h]) or {jobs}"


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
