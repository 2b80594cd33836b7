"""What each fix would gain: a bottleneck model of a job's input pipeline, per interval.

The job's speed is x (steps a second over now); each stage of the pipeline has a load at
x, the share of the interval it would be busy, and the job goes as fast as it can with
every load at most 1.  The loads, from the interval's figures (fractions of it):

  the GPU      x u                            u: the starved GPUs' mean utilization (NVML,
                                              model/gpu.py)
  the trainer  x (u + ct) + x wt f_t(x)       the GPU processes' own time: ct on a CPU, wt
                                              waiting for one (schedstat, model/procs.py);
                                              a step is its Python, then its GPU work
  the loaders  x r (c + b rho(x) + m)         per loader (model/loaders.py LoaderTime), r =
               + x r w f_l(x)                 N/N' (N' workers share the work): c on a CPU,
                                              w waiting for one, b blocked on reads, m
                                              waiting on a network mount; asleep the rest
  the CPUs     x (J + I) / (max(C - O', J + I) + k R)
                                              J: every process of the job's CPU (wrappers
                                              and launchers too: a per-loader mean cannot be
                                              diluted by them); C: the host's CPUs, or the
                                              cgroup's cpu.max where lower (model/host.py);
                                              O: the others' CPU (everything busy that is
                                              not the job: processes, interrupts, steal;
                                              not what niced processes ran: they yield,
                                              model/host.py others_cpu_pct);
                                              R: what a fix stops of it;
                                              I: the interrupts (irq + softirq, /proc/stat)
                                              the loaders' reads cause, their share of the
                                              device's reads (O' = steal + k x the others'
                                              processes: k, how CPU-bound the job's loaders
                                              are, as for the wait below): they grow
                                              with the reads, and go with a cached dataset
  the device   x (reads/s) / ceiling          without a probe, a saturated device's highest
                                              rate seen; with one, its bandwidth: the probe's
                                              1 MiB reads, against the loaders' kB a second
                                              (x) and the others' (as they are)

The run-queue wait follows the CPU work runnable beside a process, as the scheduler shares
the CPUs among what is runnable: f(x) = (other work at x) / (other work now), where the
other work is the job's CPU less the process's own share and the interrupts of its reads
(both grow with x), steal, and the others' processes less R, these weighted by how
CPU-bound the process is (c / (1 - w)): CFS runs a task waking from a read before a busy
loop that has had its share, so busy loops cost a reader little wait and a decoder much.
rho(x) is the device's read latency at the queue depth the readers make over now:
lat(q) = A + B q through the stored probe's two points (QD1: 1/iops1; QD32: 32/iops32),
so iops(q) = q / lat(q) is exact at QD1 and QD32; q = the others' queue + the loaders'
reads a second x their latency (Little), solved for the latency; the curve gives the
growth, lat(q at x) / lat(q now), the interval's blocked time the level.  Without a probe
(or with one the device's rates contradict: verdict/ceiling.py) it is flat: `estimated`.

A fix's speed-up is the fastest x with the change over the fastest x without it, both by
this model (its errors fall on both sides of the ratio).  The fixes (each only where its
cause holds a share: a fix worth < 2 % is left out):
  workers        num_workers N -> N': the fewest N' that reach 95 % of the best speed up
                 to 4 N (N + 8 for a few workers).  Where the loaders' load provably falls
                 as N' grows (_Solver.more_workers_never_slower, checked each interval), so
                 does the speed grow with N': the best is at the last N' searched and the
                 fewest a bisection over N' away; else every N' is solved
  others         stopping the processes outside the job that take the CPUs: R = the named
                 ones' CPU (else the others' less steal), where the job alone fits its CPUs
  cache          the working set in the page cache (buffered reads, the data files' size
                 fits in MemAvailable): b, m -> 0, and the loaders' CPU less what the kernel
                 spends on a read that misses the cache (allocating its pages, starting and
                 completing the I/O): c -> c - max(0, s - s_warm), s the loaders' kernel
                 share (stime), s_warm a cached read's, the copy alone: READ_CALL_S a read()
                 call + its bytes (rchar) at COPY_B_S (measured on this project's 2-vCPU VM:
                 1.4 us for a cached 4 KiB read, 9.2 us for 64 KiB, 114 us for 1 MiB; a
                 cold 64 KiB one 45-50 us).  An assumption, so `estimated`; without stime
                 (recordings made before it) c stays as it is: a cold read's kernel work is
                 taken for the loaders' own, and the gain under-predicted
  storage        reads served at the probed QD32 ceiling (parallel reads, or a faster device)
  checkpoint     an asynchronous save: the GPU-seconds the synchronous one cost, over the
                 time between checkpoints (left out until two were seen)
  fewer-workers  the job's own processes crowd the CPUs and the trainer waits for one

`confidence` is "measured" when every input was read in the interval (delay accounting's
blocked time, schedstat's wait, a probe for a device the loaders read), "estimated"
otherwise, and `basis` names the gap.  No input, no prediction: never a made-up number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

from gpudisk_top.collect.blockdev import device_stack
from gpudisk_top.verdict.ceiling import probe_figures
from gpudisk_top.model.host import others_cpu_pct
from gpudisk_top.model.loaders import IO_MEASURED

FIXES = ("workers", "others", "cache", "storage", "checkpoint", "fewer-workers")
MEASURED = "measured"
ESTIMATED = "estimated"
WORTH = 1.02            # a fix gaining less than 2 % is not offered
MAX_WORKERS = 64
WORKER_PLATEAU = 0.95   # num_workers: the fewest that reach 95 % of the best speed up to 4 N
# a read() served by the page cache costs the kernel about this a call, and its bytes'
# copy at this rate (the module docstring: measured on a 2-vCPU VM; a server's memcpy
# runs at 5-15 GB/s a core)
READ_CALL_S = 1.0e-6
COPY_B_S = 9.0e9
# others' CPU worth stopping even where none of them is named (the collector names them
# after two scans of every process, OTHERS_REFRESH_S apart: a --once is too short)
OTHERS_MIN_CPUS = 0.3


@dataclass
class WhatIf:
    """One fix's prediction (the JSON contract `verdict.whatif`, best first)."""

    fix: str
    speedup: float
    gpu_util_pct: float
    gpu_now_pct: float
    confidence: str
    basis: str
    cap: str | None = None
    from_: int | None = None     # num_workers now and after, for the workers fixes: counts
    to: int | None = None
    pids: list[int] = field(default_factory=list)

    def as_json(self) -> dict:
        out = {"fix": self.fix, "from": self.from_, "to": self.to,
               "speedup": round(self.speedup, 3), "gpu_util_pct": round(self.gpu_util_pct, 1),
               "cap": self.cap, "confidence": self.confidence, "basis": self.basis,
               "gpu_now_pct": round(self.gpu_now_pct, 1)}
        if self.fix == "others":
            out["pids"] = list(self.pids)
        return out

    @classmethod
    def from_json(cls, doc: dict) -> "WhatIf":
        now = doc.get("gpu_now_pct")
        if now is None:
            now = doc["gpu_util_pct"] / doc["speedup"] if doc["speedup"] else 0.0
        return cls(fix=doc["fix"], speedup=doc["speedup"], gpu_util_pct=doc["gpu_util_pct"],
                   gpu_now_pct=now, confidence=doc["confidence"],
                   basis=doc["basis"], cap=doc.get("cap"), from_=doc.get("from"),
                   to=doc.get("to"), pids=list(doc.get("pids") or []))

    def title(self) -> str:
        """'num_workers 4 → 8', 'stop pid 812 (stress)', 'dataset in the page cache'."""
        if self.fix in ("workers", "fewer-workers"):
            return f"num_workers {self.from_:.0f} → {self.to:.0f}"
        return _TITLES[self.fix]

    def line(self) -> str:
        """'num_workers 4 → 8: GPU ~2% → ~4% (×1.90), capped by the device: ...' (the
        cap's own text is the model's, never from the machine)."""
        cap = f", {self.cap}" if self.cap else ""
        est = ", estimated" if self.confidence == ESTIMATED else ""
        return (f"{self.title()}: GPU ~{self.gpu_now_pct:.0f}% → ~{self.gpu_util_pct:.0f}% "
                f"(×{self.speedup:.2f}{est}){cap}")


