"""Where a job's loaders' time goes: on a CPU, waiting for one, blocked on reads, asleep.

The loaders are the processes that feed the GPUs: a training job's DataLoader workers, or
the GPU process itself when it loads its own data (num_workers=0).  Per interval each
loader's leading thread's time is split (model/procs.py has where each number comes from):

  on CPU           utime + stime                                  (every kernel)
  waiting for CPU  schedstat run_delay                            (CONFIG_SCHED_INFO)
  blocked on reads delay accounting's blkio delay                 (kernel.task_delayacct=1)
                   where the loader's figure can be trusted (collect/procio.py: a task
                   forked before accounting was on reads 0 for ever), else estimated:
                   the loader's reads that reach the device times the device's r_await
                   (each synchronous read blocks its reader for r_await, which is how
                   DataLoader workers read; Little's law: summed over readers it is their
                   share of the device's aqu-sz).  A measured 0 of a loader found in
                   state D whose estimate is most of the interval is not believed either.
  waiting on a     where at the sample half the loaders or more are in a read() of a file
  network or FUSE  on a network or FUSE mount (NFS, Lustre, s3fs...: /proc/PID/syscall,
  mount            collect/procio.py), their time off a CPU: such a wait is neither block
                   I/O nor a CPU; per read() call it is the read latency the job sees
  asleep           the rest (the prefetch queue is full: the trainer is the bottleneck)

Per loader the four add up to 100 %: on a CPU first (capped at 100), then the wait for one,
then the blocked time, each bounded by what the ones before left, asleep the rest.  An
estimate can exceed what the CPU shares left (a read's wake-up may wait for a CPU within
the device's r_await, and a device's mean r_await is a loader's only approximately): the
detector then weighs the reads by io_claim_pct, the estimate bounded only by the time off
a CPU, against the CPU shares, and the evidence says the estimate was cut.

The detector reads one LoaderTime for the whole job (verdict/detect/job.py), the process view
and --once one per GPU process; both come from loader_time() here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from gpudisk_top.collect.blockdev import device_stack
from gpudisk_top.collect.sample import DeviceInfo
from gpudisk_top.model.disk import DiskRates
from gpudisk_top.model.present import pct
from gpudisk_top.model.procs import ProcView

IO_MEASURED = "delay accounting"
IO_ESTIMATED = "estimated: reads x r_await"
IO_PARTLY = "partly estimated"   # measured for some loaders, estimated for the others
# a measured 0 is not believed of a loader in state D whose estimate is at least this
MEASURED_ZERO_DOUBT_PCT = 50.0


@dataclass
class LoaderShare:
    """One loader's interval, in %: the four shares add up to 100 with asleep_pct.
    io_source: IO_MEASURED or IO_ESTIMATED (None: its blocked time is unknown)."""

    pid: int
    on_cpu_pct: float
    cpu_wait_pct: float | None
    io_wait_pct: float | None
    io_source: str | None
    asleep_pct: float


@dataclass
class LoaderTime:
    """The mean share of the interval, per loader, in each place; io_source says whether
    io_wait_pct was measured (IO_MEASURED), estimated (IO_ESTIMATED) or measured for
    io_measured of the loaders and estimated for the others (IO_PARTLY); `each` holds
    every loader's own shares."""

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
    io_measured: int = 0            # loaders whose blocked time delay accounting measured
    io_capped: bool = False         # an estimate was cut to the time the loader had left
    io_claim_pct: float | None = None   # the blocked time before that cut (bounded by the
                                        # time off a CPU only): what the detector weighs
    each: list[LoaderShare] = field(default_factory=list)   # in pid order

    @property
    def cpu_share_pct(self) -> float:
        """On a CPU or waiting for one: what more CPU would turn into progress."""
        return self.on_cpu_pct + (self.cpu_wait_pct or 0.0)

    @property
    def asleep_pct(self) -> float:
        waits = max(self.io_wait_pct or 0.0, self.mount_wait_pct or 0.0)
        return max(0.0, 100.0 - self.cpu_share_pct - waits)

    def io_how(self) -> str:
        """How io_wait_pct was found: 'delay accounting', 'estimated: reads x r_await',
        'measured for 2 of 4 workers by delay accounting, estimated for the others:
        reads x r_await'; ', at most the time left' where an estimate was cut."""
        cap = (f", cut from {pct(self.io_claim_pct)} to the time left"
               if self.io_capped and self.io_claim_pct is not None else "")
        if self.io_source != IO_PARTLY:
            return f"{self.io_source}{cap if self.io_source == IO_ESTIMATED else ''}"
        unit = "worker" if self.kind == "DataLoader worker" else self.kind
        return (f"measured for {self.io_measured} of {self.count} {unit}s by {IO_MEASURED}, "
                f"estimated for the others: reads x r_await{cap}")

    def describe(self) -> str:
        """'4 DataLoader workers each: 26% on CPU, 3% waiting for a CPU, 54% blocked on
        reads (estimated: reads x r_await), 17% asleep': the parts add up to 100 %."""
        shown = [self.on_cpu_pct, self.cpu_wait_pct]
        io = self.io_wait_pct is not None and not self.mount_wait_pct
        shown += [self.io_wait_pct if io else None, self.mount_wait_pct]
        if self.io_wait_pct is not None or self.mount_wait_pct is not None:
            shown.append(self.asleep_pct)
        cpu, wait, io_pct, mount, asleep = _whole(shown) + [None] * (5 - len(shown))
        parts = [f"{cpu}% on CPU"]
        if wait is not None:
            parts.append(f"{wait}% waiting for a CPU")
        if io_pct is not None:
            parts.append(f"{io_pct}% blocked on reads ({self.io_how()})")
        if mount is not None:
            per = f", {self.mount_read_ms:.1f} ms a read" if self.mount_read_ms is not None else ""
            parts.append(f"{mount}% waiting on reads from {self.mount} "
                         f"({self.mount_blocked} in a read at the sample{per})")
        if asleep is not None:
            parts.append(f"{asleep}% asleep")
        n = self.count
        return f"{n} {self.kind}{'s' * (n != 1)}{' each' if n > 1 else ''}: " + ", ".join(parts)

    def as_json(self) -> dict:
        return asdict(self)


