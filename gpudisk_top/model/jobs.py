"""The jobs on the node in one interval: its GPU processes grouped by the job the collector
tagged each with (collect/jobid.py), with their GPUs.

  - A GPU process the collector tagged belongs to that job (its id).
  - GPU processes it could not look at (another PID namespace: not mapped), and every GPU
    process of a recording made before jobs were tagged, make one job `unknown`: nothing
    here can tell them apart, and one job is what every verdict assumed before.
  - A GPU with processes of two jobs (time-slicing, MPS) is each job's.
  - A GPU with no compute process belongs to no job: the ledger counts it idle.

Jobs are ordered by their lowest GPU index, so the same node lists its jobs in the same
order on every surface.

Each job's cgroup totals over the interval (`cgroup_intervals`: its cgroup v2's CPU,
throttling, PSI, I/O and page cache, model/cgjob.py's rules) ride on its JobInfo; None
where the two samples do not pair or have none (cgroup v1, a job with no cgroup of its
own, the first interval, a replay: recordings do not keep them).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudisk_top.model.cgjob import CgJobInterval, interval
from gpudisk_top.model.cgjob_words import cgroup_totals_json

UNKNOWN_ID = "unknown"
UNKNOWN_NAME = "unknown (its processes cannot be told apart from here)"


@dataclass(frozen=True, slots=True)
class JobInfo:
    """One job in one interval.  pids: the host PIDs of its GPU processes, as NVML gives
    them; gpus: the indices of the GPUs they compute on; cgroup: its first GPU process's
    cgroup path, where it was read; cgroup_totals: its cgroup's interval (None: n/a)."""

    id: str
    source: str
    name: str
    gpus: tuple[int, ...]
    pids: tuple[int, ...]
    cgroup: str | None = None
    cgroup_totals: CgJobInterval | None = None

    def cgroup_totals_json(self) -> dict | None:
        """cgroup_totals as JSON (model/cgjob_words.py), None: n/a.  Raises nothing."""
        return cgroup_totals_json(self.cgroup_totals)


def cgroup_intervals(last, sample, elapsed_s: float) -> dict[str, CgJobInterval]:
    """Each job's cgroup interval between two Samples (their `cgjobs`, by job id): the
    reads must be of the same cgroup (path and inode: model/cgjob.py interval), so a job
    moved or a cgroup made again has none this interval.  The span is the reads' own
    (CgJobRaw.read_mono_s) where both say it, else elapsed_s.  Never raises."""
    if last is None:
        return {}
    out = {}
    for job_id, after in sample.cgjobs.items():
        before = last.cgjobs.get(job_id)
        span_s = elapsed_s
        if before is not None and before.read_mono_s is not None and after.read_mono_s is not None:
            span_s = after.read_mono_s - before.read_mono_s
        made = interval(before, after, span_s)
        if made is not None:
            out[job_id] = made
    return out


def jobs_of(gpus, procs_raw, cgroup_totals=None) -> list[JobInfo]:
    """The jobs of an interval's GpuViews (model/gpu.py), their processes' tags read from
    the sample's ProcIoRaw (keyed by PID under the procfs, as GpuProcessView.local_pid);
    cgroup_totals: cgroup_intervals' {job id: interval}."""
    found: dict[str, dict] = {}
    for gpu in gpus:
        if gpu.lost:
            continue
        for p in gpu.processes:
            raw = procs_raw.get(p.local_pid) if p.mapped and p.local_pid is not None else None
            tag = raw.job if raw is not None else None
            if tag is None:
                key, source, name, cgroup = UNKNOWN_ID, "unknown", UNKNOWN_NAME, None
            else:
                (key, source, name), cgroup = tag, raw.cgroup
            job = found.setdefault(key, {"source": source, "name": name, "gpus": [],
                                         "pids": [], "cgroup": cgroup})
            if gpu.index not in job["gpus"]:
                job["gpus"].append(gpu.index)
            if p.pid not in job["pids"]:
                job["pids"].append(p.pid)
    totals = cgroup_totals or {}
    jobs = [JobInfo(key, j["source"], j["name"], tuple(sorted(j["gpus"])), tuple(j["pids"]),
                    j["cgroup"], totals.get(key)) for key, j in found.items()]
    return sorted(jobs, key=lambda j: (j.gpus[:1], j.id))
