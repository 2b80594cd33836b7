"""Where a job's loaders' time goes: on a CPU, waiting for one, blocked on reads, asleep.

The loaders are the processes that feed the GPUs: a training job's DataLoader workers, or
the GPU process itself when it loads its own data (num_workers=0).  Per interval each
loader's leading thread's time is split (model/procs.py has where each number comes from):

  on CPU           utime + stime                                  (every kernel)
  waiting for CPU  schedstat run_delay                            (CONFIG_SCHED_INFO)
  blocked on reads delay accounting's blkio delay                 (kernel.task_delayacct=1)
                   or, where that is off, estimated: the loader's reads that reach the
                   device times the device's r_await (each synchronous read blocks its
                   reader for r_await, which is how DataLoader workers read; Little's
                   law: summed over readers it is their share of the device's aqu-sz)
  waiting on a     where at the sample half the loaders or more are in a read() of a file
  network or FUSE  on a network or FUSE mount (NFS, Lustre, s3fs...: /proc/PID/syscall,
  mount            collect/procio.py), their time off a CPU: such a wait is neither block
                   I/O nor a CPU; per read() call it is the read latency the job sees
  asleep           the rest (the prefetch queue is full: the trainer is the bottleneck)

The detector reads one LoaderTime for the whole job (model/detect/job.py), the process view
and --once one per GPU process; both come from loader_time() here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from gpudisk_top.model.disk import DiskRates
from gpudisk_top.model.procs import ProcView

IO_MEASURED = "delay accounting"
IO_ESTIMATED = "estimated: reads x r_await"


@dataclass
class LoaderTime:
    """The mean share of the interval, per loader, in each place; io_source says whether
    io_wait_pct was measured (IO_MEASURED) or estimated (IO_ESTIMATED)."""

    kind: str                       # "DataLoader worker" | "process"
    count: int                      # loaders with a full interval
    on_cpu_pct: float
    cpu_wait_pct: float | None
    io_wait_pct: float | None
    io_source: str | None
    blocked: int = 0                # loaders blocked (state D) at the end of the interval
    device: str | None = None       # where most of the loaders' reads go
    reads_s: float | None = None    # the loaders' reads that reach that device, a second
    read_kb: float | None = None    # its mean read size (rareq-sz)
    read_wait_ms: float | None = None  # and its read latency (r_await)
    mount: str | None = None        # the network or FUSE mount the loaders were reading
    mount_blocked: int = 0          # loaders in a read() on it at the sample
    mount_wait_pct: float | None = None  # their time off a CPU, taken as waiting on it
    mount_read_ms: float | None = None   # ... per read() call: the latency the job sees

    @property
    def cpu_share_pct(self) -> float:
        """On a CPU or waiting for one: what more CPU would turn into progress."""
        return self.on_cpu_pct + (self.cpu_wait_pct or 0.0)

    @property
    def asleep_pct(self) -> float:
        waits = max(self.io_wait_pct or 0.0, self.mount_wait_pct or 0.0)
        return max(0.0, 100.0 - self.cpu_share_pct - waits)

    def describe(self) -> str:
        """'4 DataLoader workers each: 26% on CPU, 3% waiting for a CPU, 54% blocked on
        reads (estimated: reads x r_await)'."""
        parts = [f"{self.on_cpu_pct:.0f}% on CPU"]
        if self.cpu_wait_pct is not None:
            parts.append(f"{self.cpu_wait_pct:.0f}% waiting for a CPU")
        if self.io_wait_pct is not None and not self.mount_wait_pct:
            parts.append(f"{self.io_wait_pct:.0f}% blocked on reads ({self.io_source})")
        if self.mount_wait_pct is not None:
            per = f", {self.mount_read_ms:.1f} ms a read" if self.mount_read_ms is not None else ""
            parts.append(f"{self.mount_wait_pct:.0f}% waiting on reads from {self.mount} "
                         f"({self.mount_blocked} in a read at the sample{per})")
        n = self.count
        return f"{n} {self.kind}{'s' * (n != 1)}{' each' if n > 1 else ''}: " + ", ".join(parts)

    def as_json(self) -> dict:
        return asdict(self)


def _read_device(disks: dict[str, DiskRates], v: ProcView) -> str | None:
    """The device under the process's files that its reads most likely went to: the one
    whose reads it accounts for the largest share of.  A worker holding a dataset on a
    volume and its log on the root disk reads the volume, busy as the root disk may be."""
    best, best_key = None, None
    for name in v.devices or ():
        r = disks.get(name)
        if r is None or r.r_s <= 0:
            continue
        key = (min(1.0, (v.read_kb_s or 0.0) / r.rkb_s) if r.rkb_s else 0.0, r.rkb_s)
        if best_key is None or key > best_key:
            best, best_key = name, key
    return best