_TITLES = {"others": "stop the processes that take the CPUs",
           "cache": "the dataset in the page cache",
           "storage": "reads at the device's QD32 ceiling",
           "checkpoint": "asynchronous checkpoints"}


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
    io_cpu: float = 0.0                  # ... of which the interrupts the loaders' reads cause
    others: list[tuple[int, str, float]] = field(default_factory=list)  # (pid, name, CPUs)
    direct: bool | None = None
    data_kb: int | None = None
    mem_available_kb: int | None = None
    ckpt_lost_s: float | None = None     # checkpoint: GPU-seconds lost by the latest stall
    ckpt_period_s: float | None = None   # ... and the time between the last two starts

    @property
    def others_procs_cpu(self) -> float:
        """The others' CPU that their processes take (not steal, not the job's interrupts)."""
        return max(0.0, self.others_cpu - self.steal_cpu - self.io_cpu)


# ---------------------------------------------------------------------------- the device
def lat_ms(p: Pipeline, q: float) -> float | None:
    """The device's read latency at queue depth q, through the probe's QD1 and QD32
    points (lat = A + B q), in ms; None without a probe."""
    if not p.qd1_iops or not p.qd32_iops:
        return None
    lat1, lat32 = 1000.0 / p.qd1_iops, 32 * 1000.0 / p.qd32_iops
    slope = max(0.0, (lat32 - lat1) / 31.0)
    return lat1 - slope + slope * max(1.0, q)


