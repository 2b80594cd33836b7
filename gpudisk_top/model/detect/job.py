"""The training job as the detector sees it: its GPUs, its processes (the GPU processes and
their descendants, such as DataLoader workers), what they read and from which devices, and
where its loaders' time goes."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudisk_top.collect.sample import DeviceInfo
from gpudisk_top.model.gpu import GpuView
from gpudisk_top.model.procs import ProcView
from gpudisk_top.model.snapshot import Model


IO_MEASURED = "delay accounting"
IO_ESTIMATED = "estimated: reads x r_await"


@dataclass
class LoaderTime:
    """Where the job's loaders' time went over one interval, as the mean share of the
    interval per loader: on a CPU, runnable but waiting for one, blocked on block I/O;
    the rest they slept (waiting for the trainer to take a batch, or for a lock).

    The loaders are the DataLoader workers, or the GPU processes themselves when the job
    has none (num_workers=0).  io_wait_pct is measured where the kernel's delay
    accounting is on (io_source IO_MEASURED); elsewhere it is estimated as each loader's
    reads from the device times that device's r_await (IO_ESTIMATED): exact for
    synchronous reads, which is how a DataLoader worker reads."""

    kind: str                       # "DataLoader worker" | "process"
    count: int                      # loaders with a full interval (the rest just started)
    on_cpu_pct: float
    cpu_wait_pct: float | None
    io_wait_pct: float | None
    io_source: str | None
    blocked: int = 0                # loaders blocked (state D) at the end of the interval
    device: str | None = None       # where most of the loaders' reads go
    reads_s: float | None = None    # the loaders' reads that reach that device, a second
    read_kb: float | None = None    # its mean read size (rareq-sz)
    read_wait_ms: float | None = None  # and its read latency (r_await)

    @property
    def cpu_share_pct(self) -> float:
        """On a CPU or waiting for one: what more CPU would turn into progress."""
        return self.on_cpu_pct + (self.cpu_wait_pct or 0.0)

    def describe(self) -> str:
        """'4 DataLoader workers: 26% on CPU, 3% waiting for a CPU, 54% blocked on reads
        (estimated: reads x r_await)'."""
        parts = [f"{self.on_cpu_pct:.0f}% on CPU"]
        if self.cpu_wait_pct is not None:
            parts.append(f"{self.cpu_wait_pct:.0f}% waiting for a CPU")
        if self.io_wait_pct is not None:
            parts.append(f"{self.io_wait_pct:.0f}% blocked on reads ({self.io_source})")
        n = self.count
        return f"{n} {self.kind}{'s' * (n != 1)}{' each' if n > 1 else ''}: " + ", ".join(parts)


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
    time: LoaderTime | None = None   # None: the loaders' time cannot be read

    @property
    def running(self) -> bool:
        return bool(self.gpus)

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
            return f"pid {first} ({name}){workers}"
        shown = ", ".join(map(str, self.gpu_pids[:3])) + (", ..." if len(self.gpu_pids) > 3 else "")
        return f"{name} ({len(self.gpu_pids)} processes: pid {shown}){workers}"


def _short_cmd(cmdline: str | None, name: str | None) -> str | None:
    """"python -u /path/to/train.py --lr 3e-4" -> "python train.py"."""
    if not cmdline:
        return name
    words = [w for w in cmdline.split() if not w.startswith("-")]
    return " ".join(w.rsplit("/", 1)[-1] for w in words[:2]) or name


