"""FakeNvml: the one fake NVML in the project, shaped like nvidia-ml-py's `pynvml` module.

It has pynvml's function names, argument order, return types and structures, and it
raises pynvml's REAL `NVMLError_*` classes (re-exported as attributes, with every `NVML_*`
constant and the clock-reason bits), so code written against `pynvml` runs on it unchanged.

Driving it (tests, and the simulator that produces raw NVML readings for N GPUs):

    nvml = FakeNvml(gpus=[FakeGpu(), FakeGpu()])    # or FakeNvml.with_gpus(8)
    nvml.set_state(0, util_pct=97, power_mw=650_000, processes=[(4242, 30 * 2**30)])
    nvml.advance(1.0)           # the fake clock moves 1 s: each live GPU gets a GPU and a
                                # memory utilization sample every 1/6 s, carrying the state set
                                # before the call, and its energy counter integrates power
    nvml.advance_to(time.time())  # or follow the wall clock (timestamps are epoch µs)
    nvml.push_samples(0, util=[(ts_us, 50)])  # exact samples, for tests
    nvml.lose_gpu(3)            # every later call on GPU 3 raises NVMLError_GpuIsLost

Field values (clock-event durations following a throttle schedule) and per-process
utilization: sim/fake_nvml_fields.py says how to drive them; MIG: sim/fake_nvml_mig.py.

GPM (nvmlGpmQueryDeviceSupport, nvmlGpmSampleAlloc/Get/Free, nvmlGpmMigSampleGet,
nvmlGpmMetricsGet with pynvml's c_nvmlGpmMetricsGet_t), as a Hopper driver answers it:
    FakeGpu(gpm_supported=True)   # else the query says isSupportedDevice 0 and every
                                  # other GPM call on it raises NVMLError_NotSupported
    set_state(0, util_pct=100, sm_active_pct=3)   # a one-thread kernel: busy, SMs idle
    (sm_active_pct None follows util_pct; sm_occupancy_pct None is half the SM activity;
    dram_bw_pct None follows mem_util_pct; PCIe RX/TX are pcie_*_kb_s in MiB/s.)  advance()
    integrates them, so a metric is their mean between the two samples' fake times.
    set_state(0, gpm_values={NVML_GPM_METRIC_SM_UTIL: float("nan")})  # what a bad driver says

Cost: FakeNvml(pcie_delay_s=0.02) makes each nvmlDeviceGetPcieThroughput take 20 ms, as
it does inside a real driver (it measures over that window).

Failures to reproduce:
    FakeNvml.missing_library() / .driver_not_loaded() / .no_permission(): nvmlInit raises
    `init_error` / `count_error` attributes: set them to an NVMLError class at any time
    FakeGpu.unsupported = {"nvmlDeviceGetSamples", ...}: those calls raise NVMLError_NotSupported
    FakeGpu.errors = {"nvmlDeviceGetPowerUsage": NVMLError_NoPermission}: that call raises it
    FakeNvml(missing={"nvmlDeviceGetCurrentClocksEventReasons"}): the attribute does not
        exist (AttributeError), like an older nvidia-ml-py
    FakeNvml(idle_samples=False): an idle GPU produces no samples, as real drivers do;
        nvmlDeviceGetSamples then raises NVMLError_NotFound
    nvml.hang("nvmlDeviceGetPowerUsage"): that call (any function name, nvmlInit too)
        blocks, as a wedged driver's does, until nvml.unhang(); hang(..., gpu=3) on one GPU;
        hang(..., after_calls=4) from the fifth call on

`calls` counts every call by (function name, GPU index or None); `call_count()` sums it.
"""

from __future__ import annotations

import ctypes
import itertools
import math
import threading
import time
import uuid as uuidlib
from collections import Counter, deque
from dataclasses import dataclass, field, fields

import pynvml

from gpudisk_top.sim.fake_nvml_fields import FieldsApi, integrate_clock_events
from gpudisk_top.sim.fake_nvml_mig import MigApi

# Drivers keep about six utilization samples a second.
SAMPLES_PER_S = 6
# NVML keeps a ring buffer of recent samples; roughly 20 s of them at 6 Hz.
SAMPLE_BUFFER_LEN = 120
# What pynvml reports as gpuInstanceId/computeInstanceId outside MIG mode.
_NOT_MIG = 0xFFFFFFFF
# Bus ids of the eight GPUs of an HGX H100 board, so fake GPUs look like real ones.
_HGX_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)