def _whole(values: list[float | None]) -> list[int | None]:
    """Whole percentages of `values` (None kept) that add up to the rounded sum of their
    total, so that shares printed side by side add up to 100 (largest remainder)."""
    known = [(i, v) for i, v in enumerate(values) if v is not None]
    out: list[int | None] = [None if v is None else int(v) for v in values]
    short = round(sum(v for _, v in known)) - sum(out[i] for i, _ in known)
    for i, _v in sorted(known, key=lambda iv: iv[1] - int(iv[1]), reverse=True)[:max(0, short)]:
        out[i] += 1
    return out


def own_read_kb_s(disks: Mapping[str, DiskRates],
                  devices: Mapping[str, DeviceInfo]) -> dict[str, float]:
    """The read KiB/s of each device under a loop device, less what the loop device passes
    on: its reads are read again from the device its backing file lives on (and the disk
    under that), so the two count the same reads twice (DeviceInfo.backing).  Never below
    0 (a buffered loop's reads that the page cache served never reach the disk).  A device
    not in it has no loop device over it: its own reads are its rkb_s."""
    own: dict[str, float] = {}
    for name, info in devices.items():
        r = disks.get(name) if info.backing else None
        if r is None or not r.rkb_s:
            continue
        for under in device_stack(devices, info.backing):
            if under in disks and under != name:
                own[under] = max(0.0, own.get(under, disks[under].rkb_s) - r.rkb_s)
    return own


def _read_device(disks: Mapping[str, DiskRates], own: Mapping[str, float],
                 v: ProcView) -> str | None:
    """The device under the process's files that its reads most likely went to:
    1. the one that must hold the most of them: its reads less what the others could
       hold (own_read_kb_s: a loop device's reads are not the disk's under it again).  A
       worker reading a dataset image on loop0 has its libraries on the root disk that
       holds the image; the disk's reads are loop0's again, less its own few;
    2. where that says nothing (each could hold them all), the one whose reads it
       accounts for the largest share of: a worker holding a dataset on a volume and its
       log on the root disk reads the volume, busy as the root disk may be;
    3. the busiest."""
    read_kb = v.read_kb_s or 0.0
    found = [(name, own.get(name, r.rkb_s)) for name in v.devices or ()
             if (r := disks.get(name)) is not None and r.r_s > 0]
    found = [(name, kb) for name, kb in found if kb > 0]
    total = sum(kb for _, kb in found)
    best, best_key = None, None
    for name, kb in found:
        must = max(0.0, read_kb - (total - kb))
        key = (must, min(1.0, read_kb / kb), kb)
        if best_key is None or key > best_key:
            best, best_key = name, key
    return best