def find_job(model: Model) -> Job:
    job = Job()
    for gpu in model.gpus:
        if gpu.lost or not gpu.processes:
            continue
        job.gpus.append(gpu)
        for p in gpu.processes:
            if p.pid not in job.gpu_pids:
                job.gpu_pids.append(p.pid)
                job.names[p.pid] = _short_cmd(p.cmdline, p.name) or "?"
    if not job.gpus:
        return job
    gpu_local = {p.local_pid for g in job.gpus for p in g.processes if p.local_pid is not None}
    roots = set(job.gpu_pids)
    job.members = [v for v in model.procs.values() if v.root_pid in roots]
    job.workers = [v for v in job.members if v.pid not in gpu_local]
    mapped = any(p.mapped for g in job.gpus for p in g.processes)
    job.visible = mapped and bool(job.members)
    for v in job.members:
        job.read_kb_s += v.read_kb_s or 0.0
        job.write_kb_s += v.write_kb_s or 0.0
        job.rchar_kb_s += v.rchar_kb_s or 0.0
        for dev in v.devices or ():
            job.device_readers.setdefault(dev, []).append(v.pid)
    if job.visible:
        job.time = loader_time(model, job)
    return job


def _read_device(model: Model, v: ProcView) -> str | None:
    """The device under the process's files that read the most this interval."""
    best = None
    for name in v.devices or ():
        r = model.disks.get(name)
        if r is not None and r.r_s > 0 and (best is None or r.rkb_s > model.disks[best].rkb_s):
            best = name
    return best


def loader_time(model: Model, job: Job) -> LoaderTime | None:
    """The job's LoaderTime, or None when it would not describe the job's loaders: none
    has a full interval, or more than a quarter of them are new (workers replaced at an
    epoch boundary, a job starting), whose time this interval cannot be told."""
    pool = job.workers or job.members
    loaders = [v for v in pool if v.cpu_pct is not None]
    if not loaders or len(loaders) < 0.75 * len(pool):
        return None
    n = len(loaders)
    on_cpu = [min(100.0, v.cpu_pct) for v in loaders]
    waits = [v.cpu_wait_pct for v in loaders if v.cpu_wait_pct is not None]
    measured = [v.io_wait_pct for v in loaders if v.io_wait_pct is not None]
    # the device the loaders read from, and what each of their reads costs there
    reads_kb: dict[str, float] = {}
    for v in loaders:
        dev = _read_device(model, v)
        if dev is not None and v.read_kb_s:
            reads_kb[dev] = reads_kb.get(dev, 0.0) + v.read_kb_s
    device = max(reads_kb, key=reads_kb.get) if reads_kb else None
    io_pct = None
    source = None
    if len(measured) == n:
        io_pct, source = sum(min(100.0, x) for x in measured) / n, IO_MEASURED
    elif reads_kb:
        estimates = []
        for v, cpu in zip(loaders, on_cpu):
            dev = _read_device(model, v)
            r = model.disks.get(dev) if dev is not None else None
            if r is None or not v.read_kb_s or not r.rareq_kb:
                estimates.append(0.0)
                continue
            # synchronous reads: each one blocks its reader for r_await
            wait_pct = v.read_kb_s / r.rareq_kb * r.r_await_ms / 10.0
            estimates.append(min(wait_pct, 100.0 - cpu))
        io_pct, source = sum(estimates) / n, IO_ESTIMATED
    r = model.disks.get(device) if device is not None else None
    return LoaderTime(
        kind="DataLoader worker" if job.workers else "process", count=n,
        on_cpu_pct=sum(on_cpu) / n,
        cpu_wait_pct=sum(min(100.0, x) for x in waits) / len(waits) if waits else None,
        io_wait_pct=io_pct, io_source=source,
        blocked=sum(1 for v in loaders if v.state == "D"),
        device=device,
        reads_s=reads_kb[device] / r.rareq_kb if r is not None and r.rareq_kb else None,
        read_kb=r.rareq_kb if r is not None else None,
        read_wait_ms=r.r_await_ms if r is not None else None)


def device_stack(devices: dict[str, DeviceInfo], name: str) -> list[str]:
    """name, then every device below it: a partition's disk, a dm/md device's members."""
    out: list[str] = []
    todo = [name]
    while todo:
        cur = todo.pop(0)
        if cur in out:
            continue
        out.append(cur)
        info = devices.get(cur)
        if info is not None:
            todo.extend(info.slaves)
            if info.parent:
                todo.append(info.parent)
    return out