@dataclass
class FakeGpu:
    """The programmable state of one fake GPU.  Units are in the names."""

    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = ""                 # "" -> a stable GPU-... uuid derived from the index
    pci_bus_id: str = ""           # "" -> "00000000:BB:00.0" from an HGX layout
    util_pct: float = 0.0
    mem_util_pct: float = 0.0
    mem_used_bytes: int = 0
    mem_total_bytes: int = 81559 * 2**20
    power_mw: int = 70_000
    power_limit_mw: int = 700_000
    energy_mj: float = 0.0         # advance() integrates power_mw into it
    temp_c: int = 32
    sm_clock_mhz: int = 1980
    pcie_rx_kb_s: int = 0
    pcie_tx_kb_s: int = 0
    clocks_event_reasons: int = 0  # nvmlClocksEventReason* bits
    processes: list[tuple[int, int | None]] = field(default_factory=list)  # (host pid, used bytes|None)
    unsupported: set[str] = field(default_factory=set)  # pynvml function names -> NotSupported
    errors: dict[str, type] = field(default_factory=dict)  # pynvml function name -> NVMLError class
    lost: bool = False
    minor_number: int | None = None  # /dev/nvidiaN; None -> the index, as on most nodes
    # GPM (see the module docstring): None follows the figure named there
    gpm_supported: bool = False
    sm_active_pct: float | None = None
    sm_occupancy_pct: float | None = None
    tensor_active_pct: float = 0.0
    dram_bw_pct: float | None = None
    gpm_values: dict[int, float] = field(default_factory=dict)  # metric id -> value returned
    mig_gpu_instances: set[int] = field(default_factory=set)  # GPU instance ids in MIG mode
    mig_sm_count: dict[int, int] = field(default_factory=dict)   # sim/fake_nvml_mig.py
    mig_sm_active_pct: dict[int, float] = field(default_factory=dict)
    # field values and per-process utilization: see sim/fake_nvml_fields.py
    throttle_pct: dict[int, float] = field(default_factory=dict)  # field id -> % of time held
    throttle_schedule: list[tuple[float, float, int]] = field(default_factory=list)
    clock_event_ns: dict[int, int] = field(default_factory=dict)  # field id -> cumulative ns
    unsupported_fields: set[int] = field(default_factory=set)
    process_util: dict[int, tuple[float, float]] = field(default_factory=dict)  # pid -> (SM %, mem %)


# The GPM metrics the fake integrates: id -> the FakeGpu figure it follows (in %, or MiB/s).
def _gpm_now(gpu: FakeGpu) -> dict[int, float]:
    sm = gpu.util_pct if gpu.sm_active_pct is None else gpu.sm_active_pct
    return {
        pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL: gpu.util_pct,
        pynvml.NVML_GPM_METRIC_SM_UTIL: sm,
        pynvml.NVML_GPM_METRIC_SM_OCCUPANCY: sm / 2 if gpu.sm_occupancy_pct is None else gpu.sm_occupancy_pct,
        pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL: gpu.tensor_active_pct,
        pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL: gpu.mem_util_pct if gpu.dram_bw_pct is None else gpu.dram_bw_pct,
        pynvml.NVML_GPM_METRIC_PCIE_TX_PER_SEC: gpu.pcie_tx_kb_s / 1024,
        pynvml.NVML_GPM_METRIC_PCIE_RX_PER_SEC: gpu.pcie_rx_kb_s / 1024,
    }


@dataclass(frozen=True)
class FakeHandle:
    """What nvmlDeviceGetHandleByIndex returns; opaque to callers, as a real handle is."""

    index: int


_STATE_FIELDS = frozenset(f.name for f in fields(FakeGpu))


