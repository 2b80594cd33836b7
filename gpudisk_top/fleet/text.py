"""`gpudisk-top fleet --once [--json]`: a FleetView as a table, or as one JSON object.

The JSON's keys are an API (README, "Fleet"); the text is for people and may change.
Everything that came from Prometheus (label values, node and device names) goes through
printable() before it reaches a terminal.
"""

from __future__ import annotations

import dataclasses
import json

from gpudisk_top.fleet.ledger import LOST_REFUSED, lost_text
from gpudisk_top.fleet.view import BUSY_MARK, FleetView, JobGroup, NodeRow, busy_head
from gpudisk_top.verdict.detect import STARVED_STATES
from gpudisk_top.verdict.detect.states import gpu_ranges
from gpudisk_top.model.present import Col, pct, table
from gpudisk_top.model.timefmt import clock, clock_hm, date_clock, duration
from gpudisk_top.model.vocab import gpu_hours
from gpudisk_top.textsafe import printable

COST_NOTE = ("the table: 1 instant query a refresh; the sparkline and the GPU time lost: "
             "1 query each a minute")
LOST_HEAD = "GPU time lost, last 24 h"


def render_json(view: FleetView) -> str:
    return json.dumps(view.to_json(), indent=2, allow_nan=False, default=str)


def since_text(row: NodeRow, now_s: float) -> str:
    """'14:02:11 (12 min)' for a node's state; '' when unknown."""
    if row.since_s is None:
        return ""
    return f"{clock(row.since_s)} ({duration(now_s - row.since_s)})"


def last_seen_text(row: NodeRow, now_s: float) -> str:
    if row.last_seen_s is None:
        return "never" if row.stale else ""
    return f"{duration(now_s - row.last_seen_s)} ago"


# what the verdict blames when it names no device (the exporter's verdict_info kind)
KIND_TEXT = {"own": "(no device: the job's own loaders)", "others": "(no device: other processes)",
             "throttled": "(no device: CPU throttled)", "saturated": "(a device, not named)",
             "latency-bound": "(latency-bound)", "remote-mount": "(a remote mount)",
             "unseen": "(the job cannot be seen from there: no cause named)"}


def groups_of(jobs: list[JobGroup]) -> dict[str, JobGroup]:
    """Each row's job group, by the row's key (NodeRow.key: a node and its job)."""
    return {r.key: g for g in jobs for r in g.nodes}


JOB_W = 28          # the JOB column's width: a job's name is cut to it (--json has it whole)


def job_cell(row: NodeRow, width: int = JOB_W) -> str:
    """The job of a row as a person knows it ('slurm 1001 (train.py)', else its id), cut
    to width; '' for a node's row.  Unescaped: print it through textsafe."""
    text = row.job_name or row.job_id
    return text if len(text) <= width else text[:width - 1] + "…"


def job_title(group: JobGroup) -> str:
    """A job group as its line names it: the job label's value, or the exporters' name
    and id."""
    return group.title if group.id else group.job


def state_text(row: NodeRow, group: JobGroup | None = None) -> str:
    """A row's state word: in a job's view (its group given) "straggler" for the node
    that holds the job back and "waiting" for those that wait on it; elsewhere a node
    whose own detector says straggler (its GPUs wait on peers) reads "waiting" too, so
    that "straggler" only ever names the node that holds the others back."""
    role = group.role(row) if group is not None else None
    return role or ("waiting" if row.state == "straggler" else row.state)


def device_text(row: NodeRow, group: JobGroup | None = None) -> str:
    """The device column, the one text of a row's evidence on the screens and in
    --once: for a node that waits on its job's straggler (group: its job), "waiting on"
    that node; else the blamed devices' evidence with the verdict's kind, else the GPUs
    the verdict names (a CPU-starved node's) and what the kind blames.  A node whose
    exporter gave numbers out of range says so first (NodeRow.bad_data_text)."""
    bad = row.bad_data_text
    text = _device_text(row, group)
    return f"{bad}; {text}" if bad and text else bad or text


def _device_text(row: NodeRow, group: JobGroup | None) -> str:
    if group is not None and group.role(row) == "waiting":
        return f"waiting on {group.straggler.node}"
    text = row.evidence_text
    if text:
        return f"{text} ({row.kind})" if row.kind else text
    if row.gpus and row.state in STARVED_STATES:
        text = gpu_ranges(row.gpus)
    if row.kind:
        kind = KIND_TEXT.get(row.kind, f"({row.kind})")
        text = f"{text} {kind}" if text else kind
    return text


def job_reason(group: JobGroup, clock=None) -> str:
    """The job's straggler line and its GPU time lost in 24 hours ('...; lost, 24 h:
    0.35 GPU-h: disk 0.30'): --once's job lines and the job screen's banner."""
    reason = group.describe(clock)
    if group.lost_by_cause is not None:
        reason += f"; lost, 24 h: {lost_text(group.lost_by_cause)}"
    return reason


