"""Which samples need every process read (issue 41): the detector's side of the slow
cadence (collect/detail.py), with the detector's own thresholds.

A job's interval can be judged starved only where one of its GPUs is under
gpu_low_util_pct (verdict/detect/classify.py: no low GPU is healthy, and a straggler
needs one too), and a device can be saturated only with a request in flight nearly all
the time (verdict/detect/saturation.py BUSY_QUEUE).  So the figures a sample reads before
the processes (NVML's utilization, /proc/diskstats) say whether its interval needs them:
DetailWatch asks exactly that, with the model's own figures (model/gpu.py gpu_busy_pct,
the busy figure every verdict reads; model/disk.py device_rates, iostat's aqu-sz), so that
the first interval the detector judges starved has the processes read at its end.  Host
PSI is not asked: it is host-wide, and the detector counts it only on a busy device.
"""

from __future__ import annotations

from gpudisk_top.model.disk import device_rates
from gpudisk_top.model.gpu import gpu_busy_pct
from gpudisk_top.verdict.detect.saturation import BUSY_QUEUE
from gpudisk_top.verdict.detect.states import STARVED_STATES
from gpudisk_top.verdict.detect.thresholds import Thresholds


class DetailWatch:
    """needs(sample, last) for a DetailCadence: why this sample's cheap figures need the
    processes read, or None.  Never raises."""

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        self.t = thresholds or Thresholds()
        self._devices: tuple[dict | None, frozenset[str]] = (None, frozenset())  # (procs, theirs)

    def __call__(self, sample, last) -> str | None:
        window_us = (int(last.wall_s * 1e6), int(sample.wall_s * 1e6))
        for g in sample.gpu.gpus:
            if g.lost or not g.processes:
                continue          # not a job's GPU (verdict/detect/job.py job_gpus)
            util = gpu_busy_pct(g, window_us)
            if util is not None and util < self.t.gpu_low_util_pct:
                return f"GPU {g.index} at {util:.0f}%"
        interval_s = sample.mono_s - last.mono_s
        if interval_s <= 0:
            return None
        for name in self._job_devices(last.procs):
            cur, prev = sample.disks.get(name), last.disks.get(name)
            if cur is None or prev is None:
                continue
            aqu = device_rates(cur, prev, interval_s).aqu_sz
            if aqu >= BUSY_QUEUE:
                return f"{name} busy (aqu-sz {aqu:.1f})"
        return None

    def _job_devices(self, procs) -> frozenset[str]:
        """The devices under the job's processes' files, as last read (kept per read:
        the carried samples hold the same dict)."""
        if self._devices[0] is not procs:
            self._devices = (procs, frozenset(
                d for p in procs.values() if p.root_pid is not None for d in (p.devices or ())))
        return self._devices[1]


def wanted(verdict) -> bool:
    """Whether a step's verdict asks for every process at the next sample: the node's or
    a job's state starved, or this interval's alone (an episode building up)."""
    return any(v.state in STARVED_STATES or v.raw_state in STARVED_STATES
               for v in (verdict, *verdict.jobs))