class FakeNvml(FieldsApi, MigApi):
    """A module-like fake of `pynvml`; see the module docstring for how to drive it."""

    def __init__(self, gpus: list[FakeGpu] | None = None, *, start_us: int | None = None,
                 samples_per_s: float = SAMPLES_PER_S, buffer_len: int = SAMPLE_BUFFER_LEN,
                 sample_value_type: int = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT,
                 idle_samples: bool = True, driver_version: str = "550.54.15",
                 missing: set[str] | frozenset[str] = frozenset(),
                 init_error: type | None = None, pcie_delay_s: float = 0.0) -> None:
        self.gpus: list[FakeGpu] = []
        self.pcie_delay_s = pcie_delay_s  # time each nvmlDeviceGetPcieThroughput takes
        # GPM: per GPU, each metric integrated over fake time (value x s); and the samples
        # taken, by the address their opaque pointer carries -> (GPU, time, integrals)
        self._gpm_sums: list[dict[int, float]] = []
        self._gpm_samples: dict[int, tuple[int, int, dict[int, float]] | None] = {}
        self._gpm_addresses = itertools.count(0x1000, 0x100)
        self.now_us = int(time.time() * 1e6) if start_us is None else int(start_us)
        self.samples_per_s = samples_per_s
        self.sample_value_type = sample_value_type
        self.idle_samples = idle_samples
        self.driver_version = driver_version
        self.missing = set(missing)
        if self.missing and type(self) is FakeNvml:
            self.__class__ = _FakeNvmlMissing
        self.init_error = init_error    # raised by nvmlInit while set
        self.count_error: type | None = None  # raised by nvmlDeviceGetCount while set
        self.init_count = 0             # NVML's init reference count
        self.calls: Counter[tuple[str, int | None]] = Counter()
        # (function, GPU or None) -> calls that still answer before it blocks
        self._hangs: dict[tuple[str, int | None], int] = {}
        self._hangs_lock = threading.Lock()
        self._unhung = threading.Event()
        self._unhung.set()
        self._buffer_len = buffer_len
        self._pushed = False            # push_samples used: buffers may be out of order
        self._buffers: list[dict[int, deque[tuple[int, float]]]] = []
        # Sample k is stamped origin + k/samples_per_s, rounded to a µs (no drift).
        self._sample_origin_us = self.now_us
        self._sample_k = 1
        for gpu in gpus or ():
            self.add_gpu(gpu)

    # ------------------------------------------------------------------ modes
    @classmethod
    def with_gpus(cls, n: int, **kwargs) -> FakeNvml:
        return cls(gpus=[FakeGpu() for _ in range(n)], **kwargs)

    @classmethod
    def missing_library(cls, **kwargs) -> FakeNvml:
        """No libnvidia-ml.so.1: nvmlInit raises NVMLError_LibraryNotFound."""
        return cls(init_error=pynvml.NVMLError_LibraryNotFound, **kwargs)

    @classmethod
    def driver_not_loaded(cls, **kwargs) -> FakeNvml:
        return cls(init_error=pynvml.NVMLError_DriverNotLoaded, **kwargs)

    @classmethod
    def no_permission(cls, **kwargs) -> FakeNvml:
        return cls(init_error=pynvml.NVMLError_NoPermission, **kwargs)

    # ------------------------------------------------------------------ driving
    def add_gpu(self, gpu: FakeGpu) -> int:
        """Append a GPU; returns its index.  Empty uuid and bus id get realistic defaults."""
        index = len(self.gpus)
        if not gpu.uuid:
            gpu.uuid = "GPU-" + str(uuidlib.uuid5(uuidlib.NAMESPACE_OID, f"gpudisk-top-fake-{index}"))
        if not gpu.pci_bus_id:
            bus = _HGX_BUSES[index] if index < len(_HGX_BUSES) else 0x100 + index
            gpu.pci_bus_id = f"{bus >> 8:08X}:{bus & 0xFF:02X}:00.0"
        self.gpus.append(gpu)
        self._gpm_sums.append(dict.fromkeys(_gpm_now(gpu), 0.0))
        self._buffers.append({pynvml.NVML_GPU_UTILIZATION_SAMPLES: deque(maxlen=self._buffer_len),
                              pynvml.NVML_MEMORY_UTILIZATION_SAMPLES: deque(maxlen=self._buffer_len)})
        return index

    def set_state(self, index: int, **state) -> None:
        """Set FakeGpu fields of GPU `index`.  Raises AttributeError on an unknown field, so
        a typo in a simulator does not pass silently."""
        unknown = set(state) - _STATE_FIELDS
        if unknown:
            raise AttributeError(f"FakeGpu has no field(s) {sorted(unknown)}")
        gpu = self.gpus[index]
        for name, value in state.items():
            setattr(gpu, name, value)

    def lose_gpu(self, index: int) -> None:
        """The GPU falls off the bus: every call on it raises NVMLError_GpuIsLost."""
        self.gpus[index].lost = True

    def advance(self, seconds: float) -> None:
        """Move the fake clock forward, producing samples and energy (see module docstring)."""
        self._advance_to_us(self.now_us + round(seconds * 1e6))

    def advance_to(self, wall_s: float) -> None:
        """Move the fake clock to `wall_s` (seconds since the epoch); never moves it back."""
        self._advance_to_us(round(wall_s * 1e6))

    def push_samples(self, index: int, util: list[tuple[int, float]] | None = None,
                     mem_util: list[tuple[int, float]] | None = None) -> None:
        """Put exact (timestamp_us, value) samples into GPU `index`'s buffers."""
        buffers = self._buffers[index]
        self._pushed = True
        for kind, samples in ((pynvml.NVML_GPU_UTILIZATION_SAMPLES, util),
                              (pynvml.NVML_MEMORY_UTILIZATION_SAMPLES, mem_util)):
            for sample in sorted(samples or ()):
                buffers[kind].append(sample)

    def call_count(self, function: str, index: int | None = None) -> int:
        """Calls of `function`, on GPU `index`, or in all when index is None."""
        return sum(n for (name, i), n in self.calls.items()
                   if name == function and (index is None or i == index))

    def _advance_to_us(self, target_us: int) -> None:
        if target_us <= self.now_us:
            return
        dt_s = (target_us - self.now_us) / 1e6
        for index, (gpu, sums) in enumerate(zip(self.gpus, self._gpm_sums)):
            if not gpu.lost:
                gpu.energy_mj += gpu.power_mw * dt_s  # mW * s = mJ
                for metric, value in _gpm_now(gpu).items():
                    sums[metric] += value * dt_s
                integrate_clock_events(gpu, self.now_us, target_us, self._sample_origin_us)
                if gpu.mig_gpu_instances:
                    self._integrate_mig(index, gpu, dt_s)
        while (ts := self._sample_ts(self._sample_k)) <= target_us:
            for index, (gpu, buffers) in enumerate(zip(self.gpus, self._buffers)):
                if gpu.process_util and not gpu.lost:
                    self._tick_processes(index, gpu, ts)
                if gpu.lost or (not self.idle_samples and not gpu.util_pct and not gpu.mem_util_pct):
                    continue
                buffers[pynvml.NVML_GPU_UTILIZATION_SAMPLES].append((ts, gpu.util_pct))
                buffers[pynvml.NVML_MEMORY_UTILIZATION_SAMPLES].append((ts, gpu.mem_util_pct))
            self._sample_k += 1
        self.now_us = target_us

    def _sample_ts(self, k: int) -> int:
        return self._sample_origin_us + round(k * 1e6 / self.samples_per_s)

    # ------------------------------------------------------------------ hangs
    def hang(self, function: str, gpu: int | None = None, after_calls: int = 0) -> None:
        """Make `function` (on GPU `gpu`, or on every GPU) block until unhang(), from its
        call after the next `after_calls` ones (counted on that GPU, or on all): a hang
        that starts after so many samples, however slowly the machine runs them."""
        with self._hangs_lock:
            self._hangs[(function, gpu)] = max(0, after_calls)
            self._unhung.clear()

    def unhang(self) -> None:
        """Release every call that hangs, and make none hang again."""
        self._hangs.clear()
        self._unhung.set()

    def _maybe_hang(self, function: str, index: int | None) -> None:
        if not self._hangs:
            return
        with self._hangs_lock:
            keys = [k for k in ((function, None), (function, index)) if k in self._hangs]
            if not keys:
                return
            if all(self._hangs[k] > 0 for k in keys):
                for k in keys:
                    self._hangs[k] -= 1
                return
        self._unhung.wait()

    # ------------------------------------------------------------------ checks
    def _library(self, function: str, index: int | None = None) -> None:
        self.calls[(function, index)] += 1
        self._maybe_hang(function, index)
        if self.init_count == 0:
            raise pynvml.NVMLError_Uninitialized()

    def _device(self, function: str, handle: FakeHandle) -> FakeGpu:
        """The GPU behind `handle`, after the checks the driver would make."""
        self.calls[(function, handle.index)] += 1
        self._maybe_hang(function, handle.index)
        if self.init_count == 0:
            raise pynvml.NVMLError_Uninitialized()
        gpu = self.gpus[handle.index]
        if gpu.lost:
            raise pynvml.NVMLError_GpuIsLost()
        if function in gpu.unsupported:
            raise pynvml.NVMLError_NotSupported()
        if function in gpu.errors:
            raise gpu.errors[function]()
        return gpu

    # ------------------------------------------------------------------ library
    def nvmlInit(self) -> None:
        self.calls[("nvmlInit", None)] += 1
        self._maybe_hang("nvmlInit", None)
        if self.init_error is not None:
            raise self.init_error()
        self.init_count += 1

    def nvmlInitWithFlags(self, flags: int) -> None:
        self.nvmlInit()

    def nvmlShutdown(self) -> None:
        self._library("nvmlShutdown")
        self.init_count -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._library("nvmlSystemGetDriverVersion")
        return self.driver_version

    def nvmlDeviceGetCount(self) -> int:
        self._library("nvmlDeviceGetCount")
        if self.count_error is not None:
            raise self.count_error()
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        self._library("nvmlDeviceGetHandleByIndex", index)
        if not 0 <= index < len(self.gpus):
            raise pynvml.NVMLError_InvalidArgument()
        if self.gpus[index].lost:
            raise pynvml.NVMLError_GpuIsLost()
        return FakeHandle(index)

    # ------------------------------------------------------------------ device
    def nvmlDeviceGetName(self, handle: FakeHandle) -> str:
        return self._device("nvmlDeviceGetName", handle).name

    def nvmlDeviceGetUUID(self, handle: FakeHandle) -> str:
        return self._device("nvmlDeviceGetUUID", handle).uuid

    def nvmlDeviceGetMinorNumber(self, handle: FakeHandle) -> int:
        """N of the GPU's device file /dev/nvidiaN."""
        gpu = self._device("nvmlDeviceGetMinorNumber", handle)
        return handle.index if gpu.minor_number is None else gpu.minor_number

    def nvmlDeviceGetPciInfo(self, handle: FakeHandle) -> pynvml.nvmlPciInfo_t:
        gpu = self._device("nvmlDeviceGetPciInfo", handle)
        domain, bus, rest = gpu.pci_bus_id.split(":")
        info = pynvml.nvmlPciInfo_t()
        # c_char arrays: this pynvml's structures decode them to str on read (older: bytes)
        info.busId = gpu.pci_bus_id.encode()
        info.busIdLegacy = f"{int(domain, 16) & 0xFFFF:04x}:{bus}:{rest}".encode()
        info.domain, info.bus, info.device = int(domain, 16), int(bus, 16), int(rest.split(".")[0], 16)
        info.pciDeviceId = 0x233010DE
        return info

    def nvmlDeviceGetMemoryInfo(self, handle: FakeHandle, version=None) -> pynvml.c_nvmlMemory_t:
        gpu = self._device("nvmlDeviceGetMemoryInfo", handle)
        memory = pynvml.c_nvmlMemory_t()
        memory.total, memory.used = gpu.mem_total_bytes, gpu.mem_used_bytes
        memory.free = max(gpu.mem_total_bytes - gpu.mem_used_bytes, 0)
        return memory

    def nvmlDeviceGetUtilizationRates(self, handle: FakeHandle) -> pynvml.c_nvmlUtilization_t:
        gpu = self._device("nvmlDeviceGetUtilizationRates", handle)
        util = pynvml.c_nvmlUtilization_t()
        util.gpu, util.memory = round(gpu.util_pct), round(gpu.mem_util_pct)
        return util

    def nvmlDeviceGetSamples(self, device: FakeHandle, sampling_type: int, timeStamp: int):
        """(value type, [c_nvmlSample_t]) newer than timeStamp; NVMLError_NotFound if none."""
        self._device("nvmlDeviceGetSamples", device)
        buffer = self._buffers[device.index].get(sampling_type)
        if buffer is None:
            raise pynvml.NVMLError_NotSupported()
        if self._pushed:
            newer = [(ts, value) for ts, value in buffer if ts > timeStamp]
        else:
            # only the clock filled the buffers: oldest first, so the newer ones are its tail
            newer = []
            for ts, value in reversed(buffer):
                if ts <= timeStamp:
                    break
                newer.append((ts, value))
            newer.reverse()
        if not newer:
            raise pynvml.NVMLError_NotFound()
        samples = []
        for ts, value in newer:
            sample = pynvml.c_nvmlSample_t()
            sample.timeStamp = ts
            if self.sample_value_type == pynvml.NVML_VALUE_TYPE_DOUBLE:
                sample.sampleValue.dVal = float(value)
            else:
                sample.sampleValue.uiVal = round(value)
            samples.append(sample)
        return (self.sample_value_type, samples)

    def nvmlDeviceGetPowerUsage(self, handle: FakeHandle) -> int:
        return self._device("nvmlDeviceGetPowerUsage", handle).power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: FakeHandle) -> int:
        return self._device("nvmlDeviceGetEnforcedPowerLimit", handle).power_limit_mw

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: FakeHandle) -> int:
        return int(self._device("nvmlDeviceGetTotalEnergyConsumption", handle).energy_mj)

    def nvmlDeviceGetTemperature(self, handle: FakeHandle, sensor: int) -> int:
        gpu = self._device("nvmlDeviceGetTemperature", handle)
        if sensor != pynvml.NVML_TEMPERATURE_GPU:
            raise pynvml.NVMLError_InvalidArgument()
        return gpu.temp_c

    def nvmlDeviceGetClockInfo(self, handle: FakeHandle, type: int) -> int:
        gpu = self._device("nvmlDeviceGetClockInfo", handle)
        if type != pynvml.NVML_CLOCK_SM:
            raise pynvml.NVMLError_NotSupported()  # only the SM clock is modelled
        return gpu.sm_clock_mhz

    def nvmlDeviceGetPcieThroughput(self, device: FakeHandle, counter: int) -> int:
        gpu = self._device("nvmlDeviceGetPcieThroughput", device)
        if self.pcie_delay_s > 0:
            time.sleep(self.pcie_delay_s)  # the driver measures over this window
        if counter == pynvml.NVML_PCIE_UTIL_RX_BYTES:
            return gpu.pcie_rx_kb_s
        if counter == pynvml.NVML_PCIE_UTIL_TX_BYTES:
            return gpu.pcie_tx_kb_s
        raise pynvml.NVMLError_InvalidArgument()

    # ------------------------------------------------------------------ GPM
    def nvmlGpmQueryDeviceSupport(self, device: FakeHandle) -> pynvml.c_nvmlGpmSupport_t:
        gpu = self._device("nvmlGpmQueryDeviceSupport", device)
        support = pynvml.c_nvmlGpmSupport_t()
        support.version = pynvml.NVML_GPM_SUPPORT_VERSION
        support.isSupportedDevice = int(gpu.gpm_supported)
        return support

    def nvmlGpmSampleAlloc(self):
        """An opaque c_nvmlGpmSample_t, as pynvml's; its address names it (never read)."""
        self._library("nvmlGpmSampleAlloc")
        address = next(self._gpm_addresses)
        self._gpm_samples[address] = None
        return ctypes.cast(ctypes.c_void_p(address), pynvml.c_nvmlGpmSample_t)

    def nvmlGpmSampleFree(self, gpmSample) -> None:
        self._library("nvmlGpmSampleFree")
        if self._gpm_samples.pop(_address(gpmSample), False) is False:
            raise pynvml.NVMLError_InvalidArgument()

    def nvmlGpmSampleGet(self, device: FakeHandle, gpmSample):
        return self._gpm_sample("nvmlGpmSampleGet", device, gpmSample)

    def nvmlGpmMigSampleGet(self, device: FakeHandle, gpuInstanceId: int, gpmSample):
        gpu = self.gpus[device.index]
        if gpu.gpm_supported and gpuInstanceId not in gpu.mig_gpu_instances:
            self.calls[("nvmlGpmMigSampleGet", device.index)] += 1
            raise pynvml.NVMLError_InvalidArgument()  # no such GPU instance (or not in MIG mode)
        self._gpm_sample("nvmlGpmMigSampleGet", device, gpmSample)
        # the instance's own counters (sim/fake_nvml_mig.py), not the whole GPU's
        self._gpm_samples[_address(gpmSample)] = (device.index, self.now_us,
                                                  self.mig_sample(device.index, gpuInstanceId))
        return gpmSample

    def _gpm_sample(self, function: str, device: FakeHandle, gpmSample):
        gpu = self._device(function, device)
        if not gpu.gpm_supported:
            raise pynvml.NVMLError_NotSupported()
        address = _address(gpmSample)
        if address not in self._gpm_samples:
            raise pynvml.NVMLError_InvalidArgument()  # not from nvmlGpmSampleAlloc
        self._gpm_samples[address] = (device.index, self.now_us, dict(self._gpm_sums[device.index]))
        return gpmSample

    def nvmlGpmMetricsGet(self, metricsGet: pynvml.c_nvmlGpmMetricsGet_t):
        """Each asked metric's mean between sample1 and sample2 (metrics[i].value, with
        metrics[i].nvmlReturn); NVMLError_ArgumentVersionMismatch for another version,
        NVMLError_InvalidArgument for samples never taken or of two GPUs."""
        if metricsGet.version != pynvml.NVML_GPM_METRICS_GET_VERSION:
            self._library("nvmlGpmMetricsGet")
            raise pynvml.NVMLError_ArgumentVersionMismatch()
        first = self._gpm_samples.get(_address(metricsGet.sample1))
        second = self._gpm_samples.get(_address(metricsGet.sample2))
        if first is None or second is None or first[0] != second[0] \
                or not 0 < metricsGet.numMetrics <= pynvml.NVML_GPM_METRIC_MAX:
            self._library("nvmlGpmMetricsGet")
            raise pynvml.NVMLError_InvalidArgument()
        gpu = self._device("nvmlGpmMetricsGet", FakeHandle(first[0]))
        if not gpu.gpm_supported:
            raise pynvml.NVMLError_NotSupported()
        dt_s = (second[1] - first[1]) / 1e6
        for i in range(metricsGet.numMetrics):
            metric = metricsGet.metrics[i]
            metric.nvmlReturn = pynvml.NVML_SUCCESS
            if metric.metricId in gpu.gpm_values:
                metric.value = gpu.gpm_values[metric.metricId]
            elif metric.metricId in second[2]:
                delta = second[2][metric.metricId] - first[2][metric.metricId]
                metric.value = delta / dt_s if dt_s > 0 else math.nan
            else:
                metric.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
        return metricsGet

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: FakeHandle) -> int:
        return self._device("nvmlDeviceGetCurrentClocksEventReasons", handle).clocks_event_reasons

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: FakeHandle) -> int:
        return self._device("nvmlDeviceGetCurrentClocksThrottleReasons", handle).clocks_event_reasons

    def nvmlDeviceGetComputeRunningProcesses(self, handle: FakeHandle) -> list:
        """pynvml's friendly objects; usedGpuMemory is None where NVML has no value."""
        gpu = self._device("nvmlDeviceGetComputeRunningProcesses", handle)
        return [pynvml.nvmlFriendlyObject({"pid": pid, "usedGpuMemory": used,
                                           "gpuInstanceId": _NOT_MIG, "computeInstanceId": _NOT_MIG})
                for pid, used in gpu.processes]


