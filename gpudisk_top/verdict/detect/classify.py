"""One interval's state, with the numbers that prove it.

The order of the questions matters: no job -> idle; a minority of GPUs starved while the
rest spin in NCCL -> straggler; every job GPU busy -> healthy; otherwise the GPUs wait on
something: a checkpoint write burst, then the storage that feeds the job, then the CPU,
and when nothing explains it the stall is undiagnosed.

Where the job's loaders' time goes (model/loaders.py) decides between storage and CPU: a
job whose loaders are blocked on reads most of the time is starved by storage whether or
not the device is saturated.  The device says which kind: *saturated* (at its ceiling:
latency over baseline, a queue, throughput at its peak; the cure is faster storage or a
cache) or *latency-bound* (headroom left: few synchronous small reads each wait r_await;
the cure is more or larger or parallel reads).  Loaders on a CPU or waiting for one are
starved by the CPU: by their own work (more workers, lighter decoding) or by other
processes taking the CPUs (named).  Without the loaders' time (processes not visible)
the device's saturation and the host's CPU decide, as before.  iowait is idle time
everywhere here: a CPU waiting on I/O runs nothing (top, vmstat and mpstat count it so).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpudisk_top.collect.blockdev import device_stack
from gpudisk_top.verdict.ceiling import headroom
from gpudisk_top.model.gpu import unreadable_reason
from gpudisk_top.model.host import busy_pct, others_cpu_pct
from gpudisk_top.model.health import evidence_clause, health_of
from gpudisk_top.verdict.detect.evidence import (Culprit, culprits_clause, culprits_of,
                                                storage_advice)
from gpudisk_top.verdict.detect.remote import mount_advice, mount_evidence
from gpudisk_top.verdict.detect.job import Job
from gpudisk_top.verdict.detect.saturation import Saturation
from gpudisk_top.verdict.detect.thresholds import Thresholds
from gpudisk_top.model.snapshot import Model
from gpudisk_top.model.vocab import DISK, mb_s
from gpudisk_top.verdict.whatif import ACTIVE_PCT, WhatIf, pipeline_of, predict

# the fixes that act on the reads, and those that act on the CPUs (verdict/whatif.py): a
# verdict names the family whose best fix gains more; the other, where it is worth at
# least SECOND_CAUSE, is named in its evidence ("also: ...")
DISK_FIXES = ("workers", "cache", "storage")
CPU_FIXES = ("others", "fewer-workers")
SECOND_CAUSE = 1.05
# loaders blocked on reads at least this share of the time hold a real share of the
# cause, even where the wait for a CPU is longer
MIXED_IO_PCT = 20.0
# ... and their fixes are preferred within this factor of the CPUs' best: a reader's wait
# for a CPU after each read is in part the wake-up's own, not all of it others' doing, so
# the others' gain is the less certain of the two (a verdict must not flip between the two
# from one run to the next on a few percent)
MIXED_PREFER_DISK = 0.9
# the training loop itself: its GPU process on a CPU or waiting for one at least
# TRAINER_BUSY_PCT of the time, and with its GPU share TRAINER_STEP_PCT or more (it hardly
# waits for batches), while its loaders sleep on a full prefetch queue (asleep at least
# TRAINER_ASLEEP_PCT): a step is its Python, then its GPU work
TRAINER_BUSY_PCT = 20.0
TRAINER_STEP_PCT = 80.0
TRAINER_ASLEEP_PCT = 50.0
# the job's processes together hold this share of the CPUs it may use: its own crowd
JOB_CPU_FULL_PCT = 90.0

# The one list of states, each with how every surface marks it: its glyph on the
# dashboard's timeline and in the report's charts, its banner on the dashboard, its word
# in the fleet's table (narrower).  A mark never rests on colour alone.  "unavailable"
# (no GPU can be read: no driver, an NVML error, a hung driver, every GPU lost) is last so
# that the recorder's state codes keep their values.
_STATE_MARKS = (
    # state               glyph  banner                 fleet table
    ("idle",              " ", "○ IDLE",              "○ IDLE"),
    ("healthy",           "·", "● HEALTHY",           "● HEALTHY"),
    ("disk-starved",      "D", "▲ DISK-STARVED",      "▲ DISK-STARVED"),
    ("cpu-starved",       "C", "▲ CPU-STARVED",       "▲ CPU-STARVED"),
    ("checkpoint-stall",  "K", "▲ CHECKPOINT-STALL",  "▲ CHECKPOINT"),
    ("straggler",         "S", "▲ STRAGGLER",         "▲ STRAGGLER"),
    ("undiagnosed-stall", "?", "▲ UNDIAGNOSED STALL", "◇ UNDIAGNOSED"),
    ("unavailable",       "×", "⊘ NO GPUS",           "⊘ NO GPUS"),
)
STATES = tuple(state for state, *_ in _STATE_MARKS)
STARVED_STATES = frozenset(STATES[2:7])
UNAVAILABLE = STATES[7]
# The starved states whose cause is the node's own input or output path (its storage, its
# CPUs, its checkpoint writes): a node in one of these holds its GPUs back by itself.
# straggler and undiagnosed-stall are left out: on the nodes of a multi-node job they are
# what waiting on a slower peer looks like (GPUs spinning in NCCL, or idle with nothing
# saturated).  The one definition for the exporter's gpudisk_top_gpus_starved, the fleet's
# straggler rule and starved counts, and the fleet alert rules' state regex
# (examples/prometheus-rules.yml; tests/test_fleet_model.py checks they agree).
OWN_CAUSE_STATES = ("disk-starved", "cpu-starved", "checkpoint-stall")
# one glyph per state, the same on the dashboard's timeline and in the report's charts
STATE_GLYPH = {state: glyph for state, glyph, _, _ in _STATE_MARKS}
STATE_BADGE = {state: badge for state, _, badge, _ in _STATE_MARKS}
STATE_WORD = {state: word for state, _, _, word in _STATE_MARKS}
_PREFERRED_KINDS = ("disk", "dm", "md")  # what the disk table shows by default
# loaders blocked on reads less than this share of the time do not wait on the device,
# however saturated it is (by others): 64 workers sharing an HDD queue of 9 are each
# blocked 14 % of the time, and that is waiting
HARDLY_BLOCKED_PCT = 5.0
# the job's cgroup held off the CPUs by its quota (cpu.max) in at least this share of its
# enforcement periods: its loaders' wait for a CPU is the quota's, kind "throttled"
THROTTLED_PCT = 20.0


@dataclass
class IntervalState:
    state: str
    gpus: list[int] = field(default_factory=list)
    kind: str | None = None             # disk: saturated | latency-bound | remote-mount; cpu: own | others | throttled | trainer
    devices: list[str] = field(default_factory=list)
    processes: list[int] = field(default_factory=list)
    gpu_util_pct: float | None = None   # mean utilization of `gpus`
    detail: str = ""                    # the evidence after the GPU part
    advice: str | None = None
    # the processes outside the job named in `detail` as reading the blamed device, with
    # their share of its reads (verdict/detect/evidence.py): every surface's "who"
    culprits: list[Culprit] = field(default_factory=list)
    # what each fix would gain, best first (verdict/whatif.py)
    whatif: list[WhatIf] = field(default_factory=list)


def gpu_ranges(indexes: list[int]) -> str:
    """[0, 1, 2, 3, 6] -> 'GPU 0-3,6'."""
    idx = sorted(set(indexes))
    runs: list[str] = []
    start = prev = None
    for i in idx + [None]:
        if start is None:
            start = prev = i
        elif i is not None and i == prev + 1:
            prev = i
        else:
            runs.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = i
    return "GPU " + ",".join(runs)


def _mean(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _power_pct(gpu) -> float | None:
    if gpu.power_w is None or not gpu.power_limit_w:
        return None
    return gpu.power_w / gpu.power_limit_w * 100


class Classifier:
    def __init__(self, thresholds: Thresholds) -> None:
        self.t = thresholds
        self._dirty_usual_kb: float | None = None
        # checkpoint stalls: (start, GPU-seconds lost) of the latest runs of them
        self._ckpts: list[list[float]] = []
        self._ckpt_end_s: float | None = None

    # ------------------------------------------------------------------ entry point
    def classify(self, model: Model, job: Job, sats: dict[str, Saturation]) -> IntervalState:
        t = self.t
        unreadable = unreadable_reason(model.gpu_status, model.gpus)
        if unreadable is not None:      # no GPU to judge is not an idle GPU
            return IntervalState(UNAVAILABLE, detail=unreadable)
        dirty_kb = self._dirty_kb(model)
        if not job.running:
            self._learn_dirty(dirty_kb, burst=False)
            return IntervalState("idle")
        judged = [g for g in job.gpus if g.util_pct is not None]
        low = [g for g in judged if g.util_pct < t.gpu_low_util_pct]
        busy = [g for g in judged if g.util_pct >= t.gpu_low_util_pct]
        base = dict(processes=list(job.gpu_pids))
        burst = job.write_kb_s >= t.checkpoint_write_mb_s * 1024
        straggler = self._straggler(judged, low, busy)
        if straggler is not None:
            self._learn_dirty(dirty_kb, burst)
            return straggler
        if not low:
            self._learn_dirty(dirty_kb, burst)
            return IntervalState("healthy", gpus=[g.index for g in judged], **base)
        gpus = [g.index for g in low]
        util = _mean([g.util_pct for g in low])
        state = (self._checkpoint(model, job, sats, low, judged, dirty_kb, burst,
                                  self._after_checkpoint(model))
                 or self._mount(model, job)
                 or self._disk(model, job, sats)
                 or self._trainer(model, job)
                 or self._cpu(model, job, sats)
                 or self._undiagnosed(model, job, sats))
        state = self._whatif(model, job, sats, state, util)
        # Dirty's usual level is learned only while the job runs well: a stall waiting on
        # writeback must not teach it that gigabytes of Dirty are normal
        state.gpus, state.gpu_util_pct = gpus, util
        state.processes = state.processes or list(job.gpu_pids)
        return state

    # ------------------------------------------------------------------ what-if
    def _ckpt_figures(self, model: Model, state: str, util: float | None):
        """(GPU-seconds a checkpoint stall costs, seconds from one stall's start to the
        next): the checkpoint fix's inputs, None where not seen yet."""
        if state == "checkpoint-stall":
            lost = (1.0 - (util or 0.0) / 100.0) * model.interval_s
            start = model.wall_s - model.interval_s
            # a new stall: the last one's latest interval ended before this one began
            if self._ckpt_end_s is None or start - self._ckpt_end_s > 0.5 * model.interval_s:
                self._ckpts = (self._ckpts + [[start, 0.0]])[-2:]
            self._ckpts[-1][1] += lost
            self._ckpt_end_s = model.wall_s
        if not self._ckpts:
            return None, None
        if len(self._ckpts) < 2:
            return self._ckpts[-1][1], None
        # the latest stall seen whole (the newest may go on) and the time from its start to
        # the newest's: the job as it saves now (its first save, which fills the page
        # cache's Dirty from nothing, is often longer than the rest)
        return self._ckpts[-2][1], self._ckpts[-1][0] - self._ckpts[-2][0]

    def _whatif(self, model: Model, job: Job, sats, state: IntervalState,
                util: float | None) -> IntervalState:
        """Predict each fix's gain (verdict/whatif.py); where two causes each hold a real
        share, the one whose fix gains more is the verdict and the other its "also"."""
        ckpt = self._ckpt_figures(model, state.state, util)
        p = pipeline_of(model, job, sats, util, ckpt)
        if p is None:
            return state
        state.whatif = predict(p, state.state, state.kind)
        best = {fam: max((w.speedup for w in state.whatif if w.fix in fam), default=1.0)
                for fam in (DISK_FIXES, CPU_FIXES)}
        lt = job.time
        if (state.state == "cpu-starved" and state.kind == "others" and lt is not None
                and (lt.io_claim_pct or 0.0) >= MIXED_IO_PCT
                and best[DISK_FIXES] >= MIXED_PREFER_DISK * best[CPU_FIXES]):
            disk = self._disk(model, job, sats, mixed=True)
            if disk is not None:
                disk.gpus, disk.gpu_util_pct, disk.whatif = state.gpus, state.gpu_util_pct, state.whatif
                state = disk
        # more workers serve either cause: only the fixes of the other cause are its "also"
        second = CPU_FIXES if state.state == "disk-starved" else (
            ("cache", "storage") if state.state == "cpu-starved" else ())
        also = [w for w in state.whatif if w.fix in second and w.speedup >= SECOND_CAUSE]
        if also:
            w = also[0]
            what = (f"the CPUs are taken by {self._named(model, w.pids)}" if w.fix == "others"
                    else f"the reads ({w.title()})")
            state.detail += f"; also: {what}, worth ~{(w.speedup - 1) * 100:.0f}%"
        return state

    @staticmethod
    def _named(model: Model, pids: list[int]) -> str:
        """'pid 812 (stress), pid 813 (stress)'."""
        shown = [model.procs[p] for p in pids[:2] if p in model.procs]
        return ", ".join(f"pid {v.pid} ({v.name or '?'})" for v in shown) or "other processes"

    # ------------------------------------------------------------------ the trainer
    def _trainer(self, model: Model, job: Job) -> IntervalState | None:
        """The training loop itself is the bottleneck: its GPU process on a CPU (or
        waiting for one) most of the time while its loaders sleep on a full prefetch
        queue.  Whose CPUs it waits for says whether others are to blame."""
        lt = job.time if job.visible else None
        if lt is None or lt.kind != "DataLoader worker" or lt.asleep_pct < TRAINER_ASLEEP_PCT:
            return None
        workers = {v.pid for v in job.workers}
        trainers = [v for v in job.members if v.pid not in workers and v.cpu_pct is not None]
        if not trainers:
            return None
        busy = max(trainers, key=lambda v: v.cpu_pct + (v.cpu_wait_pct or 0.0))
        own = busy.cpu_pct + (busy.cpu_wait_pct or 0.0)
        util = _mean([g.util_pct for g in job.gpus])
        if own < TRAINER_BUSY_PCT or util is None or own + util < TRAINER_STEP_PCT:
            return None
        wait = busy.cpu_wait_pct
        line = (f"the trainer pid {busy.pid} ({busy.name or '?'}) {busy.cpu_pct:.0f}% on a CPU"
                + (f", {wait:.0f}% waiting for one" if wait is not None else "")
                + f"; its loaders asleep: {lt.describe()}")
        details = [line]
        advice = ("the training loop's own Python is the bottleneck: profile the step "
                  "(torch.profiler, py-spy), move work into the DataLoader workers or onto "
                  "the GPU, fewer synchronisations (.item(), .cpu())")
        if wait is not None and wait >= self.t.loader_cpu_wait_pct:
            others = self._top_others(model, job)
            _job_cpu, others_cpu, ncpu = self._cpu_holders(model, job)
            if others:
                details.append(f"the CPUs are taken by {others}")
            elif others_cpu:
                details.append(f"the CPUs are taken by processes outside the job "
                               f"({others_cpu / 100:.1f} of the host's {ncpu} CPUs)")
        return IntervalState("cpu-starved", kind="trainer", detail="; ".join(details),
                             advice=advice)

    # ------------------------------------------------------------------ straggler
    def _straggler(self, judged, low, busy) -> IntervalState | None:
        if len(judged) < 2 or not low or len(low) > len(judged) / 2:
            return None
        spinning = [g for g in busy
                    if (p := _power_pct(g)) is not None and p < self.t.spin_power_pct]
        if len(spinning) < max(1, math.ceil(len(busy) / 2)):
            return None
        procs = [p.pid for g in low for p in g.processes]
        peers = gpu_ranges([g.index for g in spinning]).removeprefix("GPU ")
        spin_util = _mean([g.util_pct for g in spinning])
        spin_power = _mean([g.power_w for g in spinning])
        detail = (f"GPU {peers} wait on it at {spin_util:.0f}% utilization and only "
                  f"{spin_power:.0f} W (NCCL spinning, not work)")
        if procs:
            detail += f"; its process: pid {procs[0]}"
        return IntervalState("straggler", gpus=[g.index for g in low], processes=procs,
                             gpu_util_pct=_mean([g.util_pct for g in low]), detail=detail,
                             advice="look at what slows that one rank: its data loader, its "
                                    "host's CPU or NUMA placement, PCIe, or thermal throttling")

    # ------------------------------------------------------------------ checkpoint
    def _dirty_kb(self, model: Model) -> float | None:
        h = model.host
        if h is None or h.dirty_kb is None:
            return None
        return float(h.dirty_kb + (h.writeback_kb or 0))

    def _learn_dirty(self, dirty_kb: float | None, burst: bool) -> None:
        if dirty_kb is None or burst:
            return
        if self._dirty_usual_kb is None:
            self._dirty_usual_kb = dirty_kb
        else:
            self._dirty_usual_kb += 0.1 * (dirty_kb - self._dirty_usual_kb)

    def _after_checkpoint(self, model: Model) -> bool:
        """Whether the interval before this one was a checkpoint stall."""
        end = self._ckpt_end_s
        return end is not None and abs(model.wall_s - model.interval_s - end) <= 0.5 * model.interval_s

    def _checkpoint(self, model, job: Job, sats, low, judged, dirty_kb, burst,
                    following: bool = False) -> IntervalState | None:
        """The job writes a burst, or waits (in fsync) while the kernel writes it back:
        either way Dirty/Writeback surge, a device writes hard, and reads are flat.  Right
        after a checkpoint stall (`following`) a device still writing hard is the save's
        flush the job waits on even once Dirty is gone (the fsync's last second: its
        cache flush, the device's queue): the stall goes on, its GPU time the save's."""
        t = self.t
        if len(low) < max(1, math.ceil(len(judged) / 2)):
            return None  # a checkpoint stalls the whole job: the GPUs dip together
        if job.read_kb_s > max(job.write_kb_s, 1024.0):
            return None  # reads are not flat: this is not a checkpoint
        fast_kb_s = t.checkpoint_write_mb_s * 1024
        writing = [s for s in sats.values()
                   if s.write_kb_s >= fast_kb_s or (s.saturated and s.write_kb_s > s.read_kb_s)]
        usual = self._dirty_usual_kb or 0.0
        surge = dirty_kb is not None and (dirty_kb >= t.dirty_surge_mb * 1024
                                          or (dirty_kb >= 4 * usual and dirty_kb >= 65536))
        if burst:
            if not (surge or any(s.saturated for s in writing)):
                return None
        elif not (surge and writing) and not (following and writing):
            return None  # no burst from the job and no writeback it could be waiting on
        target = max(writing, key=lambda s: s.write_kb_s, default=None)
        parts = []
        devices = []
        if burst:
            parts.append(f"{job.describe()} writing {mb_s(job.write_kb_s):.0f} MB/s")
        else:
            parts.append(f"{job.describe()} waits on writeback (writes "
                         f"{mb_s(job.write_kb_s):.0f} MB/s itself, e.g. in fsync)")
        if target is not None:
            info = model.devices.get(target.name)
            where = f" ({info.mountpoints[0]})" if info and info.mountpoints else ""
            parts.append(target.write_evidence(self._display(model, target.name)) + where)
            devices = [target.name]
        if dirty_kb is not None:
            # meminfo's kB are KiB.  A disk that keeps up with the burst leaves tens of MB
            # dirty at each sample, which "0.0 GB" hid: MB below a GB
            what = "Dirty+Writeback" if model.host.writeback_kb is not None else "Dirty"
            amount = (f"{dirty_kb / 1048576:.1f} GB" if dirty_kb >= 1048576
                      else f"{dirty_kb / 1024:.0f} MB" if dirty_kb >= 10240
                      else f"{dirty_kb / 1024:.1f} MB")
            parts.append(f"{what} {amount}")
        parts.append(f"reads {mb_s(job.read_kb_s):.0f} MB/s")
        return IntervalState("checkpoint-stall", devices=devices, detail="; ".join(parts),
                             advice="asynchronous checkpoints (e.g. torch.distributed.checkpoint "
                                    "async_save) or a faster local checkpoint disk")

    # ------------------------------------------------------------------ storage
    def _display(self, model: Model, name: str) -> str:
        info = model.devices.get(name)
        return info.display_name if info else name

    def _health(self, model: Model, name: str) -> str:
        """'; composite temperature 78 °C, above its 75 °C warning for 14 min: thermal
        throttling' when the disk under `name` is hot or logs media errors (model/health.py
        evidence_clause): a dying or throttling disk looks saturated by every other number."""
        clause = evidence_clause(health_of(model.health, model.devices, name))
        return f"; {clause}" if clause else ""

    def _feeding_devices(self, model: Model, job: Job, sats) -> list[Saturation]:
        """Saturated devices under files the job's readers have open, best first."""
        found = {n: sats[n] for n in self._job_read_devices(model, job)
                 if n in sats and sats[n].saturated and sats[n].read_kb_s > 0}
        return self._rank(model, found.values())

    def _rank(self, model: Model, sats) -> list[Saturation]:
        def key(s: Saturation):
            info = model.devices.get(s.name)
            preferred = info is not None and info.kind in _PREFERRED_KINDS
            return (not preferred, -(s.await_ms / s.baseline_ms if s.baseline_ms else 0), s.name)
        return sorted(sats, key=key)

    def _disk(self, model: Model, job: Job, sats, mixed: bool = False) -> IntervalState | None:
        """mixed: the reads hold a real share beside a wait for others' CPUs and their
        fixes gain more (_whatif): judged as storage even under loader_io_wait_pct."""
        if job.visible:
            t = self.t
            lt = job.time
            # the reads' claim: an estimate cut to the shares' 100 % still weighs in full
            # against the CPU (model/loaders.py)
            io = lt.io_claim_pct if lt is not None else None
            feeding = self._feeding_devices(model, job, sats)
            # a saturated device the job reads from is the cause unless the loaders' time
            # says they are CPU-bound instead (then reads are not what they wait on)
            cpu_bound = (lt is not None and lt.cpu_share_pct >= t.loader_cpu_pct
                         and lt.cpu_share_pct > (io or 0.0))
            # ... and unless they are hardly ever blocked on reads (their reads are few,
            # or served from the page cache: the device is busy with others' I/O)
            waits = io is None or io >= HARDLY_BLOCKED_PCT
            if feeding and not cpu_bound and waits:
                kind, s = "saturated", feeding[0]
            elif io is not None and (io >= t.loader_io_wait_pct or mixed) and not cpu_bound:
                # blocked on reads a large share of the time, and not CPU-bound: however
                # long they also wait for a CPU (others' load beside the job), the reads
                # are what a job of synchronous readers waits on
                kind, s = "latency-bound", self._device_of(model, lt.device, sats)
            else:
                return None
            culprits: list[Culprit] = []
            if s is None:
                detail = f"{lt.describe()}; {job.describe()}"
            else:
                share = min(100.0, job.read_kb_s / s.read_kb_s * 100) if s.read_kb_s else 0.0
                evidence = (s.evidence(self._display(model, s.name)) if kind == "saturated"
                            else self._headroom(model, s, lt)) + self._health(model, s.name)
                mine = f"{share:.0f}% of its reads from {job.describe()}"
                culprits = culprits_of(model, s.name) if share < 90 else []
                if culprits and sum(c.read_share_pct or 0.0 for c in culprits) > share:
                    # the neighbour holds more of the device than the job: named first, so
                    # that a banner cut to its first clauses still says who
                    detail = f"{evidence}; read by {culprits_clause(culprits)}; {mine}"
                elif culprits:
                    detail = (f"{evidence}; {mine}; {'also ' if share >= 10 else ''}read by "
                              f"{culprits_clause(culprits)}")
                else:
                    detail = f"{evidence}; {mine}"
                if lt is not None and lt.io_wait_pct is not None:
                    detail += f"; {lt.describe()}"
            advice = (self._disk_advice(model, job, s, culprits) if kind == "saturated" else
                      "the device has headroom: more DataLoader workers (num_workers), larger "
                      "or parallel reads (bigger files or chunks, a thread pool or io_uring "
                      "per worker), and prefetch (prefetch_factor)")
            return IntervalState("disk-starved", kind=kind,
                                 devices=[s.name] if s is not None else [], detail=detail,
                                 advice=advice, culprits=culprits)
        else:
            busy = [s for s in sats.values() if s.saturated and s.read_kb_s > 0]
            if not busy:
                return None
            s = max(busy, key=lambda x: x.read_kb_s)
            detail = (f"{s.evidence(self._display(model, s.name))}{self._health(model, s.name)}; "
                      f"the job's processes cannot "
                      f"be seen from here (another PID namespace, or no permission), so this "
                      f"is the busiest saturated disk, not a proven cause")
            culprits = culprits_of(model, s.name)
            if culprits:
                detail += f"; read by {culprits_clause(culprits)}"
        return IntervalState("disk-starved", kind="saturated", devices=[s.name], detail=detail,
                             advice=self._disk_advice(model, job, s, culprits),
                             culprits=culprits)

    # ------------------------------------------------------------------ network, FUSE
    def _mount(self, model: Model, job: Job) -> IntervalState | None:
        """The loaders wait on reads from a network or FUSE mount (model/loaders.py): no
        block device shows it, so it is told by where they sleep, with the mount's own
        numbers as its evidence."""
        lt = job.time if job.visible else None
        if lt is None or lt.mount_wait_pct is None or lt.mount_wait_pct < self.t.loader_io_wait_pct:
            return None
        if lt.cpu_share_pct >= self.t.loader_cpu_pct:
            return None                 # CPU-bound loaders: their reads are not the wait
        m = model.mounts.get(lt.mount)
        if m is None:
            return None
        detail = (f"{m.label}: {mount_evidence(m)}; {lt.mount_blocked} of {lt.count} "
                  f"{lt.kind}s in a read of it at the sample, {lt.mount_wait_pct:.0f}% of their "
                  f"time waiting on it" + (f", {lt.mount_read_ms:.1f} ms a read" if lt.mount_read_ms
                                           is not None else "")
                  + f"; {job.describe()}")
        return IntervalState("disk-starved", kind="remote-mount", devices=[m.mountpoint],
                             detail=detail, advice=mount_advice(m))

    def _device_of(self, model: Model, leaf: str | None, sats) -> Saturation | None:
        """The disk (or dm/md device) a partition belongs to, as the disk table shows it."""
        if leaf is None:
            return None
        stack = [n for n in device_stack(model.devices, leaf) if n in sats]
        preferred = [n for n in stack if model.devices.get(n) is not None
                     and model.devices[n].kind in _PREFERRED_KINDS]
        pick = (preferred or stack or [None])[0]
        return sats.get(pick) if pick is not None else None

    def _headroom(self, model: Model, s: Saturation, lt) -> str:
        """'vda at 30752.00 r/s (peak seen 98000), r_await 0.07 ms, aqu-sz 2.20: not
        saturated, so each synchronous read of 4 KiB waits 0.07 ms'."""
        ceiling = headroom(s)     # the probe's ceiling where believed (verdict/ceiling.py)
        size = f" of {lt.read_kb:.0f} KiB" if lt.read_kb else ""
        return (f"{self._display(model, s.name)} at {DISK['r_s'].text(s.r_s)} r/s{ceiling}, "
                f"{s.latency('', baseline=False)}: not saturated, so each "
                f"synchronous read{size} waits {DISK['r_await_ms'].text(s.await_ms)} ms")

    def _disk_advice(self, model: Model, job: Job, s: Saturation | None,
                     culprits: list[Culprit]) -> str:
        """verdict/detect/evidence.py storage_advice for the device `s` the job waits on."""
        job_seen = job.visible and job.running
        return storage_advice(model.host, culprits,
                              self._display(model, s.name) if s is not None else "the device",
                              job.direct_reads if job_seen else None,
                              job.data_kb if job_seen else None)

    # ------------------------------------------------------------------ CPU
    def _cpu(self, model: Model, job: Job, sats) -> IntervalState | None:
        """The loaders on a CPU or waiting for one.  When their time is known it alone
        decides: a busy host whose CPUs the loaders do not wait for is not the job's
        cause.  When it is not (the job cannot be seen), the host's CPU and pressure do."""
        t = self.t
        h = model.host
        lt = job.time if job.visible else None
        details = []
        taken = False            # the loaders wait for CPUs that others hold
        if lt is not None:
            if lt.io_claim_pct is not None and lt.io_claim_pct > lt.cpu_share_pct:
                return None      # the loaders wait on reads more than on CPUs
            loaders = [v for v in (job.workers or job.members) if v.cpu_pct is not None]
            # wrappers and launchers (timeout, torchrun's agent) asleep beside the workers
            # they start are not loaders: they would dilute the count of busy ones
            active = [v for v in loaders if v.cpu_pct + (v.cpu_wait_pct or 0.0)
                      + (v.io_wait_pct or 0.0) >= ACTIVE_PCT]
            loaders = active or loaders
            hot = [v for v in loaders
                   if (v.cpu_pct or 0) + (v.cpu_wait_pct or 0) >= t.loader_cpu_pct]
            waiting = (lt.cpu_wait_pct is not None and lt.cpu_wait_pct >= t.loader_cpu_wait_pct
                       and lt.cpu_wait_pct >= (lt.io_claim_pct or 0.0))
            if len(hot) >= max(1, math.ceil(0.75 * len(loaders))):
                kind = "DataLoader worker" if job.workers else "process"
                cpu = _mean([v.cpu_pct for v in hot])
                waits = [v.cpu_wait_pct for v in hot if v.cpu_wait_pct is not None]
                wait = _mean(waits) if waits else None
                taken = wait is not None and wait >= t.loader_cpu_wait_pct
                line = (f"{len(hot)} {kind}{'s' if len(hot) != 1 else ''} of "
                        f"{job.describe().split(' and ')[0]} at {cpu:.0f}% CPU"
                        f"{' each' if len(hot) > 1 else ''}")
                if wait is not None:
                    line += f", waiting {wait:.0f}% of the time for a CPU"
                details.append(line)
            elif waiting:
                taken = True
                details.append(lt.describe())
            elif self._job_fills_cpus(model, job):
                pass            # its wrappers dilute the loaders' mean: the job's sum says it
            elif lt.cpu_wait_pct is not None:
                return None
        if lt is None or (not details and lt.cpu_wait_pct is None):
            # no run-queue wait to tell whether the loaders wait for CPUs (their time
            # cannot be read, or the kernel has no schedstat): the host's CPU decides
            host_busy = busy_pct(h)
            if host_busy is not None and 100 - host_busy < t.host_idle_pct:
                details.append(f"host CPU {host_busy:.0f}% busy (iowait counted as idle)")
                taken = True
            if h is not None and h.psi_cpu_some_pct is not None and h.psi_cpu_some_pct >= t.cpu_pressure_pct:
                details.append(f"cpu pressure {h.psi_cpu_some_pct:.0f}%")
                taken = True
            if not details:
                return None
        crowded = False          # the CPUs the loaders wait for are the job's own
        job_cpu, others_cpu, ncpu = self._cpu_holders(model, job)
        if not details and lt is not None and self._job_fills_cpus(model, job):
            crowded = True
            details.append(f"the job's own {len(job.members)} processes take "
                           f"{job_cpu / 100:.1f} of the host's {ncpu} CPUs, others "
                           f"{others_cpu / 100:.1f} (summed over the job: its wrappers and "
                           f"idle helpers cannot hide it)")
        elif taken and lt is not None and job_cpu is not None and job_cpu >= others_cpu:
            crowded, taken = True, False
            details.append(f"the job's own {len(job.members)} processes take "
                           f"{job_cpu / 100:.1f} of the host's {ncpu} CPUs, others "
                           f"{others_cpu / 100:.1f}")
        if taken:
            others = self._top_others(model, job)
            if others:
                details.append(f"the CPUs are taken by {others}")
            elif job_cpu is not None:
                # the busy CPUs' owners are not in our PID namespace (other containers)
                details.append(f"the CPUs are taken by processes outside the job "
                               f"({others_cpu / 100:.1f} of the host's {ncpu} CPUs), none "
                               "of them visible from here")
        quiet = self._quietest_storage(model, job, sats)
        if quiet:
            details.append(quiet)
        if taken:
            advice = ("the host's CPUs are taken by other processes: fewer or lower-priority "
                      "competing processes (nice), CPU pinning for the job, or a larger node")
        elif crowded:
            advice = ("the job's own processes crowd the CPUs: no more DataLoader workers "
                      "(plus the trainer's threads) than CPUs, lighter decoding and "
                      "augmentation, or a node with more CPUs")
        else:
            advice = ("the job's own loaders are busy: more DataLoader workers (num_workers) "
                      "if CPUs are free, or lighter decoding and augmentation (or on the "
                      "GPU: DALI)")
        kind = "others" if taken else "own"
        throttled = self._throttled(h)
        if throttled:
            # a CPU-quota'd job looks exactly like a starved one: its loaders wait for CPUs
            # that are idle, held off by its cgroup's quota
            kind = "throttled"
            details.insert(0, throttled)
            advice = ("the job's cgroup runs out of its CPU quota: raise its CPU limit (docker "
                      "--cpus, Kubernetes resources.limits.cpu, cpu.max), or fewer DataLoader "
                      "workers so that the quota covers them")
        return IntervalState("cpu-starved", kind=kind, detail="; ".join(details), advice=advice)

    def _job_fills_cpus(self, model: Model, job: Job) -> bool:
        """The job's processes together take JOB_CPU_FULL_PCT of the CPUs it may use (the
        host's, or its cgroup's cpu.max where lower), and the host has no idle CPU left."""
        h = model.host
        job_cpu, _others, ncpu = self._cpu_holders(model, job)
        if job_cpu is None or not ncpu:
            return False
        cpus = float(ncpu)
        if h.cgroup_pid is not None and h.cgroup_cpu_limit_cpus:
            cpus = min(cpus, h.cgroup_cpu_limit_cpus)
        busy = busy_pct(h)
        return (job_cpu >= JOB_CPU_FULL_PCT * cpus
                and (busy is None or 100 - busy < self.t.host_idle_pct or cpus < ncpu))

    @staticmethod
    def _throttled(h) -> str | None:
        """The job's cgroup held off the CPUs by its quota in THROTTLED_PCT or more of the
        periods: the evidence, else None."""
        if h is None or h.cgroup_throttled_pct is None or h.cgroup_throttled_pct < THROTTLED_PCT:
            return None
        whose = "the job's cgroup" if h.cgroup_pid is not None else "this cgroup"
        line = f"{whose} {h.cgroup_path}: CPU throttled {h.cgroup_throttled_pct:.0f}% of periods"
        if h.cgroup_cpu_limit_cpus is not None:
            line += f" (limit {h.cgroup_cpu_limit_cpus:.1f} CPUs"
            line += f", used {h.cgroup_cpu_used_cpus:.1f})" if h.cgroup_cpu_used_cpus is not None else ")"
        if h.cgroup_cpu_some_pct is not None:
            line += f", cpu pressure {h.cgroup_cpu_some_pct:.0f}%"
        return line

    def _cpu_holders(self, model: Model, job: Job) -> tuple[float | None, float, int]:
        """(the job's CPU, everybody else's, the host's CPUs), in % of one CPU: whose are
        the CPUs the loaders wait for.  iowait is idle."""
        h = model.host
        known = [v.cpu_pct for v in job.members if v.cpu_pct is not None]
        others = others_cpu_pct(h, sum(known)) if known else None
        if others is None:
            return None, 0.0, 0
        return sum(known), others, h.ncpu


    def _top_others(self, model: Model, job: Job, n: int = 3) -> str | None:
        """'pid 812 (ffmpeg) 180% CPU, pid 90 (tar) 95%': the busiest processes outside
        the job, as the collector follows them (model.procs without a GPU root)."""
        mine = {v.pid for v in job.members}
        others = sorted((v for v in model.procs.values()
                         if v.root_pid is None and v.pid not in mine and (v.cpu_pct or 0) >= 5),
                        key=lambda v: -(v.cpu_pct or 0))[:n]
        if not others:
            return None
        return ", ".join(f"pid {v.pid} ({v.name or '?'}) {v.cpu_pct:.0f}% CPU" for v in others)

    def _quietest_storage(self, model: Model, job: Job, sats) -> str | None:
        names = [n for dev in job.device_readers for n in device_stack(model.devices, dev)
                 if n in sats]
        if not names:
            return None
        s = max((sats[n] for n in names), key=lambda x: x.read_kb_s)
        return f"storage not saturated ({s.latency(self._display(model, s.name), baseline=False)})"

    # ------------------------------------------------------------------ nothing
    def _job_read_devices(self, model: Model, job: Job) -> list[str]:
        """Devices (and the devices under them) that the job's reading processes have files on."""
        readers = {v.pid for v in job.members if (v.read_kb_s or 0) > 0}
        return [n for dev, pids in job.device_readers.items() if readers.intersection(pids)
                for n in device_stack(model.devices, dev)]

    def _undiagnosed(self, model: Model, job: Job, sats) -> IntervalState:
        feeding = [n for n in self._job_read_devices(model, job) if n in sats]
        elsewhere = [s for s in sats.values() if s.saturated and s.name not in feeding]
        # a saturated device the job reads from, which its loaders' time says they do not
        # wait on (_disk): said so, not "nothing saturated"
        ignored = [self._display(model, s.name) for s in self._feeding_devices(model, job, sats)]
        parts = [f"{', '.join(ignored)} saturated, but the job's loaders are not waiting on "
                 f"{'its' if len(ignored) == 1 else 'their'} reads" if ignored else
                 "nothing the job reads from is saturated" if elsewhere else "nothing saturated"]
        pool = [sats[n] for n in feeding] or list(sats.values())
        if pool:
            s = max(pool, key=lambda x: x.read_kb_s + x.write_kb_s)
            parts.append(f"busiest disk {s.latency(self._display(model, s.name))}")
        culprits: list[Culprit] = []
        for s in sorted(elsewhere, key=lambda x: x.name):
            others = culprits_of(model, s.name)
            culprits += others
            by = f" (read by {culprits_clause(others)})" if others else ""
            parts.append(f"{self._display(model, s.name)} saturated{by}, but the job does not "
                         "read from it")
        busy = busy_pct(model.host)
        if busy is not None:
            parts.append(f"CPU idle {100 - busy:.0f}% (iowait counted as idle)")
        lt = job.time if job.visible else None
        if lt is not None:
            parts.append(lt.describe())
        if not job.visible:
            parts.append("the job's processes cannot be seen from here")
        return IntervalState("undiagnosed-stall", detail="; ".join(parts), culprits=culprits,
                             advice="profile the step (torch.profiler): synchronisation, "
                                    "small kernels or a host-side wait")
