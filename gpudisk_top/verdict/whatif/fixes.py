"""The what-if's fixes: each one record (`Fix`: name, family, title, predict) in one
registry (`REGISTRY`, in the order that breaks a tie between equal gains), and what each
would gain on one interval's pipeline.  Each is offered only where its cause holds a
share (verdict/whatif/rank.py leaves out a fix worth < 2 %):

  workers        num_workers N -> N': the fewest N' that reach 95 % of the best speed up
                 to 4 N (N + 8 for a few workers).  Where the loaders' load provably falls
                 as N' grows (Solver.more_workers_never_slower, checked each interval), so
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
  neighbour      the verdict's culprits' reads of the device the job waits on stopped
                 (another job of the node, or processes outside the job: Culprit.who()
                 names them in the title): their part of the others' queue (Device
                 others_q, the device's aqu-sz less the loaders' b N) goes, taken as their
                 share of the others' kB a second, and their kB a second from the device's
                 bandwidth, and the CPU their processes and their reads' interrupts take
                 (at most the others' processes'; readers, so their CPU counts in full
                 in the loaders' wait, not as a busy loop's: Change.readers_cpu; where their processes' CPU is not read
                 yet, a --once's first interval, the others' less the processes named
                 beside them, `estimated`); the latency after is the probe's curve at the
                 queue left.  Only with a probe:
                 without one the model has no latency at a shorter queue (a saturated
                 device's latency over its queue is the one figure it has, and QD1's is
                 unknown), so it is not offered; the verdict's advice still says it
  storage        reads served at the probed QD32 ceiling (parallel reads, or a faster device)
  checkpoint     an asynchronous save: the GPU-seconds the synchronous one cost, over the
                 time between checkpoints (left out until two were seen)
  fewer-workers  the job's own processes crowd the CPUs and the trainer waits for one

Adding a fix: its function here (a `Gain` from the pipeline, or None), one `Fix` entry in
REGISTRY, and its paragraph in docs/whatif.md."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from gpudisk_top.model.present import pid_name, size
from gpudisk_top.verdict.whatif.device import lat_ms, seen_basis, unprobed
from gpudisk_top.verdict.whatif.limit import Cap
from gpudisk_top.verdict.whatif.pipeline import COPY_B_S, Pipeline
from gpudisk_top.verdict.whatif.solver import Change, Solver

MAX_WORKERS = 64
WORKER_PLATEAU = 0.95   # num_workers: the fewest that reach 95 % of the best speed up to 4 N
# others' CPU worth stopping even where none of them is named (the collector names them
# after two scans of every process, OTHERS_REFRESH_S apart: a --once is too short)
OTHERS_MIN_CPUS = 0.3

# the causes a fix acts on: the reads, the CPUs, a synchronous checkpoint (the only
# family predicted in a checkpoint stall, and never outside one)
READS, CPUS, CHECKPOINT = "reads", "cpus", "checkpoint"


@dataclass
class Gain:
    """What one fix would gain on one interval (verdict/whatif/rank.py makes it a WhatIf)."""

    speedup: float
    cap: Cap | None
    basis: list[str]
    gaps: list[str]                      # the inputs not read (makes it `estimated`)
    from_: int | None = None             # num_workers now and after (the workers fixes)
    to: int | None = None
    pids: list[int] = field(default_factory=list)
    who: str | None = None               # whose reads the neighbour fix stops
    gpu_now_pct: float | None = None     # the GPU now and after, where not the interval's
    gpu_util_pct: float | None = None    # ... and the interval's times the speed-up


@dataclass(frozen=True)
class Fix:
    """One fix: `name` (the JSON's `fix`), the cause it acts on (`family`), its `title`
    (a format of the prediction's worker counts `from_` and `to`, and `who`, the
    neighbour it names), and `predict(p, state,
    gaps, solver)`: its Gain on one interval, or None where its cause holds no share."""

    name: str
    family: str
    title: str
    predict: Callable[[Pipeline, str, list[str], Solver], Gain | None]


def _loaders_basis(p: Pipeline) -> str:
    return (f"{p.loaders} loader{'s' * (p.loaders != 1)} at {p.c * 100:.0f}% on a CPU, "
            f"{(p.w or 0) * 100:.0f}% waiting for one, {(p.b + p.m) * 100:.0f}% on reads")


def device_gap(p: Pipeline) -> str | None:
    """What the model lacks of the device the loaders wait on: no probe (or one not
    believed), so it is capped at what it was seen doing (device.py seen_basis), or taken
    as flat where it has no reads to go by; None where it is probed or not waited on."""
    if p.b > 0 and lat_ms(p, 1) is None:
        return seen_basis(p) or f"{unprobed(p)} (latency taken as flat)"
    return None


def _device_gaps(p: Pipeline, gaps: list[str]) -> list[str]:
    gap = device_gap(p)
    return gaps + [gap] if gap else gaps


def _workers(p: Pipeline, state: str, gaps: list[str], solver: Solver) -> Gain | None:
    if p.loaders <= 0 or p.loader_kind != "DataLoader worker" or state == "checkpoint-stall":
        return None
    n = p.loaders
    last = max(n, min(MAX_WORKERS, max(4 * n, n + 8)))
    if last == n:
        return None                  # the search goes nowhere past the workers there are
    solved: dict[int, tuple[float, Cap | None]] = {}

    def at(n2: int) -> tuple[float, Cap | None]:
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
    basis = [_loaders_basis(p), f"x {pick}/{n} workers"]
    if lat_ms(p, 1) is not None and p.b > 0:
        basis.append(f"device latency from the probe (QD1 {p.qd1_iops:.0f}, QD32 "
                     f"{p.qd32_iops:.0f} r/s)")
    return Gain(best, cap, basis, g, from_=n, to=pick)


def _others(p: Pipeline, state: str, gaps: list[str], solver: Solver) -> Gain | None:
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
    named = (", ".join(pid_name(pid, name) for pid, name, _ in p.others[:3])
             or "processes outside the job (not named: none followed yet)")
    basis = [_loaders_basis(p) if p.loaders else "the trainer",
             f"without the run-queue wait that {named} cause ({removed:.1f} of the "
             f"{p.others_cpu:.1f} CPUs others use)"]
    if p.trainer_w:
        basis.append(f"the trainer waits {p.trainer_w * 100:.0f}% for a CPU")
    return Gain(speed, cap, basis, _device_gaps(p, gaps) if p.b else gaps,
                pids=[pid for pid, _, _ in p.others])


def _cache(p: Pipeline, state: str, gaps: list[str], solver: Solver) -> Gain | None:
    if p.b + p.m < 0.05 or p.direct is not False or not p.data_kb or not p.mem_available_kb:
        return None
    if p.data_kb > p.mem_available_kb:
        return None
    cut = 0.0 if p.c_sys is None else max(0.0, min(p.c, p.c_sys) - p.c_sys_warm)
    speed, cap = solver.solve(Change(p.loaders, b_scale=0.0, m_scale=0.0, io_scale=0.0,
                                     cpu_cut=cut))
    basis = [_loaders_basis(p), f"without their reads: {size(p.data_kb, ('GiB',))} of data "
             f"fits in {size(p.mem_available_kb, ('GiB',))} available"]
    if cut > 0:
        basis.append(f"their kernel CPU {min(p.c, p.c_sys) * 100:.0f}% → "
                     f"~{p.c_sys_warm * 100:.0f}% (a cached read's copy, assumed "
                     f"{COPY_B_S / 1e9:.0f} GB/s)")
        gaps = gaps + ["a cached read's kernel time (assumed)"]
    return Gain(speed, cap, basis, gaps)


def _storage(p: Pipeline, state: str, gaps: list[str], solver: Solver) -> Gain | None:
    if p.b < 0.05 or not p.reads_s or lat_ms(p, 1) is None or state != "disk-starved":
        return None
    # the loaders' reads served at the QD32 ceiling: a read's share of it
    per_read_s = p.b * p.loaders / p.reads_s
    at_ceiling_s = p.loaders / p.qd32_iops
    scale = min(1.0, at_ceiling_s / per_read_s)
    speed, cap = solver.solve(Change(p.loaders, b_scale=scale, curve=False,
                                     ceiling_r_s=p.qd32_iops))
    basis = [_loaders_basis(p), f"reads at {p.qd32_iops:.0f} r/s (the probe's QD32)"]
    return Gain(speed, cap, basis, gaps)


def _neighbour(p: Pipeline, state: str, gaps: list[str], solver: Solver) -> Gain | None:
    dev = solver.dev
    if (not p.neighbour_who or not p.neighbour_kb_s or not dev.curve or p.b < 0.05
            or lat_ms(p, 1) is None):
        return None
    others_kb_s = max(p.neighbour_kb_s, p.device_read_kb_s - p.job_read_kb_s)
    removed_q = dev.others_q * min(1.0, p.neighbour_kb_s / others_kb_s)
    # the CPU they take goes too: their processes' and their reads' interrupts, at most
    # what the others' processes take; their processes' not read yet (found by the I/O
    # scan this interval): the others' less the processes named beside them
    procs_cpu = p.neighbour_cpu
    if procs_cpu is None:
        mine = set(p.neighbour_pids)
        named = sum(cpu for pid, _, cpu in p.others if pid not in mine)
        procs_cpu = max(0.0, p.others_procs_cpu - named - p.neighbour_irq_cpu)
        gaps = gaps + ["their CPU (not read yet: the others' less the processes named)"]
    removed_cpu = min(procs_cpu + p.neighbour_irq_cpu, p.others_procs_cpu)
    ch = Change(p.loaders, removed_q=removed_q, removed_kb_s=p.neighbour_kb_s,
                readers_cpu=removed_cpu)
    speed, cap = solver.solve(ch)
    after_ms = solver.device(ch).lat_s(1.0, p.loaders) * 1000
    basis = [_loaders_basis(p),
             f"{p.neighbour_who} {p.neighbour_share_pct:.0f}% of {p.device or 'the device'}'s "
             f"reads ({p.neighbour_kb_s * 1.024 / 1000:.0f} MB/s)",
             f"without their reads the others' queue {dev.others_q:.1f} → "
             f"{dev.others_q - removed_q:.1f}, a read ~{dev.now_s * 1000:.2f} → "
             f"~{after_ms:.2f} ms (the probe's curve: QD1 {p.qd1_iops:.0f}, QD32 "
             f"{p.qd32_iops:.0f} r/s)"]
    if removed_cpu:
        basis.append(f"and the {removed_cpu:.1f} CPUs they take (their interrupts too)")
    return Gain(speed, cap, basis, gaps, pids=list(p.neighbour_pids), who=p.neighbour_who)


def _checkpoint(p: Pipeline, state: str, gaps: list[str], solver: Solver) -> Gain | None:
    if state != "checkpoint-stall" or p.ckpt_lost_s is None:
        return None
    if not p.ckpt_period_s or p.ckpt_period_s <= p.ckpt_lost_s:
        return None      # one stall seen: what it costs the job depends on how often
    speed = p.ckpt_period_s / (p.ckpt_period_s - p.ckpt_lost_s)
    basis = [f"{p.ckpt_lost_s:.1f} GPU-seconds lost a checkpoint, one every "
             f"{p.ckpt_period_s:.0f} s"]
    # the loaders' figures are not its inputs; the GPU it expects is the job's mean
    return Gain(speed, None, basis, [], gpu_util_pct=100.0,
                gpu_now_pct=100.0 * (1 - p.ckpt_lost_s / p.ckpt_period_s))


def _fewer(p: Pipeline, state: str, gaps: list[str], solver: Solver) -> Gain | None:
    if (p.loaders < 2 or not p.cpus or not p.job_cpu or p.trainer_w is None
            or p.trainer_w < 0.05 or p.job_cpu < 0.9 * p.cpus or p.others_cpu > 0.5):
        return None
    n2 = max(1, min(p.loaders - 1, math.floor(p.cpus - (p.trainer_c or 0.0))))
    speed, cap = solver.solve(Change(n2))
    basis = [f"the job's processes take {p.job_cpu:.1f} of {p.cpus:.1f} CPUs",
             f"the trainer waits {p.trainer_w * 100:.0f}% for a CPU"]
    return Gain(speed, cap, basis, gaps, from_=p.loaders, to=n2)


# every fix, in the order that breaks a tie between equal gains
REGISTRY: tuple[Fix, ...] = (
    Fix("workers", READS, "num_workers {from_:.0f} → {to:.0f}", _workers),
    Fix("others", CPUS, "stop the processes that take the CPUs", _others),
    Fix("neighbour", READS, "stop or throttle {who}'s reads", _neighbour),
    Fix("cache", READS, "the dataset in the page cache", _cache),
    Fix("storage", READS, "reads at the device's QD32 ceiling", _storage),
    Fix("checkpoint", CHECKPOINT, "asynchronous checkpoints", _checkpoint),
    Fix("fewer-workers", CPUS, "num_workers {from_:.0f} → {to:.0f}", _fewer),
)
FIX = {f.name: f for f in REGISTRY}
FIXES = tuple(FIX)               # the names, the JSON's `fix`


def names_of(family: str) -> tuple[str, ...]:
    """The names of the fixes of one family (READS, CPUS, CHECKPOINT), in REGISTRY's
    order; none for a family no fix has."""
    return tuple(f.name for f in REGISTRY if f.family == family)
