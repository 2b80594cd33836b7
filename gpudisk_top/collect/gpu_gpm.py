"""GPM, NVML's GPU Performance Monitoring (Hopper and later): one GPU's SM activity, SM
occupancy, tensor activity, DRAM bandwidth and PCIe traffic over the sampler's interval.

utilization.gpu is the share of time at least one kernel ran: a kernel of one thread
reads 100% (NVIDIA's answer in nvidia-docker#807).  GPM's SM activity is the share of
SMs busy.  It comes from two samples of the GPU's counters; this module owns asking for
them: the support query (once per GPU), two sample buffers per GPU swapped each interval,
the >= MIN_GAP_S between them, one nvmlGpmMetricsGet per interval for every metric, and
what counts as a valid answer (share_pct).  Whenever SM activity cannot be had for an
interval (first sample, samples too close, an error, a value that is not a share) the
reading says why and the GPU's busy figure falls back to utilization.gpu for it; a GPU
that loses GPM mid-run (NotSupported, NoPermission) keeps utilization.gpu from then on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MIN_GAP_S = 0.1          # NVML: GPM samples must be at least 100 ms apart
# a ratio of two counters computed in doubles lands a rounding off its bounds (the
# stand-in's 100% reads 100.00000000000001): that much out is the bound, not a bad answer
ROUNDING_PCT = 1e-6
MAX_PCIE_MIB_S = 1 << 20  # 1 TiB/s: above any PCIe link; more is a broken answer

# NVML_GPM_METRIC_* id (pynvml) -> GpmReading field
_PCT_METRICS = (("NVML_GPM_METRIC_SM_UTIL", 2, "sm_active_pct"),
                ("NVML_GPM_METRIC_SM_OCCUPANCY", 3, "sm_occupancy_pct"),
                ("NVML_GPM_METRIC_ANY_TENSOR_UTIL", 5, "tensor_active_pct"),
                ("NVML_GPM_METRIC_DRAM_BW_UTIL", 10, "dram_bw_pct"))
_PCIE_METRICS = (("NVML_GPM_METRIC_PCIE_RX_PER_SEC", 21, "pcie_rx_kb_s"),
                 ("NVML_GPM_METRIC_PCIE_TX_PER_SEC", 20, "pcie_tx_kb_s"))
_WANTED = _PCT_METRICS + _PCIE_METRICS


def share_pct(value) -> float | None:
    """`value` as a share in percent, or None when it is not one (NaN, infinite, below 0,
    above 100 beyond a rounding, not a number).  The one check of a GPM share: the collector's and a
    recording's alike.  Raises nothing."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(value) or not -ROUNDING_PCT <= value <= 100.0 + ROUNDING_PCT:
        return None
    return min(100.0, max(0.0, value))


@dataclass
class GpmReading:
    """One interval's GPM figures; None where the GPU did not give a valid one.  `note`
    says why sm_active_pct is None on a GPU that has GPM (else None)."""

    sm_active_pct: float | None = None
    sm_occupancy_pct: float | None = None
    tensor_active_pct: float | None = None
    dram_bw_pct: float | None = None
    pcie_rx_kb_s: int | None = None
    pcie_tx_kb_s: int | None = None
    note: str | None = None


