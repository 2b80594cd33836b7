"""Per-process GPU use: owns asking NVML what share of a GPU each of its processes used.

nvmlDeviceGetProcessesUtilizationInfo (driver 550 and later; nvmlDeviceGetProcessUtilization
before it, asked where the newer one is missing or not supported) answers, for the
processes that ran on the GPU since the timestamp asked with, one sample each: its SM
and memory utilization over NVML's last sample period and the CPU time it was stamped
(epoch µs).  A process that did not run since is not in the answer; no process at all is
NVMLError_NotFound.  It is asked at the process list's cadence (collect/gpu.py
PROCESSES_REFRESH_S: a driver round trip under its lock, not worth one a second), with
the newest timestamp seen, so each answer holds only new samples; between, each process
keeps its last sample and its stamp, and the model shows how old it is (model/gpu.py).
It is NVML's sampled figure, not a share of our interval: surfaces say so.
"""

from __future__ import annotations

# newest first: the one nvidia-ml-py and drivers since 550 have, then the older one
FUNCTIONS = ("nvmlDeviceGetProcessesUtilizationInfo", "nvmlDeviceGetProcessUtilization")
MAX_SAMPLES = 4096       # an answer longer than this is cut: a GPU has a few dozen processes
_NONE_NEW = object()     # NVMLError_NotFound: no sample newer than asked


def _pct(value) -> int | None:
    try:
        value = int(value)
    except (TypeError, ValueError):
        return None
    return value if 0 <= value <= 100 else None


class ProcessUtil:
    """One GPU's latest per-process samples: pid -> (sm %, memory %, stamp µs)."""

    def __init__(self) -> None:
        self.seen_us = 0
        self.latest: dict[int, tuple[int | None, int | None, int]] = {}
        self.supported = True

    def refresh(self, call, unsupported: set[str], pids: set[int]) -> None:
        """Ask NVML for the samples since the last one seen.  `call(function, timestamp,
        not_found=...)` is the collector's guarded call (None for a failure; it adds the
        function to `unsupported` when the GPU or this nvidia-ml-py cannot give it);
        `pids` the processes on the GPU now (others' samples are forgotten).  Raises
        what `call` raises (the GPU lost)."""
        result = None
        for function in FUNCTIONS:
            if function in unsupported:
                continue
            result = call(function, self.seen_us, not_found=_NONE_NEW)
            if function not in unsupported:
                break
        else:
            self.supported = False
            self.latest.clear()
            return
        self.latest = {pid: v for pid, v in self.latest.items() if pid in pids}
        if result is None or result is _NONE_NEW:
            return
        newest = self.seen_us
        for sample in result[:MAX_SAMPLES]:
            try:
                pid, stamp = int(sample.pid), int(sample.timeStamp)
                sm, mem = _pct(sample.smUtil), _pct(sample.memUtil)
            except (TypeError, ValueError, AttributeError):
                continue
            if stamp <= self.seen_us:
                continue  # a sample a driver returns twice
            newest = max(newest, stamp)
            had = self.latest.get(pid)
            if had is None or stamp >= had[2]:
                self.latest[pid] = (sm, mem, stamp)
        self.seen_us = newest

    def of(self, pid: int) -> tuple[int | None, int | None, int | None]:
        """(sm %, memory %, stamp µs) of `pid`'s last sample; Nones when none came."""
        return self.latest.get(pid, (None, None, None))