class _Device:
    """The device's read latency at speed x with `workers` readers: lat = A + S q and q =
    the others' queue + the loaders' reads a second x lat (Little), solved for lat.  What
    does not depend on x or the readers is worked out once an interval."""

    def __init__(self, p: Pipeline):
        # without the probe's curve (or without reads) a read's blocked time stays as it is
        self.curve = not (p.b <= 0 or not p.reads_s or lat_ms(p, 1) is None)
        if not self.curve:
            return
        self.p = p
        self.reads_s = p.reads_s
        per_read_s = p.b * p.loaders / p.reads_s       # a loader's blocked time a read, now
        self.others_q = max(0.0, p.device_aqu - p.reads_s * per_read_s)
        self.slope_s = (lat_ms(p, 2) - lat_ms(p, 1)) / 1000.0
        base_s = lat_ms(p, 1) / 1000.0 - self.slope_s
        self.free_s = base_s + self.slope_s * self.others_q   # the latency with none of theirs
        self.least_s = lat_ms(p, 1) / 1000.0
        self.most_s: dict[int, float] = {}
        self.now_s = self.lat_s(1.0, p.loaders)

    def lat_s(self, x: float, workers: int) -> float:
        """The latency at speed x with `workers` readers, in s."""
        most_s = self.most_s.get(workers)
        if most_s is None:                                  # every reader in a read
            most_s = self.most_s[workers] = lat_ms(self.p, workers + self.others_q) / 1000.0
        rate = self.reads_s * x
        lat_s = most_s if self.slope_s * rate >= 1 else min(
            most_s, self.free_s / (1 - self.slope_s * rate))
        return max(lat_s, self.least_s)

    def rho(self, x: float, workers: int) -> float:
        """A read's blocked time at speed x over now (1 without the probe's curve): the
        curve gives how the latency grows with the queue, the interval its level."""
        return self.lat_s(x, workers) / self.now_s if self.curve else 1.0


# ---------------------------------------------------------------------------- the stages
@dataclass
class Change:
    """One fix, as the model's inputs it changes."""

    workers: int
    b_scale: float = 1.0          # the reads' blocked time (cache: 0; storage: at the ceiling)
    m_scale: float = 1.0          # the mount's
    removed_cpu: float = 0.0      # others' CPUs stopped
    io_scale: float = 1.0         # the kernel's interrupt work for the reads (cache: 0)
    curve: bool = True            # the device's latency follows the probe's curve
    cpu_cut: float = 0.0          # of a loader's share on a CPU, what goes (cache: cold
                                  # reads' kernel work)
    ceiling_r_s: float | None = None   # storage: reads a second the device can serve


def _bound(on_cpu: float, wait: float) -> float:
    """How CPU-bound a process is: its share on a CPU over its time not waiting for one."""
    return min(1.0, on_cpu / max(1e-6, 1.0 - wait))


def _cpu_bound(p: Pipeline) -> float:
    """_bound of the job's busiest processes: the loaders, else the trainer."""
    if p.loaders and p.c > 0:
        return _bound(p.c, p.w or 0.0)
    if p.trainer_c:
        return _bound(p.trainer_c, p.trainer_w or 0.0)
    return 1.0


