"""The training job as the detector sees it: its GPUs, its processes (the GPU processes and
their descendants, such as DataLoader workers), what they read and from which devices, and
where its loaders' time goes.  On a shared node each job (model/jobs.py JobInfo) is one
Job, made of its own GPUs and processes only (find_job(model, info)); without an info,
every GPU process of the node (a detector that judges no job: the node's idle state)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable

from gpudisk_top.model.gpu import GpuView
from gpudisk_top.model.jobs import JobInfo
from gpudisk_top.model.loaders import LoaderTime, loader_time
from gpudisk_top.model.present import pid_name
from gpudisk_top.model.procs import ProcView
from gpudisk_top.model.snapshot import Model


@dataclass
class Job:
    gpus: list[GpuView] = field(default_factory=list)      # GPUs with a compute process
    gpu_pids: list[int] = field(default_factory=list)      # host PIDs, as NVML gives them
    names: dict[int, str] = field(default_factory=dict)    # host PID -> "python train.py"
    members: list[ProcView] = field(default_factory=list)  # every process of every tree
    workers: list[ProcView] = field(default_factory=list)  # members that are not GPU processes
    visible: bool = True           # False: the job's processes cannot be read from here
    read_kb_s: float = 0.0         # the whole job, from /proc/PID/io read_bytes
    write_kb_s: float = 0.0
    rchar_kb_s: float = 0.0
    # device -> the job's processes that have files on it
    device_readers: dict[str, list[int]] = field(default_factory=dict)
    info: JobInfo | None = None      # which job of the node (None: all its GPU processes)
    # the loaders' time to be made, where the job is seen (find_job); made on first use:
    # a healthy interval never asks for it (verdict/detect/classify.py)
    _make_time: Callable[[], LoaderTime | None] | None = field(
        default=None, init=False, repr=False, compare=False)
    _time: LoaderTime | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def time(self) -> LoaderTime | None:
        """Where the loaders' time goes this interval (model/loaders.py loader_time);
        None where it cannot be read."""
        if self._make_time is not None:
            self._time, self._make_time = self._make_time(), None
        return self._time

    @property
    def direct_reads(self) -> bool | None:
        """Whether the job reads its data with O_DIRECT (past the page cache): True when a
        process of it that reads has a data file open with it, False when those with data
        files have none, None when unknown (collect/procio.py _data_files)."""
        known = [v.direct_reads for v in self.members
                 if v.direct_reads is not None and (v.read_kb_s or v.rchar_kb_s)]
        return any(known) if known else None

    @property
    def data_kb(self) -> int | None:
        """The size of the data files one of its processes has open through the page cache,
        the largest (workers often share one dataset file); None when unknown."""
        return max((v.data_kb for v in self.members if v.data_kb), default=None)

    @property
    def running(self) -> bool:
        return bool(self.gpus)

    @property
    def io_unreadable(self) -> bool:
        """Whether the job's processes are seen but none of their I/O could be read
        (another user's /proc/PID/io and fd links, as non-root): their CPU time is known,
        their time blocked on reads is not, so reads cannot be weighed against CPUs."""
        return (self.visible and bool(self.members)
                and all(v.read_kb_s is None and v.io_wait_pct is None for v in self.members))

    def unseen_reason(self) -> tuple[str, str] | None:
        """(why the job's processes cannot be seen from here, how to see them); None
        where they can (verdict/detect/unseen.py says both in the verdict)."""
        as_root = "run gpudisk-top as root (sudo, docker exec -u 0)"
        if not self.visible:
            if any(not p.mapped for g in self.gpus for p in g.processes
                   if p.pid in self.gpu_pids):
                return ("another PID namespace: NVML's host PIDs name nothing here, and no "
                        "process here could be matched to them by device file",
                        "run gpudisk-top in the host's PID namespace (docker --pid=host, or "
                        "the host's /proc with --procfs /host/proc), or as root inside the "
                        "job's container")
            return "its processes could not be read", as_root
        if self.io_unreadable:
            return ("not root: its processes' I/O counters, open files and delays cannot "
                    "be read", as_root)
        return None

    def describe(self) -> str:
        """'pid 4121 (python train.py) and its 8 workers', for evidence lines."""
        if not self.gpu_pids:
            return "no process"
        first = self.gpu_pids[0]
        name = self.names.get(first) or "?"
        n = len(self.workers)
        workers = f" and {'its' if len(self.gpu_pids) == 1 else 'their'} {n} worker{'s' * (n != 1)}" \
            if n else ""
        if len(self.gpu_pids) == 1:
            return pid_name(first, name) + workers
        shown = ", ".join(map(str, self.gpu_pids[:3])) + (", ..." if len(self.gpu_pids) > 3 else "")
        return f"{name} ({len(self.gpu_pids)} processes: pid {shown}){workers}"


def _short_cmd(cmdline: str | None, name: str | None) -> str | None:
    """"python -u /path/to/train.py --lr 3e-4" -> "python train.py"."""
    if not cmdline:
        return name
    words = [w for w in cmdline.split() if not w.startswith("-")]
    return " ".join(w.rsplit("/", 1)[-1] for w in words[:2]) or name


def job_gpus(model: Model, info: JobInfo | None = None) -> list[GpuView]:
    """The job's GPUs: those not lost with a compute process (of the job `info`, where
    given; the stall ledger counts the others as idle or another job's)."""
    gpus = [gpu for gpu in model.gpus if not gpu.lost and gpu.processes]
    if info is not None:
        gpus = [gpu for gpu in gpus if gpu.index in info.gpus]
    return gpus


def find_job(model: Model, info: JobInfo | None = None) -> Job:
    job = Job(info=info)
    mine = set(info.pids) if info is not None else None
    for gpu in job_gpus(model, info):
        job.gpus.append(gpu)
        for p in gpu.processes:
            if (mine is None or p.pid in mine) and p.pid not in job.gpu_pids:
                job.gpu_pids.append(p.pid)
                job.names[p.pid] = _short_cmd(p.cmdline, p.name) or "?"
    if not job.gpus:
        return job
    gpu_local = {p.local_pid for g in job.gpus for p in g.processes
                 if p.local_pid is not None and (mine is None or p.pid in mine)}
    roots = set(job.gpu_pids)
    job.members = [v for v in model.procs.values() if v.root_pid in roots]
    job.workers = [v for v in job.members if v.pid not in gpu_local]
    mapped = any(p.mapped for g in job.gpus for p in g.processes if mine is None or p.pid in mine)
    job.visible = mapped and bool(job.members)
    for v in job.members:
        job.read_kb_s += v.read_kb_s or 0.0
        job.write_kb_s += v.write_kb_s or 0.0
        job.rchar_kb_s += v.rchar_kb_s or 0.0
        for dev in v.devices or ():
            job.device_readers.setdefault(dev, []).append(v.pid)
    if job.visible:
        job._make_time = functools.partial(
            loader_time, model.disks, job.workers or job.members,
            "DataLoader worker" if job.workers else "process", devices=model.devices)
    return job
