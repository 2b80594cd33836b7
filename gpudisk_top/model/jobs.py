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
"""

from __future__ import annotations

from dataclasses import dataclass

UNKNOWN_ID = "unknown"
UNKNOWN_NAME = "unknown (its processes cannot be told apart from here)"


@dataclass(frozen=True, slots=True)
class JobInfo:
    """One job in one interval.  pids: the host PIDs of its GPU processes, as NVML gives
    them; gpus: the indices of the GPUs they compute on; cgroup: its first GPU process's
    cgroup path, where it was read."""

    id: str
    source: str
    name: str
    gpus: tuple[int, ...]
    pids: tuple[int, ...]
    cgroup: str | None = None


def jobs_of(gpus, procs_raw) -> list[JobInfo]:
    """The jobs of an interval's GpuViews (model/gpu.py), their processes' tags read from
    the sample's ProcIoRaw (keyed by PID under the procfs, as GpuProcessView.local_pid)."""
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
    jobs = [JobInfo(key, j["source"], j["name"], tuple(sorted(j["gpus"])), tuple(j["pids"]),
                    j["cgroup"]) for key, j in found.items()]
    return sorted(jobs, key=lambda j: (j.gpus[:1], j.id))
