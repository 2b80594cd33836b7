"""The what-if's inputs: the figures one interval gives the input pipeline's model
(`Pipeline`, fractions of the interval), and how they are read from a Model, the
detector's Job and the devices' Saturations (`pipeline_of`).

The figures: u, the starved GPUs' mean utilization (NVML, model/gpu.py); per loader
(model/loaders.py LoaderTime) c on a CPU, w waiting for one (schedstat, model/procs.py),
b blocked on reads, m waiting on a network mount; the trainer's own time on a CPU and its
wait; J, every process of the job's CPU (wrappers and launchers too: a per-loader mean
cannot be diluted by them); C, the host's CPUs or the cgroup's cpu.max where lower
(model/host.py); the others' CPU (everything busy that is not the job: processes,
interrupts, steal; not what niced processes ran: they yield, model/host.py
others_cpu_pct); I, the interrupts (irq + softirq, /proc/stat) the loaders' reads cause,
their share of the device's reads; the device's rates and its stored probe, where
believed (verdict/ceiling.py); the verdict's culprits (verdict/detect/evidence.py: others
reading the device the job waits on, processes or another job of the node) as one
neighbour: who, its pids, its kB a second and its share of the device's reads, beside
the job's own kB a second.  No input, no figure: never a made-up one."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudisk_top.collect.blockdev import device_stack
from gpudisk_top.verdict.ceiling import probe_figures
from gpudisk_top.model.host import busy_pct, others_cpu_pct
from gpudisk_top.model.loaders import IO_MEASURED

# a read() served by the page cache costs the kernel about this a call, and its bytes'
# copy at this rate (the cache fix, verdict/whatif/fixes.py: measured on a 2-vCPU VM; a
# server's memcpy runs at 5-15 GB/s a core)
READ_CALL_S = 1.0e-6
COPY_B_S = 9.0e9

ACTIVE_PCT = 2.0     # a loader busier than this (CPU, wait, reads) does the loading: a
                     # wrapper (timeout, a launcher) asleep beside it does not


@dataclass
class Pipeline:
    """The figures one interval gives the model (fractions of the interval, 0..1)."""

    gpu_util: float                      # u
    loaders: int = 0                     # N: loaders doing work (idle wrappers left out)
    loader_kind: str = "DataLoader worker"
    c: float = 0.0                       # a loader's share on a CPU
    c_sys: float | None = None           # ... of it in the kernel (None: stime not read)
    c_sys_warm: float = 0.0              # ... what its reads would cost it from the cache
    w: float | None = None               # waiting for one (None: no schedstat)
    b: float = 0.0                       # blocked on reads (block device)
    m: float = 0.0                       # waiting on a network or FUSE mount
    io_estimated: bool = False           # b came from reads x r_await
    reads_s: float | None = None         # the loaders' reads a second from `device`
    device: str | None = None
    device_r_s: float = 0.0              # the device's reads a second (everybody's)
    device_aqu: float = 0.0              # its aqu-sz
    saturated: bool = False
    peak_iops: float = 0.0
    seen_r_s: float = 0.0                # the most it has read a second so far (this run)
    seen_kb_s: float = 0.0               # ... and kB a second: an unprobed device's cap
    probe_target: str | None = None      # where `gpudisk-top probe` would measure it
    qd1_iops: float | None = None        # the stored probe, where believed (verdict/ceiling.py)
    qd32_iops: float | None = None
    probe_doubt: str | None = None       # ... else why not ("probe of vda ignored: ...")
    ceiling_mib_s: float | None = None   # ... its 1 MiB reads at QD8: the device's bandwidth
    device_read_kb_s: float = 0.0        # the device's reads, kB a second (everybody's)
    read_kb: float = 0.0                 # ... their mean size (rareq-sz)
    trainer_c: float | None = None       # the GPU processes' own time (when apart)
    trainer_w: float | None = None
    cpus: float | None = None            # C
    cpus_from: str = "host"              # "host" | "cpu.max"
    job_cpu: float | None = None         # CPUs the whole job uses
    others_cpu: float = 0.0              # CPUs the others use (the kernel's and steal too)
    steal_cpu: float = 0.0               # ... of which the hypervisor's (steal)
    niced_cpu: float = 0.0               # CPUs others ran at a lower priority (not in it)
    io_cpu: float = 0.0                  # ... of which the interrupts the loaders' reads cause
    others: list[tuple[int, str, float]] = field(default_factory=list)  # (pid, name, CPUs)
    direct: bool | None = None
    data_kb: int | None = None
    mem_available_kb: int | None = None
    ckpt_lost_s: float | None = None     # checkpoint: GPU-seconds lost by the latest stall
    ckpt_period_s: float | None = None   # ... and the time between the last two starts
    job_read_kb_s: float = 0.0           # the job's own reads, kB a second (every process)
    neighbour_who: str | None = None     # the verdict's culprits (Culprit.who(), joined)
    neighbour_pids: list[int] = field(default_factory=list)   # ... their reading pids
    neighbour_kb_s: float = 0.0          # ... their reads from `device`, kB a second
    neighbour_share_pct: float = 0.0     # ... their share of the device's reads
    neighbour_cpu: float | None = None   # ... CPUs their processes use (None: not read yet)
    neighbour_irq_cpu: float = 0.0       # ... and their reads' interrupts

    @property
    def others_procs_cpu(self) -> float:
        """The others' CPU that their processes take (not steal, not the job's interrupts),
        those at a lower priority too: nice orders the tasks of one scheduling group (a
        session's autogroup, a cgroup) and the CPUs are shared among the groups first, so a
        job yields to a niced loop of another session as to any (measured on this
        project's VM: busy loops at nice 19 and nice 0, each in a session of its own, took
        0.34 CPU each)."""
        return max(0.0, self.others_cpu + self.niced_cpu - self.steal_cpu - self.io_cpu)



def pipeline_of(model, job, sats: dict, gpu_util_pct: float | None,
                ckpt: tuple[float | None, float | None] = (None, None),
                culprits=()) -> Pipeline | None:
    """The figures of one interval (a Model, the detector's Job and Saturations, the
    verdict's culprits: verdict/detect/evidence.py Culprit), or None where the job or its
    GPUs cannot be seen: no prediction then.  Raises nothing."""
    if gpu_util_pct is None or not job.running or not job.visible:
        return None
    p = Pipeline(gpu_util=max(0.005, gpu_util_pct / 100.0))
    lt = job.time
    if lt is not None:
        active = [s for s in lt.each
                  if s.on_cpu_pct + (s.cpu_wait_pct or 0) + (s.io_wait_pct or 0) >= ACTIVE_PCT]
        if active:
            n = len(active)
            p.loaders, p.loader_kind = n, lt.kind
            p.c = sum(s.on_cpu_pct for s in active) / n / 100
            waits = [s.cpu_wait_pct for s in active if s.cpu_wait_pct is not None]
            p.w = sum(waits) / len(waits) / 100 if waits else None
            p.b = sum(s.io_wait_pct or 0.0 for s in active) / n / 100
            p.io_estimated = any(s.io_source not in (None, IO_MEASURED) for s in active)
            if lt.mount_wait_pct:
                p.m = min(1.0 - p.c, lt.mount_wait_pct * lt.count / n / 100)
                p.b = 0.0
            p.reads_s, p.device = lt.reads_s, lt.device
            views = {v.pid: v for v in job.members}
            mine = [views.get(s.pid) for s in active]
            if all(v is not None and v.sys_pct is not None for v in mine):
                p.c_sys = sum(v.sys_pct for v in mine) / n / 100
                p.c_sys_warm = sum((v.reads_s or 0.0) * READ_CALL_S
                                   + (v.rchar_kb_s or 0.0) * 1024 / COPY_B_S
                                   for v in mine) / n
    workers = {v.pid for v in job.workers}
    trainers = [v for v in job.members if v.pid not in workers and v.cpu_pct is not None]
    if trainers and p.loader_kind == "DataLoader worker":
        p.trainer_c = sum(v.cpu_pct for v in trainers) / len(trainers) / 100
        tw = [v.cpu_wait_pct for v in trainers if v.cpu_wait_pct is not None]
        p.trainer_w = sum(tw) / len(tw) / 100 if tw else None
    h = model.host
    if h is not None and h.ncpu:
        p.cpus = float(h.ncpu)
        if h.cgroup_pid is not None and h.cgroup_cpu_limit_cpus and h.cgroup_cpu_limit_cpus < h.ncpu:
            p.cpus, p.cpus_from = h.cgroup_cpu_limit_cpus, "cpu.max"
        known = [v.cpu_pct for v in job.members if v.cpu_pct is not None]
        if known:
            p.job_cpu = sum(known) / 100
        others = others_cpu_pct(h, p.job_cpu * 100) if p.job_cpu is not None else None
        if others is not None:
            p.others_cpu = others / 100
            p.steal_cpu = min(p.others_cpu, (h.cpu_steal_pct or 0.0) / 100 * h.ncpu)
            # what others took this interval, whatever their nice (others_procs_cpu)
            took = max(0.0, busy_pct(h) / 100 * h.ncpu - p.job_cpu)
            p.niced_cpu = max(0.0, took - p.others_cpu)
        mine = {v.pid for v in job.members}
        p.others = [(v.pid, v.name or "?", v.cpu_pct / 100) for v in sorted(
            (v for v in model.procs.values()
             if (job.info is not None or v.root_pid is None) and v.pid not in mine
             and (v.cpu_pct or 0) >= 20), key=lambda v: -(v.cpu_pct or 0))]
        p.mem_available_kb = h.mem_available_kb
    if p.device is not None:
        for s in filter(None, map(sats.get, device_stack(model.devices, p.device))):
            if not p.device_r_s:
                p.device_r_s, p.device_aqu = s.r_s, s.aqu_sz
                p.saturated, p.peak_iops = s.saturated, s.peak_iops
                p.device_read_kb_s, p.read_kb = s.read_kb_s, s.rareq_kb
                p.seen_r_s = max(s.r_s, getattr(s, "peak_read_r_s", 0.0))
                p.seen_kb_s = max(s.read_kb_s, getattr(s, "peak_read_kb_s", 0.0))
            if s.probe_doubt or (s.ceiling_iops and s.probed_read_ms):
                p.qd32_iops, p.qd1_iops, p.ceiling_mib_s, p.probe_doubt = probe_figures(s)
                break
    if p.device is not None:
        p.probe_target = _probe_target(model, p.device)
    p.direct, p.data_kb = job.direct_reads, job.data_kb
    p.ckpt_lost_s, p.ckpt_period_s = ckpt
    p.job_read_kb_s = job.read_kb_s
    read = [c for c in culprits if c.read_kb_s]
    if read:
        p.neighbour_who = " and ".join(c.who() for c in read)
        p.neighbour_pids = [pid for c in read for pid in (c.pids or (c.pid,))]
        p.neighbour_kb_s = sum(c.read_kb_s for c in read)
        p.neighbour_share_pct = sum(c.read_share_pct or 0.0 for c in read)
        # another job stops whole: every process of its tree, not only its readers; a
        # process the I/O scan found this interval has no CPU rate yet (a --once's)
        gpu_pids = {pid for info in model.jobs if info.id in {c.job_id for c in read}
                    for pid in info.pids}
        cpu_pids = set(p.neighbour_pids) | {v.pid for v in model.procs.values()
                                            if v.pid in gpu_pids or v.root_pid in gpu_pids}
        cpu_pct = [getattr(model.procs.get(pid), "cpu_pct", None) for pid in cpu_pids]
        if None not in cpu_pct:
            p.neighbour_cpu = sum(cpu_pct) / 100
        p.neighbour_irq_cpu = _irq_cpu(h, p.neighbour_share_pct / 100)
    if p.reads_s and p.device_r_s:
        p.io_cpu = max(0.0, min(p.others_cpu - p.steal_cpu,
                                _irq_cpu(h, p.reads_s / p.device_r_s)))
    return p


def _probe_target(model, device: str) -> str:
    """Where `gpudisk-top probe` measures `device`: a mountpoint on it (a file there needs
    no root), else its device node (text from the machine: the caller's to escape)."""
    for name in device_stack(model.devices, device):
        info = model.devices.get(name)
        if info is not None and info.mountpoints:
            return info.mountpoints[0]
    return f"/dev/{device}"


def _irq_cpu(h, share: float) -> float:
    """The CPUs the interrupts of `share` of the device's reads take: the interrupts
    (irq + softirq) serve every read of the host, each reader's by its share."""
    if h is None or not h.ncpu or not h.irq_pct:
        return 0.0
    return h.irq_pct / 100 * h.ncpu * min(1.0, share)
