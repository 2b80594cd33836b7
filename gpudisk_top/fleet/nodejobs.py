"""The jobs a node's exporter names (issue 37: gpudisk_top_job_info, _job_state,
_job_gpus_starved, _job_ended_timestamp_seconds, labelled job_id, job_name, job_source),
read strictly, and a node's row split into one row a job (job_rows).

Owns what the fleet believes of those series, since any exporter can say anything:
- a job id is the exporter's form (collect/jobid.py: letters, digits and _ . : -, at most
  MAX_JOB_ID characters), a source one jobid.SOURCES knows (else "unknown"), a name cut
  to jobid's MAX_NAME characters (escaped where printed: fleet/text.py, the screens); a series with
  another id is dropped and counted (the caller's bad_series), never shown;
- a job's GPUs are indices ("0-3,6" or "0,1,2,3"), each under edge.MAX_GPUS, at most
  MAX_GPUS of them; a list that is not one is dropped and counted;
- at most MAX_JOBS jobs a scrape target: the rest are left out, and the row says so;
- a job with two states at once is trust.BAD_DATA, not whichever came last.
A job that ended (its ended timestamp, kept for the exporter's retention) has no row, nor
has the job 'unknown' where it is the node's only one (the node's row says all it knows).

A job row is the node's row with the job's own state, GPUs, GPUs starved and their
utilization.  The node's verdict (kind, devices, evidence, since when) is the worst job's
(verdict/jobs.py node_verdict): it goes to the job row whose GPUs it names, and no other.
No I/O; never raises.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field

from gpudisk_top.collect.jobid import SOURCES, bounded_name
from gpudisk_top.fleet import trust
from gpudisk_top.fleet.edge import MAX_GPUS, gpu_index
from gpudisk_top.fleet.queries import JOB_STATE_LABEL, P
from gpudisk_top.verdict.detect import STARVED_STATES, STATES
from gpudisk_top.model.jobs import UNKNOWN_ID
from gpudisk_top.model.vocab import JOB_ENDED, JOB_GPUS_STARVED, JOB_INFO


MAX_JOBS = 64              # a target's jobs the table reads (the exporter's own cap is lower)
MAX_JOB_ID = 128           # collect/jobid.py's ids are at most a source and 80 characters
_JOB_ID = re.compile(r"[A-Za-z0-9_.:-]{1,%d}" % MAX_JOB_ID)
JOB_SERIES = {P + JOB_INFO, P + JOB_GPUS_STARVED, P + JOB_ENDED}
# a doubt's key in a row's doubts (trust.doubts_text says them)
JOBS_LEFT_OUT = "jobs"
JOB_STATES = "job_state"


@dataclass
class SeenJob:
    """One job of one scrape target, as its series say: gpus None where job_info did not
    say (or said no list); states: those at 1 now."""

    id: str
    name: str = ""
    source: str = "unknown"
    gpus: list[int] | None = None
    states: list[str] = field(default_factory=list)
    gpus_starved: int | None = None
    ended: bool = False


@dataclass
class TargetJobs:
    """A scrape target's jobs by id, and how many series named one past MAX_JOBS."""

    jobs: dict[str, SeenJob] = field(default_factory=dict)
    left_out: int = 0

    def take(self, name: str, labels: dict[str, str], value: float | None) -> bool:
        """One series of the table's answer that is a job's (is_job_series): kept, or
        False where it is bad (the caller counts it).  Never raises."""
        job_id = labels.get("job_id", "")
        if not _JOB_ID.fullmatch(job_id):
            return False
        job = self.jobs.get(job_id)
        if job is None:
            if len(self.jobs) >= MAX_JOBS:
                self.left_out += 1
                return True
            source = labels.get("job_source", "")
            job = self.jobs[job_id] = SeenJob(
                job_id, bounded_name(labels.get("job_name", "") or ""),
                source if source in SOURCES else "unknown")
        if JOB_STATE_LABEL in labels:
            state = labels.get("state", "")
            if state not in STATES:
                return False
            if state not in job.states:
                job.states.append(state)
        elif name == P + JOB_INFO:
            gpus = gpu_list(labels.get("gpus", ""))
            if gpus is None:
                return False
            job.gpus = gpus
        elif name == P + JOB_GPUS_STARVED:
            job.gpus_starved = None if value is None else int(value)
        elif name == P + JOB_ENDED:
            job.ended = value is not None
        return True


def is_job_series(name: str, labels: dict[str, str]) -> bool:
    return name in JOB_SERIES or JOB_STATE_LABEL in labels


def gpu_list(text: str) -> list[int] | None:
    """'0-3,6' or '0,1,2,3' -> [0, 1, 2, 3, 6]; '' -> []; None for anything else, or for
    more than MAX_GPUS indices."""
    out: set[int] = set()
    for part in text.split(",") if text else ():
        lo, dash, hi = part.strip().partition("-")
        a, b = gpu_index(lo), gpu_index(hi) if dash else gpu_index(lo)
        if a is None or b is None or b < a or len(out) + (b - a + 1) > MAX_GPUS:
            return None
        out.update(range(a, b + 1))
    return sorted(out)


def job_rows(row, jobs: TargetJobs | None, gpu_util: dict[int, float | None]) -> list:
    """The node's row split into one row a live job (fleet/view.py NodeRow, the job's
    fields set), in the jobs' order of their lowest GPU; [row] when the target names no
    live job (an older exporter, no GPU process) or is not reporting.  gpu_util: the
    target's GPUs' utilization (percent) by index."""
    live = [j for j in (jobs.jobs.values() if jobs else ()) if not j.ended]
    # a node whose only job is 'unknown' (its processes cannot be told apart: another PID
    # namespace, a recording's, a simulation's) is told nothing by it: the node's row
    if row.stale or not live or all(j.id == UNKNOWN_ID for j in live):
        if jobs is not None and jobs.left_out:
            row.doubts[JOBS_LEFT_OUT] = _left_out(jobs.left_out)
        return [row]
    live.sort(key=lambda j: (min(j.gpus) if j.gpus else MAX_GPUS, j.id))
    node_gpus = set(gpu_util)
    out = []
    for job in live:
        r = copy.deepcopy(row)
        r.job_id, r.job_name, r.job_source = job.id, job.name, job.source
        gpus = job.gpus or []
        r.gpus_total = len(gpus)
        r.gpu_util_by_gpu = {g: gpu_util.get(g) for g in gpus if g in gpu_util}
        read = [v for v in r.gpu_util_by_gpu.values() if v is not None]
        r.gpu_util_pct = sum(read) / len(read) if read else None
        r.gpus_starved = min(job.gpus_starved or 0, len(gpus) or MAX_GPUS)
        r.spark_of_node = bool(gpus) and set(gpus) >= node_gpus
        if len(job.states) > 1:
            r.state = trust.BAD_DATA
            r.doubts[JOB_STATES] = (f"job {job.id}: {len(job.states)} states at once: "
                                    f"{', '.join(sorted(job.states))}")
        elif job.states:
            r.state = job.states[0]
        # the node's verdict is the worst job's: this one's where it names its GPUs (or
        # where the node has no other job)
        own = r.state == row.state and (len(live) == 1 or bool(set(row.gpus) & set(gpus)))
        if not own:
            r.kind, r.devices, r.evidence, r.since_s = None, [], [], None
            r.gpus = list(gpus) if r.state in STARVED_STATES else []
        if jobs.left_out:
            r.doubts[JOBS_LEFT_OUT] = _left_out(jobs.left_out)
        out.append(r)
    return out


def _left_out(n: int) -> str:
    return f"more than {MAX_JOBS} jobs: {n} series left out"