class _Wait:
    """A process's run-queue wait per CPU-second at speed x over now: the CPU work
    runnable beside it, as the scheduler shares the CPUs.  The job's other processes and
    the interrupts its reads cause grow with x; the hypervisor's steal stays; the others'
    processes count by how CPU-bound this one is (its share on a CPU over its time not
    waiting): CFS lets a task that wakes from a read run before a busy loop that has had
    its share, so a reader that sleeps most of the time waits little for such loops, and a
    decoder that never sleeps shares the CPUs with them evenly.  `own_now`: the process's
    own share on a CPU now; `at(x, own_after)`: its share after."""

    def __init__(self, p: Pipeline, ch: Change, own_now: float, wait: float):
        self.p, self.io_scale = p, ch.io_scale
        self.job_cpu = p.job_cpu if p.job_cpu is None else p.job_cpu - p.loaders * ch.cpu_cut
        self.flat = p.job_cpu is None               # nothing known beside it: no change
        if self.flat:
            return
        weight = _bound(own_now, wait)
        procs = p.others_procs_cpu
        self.now = max(0.05, p.job_cpu - own_now + p.io_cpu + p.steal_cpu + weight * procs)
        self.rest = weight * max(0.0, procs - ch.removed_cpu)   # the others' it leaves

    def at(self, x: float, own_after: float) -> float:
        if self.flat:
            return 1.0
        p = self.p
        after = max(0.0, self.job_cpu * x - own_after + p.io_cpu * x * self.io_scale
                    + p.steal_cpu + self.rest)
        return after / self.now


class _Stages:
    """Each stage's load at speed x (the job's steps a second over now) under one change:
    above 1, that stage cannot go so fast.  What does not depend on x is worked out here
    once, so a bisection step is the loads' arithmetic alone; a cap's text is made only
    for the stage that binds."""

    def __init__(self, p: Pipeline, ch: Change, dev: _Device):
        self.loads_at: list = []         # each stage's load at x
        self.texts: list = []            # ... and its cap's text
        u = p.gpu_util
        self._add(lambda x: x * u, lambda: "capped by the GPU: 100%")
        if p.loaders:
            r = p.loaders / ch.workers if ch.workers else 0.0
            c, w, workers = p.c, p.w or 0.0, ch.workers
            loader_wait = _Wait(p, ch, c, w).at
            c -= ch.cpu_cut
            bb, mm = p.b * ch.b_scale, p.m * ch.m_scale
            rho = dev.rho if ch.curve else (lambda x, workers: 1.0)
            own_step = p.loader_kind != "DataLoader worker"

            def loaders(x: float) -> float:
                c_new = c * x * r                        # one loader's share on a CPU after
                wait = w * x * r * loader_wait(x, c_new)
                cycle = c_new + wait + x * r * (bb * rho(x, workers) + mm)
                if own_step:
                    cycle += x * u            # the GPU process loads its own data, then steps
                return cycle
            self._add(loaders, lambda: "capped by the loaders")
        if p.trainer_c is not None:
            tc, tw, u_tc = p.trainer_c, p.trainer_w or 0.0, u + p.trainer_c
            trainer_wait = _Wait(p, ch, tc, tw).at
            self._add(lambda x: x * u_tc + tw * x * trainer_wait(x, tc * x),
                      lambda: f"capped by the trainer's own step ({tc * 100:.0f}% on a CPU)")
        if p.cpus and p.job_cpu:
            # the job has the CPUs it uses now (its processes' and its reads' interrupts),
            # whatever the others take, and of the others' processes' what CFS gives its
            # waking readers first (the weight of _Wait)
            mine = p.job_cpu + p.io_cpu
            held = p.steal_cpu + _cpu_bound(p) * p.others_procs_cpu
            usable = max(p.cpus - held, mine) + _cpu_bound(p) * ch.removed_cpu
            job_cpu, io_cpu, io_scale = p.job_cpu - p.loaders * ch.cpu_cut, p.io_cpu, ch.io_scale
            self._add(lambda x: (job_cpu * x + io_cpu * x * io_scale) / usable,
                      lambda: f"capped by the CPUs: {p.cpus:.1f} "
                      f"{'(cpu.max)' if p.cpus_from == 'cpu.max' else 'on the host'}")
        if p.b > 0 and p.saturated and lat_ms(p, 1) is None and p.device_r_s and p.peak_iops:
            # no probe: a saturated device's ceiling is the highest rate it was seen at
            r_s, peak_r_s = p.device_r_s, max(p.peak_iops, p.device_r_s)
            self._add(lambda x: x * r_s / peak_r_s,
                      lambda: f"capped by the device: {p.peak_iops:.0f} r/s, the highest "
                      "seen (no probe)")
        if p.ceiling_mib_s and p.device_read_kb_s and p.reads_s and p.read_kb:
            # the device's bandwidth (the probe's large reads): the loaders' share of its reads
            # grows with x, the others' stays; a cached dataset's reads do not reach it
            mine_kb = min(p.device_read_kb_s, p.reads_s * p.read_kb)
            kb_s, ceiling_kb, io_scale = p.device_read_kb_s, p.ceiling_mib_s * 1024, ch.io_scale
            self._add(lambda x: (x * mine_kb * io_scale + kb_s - mine_kb) / ceiling_kb,
                      lambda: f"capped by the device: {p.ceiling_mib_s:.0f} MiB/s (the "
                      "probe's 1 MiB reads)")
        if ch.ceiling_r_s and p.reads_s:
            reads_s, ceiling_r_s = p.reads_s, ch.ceiling_r_s
            self._add(lambda x: x * reads_s / ceiling_r_s,
                      lambda: f"capped by the device: {ceiling_r_s / 1000:.0f}k r/s at QD32")
        self.first, self.rest = self.loads_at[0], tuple(self.loads_at[1:])

    def _add(self, load_at, text) -> None:
        self.loads_at.append(load_at)
        self.texts.append(text)

    def fit(self, x: float) -> bool:
        """Whether every load at x is at most 1: max(loads) <= 1 without the list, as max()
        reads a NaN too (a first one stays the max, a later one is passed over)."""
        if not self.first(x) <= 1.0:
            return False
        for load_at in self.rest:
            if load_at(x) > 1.0:
                return False
        return True

    def binding(self, x: float) -> str:
        """The cap's text of the stage with the highest load at x (the first of equals)."""
        loads = [load_at(x) for load_at in self.loads_at]
        return self.texts[max(range(len(loads)), key=loads.__getitem__)]()


