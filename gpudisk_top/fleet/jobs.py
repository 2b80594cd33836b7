"""The fleet's jobs: the nodes of one training job side by side, and which of them holds
the others back (judge_job: the straggler rule, on the alert rules' own definitions,
examples/prometheus-rules.yml).  Pure functions of NodeRows.

A job is found by its own identity (job_groups, group_of), as the nodes' exporters name
it (issue 37, fleet/nodejobs.py), never by a guess:
- a job id of a source that names one job on every node it spans (SPANNING: a Slurm job
  id, a torch elastic run id) gathers the rows of that id across nodes;
- any other job id is one node's: a pod (a pod's UID is its own: the pods of one
  multi-node job have one each), a container, a systemd unit, a process tree (pid:4121
  on two nodes is two jobs).  It is a job of one node, keyed ID@NODE, unless it is its
  node's only job and the target carries the job label (below): then that;
- a row of no job id (an older exporter, a node with no GPU process) is in the group of
  its target's job label (--job-label, written by hand in Prometheus's config), if any.
"""

from __future__ import annotations

import math
from collections import Counter

from gpudisk_top.fleet.labels import BY_ID, BY_NODE
from gpudisk_top.fleet.view import GPU_LOW_PCT, JobGroup, NodeRow
from gpudisk_top.model.present import natural_key, pct

# the job sources whose id is the same on every node of one job (collect/jobid.py)
SPANNING = ("slurm", "torchelastic")


def group_of(row: NodeRow, job_label: str, rows_of_node: int = 1) -> tuple[str, str] | None:
    """(the job's key, how it was found: BY_ID, BY_NODE or job_label) for a row, None for
    a row in no job.  rows_of_node: how many rows its node has in the view."""
    hand = row.labels.get(job_label)
    if row.job_id and row.job_source in SPANNING:
        return row.job_id, BY_ID
    if hand and rows_of_node == 1:
        return hand, job_label
    if row.job_id:
        return f"{row.job_id}@{row.node}", BY_NODE
    return None


def job_groups(rows: list[NodeRow], job_label: str,
               gpu_low_pct: float = GPU_LOW_PCT) -> list[JobGroup]:
    """A JobGroup per job among the rows (group_of; rows of no job are in none), those
    with a straggler first, then by key."""
    per_node = Counter(r.node for r in rows)
    by_job: dict[tuple[str, str], list[NodeRow]] = {}
    for r in rows:
        key = group_of(r, job_label, per_node[r.node])
        if key:
            by_job.setdefault(key, []).append(r)
    groups = []
    for (job, by), nodes in by_job.items():
        first = nodes[0]
        ident = first.job_id if by != job_label else ""
        called = (f"{job_label}={job}" if by == job_label
                  else f"job {first.job_name or ident}")
        group = judge_job(job, nodes, job_label, gpu_low_pct, called=called)
        group.by, group.id = by, ident
        group.name = first.job_name if ident else job
        group.source = first.job_source if ident else ""
        groups.append(group)
    groups.sort(key=lambda g: (g.straggler is None, natural_key(g.job)))
    return groups


def judge_job(job: str, nodes: list[NodeRow], job_label: str = "training_job",
              gpu_low_pct: float = GPU_LOW_PCT, called: str | None = None) -> JobGroup:
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
      with the lowest GPU utilization, then the longest in its state.
    called: the job in the reason's words (default job_label=job)."""
    group = JobGroup(job=job, nodes=list(nodes), by=job_label)
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
            how.append(f"GPU {pct(sum(utils) / len(utils))}")
        head = f"{pick.node} holds {called or f'{job_label}={job}'} back: {what}"
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
