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
processes taking the CPUs (named).  Where the job's processes cannot be seen (another
PID namespace unmatched, or their I/O unreadable as non-root) a saturated device is still
said, hedged (its saturation needs no process), but the host's CPU never stands in for
the loaders: the stall is undiagnosed, of kind `unseen`, and names no cause (unseen.py).  iowait is idle time
everywhere here: a CPU waiting on I/O runs nothing (top, vmstat and mpstat count it so).

This module asks the questions in order and weighs the what-if; the rules live by job:
states.py (the states, IntervalState), storage.py (device, mount, undiagnosed), cpu.py
(own, others, throttled, trainer), checkpoint.py (write bursts and what they cost),
unseen.py (a job that cannot be seen).
"""

from __future__ import annotations

import math

from gpudisk_top.model.gpu import unreadable_reason
from gpudisk_top.model.present import pid_name
from gpudisk_top.model.snapshot import Model
from gpudisk_top.verdict.detect import cpu, storage
from gpudisk_top.verdict.detect.checkpoint import CheckpointWatch
from gpudisk_top.verdict.detect.job import Job
from gpudisk_top.verdict.detect.saturation import Saturation
from gpudisk_top.verdict.detect.states import UNAVAILABLE, IntervalState, gpu_ranges, mean
from gpudisk_top.verdict.detect.thresholds import Thresholds
from gpudisk_top.verdict.detect.unseen import UNSEEN, unseen
from gpudisk_top.verdict.whatif import CPUS, READS, names_of, pipeline_of, predict

# the fixes that act on the reads, and those that act on the CPUs (verdict/whatif.py): a
# verdict names the family whose best fix gains more; the other, where it is worth at
# least SECOND_CAUSE, is named in its evidence ("also: ...")
DISK_FIXES = names_of(READS)      # the registry's families (verdict/whatif/fixes.py)
CPU_FIXES = names_of(CPUS)
SECOND_CAUSE = 1.05
# loaders blocked on reads at least this share of the time hold a real share of the
# cause, even where the wait for a CPU is longer
MIXED_IO_PCT = 20.0
# ... and their fixes are preferred within this factor of the CPUs' best: a reader's wait
# for a CPU after each read is in part the wake-up's own, not all of it others' doing, so
# the others' gain is the less certain of the two (a verdict must not flip between the two
# from one run to the next on a few percent)
MIXED_PREFER_DISK = 0.9


def _power_pct(gpu) -> float | None:
    if gpu.power_w is None or not gpu.power_limit_w:
        return None
    return gpu.power_w / gpu.power_limit_w * 100


class Classifier:
    def __init__(self, thresholds: Thresholds) -> None:
        self.t = thresholds
        self.checkpoints = CheckpointWatch(thresholds)

    # ------------------------------------------------------------------ entry point
    def classify(self, model: Model, job: Job, sats: dict[str, Saturation]) -> IntervalState:
        t = self.t
        unreadable = unreadable_reason(model.gpu_status, model.gpus)
        if unreadable is not None:      # no GPU to judge is not an idle GPU
            return IntervalState(UNAVAILABLE, detail=unreadable)
        dirty_kb = self.checkpoints.dirty_kb(model)
        if not job.running:
            self.checkpoints.learn_dirty(dirty_kb, burst=False)
            return IntervalState("idle")
        judged = [g for g in job.gpus if g.util_pct is not None]
        low = [g for g in judged if g.util_pct < t.gpu_low_util_pct]
        busy = [g for g in judged if g.util_pct >= t.gpu_low_util_pct]
        base = dict(processes=list(job.gpu_pids))
        burst = job.write_kb_s >= t.checkpoint_write_mb_s * 1024
        straggler = self._straggler(judged, low, busy)
        if straggler is not None:
            self.checkpoints.learn_dirty(dirty_kb, burst)
            return straggler
        if not low:
            self.checkpoints.learn_dirty(dirty_kb, burst)
            return IntervalState("healthy", gpus=[g.index for g in judged], **base)
        gpus = [g.index for g in low]
        util = mean([g.util_pct for g in low])
        state = (self.checkpoints.judge(model, job, sats, low, judged, dirty_kb, burst,
                                         self.checkpoints.after_checkpoint(model))
                 or storage.mount(t, model, job)
                 or storage.disk(t, model, job, sats)
                 or cpu.trainer(t, model, job)
                 or cpu.cpu(t, model, job, sats)
                 or unseen(model, job, sats)
                 or storage.undiagnosed(model, job, sats))
        state = self._whatif(model, job, sats, state, util)
        # Dirty's usual level is learned only while the job runs well: a stall waiting on
        # writeback must not teach it that gigabytes of Dirty are normal
        state.gpus, state.gpu_util_pct = gpus, util
        state.processes = state.processes or list(job.gpu_pids)
        return state

    # ------------------------------------------------------------------ what-if
    def _whatif(self, model: Model, job: Job, sats, state: IntervalState,
                util: float | None) -> IntervalState:
        """Predict each fix's gain (verdict/whatif.py); where two causes each hold a real
        share, the one whose fix gains more is the verdict and the other its "also"."""
        if state.kind == UNSEEN:
            return state        # no cause, so no fix: a fix's gain rests on the loaders' time
        ckpt = self.checkpoints.figures(model, state.state, util)
        p = pipeline_of(model, job, sats, util, ckpt, state.culprits)
        if p is None:
            return state
        state.whatif = predict(p, state.state, state.kind)
        best = {fam: max((w.speedup for w in state.whatif if w.fix in fam), default=1.0)
                for fam in (DISK_FIXES, CPU_FIXES)}
        lt = job.time
        if (state.state == "cpu-starved" and state.kind == "others" and lt is not None
                and (lt.io_claim_pct or 0.0) >= MIXED_IO_PCT
                and best[DISK_FIXES] >= MIXED_PREFER_DISK * best[CPU_FIXES]):
            disk = storage.disk(self.t, model, job, sats, mixed=True)
            if disk is not None:
                disk.gpus, disk.gpu_util_pct, disk.whatif = state.gpus, state.gpu_util_pct, state.whatif
                state = disk
        # more workers serve either cause: only the fixes of the other cause are its "also"
        second = CPU_FIXES if state.state == "disk-starved" else (
            tuple(f for f in DISK_FIXES if f != "workers") if state.state == "cpu-starved"
            else ())
        also = [w for w in state.whatif if w.fix in second and w.speedup_shown >= SECOND_CAUSE]
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
        return ", ".join(pid_name(v.pid, v.name) for v in shown) or "other processes"

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
        spin_util = mean([g.util_pct for g in spinning])
        spin_power = mean([g.power_w for g in spinning])
        detail = (f"GPU {peers} wait on it at {spin_util:.0f}% utilization and only "
                  f"{spin_power:.0f} W (NCCL spinning, not work)")
        if procs:
            detail += f"; its process: pid {procs[0]}"
        return IntervalState("straggler", gpus=[g.index for g in low], processes=procs,
                             gpu_util_pct=mean([g.util_pct for g in low]), detail=detail,
                             advice="look at what slows that one rank: its data loader, its "
                                    "host's CPU or NUMA placement, PCIe, or thermal throttling")