def loader_time(disks: dict[str, DiskRates], pool: list[ProcView],
                kind: str = "DataLoader worker") -> LoaderTime | None:
    """The LoaderTime of the loaders in `pool`, or None when it would not describe them:
    none has a full interval, or more than a quarter of them are new (workers replaced at
    an epoch boundary, a job starting), whose time this interval cannot be told. Sums run
    in pid order, so a replay (whose process order differs) gives the same figures."""
    loaders = sorted((v for v in pool if v.cpu_pct is not None), key=lambda v: v.pid)
    if not loaders or len(loaders) < 0.75 * len(pool):
        return None
    n = len(loaders)
    on_cpu = [min(100.0, v.cpu_pct) for v in loaders]
    waits = [v.cpu_wait_pct for v in loaders if v.cpu_wait_pct is not None]
    measured = [v.io_wait_pct for v in loaders if v.io_wait_pct is not None]
    devices = [_read_device(disks, v) for v in loaders]
    reads_kb: dict[str, float] = {}
    for v, dev in zip(loaders, devices):
        if dev is not None and v.read_kb_s:
            reads_kb[dev] = reads_kb.get(dev, 0.0) + v.read_kb_s
    io_pct = source = None
    if len(measured) == n:
        io_pct, source = sum(min(100.0, x) for x in measured) / n, IO_MEASURED
    elif reads_kb:
        estimates = []
        for v, dev, cpu in zip(loaders, devices, on_cpu):
            r = disks.get(dev) if dev is not None else None
            if r is None or not v.read_kb_s or not r.rareq_kb:
                estimates.append(0.0)
                continue
            # synchronous reads: each one blocks its reader for r_await; never more than
            # the time the loader was not on a CPU (a read's wake-up may wait for a CPU
            # within the device's r_await: the two are not told apart here)
            wait_pct = v.read_kb_s / r.rareq_kb * r.r_await_ms / 10.0
            estimates.append(max(0.0, min(wait_pct, 100.0 - cpu)))
        io_pct, source = sum(estimates) / n, IO_ESTIMATED
    device = max(reads_kb, key=reads_kb.get) if reads_kb else None
    r = disks.get(device) if device is not None else None
    mount = _mount_wait(loaders, on_cpu)
    return LoaderTime(
        **mount,
        kind=kind, count=n, on_cpu_pct=sum(on_cpu) / n,
        cpu_wait_pct=sum(min(100.0, x) for x in waits) / len(waits) if waits else None,
        io_wait_pct=io_pct, io_source=source,
        blocked=sum(1 for v in loaders if v.state == "D"),
        device=device,
        reads_s=reads_kb[device] / r.rareq_kb if r is not None and r.rareq_kb else None,
        read_kb=r.rareq_kb if r is not None else None,
        read_wait_ms=r.r_await_ms if r is not None else None)


def _mount_wait(loaders: list[ProcView], on_cpu: list[float]) -> dict:
    """The network or FUSE mount the loaders wait on, when half of them or more were in
    a read() of it at the sample: their time off a CPU is then that wait."""
    at = [v.blocked_on for v in loaders if v.blocked_on]
    if not at:
        return {}
    mount = max(set(at), key=lambda m: (at.count(m), m))
    blocked = at.count(mount)
    if blocked * 2 < len(loaders):
        return {"mount": mount, "mount_blocked": blocked}
    off = [max(0.0, 100.0 - cpu - min(100.0, v.cpu_wait_pct or 0.0)) for v, cpu in zip(loaders, on_cpu)]
    reads_s = sum(v.reads_s or 0.0 for v in loaders)
    return {"mount": mount, "mount_blocked": blocked, "mount_wait_pct": sum(off) / len(off),
            "mount_read_ms": sum(off) / 100.0 / reads_s * 1000.0 if reads_s else None}


def tree_loaders(procs: dict[int, ProcView], root_pid: int,
                 gpu_local: set[int]) -> tuple[list[ProcView], str]:
    """The loaders of one GPU process's tree: its descendants (DataLoader workers), or
    the GPU process itself when it has none."""
    members = [v for v in procs.values() if v.root_pid == root_pid]
    workers = [v for v in members if v.pid not in gpu_local]
    return (workers, "DataLoader worker") if workers else (members, "process")
