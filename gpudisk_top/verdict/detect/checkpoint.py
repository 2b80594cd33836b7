"""Checkpoint stalls: the job writes a burst, or waits in fsync while the kernel writes it
back (Dirty and Writeback surge, a device writes hard, reads are flat).  CheckpointWatch
keeps what it takes between intervals: the usual level of Dirty (learned only while the
job runs well) and the latest stalls' starts and GPU-seconds, which the checkpoint fix's
prediction reads (figures)."""

from __future__ import annotations

import math

from gpudisk_top.model.snapshot import Model
from gpudisk_top.model.vocab import mb_s
from gpudisk_top.verdict.detect.job import Job
from gpudisk_top.verdict.detect.states import IntervalState
from gpudisk_top.verdict.detect.storage import display
from gpudisk_top.verdict.detect.thresholds import Thresholds


class CheckpointWatch:
    """One detector's memory of checkpoints: judge() an interval, figures() for the
    what-if."""

    def __init__(self, thresholds: Thresholds) -> None:
        self.t = thresholds
        self._dirty_usual_kb: float | None = None
        # checkpoint stalls: (start, GPU-seconds lost) of the latest runs of them
        self._ckpts: list[list[float]] = []
        self._ckpt_end_s: float | None = None

    def figures(self, model: Model, state: str, util: float | None):
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

    def dirty_kb(self, model: Model) -> float | None:
        h = model.host
        if h is None or h.dirty_kb is None:
            return None
        return float(h.dirty_kb + (h.writeback_kb or 0))

    def learn_dirty(self, dirty_kb: float | None, burst: bool) -> None:
        if dirty_kb is None or burst:
            return
        if self._dirty_usual_kb is None:
            self._dirty_usual_kb = dirty_kb
        else:
            self._dirty_usual_kb += 0.1 * (dirty_kb - self._dirty_usual_kb)

    def after_checkpoint(self, model: Model) -> bool:
        """Whether the interval before this one was a checkpoint stall."""
        end = self._ckpt_end_s
        return end is not None and abs(model.wall_s - model.interval_s - end) <= 0.5 * model.interval_s

    def judge(self, model, job: Job, sats, low, judged, dirty_kb, burst,
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
            parts.append(target.write_evidence(display(model, target.name)) + where)
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