class _Solver:
    """One interval's model: the device's curve, and the job's speed without a change
    (`now`), worked out once a prediction."""

    def __init__(self, p: Pipeline):
        self.p = p
        self.dev = _Device(p)

    @cached_property
    def now(self) -> float:
        return self.fastest(Change(self.p.loaders))[0]

    def fastest(self, ch: Change) -> tuple[float, str | None]:
        """The highest speed at which every stage's load stays at or under 1 (bisection:
        each load grows with x), and the stage that binds there."""
        stages = _Stages(self.p, ch, self.dev)
        lo, hi = 0.0, 1.0 / self.p.gpu_util
        if stages.fit(hi):
            return hi, "capped by the GPU: 100%"
        for _ in range(40):
            if hi - lo <= 1e-4 * hi:        # finer than the speed-up's printed 3 decimals
                break
            mid = 0.5 * (lo + hi)
            if stages.fit(mid):
                lo = mid
            else:
                hi = mid
        return lo, stages.binding(hi * 1.001)

    def solve(self, ch: Change) -> tuple[float, str | None]:
        """The job's speed after a change over its speed now, both by the same model (so
        its errors fall on both sides), and the binding cap's text where it is not the
        loaders' own cycle."""
        p, now = self.p, self.now
        after, cap = self.fastest(ch)
        # below 1 the figures say the job cannot go as fast as it did (estimates that overrun
        # the interval): the speed it went at is the reference then
        speed = after / max(1.0, now)
        if cap == "capped by the loaders":
            # the loaders' own cycle binds; the device's, where its latency grew with them
            slower = (ch.curve and ch.b_scale > 0 and lat_ms(p, 1) is not None
                      and self.dev.rho(after, ch.workers) > 1.05 * self.dev.rho(now, p.loaders))
            cap = f"capped by the device: {p.qd32_iops / 1000:.0f}k r/s at QD32" if slower else None
        return speed, cap

    def more_workers_never_slower(self) -> bool:
        """Whether the loaders' load at each speed the bisection tries (x up to 1/u) falls,
        or stays, as num_workers grows from N (r = N/N' <= 1); no other stage depends on
        N'.  Then every N' reaches the speeds N'-1 reached, and the speed grows with N'.
        Term by term: c x r falls with r; r x rho (b + m) falls where the latency with
        none of the others' reads (A + S q_others) is not negative, for only the queue's
        cap (every reader in a read) grows with N', as r N' stays; the wait's r x max(0,
        a(x) - c x r) / now with a(x) = (J + I) x + steal + the others' weighted share
        falls with c x r where c now + w (a(x) - 2 c x) >= 0, its derivative in r at r = 1
        (its least), linear in x: checked at x = 0 and x = 1/u."""
        p = self.p
        w = p.w or 0.0
        if min(p.c, w, p.b, p.m) < 0:
            return False
        if self.dev.curve and (self.dev.free_s < 0 or self.dev.now_s <= 0):
            return False
        if p.job_cpu is None:
            return True
        wait = _Wait(p, Change(p.loaders), p.c, w)
        fixed = p.steal_cpu + wait.rest
        slope = p.job_cpu + p.io_cpu - 2 * p.c
        return all(p.c * wait.now + w * (fixed + x * slope) >= 0
                   for x in (0.0, 1.0 / p.gpu_util))


