"""The what-if's solver: a bottleneck model of a job's input pipeline, per interval, and
the fastest speed it allows under one change (`Change`, what a fix alters of the inputs).

The job's speed is x (steps a second over now); each stage of the pipeline has a load at
x, the share of the interval it would be busy, and the job goes as fast as it can with
every load at most 1.  The loads, from the interval's figures (fractions of it;
verdict/whatif/pipeline.py reads them):

  the GPU      x u                            u: the starved GPUs' mean utilization
  the trainer  x (u + ct) + x wt f_t(x)       the GPU processes' own time: ct on a CPU, wt
                                              waiting for one; a step is its Python, then
                                              its GPU work
  the loaders  x r (c + b rho(x) + m)         per loader, r = N/N' (N' workers share the
               + x r w f_l(x)                 work): c on a CPU, w waiting for one, b
                                              blocked on reads, m waiting on a network
                                              mount; asleep the rest
  the CPUs     x (J + I) / (max(C - O', J + I) + k R)
                                              J: every process of the job's CPU; C: the
                                              CPUs it may use; O: the others' CPU; R: what
                                              a fix stops of it; I: the interrupts the
                                              loaders' reads cause (O' = steal + k x the
                                              others' processes: k, how CPU-bound the job's
                                              loaders are, as for the wait below): they
                                              grow with the reads, and go with a cached
                                              dataset
  the device   x (kB/s) / ceiling             its bandwidth: the probe's 1 MiB reads, or
                                              without a probe the most it was seen reading,
                                              against the loaders' kB a second (x) and the
                                              others' (as they are); its reads a second are
                                              capped through rho (device.py: without a
                                              probe, at the most seen)

The run-queue wait follows the CPU work runnable beside a process, as the scheduler shares
the CPUs among what is runnable: f(x) = (other work at x) / (other work now), where the
other work is the job's CPU less the process's own share and the interrupts of its reads
(both grow with x), steal, and the others' processes less R, these weighted by how
CPU-bound the process is (c / (1 - w)): CFS runs a task waking from a read before a busy
loop that has had its share, so busy loops cost a reader little wait and a decoder much;
a neighbour's readers (Change.readers_cpu, what the neighbour fix stops) wake from their
reads alike, so theirs counts in full.
rho(x), a read's blocked time at x over now, is verdict/whatif/device.py's.

A fix's speed-up is the fastest x with the change over the fastest x without it, both by
this model (its errors fall on both sides of the ratio); the stage that binds there is its
cap (verdict/whatif/limit.py: a key, and its sentence)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from gpudisk_top.verdict.whatif.device import Device, lat_ms
from gpudisk_top.verdict.whatif.limit import Cap, Limit
from gpudisk_top.verdict.whatif.pipeline import Pipeline

# the caps without figures, made once (a solve asks one, or several, of each)
_GPU = Cap.of(Limit.GPU)
_LOADERS = Cap.of(Limit.LOADERS)


@dataclass
class Change:
    """One fix, as the model's inputs it changes."""

    workers: int
    b_scale: float = 1.0          # the reads' blocked time (cache: 0; storage: at the ceiling)
    m_scale: float = 1.0          # the mount's
    removed_cpu: float = 0.0      # others' CPUs stopped
    readers_cpu: float = 0.0      # ... of readers (a neighbour's): they wake as the loaders do
    io_scale: float = 1.0         # the kernel's interrupt work for the reads (cache: 0)
    curve: bool = True            # the device's latency follows the probe's curve
    cpu_cut: float = 0.0          # of a loader's share on a CPU, what goes (cache: cold
                                  # reads' kernel work)
    ceiling_r_s: float | None = None   # storage: reads a second the device can serve
    removed_q: float = 0.0        # neighbour: the others' queue depth that goes
    removed_kb_s: float = 0.0     # ... and their kB a second (the device's bandwidth)


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
        # readers wake from their reads as the job's loaders do: CFS puts neither behind
        # the other, so their CPU counts in full (what a change stops of it, as it was)
        readers = min(procs, ch.readers_cpu)
        self.now = max(0.05, p.job_cpu - own_now + p.io_cpu + p.steal_cpu
                       + weight * (procs - readers) + readers)
        self.rest = weight * max(0.0, procs - readers - ch.removed_cpu)   # the others' it leaves

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
    once, so a bisection step is the loads' arithmetic alone; a cap's sentence is made
    only for the stage that binds."""

    def __init__(self, p: Pipeline, ch: Change, dev: Device):
        self.loads_at: list = []         # each stage's load at x
        self.caps: list = []             # ... and its cap, made when it binds
        u = p.gpu_util
        self._add(lambda x: x * u, lambda: _GPU)
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
            self._add(loaders, lambda: _LOADERS)
        if p.trainer_c is not None:
            tc, tw, u_tc = p.trainer_c, p.trainer_w or 0.0, u + p.trainer_c
            trainer_wait = _Wait(p, ch, tc, tw).at
            self._add(lambda x: x * u_tc + tw * x * trainer_wait(x, tc * x),
                      lambda: Cap.of(Limit.TRAINER, tc))
        if p.cpus and p.job_cpu:
            # the job has the CPUs it uses now (its processes' and its reads' interrupts),
            # whatever the others take, and of the others' processes' what CFS gives its
            # waking readers first (the weight of _Wait)
            mine = p.job_cpu + p.io_cpu
            held = p.steal_cpu + _cpu_bound(p) * p.others_procs_cpu
            usable = max(p.cpus - held, mine) + _cpu_bound(p) * (ch.removed_cpu
                                                                 + ch.readers_cpu)
            job_cpu, io_cpu, io_scale = p.job_cpu - p.loaders * ch.cpu_cut, p.io_cpu, ch.io_scale
            self._add(lambda x: (job_cpu * x + io_cpu * x * io_scale) / usable,
                      lambda: Cap.of(Limit.CPUS, p.cpus, p.cpus_from))
        # the device's bandwidth: the probe's large reads, else (unprobed) the most it was
        # seen reading; the loaders' share of its reads grows with x, the others' stays; a
        # cached dataset's reads do not reach it
        if p.ceiling_mib_s:
            ceiling_kb, bw_cap = p.ceiling_mib_s * 1024, (Limit.DEVICE_BANDWIDTH, p.ceiling_mib_s)
        elif dev.seen_r_s is not None and p.seen_kb_s:
            ceiling_kb = max(p.seen_kb_s, p.device_read_kb_s)
            bw_cap = (Limit.DEVICE_SEEN, ceiling_kb / 1024, "MiB/s")
        else:
            ceiling_kb = None
        if ceiling_kb and p.device_read_kb_s and p.reads_s and p.read_kb:
            mine_kb = min(p.device_read_kb_s, p.reads_s * p.read_kb)
            kb_s = max(mine_kb, p.device_read_kb_s - ch.removed_kb_s)
            io_scale = ch.io_scale
            self._add(lambda x: (x * mine_kb * io_scale + kb_s - mine_kb) / ceiling_kb,
                      lambda: Cap.of(*bw_cap))
        if dev.seen_r_s is not None and p.reads_s and ch.b_scale > 0:
            # unprobed: the device's reads a second at most the most it was seen doing, the
            # loaders' growing with x, the others' as they are (the latency's growth, rho,
            # says the same where the loaders' blocked time a read is the device's latency;
            # where it is less, an estimate, this holds the rate)
            mine_r_s = min(p.reads_s, p.device_r_s)
            rest_r_s, seen = p.device_r_s - mine_r_s, dev.seen_r_s
            self._add(lambda x: (x * mine_r_s + rest_r_s) / seen,
                      lambda: Cap.of(Limit.DEVICE_SEEN, seen))
        if ch.ceiling_r_s and p.reads_s:
            reads_s, ceiling_r_s = p.reads_s, ch.ceiling_r_s
            self._add(lambda x: x * reads_s / ceiling_r_s,
                      lambda: Cap.of(Limit.DEVICE_QD32, ceiling_r_s))
        self.first, self.rest = self.loads_at[0], tuple(self.loads_at[1:])

    def _add(self, load_at, cap) -> None:
        """A stage: its load at x, and a function that makes its cap (only asked of the
        stage that binds, so a solve makes one sentence)."""
        self.loads_at.append(load_at)
        self.caps.append(cap)

    def fit(self, x: float) -> bool:
        """Whether every load at x is at most 1: max(loads) <= 1 without the list, as max()
        reads a NaN too (a first one stays the max, a later one is passed over)."""
        if not self.first(x) <= 1.0:
            return False
        for load_at in self.rest:
            if load_at(x) > 1.0:
                return False
        return True

    def binding(self, x: float) -> Cap:
        """The cap of the stage with the highest load at x (the first of equals)."""
        loads = [load_at(x) for load_at in self.loads_at]
        return self.caps[max(range(len(loads)), key=loads.__getitem__)]()


class Solver:
    """One interval's model: the device's curve, and the job's speed without a change
    (`now`), worked out once a prediction."""

    def __init__(self, p: Pipeline):
        self.p = p
        self.dev = Device(p)

    def device(self, ch: Change) -> Device:
        """The device's curve under a change: the interval's, or without the others'
        queue the change removes (a neighbour's reads stopped)."""
        return Device(self.p, ch.removed_q) if ch.removed_q > 0 else self.dev

    @cached_property
    def now(self) -> float:
        return self.fastest(Change(self.p.loaders))[0]

    def fastest(self, ch: Change) -> tuple[float, Cap]:
        """The highest speed at which every stage's load stays at or under 1 (bisection:
        each load grows with x), and the stage that binds there."""
        stages = _Stages(self.p, ch, self.device(ch))
        lo, hi = 0.0, 1.0 / self.p.gpu_util
        if stages.fit(hi):
            return hi, _GPU
        for _ in range(40):
            if hi - lo <= 1e-4 * hi:        # finer than the speed-up's printed 3 decimals
                break
            mid = 0.5 * (lo + hi)
            if stages.fit(mid):
                lo = mid
            else:
                hi = mid
        return lo, stages.binding(hi * 1.001)

    def solve(self, ch: Change) -> tuple[float, Cap | None]:
        """The job's speed after a change over its speed now, both by the same model (so
        its errors fall on both sides), and the binding cap where it is not the loaders'
        own cycle."""
        p, now = self.p, self.now
        after, cap = self.fastest(ch)
        # below 1 the figures say the job cannot go as fast as it did (estimates that overrun
        # the interval): the speed it went at is the reference then
        speed = after / max(1.0, now)
        if cap.limit is Limit.LOADERS:
            # the loaders' own cycle binds; the device's, where its latency grew with them
            dev = self.device(ch)
            slower = (ch.curve and ch.b_scale > 0 and dev.curve
                      and dev.rho(after, ch.workers) > 1.05 * dev.rho(now, p.loaders))
            cap = None if not slower else (
                Cap.of(Limit.DEVICE_QD32, p.qd32_iops) if dev.seen_r_s is None
                else Cap.of(Limit.DEVICE_SEEN, dev.seen_r_s))
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