def _address(sample) -> int | None:
    """The address an opaque c_nvmlGpmSample_t points to (its name in the fake)."""
    return ctypes.cast(sample, ctypes.c_void_p).value


# Re-export pynvml's real error classes and constants, so `nvml.NVMLError_GpuIsLost` and
# `nvml.NVML_CLOCK_SM` mean the same thing whichever of the two `nvml` is.
for _name in dir(pynvml):
    if _name.startswith(("NVMLError", "NVML_", "nvmlClocksEventReason", "nvmlClocksThrottleReason")) \
            or _name in ("c_nvmlGpmMetricsGet_t", "c_nvmlGpmSample_t", "c_nvmlGpmSupport_t",
                         "c_nvmlFieldValue_t"):
        setattr(FakeNvml, _name, getattr(pynvml, _name))
if hasattr(pynvml, "NVMLLibraryMismatchError"):  # raised by nvidia-ml-py >= 12.535 only
    FakeNvml.NVMLLibraryMismatchError = pynvml.NVMLLibraryMismatchError
del _name


class _FakeNvmlMissing(FakeNvml):
    """A FakeNvml with `missing` functions: it plays an older nvidia-ml-py that lacks them
    altogether.  A subclass, so that the check costs nothing when nothing is missing."""

    def __getattribute__(self, name: str):
        if not name.startswith("_") and name in object.__getattribute__(self, "missing"):
            raise AttributeError(f"module 'pynvml' has no attribute '{name}'")
        return object.__getattribute__(self, name)