# ---------------------------------------------------------------------------- the fixes
def predict(p: Pipeline, state: str, kind: str | None) -> list[WhatIf]:
    """Every fix worth having, best first."""
    if p.gpu_util is None or p.gpu_util <= 0:
        p.gpu_util = 0.005
    out: list[WhatIf] = []
    gaps = _gaps(p)
    # in a checkpoint stall the trainer waits for its save: the loaders' and the CPUs'
    # figures of that time say nothing of what would gain
    fns = (_checkpoint,) if state == "checkpoint-stall" else (
        _workers, _others, _cache, _storage, _fewer)
    solver = _Solver(p)
    for fn in fns:
        w = fn(p, state, kind, gaps, solver)
        if w is not None and w.speedup >= WORTH:
            out.append(w)
    out.sort(key=lambda x: (-x.speedup, FIXES.index(x.fix)))
    return out


def _gaps(p: Pipeline) -> list[str]:
    gaps = []
    if p.io_estimated and p.b > 0:
        gaps.append("blocked time estimated as reads x r_await (no delay accounting)")
    if p.w is None and p.loaders:
        gaps.append("no run-queue wait (schedstat)")
    return gaps


def _make(p: Pipeline, fix: str, speed: float, cap: str | None, basis: list[str],
          gaps: list[str], **kw) -> WhatIf:
    u = p.gpu_util * 100
    conf = ESTIMATED if gaps else MEASURED
    if gaps:
        basis = basis + ["missing: " + ", ".join(gaps)]
    return WhatIf(fix=fix, speedup=speed, gpu_util_pct=min(100.0, u * speed), gpu_now_pct=u,
                  confidence=conf, basis="; ".join(basis), cap=cap, **kw)


def _loaders_basis(p: Pipeline) -> str:
    return (f"{p.loaders} loader{'s' * (p.loaders != 1)} at {p.c * 100:.0f}% on a CPU, "
            f"{(p.w or 0) * 100:.0f}% waiting for one, {(p.b + p.m) * 100:.0f}% on reads")


def _device_gaps(p: Pipeline, gaps: list[str]) -> list[str]:
    if p.b > 0 and lat_ms(p, 1) is None:
        return gaps + [(p.probe_doubt or f"no probe of {p.device or 'the device'}")
                       + " (latency taken as flat)"]
    return gaps


def _workers(p, state, kind, gaps, solver) -> WhatIf | None:
    if p.loaders <= 0 or p.loader_kind != "DataLoader worker" or state == "checkpoint-stall":
        return None
    n = p.loaders
    last = max(n, min(MAX_WORKERS, max(4 * n, n + 8)))
    if last == n:
        return None                  # the search goes nowhere past the workers there are
    solved: dict[int, tuple[float, str | None]] = {}

    def at(n2: int) -> tuple[float, str | None]:
        if n2 not in solved:
            solved[n2] = solver.solve(Change(n2))
        return solved[n2]

    # the fewest workers that reach the plateau: past it one more adds little, and the
    # model's error grows with the distance from the workers it saw
    if solver.more_workers_never_slower():
        # the speed grows with N': the best is at the last, the fewest that reach 95 % of
        # it a bisection away
        top = at(last)[0]
        below, pick = n - 1, last
        while pick - below > 1:
            mid = (below + pick) // 2
            if at(mid)[0] >= WORKER_PLATEAU * top:
                pick = mid
            else:
                below = mid
    else:
        counts = range(n, last + 1)
        top = max(at(n2)[0] for n2 in counts)
        pick = next(n2 for n2 in counts if at(n2)[0] >= WORKER_PLATEAU * top)
    if pick == n:
        return None
    best, cap = at(pick)
    g = _device_gaps(p, gaps)
    if p.saturated and lat_ms(p, 1) is None:
        g = g + ["the device's ceiling: the highest rate seen"]
    basis = [_loaders_basis(p), f"x {pick}/{n} workers"]
    if lat_ms(p, 1) is not None and p.b > 0:
        basis.append(f"device latency from the probe (QD1 {p.qd1_iops:.0f}, QD32 "
                     f"{p.qd32_iops:.0f} r/s)")
    return _make(p, "workers", best, cap, basis, g, from_=n, to=pick)


