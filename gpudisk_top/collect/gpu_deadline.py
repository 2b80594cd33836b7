"""NVML on a thread of its own, waited for at most a deadline: a wedged driver never
stops the disks, the host and the recording from being sampled on time.

A GPU driver can block an NVML call for seconds or for good (a GPU falling off the bus,
an Xid storm, a driver upgrade half done).  The sampler asks this collector for the GPUs
and gets, within the deadline, either the snapshot or one that says why not:

    unavailable: NVML has not answered for 12.0 s (nvmlDeviceGetPowerUsage on GPU 3)

While that call hangs no other is made (it would only queue behind the driver's lock);
once it returns, the next sample asks again.  The thread is a daemon thread, so a call
that never returns never keeps the process from exiting, and close() does not wait for it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from gpudisk_top.collect.sample import GpuSnapshot

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
        self._clock = clock
        self._lock = threading.Lock()
        self._asked = threading.Event()
        self._answered = threading.Event()
        self._result: GpuSnapshot | None = None
        self._busy_since: float | None = None   # when the call in progress was asked for
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="gpudisk-top-gpu", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ the thread
    def _run(self) -> None:
        while True:
            self._asked.wait()
            self._asked.clear()
            if self._closing:
                self.collector.close()
                self._answered.set()
                return
            try:
                snapshot = self.collector.collect()
            except Exception as err:  # noqa: BLE001 - never lose the thread to one bad read
                snapshot = GpuSnapshot(status=f"unavailable: {type(err).__name__}: {err}")
            with self._lock:
                self._result = snapshot
                self._busy_since = None
            self._answered.set()

    # ------------------------------------------------------------------ public
    def collect(self) -> GpuSnapshot:
        now = self._clock()
        with self._lock:
            if self._busy_since is not None:
                return self._late(now - self._busy_since)
            self._busy_since = now
            self._result = None
            self._answered.clear()
        self._asked.set()
        answered = self._answered.wait(self.timeout_s)
        if not answered and self._loading():
            answered = self._answered.wait(max(0.0, self.init_timeout_s - self.timeout_s))
        if answered:
            with self._lock:
                if self._result is not None:
                    return self._result
        with self._lock:
            if self._busy_since is None and self._result is not None:
                return self._result      # answered just as the wait ended
            return self._late(self._clock() - (self._busy_since or now))

    def _loading(self) -> bool:
        """Whether the call in progress is nvmlInit, which may take seconds on a node
        without persistence mode: it gets init_timeout_s, not timeout_s."""
        stuck = getattr(self.collector, "stuck_call", None)
        return stuck is not None and stuck() == "nvmlInit"

    def _late(self, waited_s: float) -> GpuSnapshot:
        call = self.collector.stuck_call() if hasattr(self.collector, "stuck_call") else None
        where = f" ({call})" if call else ""
        return GpuSnapshot(status=f"{HUNG_STATUS} {waited_s:.1f} s{where}")

    @property
    def hung_s(self) -> float | None:
        """How long the call in progress has taken, or None when none is."""
        with self._lock:
            return None if self._busy_since is None else self._clock() - self._busy_since

    def close(self, wait_s: float = MAX_TIMEOUT_S) -> None:
        """Shut NVML down on its thread, waiting at most wait_s; a call that hangs is left
        behind (the thread is a daemon).  Raises nothing."""
        with self._lock:
            busy = self._busy_since is not None
            self._closing = True
            self._answered.clear()
        if busy:
            return                      # nvmlShutdown would wait behind the hung call
        self._asked.set()
        self._answered.wait(wait_s)


def hung(status: str) -> bool:
    """Whether a GPU status says NVML did not answer in time (the driver hangs)."""
    return status.startswith(HUNG_STATUS)