def lost_line(by_cause: dict[str, float] | None) -> str:
    """'GPU time lost, last 24 h: 0.35 GPU-h: disk 0.30, cpu 0.05' (the fleet's total by
    cause: --once's line and the screen's), '' when unknown."""
    return "" if by_cause is None else f"{LOST_HEAD}: {lost_text(by_cause)}"


def lost_cell(row: NodeRow) -> str:
    """The "lost, 24 h" column: the node's GPU-hours lost to a cause ('0.35'), '-' where
    it exports no ledger counters, '?' where its figures were not counted (the row's
    doubts say why: ledger.py)."""
    if row.lost_gpu_s is None:
        return "?" if LOST_REFUSED in row.doubts else "-"
    return gpu_hours(row.lost_gpu_s)


def gpus_text(row: NodeRow) -> str:
    return f"{row.gpus_starved}/{row.gpus_total}" if row.gpus_total or row.gpus_starved else "-"


# the table's columns; the last, DEVICE / EVIDENCE, is device_text()
_GPU_COL = Col("GPU%", 5, ">", "  ")      # named after its tier by render_text
_COLUMNS = (Col("NODE", 21, "<", "  "), Col("STATE", 17, "<", "  "), Col("GPUS", 5, ">", "  "),
            _GPU_COL, Col("SINCE", 20, "<", "  "), Col("SEEN", 9, "<", "  "),
            Col("LOST 24H", 8, ">", "  "), Col("DEVICE / EVIDENCE", 0, "<", "  "))


_JOB_COL = Col("JOB", None, "<", "  ")


def _row_cells(row: NodeRow, now_s: float, group: JobGroup | None, by_role: bool,
               jobs: bool, mixed: bool = False) -> tuple:
    util = pct(row.gpu_util_pct, na="")
    if mixed and util:
        util += BUSY_MARK[row.busy_tag]     # the rows' tiers differ: this one's
    cells = (row.node, *((job_cell(row),) if jobs else ()),
             state_text(row, group if by_role else None), gpus_text(row), util,
             since_text(row, now_s), last_seen_text(row, now_s), lost_cell(row),
             device_text(row, group))
    return tuple(printable(str(c)) for c in cells)


def _job_line(group: JobGroup) -> str:
    head = (f"  {printable(job_title(group))}: {len(group.nodes)} "
            f"node{'s' if len(group.nodes) != 1 else ''}")
    reason = printable(job_reason(group, clock_hm))
    if group.straggler is not None:
        return f"{head}, straggler {printable(group.straggler.node)}: {reason}"
    return f"{head}, no straggler: {reason}"


def render_text(view: FleetView, job: str | None = None) -> str:
    """The table (a job's nodes only when `job` is given, each then labelled as the job
    view does: the straggler, those waiting on it), the job groups with their straggler
    line, and the query cost."""
    now = view.wall_s
    lines = [f"gpudisk-top fleet  Prometheus {printable(view.url)}  "
             f"{len(view.rows)} node{'s' if len(view.rows) != 1 else ''} by "
             f"{printable(view.group_by)}  {date_clock(now)}"]
    if view.error:
        lines.append(f"error: {printable(view.error)}")
    groups = groups_of(view.jobs)
    # a JOB column where an exporter names jobs (a row a node and job)
    jobs_named = any(r.job_id for r in view.rows)
    columns = (_COLUMNS[0], _JOB_COL, *_COLUMNS[1:]) if jobs_named else _COLUMNS
    # the GPU column says its tier (SM: GPM SM activity, util: utilization.gpu); where
    # the rows' differ it says BUSY% and each row's figure is marked
    tier = busy_head(view.rows)
    mixed = tier is None or "+" in tier
    columns = tuple(dataclasses.replace(c, title="BUSY%" if mixed else f"{tier.upper()}%")
                    if c is _GPU_COL else c for c in columns)
    lines += table([_row_cells(r, now, groups.get(r.key), job is not None, jobs_named, mixed)
                    for r in view.rows], columns)
    if mixed:
        lines.append("  BUSY%: S GPM SM activity, U utilization.gpu, ~ a node of both")
    if not view.rows and not view.error:
        lines.append("  (no node: no gpudisk-top series in the last hour"
                     + (" matching the filters)" if job else ")"))
    jobs = [g for g in view.jobs if job is None or g is view.job(job)]
    if jobs:
        lines.append("")
        lines.append(f"jobs (by the exporters' job id, else {printable(view.job_label)}):"
                     if any(g.id for g in jobs) else f"jobs ({printable(view.job_label)}):")
        lines += [_job_line(g) for g in jobs]
    lines.append("")
    if view.lost_by_cause is not None:
        lines.append(lost_line(view.lost_by_cause))
    # the doubts of nodes without a row (stopped for more than the table's hour)
    lines += [f"  not counted or doubted: {printable(d)}" for d in view.doubts]
    rules = ", read from the recording rules" if view.recorded else ""
    lines.append(f"query cost: {view.cost.text()} ({COST_NOTE}{rules})")
    return "\n".join(lines) + "\n"