def _others(p, state, kind, gaps, solver) -> WhatIf | None:
    waits = (p.w or 0.0) if p.loaders else 0.0
    twait = p.trainer_w or 0.0
    if (not p.others and p.others_cpu < OTHERS_MIN_CPUS) or (waits < 0.03 and twait < 0.03) \
            or p.cpus is None:
        return None
    own_fits = (p.job_cpu or 0.0) <= p.cpus * 0.9
    if not own_fits:
        return None                  # the job alone fills its CPUs: the wait stays
    # what stopping them frees: the named processes' CPUs, else everything outside the
    # job that is not the kernel's or the hypervisor's (steal)
    removed = min(sum(cpu for _, _, cpu in p.others) if p.others else math.inf,
                  max(0.0, p.others_cpu - p.steal_cpu))     # niced ones yield already
    speed, cap = solver.solve(Change(p.loaders, removed_cpu=removed))
    named = (", ".join(f"pid {pid} ({name})" for pid, name, _ in p.others[:3])
             or "processes outside the job (not named: none followed yet)")
    basis = [_loaders_basis(p) if p.loaders else "the trainer",
             f"without the run-queue wait that {named} cause ({removed:.1f} of the "
             f"{p.others_cpu:.1f} CPUs others use)"]
    if p.trainer_w:
        basis.append(f"the trainer waits {p.trainer_w * 100:.0f}% for a CPU")
    return _make(p, "others", speed, cap, basis, _device_gaps(p, gaps) if p.b else gaps,
                 pids=[pid for pid, _, _ in p.others])


def _cache(p, state, kind, gaps, solver) -> WhatIf | None:
    if p.b + p.m < 0.05 or p.direct is not False or not p.data_kb or not p.mem_available_kb:
        return None
    if p.data_kb > p.mem_available_kb:
        return None
    cut = 0.0 if p.c_sys is None else max(0.0, min(p.c, p.c_sys) - p.c_sys_warm)
    speed, cap = solver.solve(Change(p.loaders, b_scale=0.0, m_scale=0.0, io_scale=0.0,
                                     cpu_cut=cut))
    basis = [_loaders_basis(p), f"without their reads: {p.data_kb / 1048576:.1f} GiB of data "
             f"fits in {p.mem_available_kb / 1048576:.1f} GiB available"]
    if cut > 0:
        basis.append(f"their kernel CPU {min(p.c, p.c_sys) * 100:.0f}% → "
                     f"~{p.c_sys_warm * 100:.0f}% (a cached read's copy, assumed "
                     f"{COPY_B_S / 1e9:.0f} GB/s)")
        gaps = gaps + ["a cached read's kernel time (assumed)"]
    return _make(p, "cache", speed, cap, basis, gaps)


def _storage(p, state, kind, gaps, solver) -> WhatIf | None:
    if p.b < 0.05 or not p.reads_s or lat_ms(p, 1) is None or state != "disk-starved":
        return None
    # the loaders' reads served at the QD32 ceiling: a read's share of it
    per_read_s = p.b * p.loaders / p.reads_s
    at_ceiling_s = p.loaders / p.qd32_iops
    scale = min(1.0, at_ceiling_s / per_read_s)
    speed, cap = solver.solve(Change(p.loaders, b_scale=scale, curve=False,
                                     ceiling_r_s=p.qd32_iops))
    basis = [_loaders_basis(p), f"reads at {p.qd32_iops:.0f} r/s (the probe's QD32)"]
    return _make(p, "storage", speed, cap, basis, gaps)


