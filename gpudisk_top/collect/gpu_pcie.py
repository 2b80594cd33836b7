"""PCIe throughput off the sampling path: owns when nvmlDeviceGetPcieThroughput is asked.

Each nvmlDeviceGetPcieThroughput call measures for 20 ms inside the driver (NVML's own
documentation; nvitop's api/device.py says the same), and a GPU needs two (RX, TX): asked
every sample, 8 GPUs kept the sampler 320 ms a second in NVML.  Here a GPU's pair is asked
at most every REFRESH_S, on a daemon thread of its own, and the sampler takes the last
pair with its age.  A driver call that never returns holds this thread only: the values
then age, and say so.  GPUs whose GPM gives PCIe traffic (collect/gpu_gpm.py) never
come here.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

REFRESH_S = 5.0


class PcieRefresher:
    """Last (rx_kb_s, tx_kb_s) per GPU, refreshed in the background.  `nvml` is pynvml or
    FakeNvml; `clock` monotonic seconds; `unsupported` the NVMLError classes meaning
    "this GPU cannot say" (then never asked again)."""

    def __init__(self, nvml, clock: Callable[[], float], unsupported: tuple[type, ...]) -> None:
        self._nvml = nvml
        self._clock = clock
        self._unsupported_errors = unsupported
        self._lock = threading.Lock()
        self._latest: dict[int, tuple[int | None, int | None, float]] = {}
        self._due_s: dict[int, float] = {}
        self._pending: set[int] = set()
        self._unsupported: set[int] = set()
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._idle = threading.Condition(self._lock)

    def latest(self, index: int, handle) -> tuple[int | None, int | None, float | None]:
        """(rx_kb_s, tx_kb_s, age_s) of GPU `index` as last read; Nones before the first
        read lands or when the GPU cannot say.  Asks for a new read when one is due.
        Raises nothing."""
        now = self._clock()
        with self._lock:
            if index not in self._unsupported and index not in self._pending \
                    and now >= self._due_s.get(index, 0.0):
                if getattr(self._nvml, "nvmlDeviceGetPcieThroughput", None) is None:
                    self._unsupported.add(index)  # an nvidia-ml-py that predates it
                else:
                    self._pending.add(index)
                    self._due_s[index] = now + REFRESH_S
                    self._jobs.put((index, handle))
                    if self._thread is None:
                        self._thread = threading.Thread(target=self._work, daemon=True,
                                                        name="gpudisk-top-nvml-pcie")
                        self._thread.start()
            value = self._latest.get(index)
        if value is None:
            return None, None, None
        rx, tx, at_s = value
        return rx, tx, max(0.0, now - at_s)

    def wait_idle(self, timeout_s: float) -> bool:
        """True once no read is asked or in flight (for tests and benches), False when
        `timeout_s` went by first."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._pending, timeout_s)

    def forget(self) -> None:
        """Drop every value and due time (handles die with nvmlShutdown).  Raises nothing."""
        with self._lock:
            self._latest.clear()
            self._due_s.clear()
            self._unsupported.clear()

    def close(self) -> None:
        """Ends the thread once its call in flight returns.  Raises nothing."""
        if self._thread is not None:
            self._jobs.put(None)
            self._thread = None

    def _work(self) -> None:
        nvml = self._nvml
        while True:
            job = self._jobs.get()
            if job is None:
                return
            index, handle = job
            rx = tx = None
            unsupported = False
            try:
                rx = int(nvml.nvmlDeviceGetPcieThroughput(handle, nvml.NVML_PCIE_UTIL_RX_BYTES))
                tx = int(nvml.nvmlDeviceGetPcieThroughput(handle, nvml.NVML_PCIE_UTIL_TX_BYTES))
            except self._unsupported_errors:
                unsupported = True
            except Exception:  # noqa: BLE001 - lost, shut down, transient: the next read tries again
                pass
            with self._idle:
                self._pending.discard(index)
                if unsupported:
                    self._unsupported.add(index)
                    self._latest.pop(index, None)
                elif rx is not None and tx is not None and rx >= 0 and tx >= 0:
                    self._latest[index] = (rx, tx, self._clock())
                self._idle.notify_all()