class GpmState:
    """One GPU's GPM between intervals, or one of its MIG GPU instances' (`gpu_instance`:
    sampled with nvmlGpmMigSampleGet, collect/gpu_mig.py).  `supported` is None until
    asked."""

    def __init__(self, gpu_instance: int | None = None) -> None:
        self.gpu_instance = gpu_instance
        self.supported: bool | None = None
        self.off_reason: str | None = None   # why a GPU that had GPM no longer has it
        self._buffers: list = []
        self._newest = 0                     # which buffer holds the last sample
        self._taken_at_s: float | None = None
        self._request = None                 # the nvmlGpmMetricsGet structure, reused

    def read(self, nvml, handle, now_s: float, lost: tuple[type, ...],
             unsupported: tuple[type, ...]) -> GpmReading | None:
        """This interval's reading; None when the GPU has no GPM at all.  Raises the
        `lost` NVMLError classes (the GPU stopped answering) and nothing else."""
        if not self.known(nvml, handle, lost, unsupported):
            return GpmReading(note=self.off_reason) if self.off_reason else None
        try:
            return self._interval(nvml, handle, now_s)
        except lost:
            raise
        except unsupported as err:
            self.supported = False
            self.off_reason = f"GPM stopped ({_name(err)}): utilization.gpu from now on"
            return GpmReading(note=self.off_reason)
        except Exception as err:  # noqa: BLE001 - transient NVML error, or a ctypes surprise
            self._taken_at_s = None  # the pair is broken: start again next interval
            return GpmReading(note=f"GPM read failed ({_name(err)}): utilization.gpu this interval")

    def known(self, nvml, handle, lost: tuple[type, ...], unsupported: tuple[type, ...]) -> bool:
        """Whether the GPU has GPM, asked once (again after a transient error).  Raises
        the `lost` classes."""
        if self.supported is None:
            self.supported = self._query(nvml, handle, lost, unsupported)
        return bool(self.supported)

    def free(self, nvml) -> None:
        """Give the sample buffers back (before nvmlShutdown).  Raises nothing."""
        for buffer in self._buffers:
            try:
                nvml.nvmlGpmSampleFree(buffer)
            except Exception:  # noqa: BLE001 - the library is going away anyway
                pass
        self._buffers = []
        self._taken_at_s = None

    def _query(self, nvml, handle, lost, unsupported) -> bool | None:
        """Does the GPU have GPM; None when the driver could not say now (asked again)."""
        query = getattr(nvml, "nvmlGpmQueryDeviceSupport", None)
        if query is None:  # an nvidia-ml-py that predates GPM
            return False
        try:
            return bool(query(handle).isSupportedDevice)
        except lost:
            raise
        except unsupported as err:
            if type(err).__name__ == "NVMLError_NoPermission":
                self.off_reason = "GPM not permitted: utilization.gpu"
            return False
        except Exception:  # noqa: BLE001 - transient: asked again next interval
            return None

    def _interval(self, nvml, handle, now_s: float) -> GpmReading:
        if not self._buffers:
            self._buffers = [nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()]
        older, newer = self._buffers[self._newest], self._buffers[1 - self._newest]
        if self.gpu_instance is None:
            nvml.nvmlGpmSampleGet(handle, newer)
        else:
            nvml.nvmlGpmMigSampleGet(handle, self.gpu_instance, newer)
        self._newest = 1 - self._newest
        previous_s, self._taken_at_s = self._taken_at_s, now_s
        if previous_s is None:
            return GpmReading(note="GPM: first sample: utilization.gpu this interval")
        gap_s = now_s - previous_s
        if gap_s < MIN_GAP_S:
            return GpmReading(note=f"GPM samples {gap_s * 1000:.0f} ms apart (< 100 ms): "
                                   "utilization.gpu this interval")
        request = self._request
        if request is None:
            # built once: the structure holds room for every metric NVML has (~19 KB)
            request = self._request = nvml.c_nvmlGpmMetricsGet_t()
            request.version = nvml.NVML_GPM_METRICS_GET_VERSION
            request.numMetrics = len(_WANTED)
            for i, (const, default, _) in enumerate(_WANTED):
                request.metrics[i].metricId = getattr(nvml, const, default)
        request.sample1, request.sample2 = older, newer
        nvml.nvmlGpmMetricsGet(request)
        reading = GpmReading()
        for i, (_, _, name) in enumerate(_WANTED):
            metric = request.metrics[i]
            if metric.nvmlReturn != 0:  # NVML_SUCCESS
                continue
            if name.startswith("pcie_"):
                mib_s = metric.value
                if math.isfinite(mib_s) and 0 <= mib_s <= MAX_PCIE_MIB_S:
                    setattr(reading, name, round(mib_s * 1024))  # MiB/s -> KB/s (KiB)
            else:
                setattr(reading, name, share_pct(metric.value))
        if reading.sm_active_pct is None:
            sm = request.metrics[0]
            said = "not given" if sm.nvmlReturn != 0 else f"{sm.value!r}"
            reading.note = f"GPM SM activity {said}: utilization.gpu this interval"
        return reading


def _name(err: Exception) -> str:
    return type(err).__name__.removeprefix("NVMLError_")