def _checkpoint(p, state, kind, gaps, solver) -> WhatIf | None:
    if state != "checkpoint-stall" or p.ckpt_lost_s is None:
        return None
    if not p.ckpt_period_s or p.ckpt_period_s <= p.ckpt_lost_s:
        return None      # one stall seen: what it costs the job depends on how often
    speed = p.ckpt_period_s / (p.ckpt_period_s - p.ckpt_lost_s)
    basis = [f"{p.ckpt_lost_s:.1f} GPU-seconds lost a checkpoint, one every "
             f"{p.ckpt_period_s:.0f} s"]
    # the loaders' figures are not its inputs; the GPU it expects is the job's mean
    w = _make(p, "checkpoint", speed, None, basis, [])
    w.gpu_now_pct = 100.0 * (1 - p.ckpt_lost_s / p.ckpt_period_s)
    w.gpu_util_pct = 100.0
    return w


def _fewer(p, state, kind, gaps, solver) -> WhatIf | None:
    if (p.loaders < 2 or not p.cpus or not p.job_cpu or p.trainer_w is None
            or p.trainer_w < 0.05 or p.job_cpu < 0.9 * p.cpus or p.others_cpu > 0.5):
        return None
    n2 = max(1, min(p.loaders - 1, math.floor(p.cpus - (p.trainer_c or 0.0))))
    speed, cap = solver.solve(Change(n2))
    basis = [f"the job's processes take {p.job_cpu:.1f} of {p.cpus:.1f} CPUs",
             f"the trainer waits {p.trainer_w * 100:.0f}% for a CPU"]
    return _make(p, "fewer-workers", speed, cap, basis, gaps, from_=p.loaders,
                 to=n2)


# ---------------------------------------------------------------------------- from a Model
ACTIVE_PCT = 2.0     # a loader busier than this (CPU, wait, reads) does the loading: a
                     # wrapper (timeout, a launcher) asleep beside it does not


def pipeline_of(model, job, sats: dict, gpu_util_pct: float | None,
                ckpt: tuple[float | None, float | None] = (None, None)) -> Pipeline | None:
    """The figures of one interval (a Model, the detector's Job and Saturations), or None
    where the job or its GPUs cannot be seen: no prediction then."""
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
        mine = {v.pid for v in job.members}
        p.others = [(v.pid, v.name or "?", v.cpu_pct / 100) for v in sorted(
            (v for v in model.procs.values() if v.root_pid is None and v.pid not in mine
             and (v.cpu_pct or 0) >= 20), key=lambda v: -(v.cpu_pct or 0))]
        p.mem_available_kb = h.mem_available_kb
    if p.device is not None:
        for s in filter(None, map(sats.get, device_stack(model.devices, p.device))):
            if not p.device_r_s:
                p.device_r_s, p.device_aqu = s.r_s, s.aqu_sz
                p.saturated, p.peak_iops = s.saturated, s.peak_iops
                p.device_read_kb_s, p.read_kb = s.read_kb_s, s.rareq_kb
            if s.probe_doubt or (s.ceiling_iops and s.probed_read_ms):
                p.qd32_iops, p.qd1_iops, p.ceiling_mib_s, p.probe_doubt = probe_figures(s)
                break
    p.direct, p.data_kb = job.direct_reads, job.data_kb
    p.ckpt_lost_s, p.ckpt_period_s = ckpt
    if h is not None and h.ncpu and h.irq_pct and p.reads_s and p.device_r_s:
        # the interrupts serve every read of the host: the loaders' share of the device's
        p.io_cpu = max(0.0, min(p.others_cpu - p.steal_cpu, h.irq_pct / 100 * h.ncpu
                                * min(1.0, p.reads_s / p.device_r_s)))
    return p


def best_line(whatif: list[WhatIf]) -> str | None:
    """'best fix: num_workers 4 → 8: GPU ~2% → ~4% (×1.90), capped by the device: ...':
    the banner's, the report's and --once's one line (text from the machine in the basis
    is the caller's to escape, as the verdict's reason is)."""
    return f"best fix: {whatif[0].line()}" if whatif else None


def text_lines(whatif: list[WhatIf], prefix: str = "what-if: ") -> list[str]:
    """Every prediction, best first, each with its basis: --once text and the episode's
    evidence."""
    return [f"{prefix}{w.line()} [{w.basis}]" for w in whatif]


def of_json(docs) -> list[WhatIf]:
    """The predictions back from `verdict.whatif` / an episode's `whatif` (report)."""
    return [WhatIf.from_json(d) for d in docs or ()]
