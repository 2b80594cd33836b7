"""The fleet's GPU time lost in the last 24 hours: what it believes of the nodes' counters.

Owns reading queries.ledger_query's answer (or the recording rule's record of it) into
each row's, each job's and the fleet's GPU-seconds lost by cause (apply_ledger), and the
rules of trust that reading keeps, since any node's exporter (or a scrape config's
mistake) can say anything:

- one series a node, cause and job: the same counter read under several label sets (a
  node scraped by two Prometheus jobs, a static job and a PodMonitor; an exporter adding
  labels of its own, 10,000 of them) is counted once, its largest value, and said.  The
  node is its `instance` (the exporter's address): two jobs scraping one address scrape
  one exporter.  Series of one node under different values of the job label are its time
  in each job (a node that moved jobs) and are added;
- a job's counters (issue 37: gpudisk_top_job_gpu_lost_seconds_total, by job_id) are
  its row's and its job's; the node's own are the node's row's (a node that names no
  job) and its job label's group's, and always the fleet's total (they count every job
  of the node once);
- a node's lost time is at most its own GPUs times the window (LEDGER_WINDOW_S; SLACK
  for increase()'s extrapolation): its GPUs as the table reads them now, or, for a node
  not live now, the largest node's of the fleet.  A node over it has none of its figures
  counted, and its row says what it claimed;
- a value that cannot be a time (negative, NaN, infinite) or a cause the fleet does not
  know is left out, and said.

What is doubted goes into the row's `doubts` (trust.py's words build the row's text);
the nodes without a row (stopped for more than the table's hour) into the view's.
No I/O; never raises for what the answer holds.
"""

from __future__ import annotations

import math

from gpudisk_top.fleet.labels import BY_ID, node_name
from gpudisk_top.fleet.promapi import QueryResult
from gpudisk_top.fleet.queries import LEDGER_WINDOW_S
from gpudisk_top.verdict.ledger import LOST_CAUSES, lost_phrase
from gpudisk_top.model.vocab import gpu_hours

# increase() over a day extrapolates to the window's ends by at most 1.1 scrape intervals,
# and a scrape may read an exporter's counter a sample late: over 24 hours a few seconds.
# 10 % is far above that and far below what a rogue counter claims
SLACK = 1.1
# a doubt's key in a row's doubts: its lost time not counted / series counted once
LOST_REFUSED = "lost_24h"
LOST_SERIES = "lost_24h_series"


def lost_total(by_cause: dict[str, float] | None) -> float | None:
    return None if by_cause is None else sum(by_cause.values())


def lost_json(by_cause: dict[str, float] | None) -> dict:
    """A row's or job's "lost, 24 h" keys of --json (GPU-seconds)."""
    return {"lost_24h_gpu_s": lost_total(by_cause), "lost_24h_by_cause": by_cause}


def lost_text(by_cause: dict[str, float] | None, most: int = 3) -> str:
    """'0.35 GPU-h: disk 0.30, cpu 0.05' (verdict/ledger.py lost_phrase, the node's words:
    the largest first, the rest as 'other'), '0.00 GPU-h', or '' when unknown."""
    if by_cause is None:
        return ""
    return lost_phrase(lost_total(by_cause), [(c, None, v) for c, v in by_cause.items()], most)


class _Node:
    """One node's series of the answer (by its instance)."""

    def __init__(self, labels: dict[str, str]) -> None:
        self.labels = labels                   # its first series' (the row it goes to)
        # (cause, job) -> the largest value of the series of that counter
        self.counters: dict[tuple[str, str], float] = {}
        # (cause, job_id) -> the same, of its jobs' own counters
        self.jobs: dict[tuple[str, str], float] = {}
        self.series = 0
        self.dropped: list[str] = []

    def total(self) -> float:
        """What it claims, the larger of its own counters and its jobs' (each a share of
        the same GPUs' time)."""
        return max(sum(self.counters.values()), sum(self.jobs.values()))


