"""NVML on a thread of its own, waited for at most a deadline: a wedged driver never
stops the disks, the host and the recording from being sampled on time.

A GPU driver can block an NVML call for seconds or for good (a GPU falling off the bus,
an Xid storm, a driver upgrade half done).  The sampler asks this collector for the GPUs
and gets, within the deadline, either the snapshot or one that says why not:

    unavailable: NVML has not answered for 12.0 s (nvmlDeviceGetPowerUsage on GPU 3)

While that call hangs no other is made (it would only queue behind the driver's lock);
once it returns, the next sample asks again (gpudisk_top/deadline.py: the thread is a
daemon, so a call that never returns never keeps the process from exiting).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gpudisk_top.collect.sample import GpuSnapshot
from gpudisk_top.deadline import DeadlineWorker

HUNG_STATUS = "unavailable: NVML has not answered for"   # + " 12.0 s (call)"
INIT_TIMEOUT_S = 10.0     # nvmlInit without persistence mode takes seconds on big nodes
MIN_TIMEOUT_S = 0.5       # NVML reads of 8 GPUs take ~0.1 s; five times that is late
MAX_TIMEOUT_S = 2.0


def timeout_for(interval_s: float) -> float:
    """How long a sample waits for the GPUs: half the interval, between 0.5 and 2 s, so a
    hung driver costs the disks at most half an interval (or the sample is late by the
    floor's difference at intervals under a second)."""
    return min(MAX_TIMEOUT_S, max(MIN_TIMEOUT_S, 0.5 * interval_s))


class DeadlineGpuCollector:
    """Wraps a GpuCollector (anything with collect(), close() and stuck_call()).

    collect() returns within timeout_s (init_timeout_s while nvmlInit loads the library);
    raises nothing."""

    def __init__(self, collector, timeout_s: float = MIN_TIMEOUT_S,
                 init_timeout_s: float = INIT_TIMEOUT_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.collector = collector
        self.timeout_s = timeout_s
        self.init_timeout_s = init_timeout_s
        self._worker = DeadlineWorker(collector.collect, "gpudisk-top-gpu", clock)

    def collect(self) -> GpuSnapshot:
        if not self._worker.start():
            return self._late()
        done, result = self._worker.wait(self.timeout_s)
        if not done and self._loading():
            done, result = self._worker.wait(max(0.0, self.init_timeout_s - self.timeout_s))
        if not done:
            return self._late()
        if isinstance(result, Exception):   # never lose the thread to one bad read
            return GpuSnapshot(status=f"unavailable: {type(result).__name__}: {result}")
        return result

    def _loading(self) -> bool:
        """Whether the call in progress is nvmlInit, which may take seconds on a node
        without persistence mode: it gets init_timeout_s, not timeout_s."""
        stuck = getattr(self.collector, "stuck_call", None)
        return stuck is not None and stuck() == "nvmlInit"

    def _late(self) -> GpuSnapshot:
        call = self.collector.stuck_call() if hasattr(self.collector, "stuck_call") else None
        where = f" ({call})" if call else ""
        return GpuSnapshot(status=f"{HUNG_STATUS} {self._worker.busy_s or 0.0:.1f} s{where}")

    @property
    def hung_s(self) -> float | None:
        """How long the call in progress has taken, or None when none is."""
        return self._worker.busy_s

    def close(self, wait_s: float = MAX_TIMEOUT_S) -> None:
        """Shut NVML down on its thread, waiting at most wait_s; a call that hangs is left
        behind (the thread is a daemon).  Raises nothing."""
        self._worker.close(self.collector.close, wait_s)


def hung(status: str) -> bool:
    """Whether a GPU status says NVML did not answer in time (the driver hangs)."""
    return status.startswith(HUNG_STATUS)