def loader_time(disks: dict[str, DiskRates], pool: list[ProcView],
                kind: str = "DataLoader worker", *,
                devices: Mapping[str, DeviceInfo]) -> LoaderTime | None:
    """The LoaderTime of the loaders in `pool`, or None when it would not describe them:
    none has a full interval, or more than a quarter of them are new (workers replaced at
    an epoch boundary, a job starting), whose time this interval cannot be told. Sums run
    in pid order, so a replay (whose process order differs) gives the same figures.
    devices: what each device is (Model.devices), for the loop devices' backing."""
    loaders = sorted((v for v in pool if v.cpu_pct is not None), key=lambda v: v.pid)
    if not loaders or len(loaders) < 0.75 * len(pool):
        return None
    n = len(loaders)
    own = own_read_kb_s(disks, devices)
    read_on = [_read_device(disks, own, v) for v in loaders]
    reads_kb: dict[str, float] = {}
    for v, dev in zip(loaders, read_on):
        if dev is not None and v.read_kb_s:
            reads_kb[dev] = reads_kb.get(dev, 0.0) + v.read_kb_s
    each = [_share(v, disks.get(dev) if dev is not None else None, bool(reads_kb))
            for v, dev in zip(loaders, read_on)]
    shares = [s for s, _ in each]
    sources = {s.io_source for s in shares}
    io_pct = source = claim = None
    if None not in sources:
        io_pct = sum(s.io_wait_pct for s in shares) / n
        claim = sum(c for _, c in each) / n
        source = sources.pop() if len(sources) == 1 else IO_PARTLY
    waits = [s.cpu_wait_pct for s in shares if s.cpu_wait_pct is not None]
    device = max(reads_kb, key=reads_kb.get) if reads_kb else None
    r = disks.get(device) if device is not None else None
    mount = _mount_wait(loaders, shares)
    return LoaderTime(
        **mount,
        kind=kind, count=n, on_cpu_pct=sum(s.on_cpu_pct for s in shares) / n,
        cpu_wait_pct=sum(waits) / len(waits) if waits else None,
        io_wait_pct=io_pct, io_source=source,
        blocked=sum(1 for v in loaders if v.state == "D"),
        device=device,
        reads_s=reads_kb[device] / r.rareq_kb if r is not None and r.rareq_kb else None,
        read_kb=r.rareq_kb if r is not None else None,
        read_wait_ms=r.r_await_ms if r is not None else None,
        io_measured=sum(1 for s in shares if s.io_source == IO_MEASURED),
        # said where the cut shows in the mean: a percentage point or more
        io_capped=claim is not None and claim - io_pct >= 1.0, io_claim_pct=claim, each=shares)


def _share(v: ProcView, r: DiskRates | None,
           estimable: bool) -> tuple[LoaderShare, float | None]:
    """One loader's shares, adding up to 100 %, and its blocked time bounded only by its
    time off a CPU (an estimate may exceed what the CPU shares left).  estimable: the loaders' reads reach a device (the estimate
    of one that reads none of them is then 0)."""
    on_cpu = max(0.0, min(100.0, v.cpu_pct))
    wait = None if v.cpu_wait_pct is None else max(0.0, min(v.cpu_wait_pct, 100.0 - on_cpu))
    left = 100.0 - on_cpu - (wait or 0.0)
    estimate = None
    if estimable:
        estimate = 0.0
        if r is not None and v.read_kb_s and r.rareq_kb:
            # synchronous reads: each one blocks its reader for r_await (a read's wake-up
            # may wait for a CPU within the device's r_await: the two are not told apart
            # here, which is why the estimate is bounded by what the CPU shares left)
            estimate = max(0.0, v.read_kb_s / r.rareq_kb * r.r_await_ms / 10.0)
    measured = v.io_wait_pct
    if (measured is not None and measured <= 0.0 and v.state == "D"
            and estimate is not None and estimate >= MEASURED_ZERO_DOUBT_PCT):
        measured = None      # blocked on reads now, most of the time by its reads: not 0
    io, source = ((measured, IO_MEASURED) if measured is not None else
                  (estimate, IO_ESTIMATED) if estimate is not None else (None, None))
    claim = None
    if io is not None:
        claim = max(0.0, min(io, 100.0 - on_cpu))
        io = max(0.0, min(io, left))
    return LoaderShare(v.pid, on_cpu, wait, io, source, left - (io or 0.0)), claim


def _mount_wait(loaders: list[ProcView], shares: list[LoaderShare]) -> dict:
    """The network or FUSE mount the loaders wait on, when half of them or more were in
    a read() of it at the sample: their time off a CPU is then that wait."""
    at = [v.blocked_on for v in loaders if v.blocked_on]
    if not at:
        return {}
    mount = max(set(at), key=lambda m: (at.count(m), m))
    blocked = at.count(mount)
    if blocked * 2 < len(loaders):
        return {"mount": mount, "mount_blocked": blocked}
    off = [100.0 - s.on_cpu_pct - (s.cpu_wait_pct or 0.0) for s in shares]
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