def apply_ledger(view, ledger: QueryResult | None,
                 gpus_by_instance: dict[str, int] | None = None) -> None:
    """Each row's, each job's and the fleet's GPU-seconds lost, by cause, from
    queries.ledger_query's answer (nothing when it failed or is None), under the module's
    rules.  view: a model.FleetView (its rows and jobs get lost_by_cause, their doubts
    what was left out); gpus_by_instance: each live scrape target's GPUs now, by its
    instance (the bound).  Never raises."""
    if ledger is None or not ledger.ok:
        return
    nodes: dict[str, _Node] = {}
    for s in ledger.series:
        lab = s.labels
        who = lab.get("instance") or node_name(lab, view.group_by)
        node = nodes.get(who)
        if node is None:
            node = nodes[who] = _Node(lab)
        node.series += 1
        cause, v = lab.get("cause"), s.value
        if cause not in LOST_CAUSES:
            node.dropped.append(f"a cause it does not know ({cause!r})")
            continue
        if v is None or not math.isfinite(v) or v < 0:
            node.dropped.append(f"a value that is no time ({v!r})")
            continue
        job_id = lab.get("job_id")
        counters = node.jobs if job_id is not None else node.counters
        key = (cause, job_id if job_id is not None else lab.get(view.job_label, ""))
        counters[key] = max(v, counters.get(key, 0.0))
    gpus = gpus_by_instance or {}
    fleet_most = max(gpus.values(), default=0)
    rows = {r.key: r for r in view.rows}
    jobs = {j.job: j for j in view.jobs if not j.id}       # the job label's groups
    group_of = {(r.node, r.job_id): g for g in view.jobs for r in g.nodes}
    by_job = {(r.node, r.job_id): r for r in view.rows if r.job_id}
    node_jobs: dict[str, list] = {}
    for r in by_job.values():
        node_jobs.setdefault(r.node, []).append(r)
    # a job of several nodes by its id: its counters on a node where it has ended count
    spanning = {g.id: g for g in view.jobs if g.by == BY_ID}
    total: dict[str, float] = {}
    for who, node in nodes.items():
        name = node_name(node.labels, view.group_by)
        row = rows.get(name)
        notes = _doubts(node, gpus.get(who), fleet_most)
        job_rows = node_jobs.get(name, [])
        for holder in job_rows or [row]:
            if holder is not None:
                holder.doubts.update(notes)
        if row is None and not job_rows:
            view.doubts += [f"{who}: {n}" for n in notes.values()]
        if LOST_REFUSED in notes:
            continue
        for (cause, job), v in node.counters.items():
            total[cause] = total.get(cause, 0.0) + v
            # a node with job rows: its own counters are no row's, no job's
            for holder in (() if job_rows else (row, jobs.get(job))):
                _add(holder, cause, v)
        for (cause, job_id), v in node.jobs.items():
            key = (name, job_id)
            _add(by_job.get(key), cause, v)
            group = group_of.get(key) or spanning.get(job_id)
            if group is not None:
                _add(group, cause, v)
    if ledger.series:
        view.lost_by_cause = {c: total.get(c, 0.0) for c in LOST_CAUSES}


def _add(holder, cause: str, v: float) -> None:
    """v GPU-seconds lost to cause, to a row's or a job's figures (None: nobody's)."""
    if holder is not None:
        if holder.lost_by_cause is None:
            holder.lost_by_cause = dict.fromkeys(LOST_CAUSES, 0.0)
        holder.lost_by_cause[cause] += v


def _doubts(node: _Node, gpus: int | None, fleet_most: int) -> dict[str, str]:
    """What is doubted of one node's series: {LOST_REFUSED: why none is counted,
    LOST_SERIES: how its series were read}."""
    out = {}
    counted = len(node.counters) + len(node.jobs)
    extra = node.series - counted - len(node.dropped)
    said = []
    if extra > 0:
        said.append(f"{node.series:,} series of {counted} counter{'s' * (counted != 1)}, "
                    "each counted once")
    if node.dropped:
        said.append(f"{len(node.dropped)} series left out: {node.dropped[0]}"
                    + (" ..." if len(node.dropped) > 1 else ""))
    if said:
        out[LOST_SERIES] = "lost 24 h: " + "; ".join(said)
    most_gpus = gpus if gpus else fleet_most
    if most_gpus:
        bound_s = most_gpus * LEDGER_WINDOW_S * SLACK
        claimed = node.total()
        if claimed > bound_s:
            whose = (f"its {most_gpus} GPUs'" if gpus else
                     f"the fleet's largest node's {most_gpus} GPUs'")
            out[LOST_REFUSED] = (f"lost 24 h not counted: {gpu_hours(claimed)} GPU-h "
                                 f"claimed, more than {whose} 24 h "
                                 f"({gpu_hours(most_gpus * LEDGER_WINDOW_S)} GPU-h)")
    return out
