"""GPU collector: raw NVML readings through nvidia-ml-py (the `pynvml` module).

One `collect()` returns one GpuSnapshot.  It never raises for anything NVML does: a
missing library or driver becomes `status = "unavailable: <reason>"`, a lost GPU becomes
`lost=True`, and a field the GPU cannot give becomes None.  It runs every second next to
expensive jobs, so it keeps NVML calls few: static values are read once, and a call the
GPU does not support is remembered and never made again.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gpudisk_top.collect.gpu_fields import GpuFields, struct_field, value_member
from gpudisk_top.collect.gpu_gpm import GpmState
from gpudisk_top.collect.gpu_mig import MigState
from gpudisk_top.collect.gpu_pcie import PcieRefresher
from gpudisk_top.collect.gpu_procutil import ProcessUtil
from gpudisk_top.collect.sample import MAPPED_BY_PID, GpuProcessRaw, GpuRaw, GpuSnapshot

# A failed nvmlInit (no driver yet, module being loaded) is retried this often, not every
# second: loading the library is a dlopen plus a driver round trip.
RETRY_S = 30.0
CLOSE_WAIT_S = 0.5   # close() waits this long at most for a PCIe read in flight
SLOW_READ_S = 0.05   # reading every GPU taking longer than this: read them in parallel
# The compute process list (nvmlDeviceGetComputeRunningProcesses: a millisecond or more
# on a real driver, under its lock) is asked every PROCESSES_REFRESH_S, and at once when
# the GPU's used memory moved by PROCESSES_MEM_MOVE_BYTES or its utilization by
# PROCESSES_UTIL_MOVE_PCT points since: a process that starts or ends on a GPU takes or
# frees its memory (a CUDA context alone is some 300 MiB).  Between, the list read last
# stands, its processes resolved again every sample as before.
PROCESSES_REFRESH_S = 5.0
PROCESSES_MEM_MOVE_BYTES = 64 * 2**20
PROCESSES_UTIL_MOVE_PCT = 20.0

# resolve_pid(host_pid) -> (local_pid, ns_pid, name, cmdline, mapped)
Resolved = tuple[int | None, int | None, str | None, str | None, bool]

_NONE_NEW = object()  # nvmlDeviceGetSamples said NotFound: no sample newer than asked


def _identity(pid: int) -> Resolved:
    return pid, pid, None, None, True


def _text(value) -> str | None:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return value


class _Lost(Exception):
    """The GPU stopped answering (GpuIsLost, ResetRequired, Unknown); ends its read."""


@dataclass
class _Gpu:
    """What we keep about one GPU between calls."""

    index: int
    handle: object = None
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    minor_number: int | None = None
    unsupported: set[str] = field(default_factory=set)  # call keys never to make again
    last_seen_us: dict[int, int] = field(default_factory=dict)  # sampling type -> newest timestamp
    error: str | None = None       # why the GPU could not be read last time
    lost: bool = False
    retry_at_s: float = 0.0        # while error is set, the handle is not retried before this
    in_call: str | None = None     # the NVML function being called now (a hung driver's)
    # the process list as last read, and when, at what used memory and utilization
    procs: list | None = None
    procs_at_s: float = 0.0
    procs_mem_bytes: int | None = None
    procs_util_pct: float | None = None
    gpm: GpmState = field(default_factory=GpmState)
    mig: MigState = field(default_factory=MigState)
    fields: GpuFields | None = None  # field values asked (made with the nvml module)
    proc_util: ProcessUtil = field(default_factory=ProcessUtil)


class _DaemonPool:
    """Reads GPUs side by side on daemon threads.  Not concurrent.futures: its workers are
    joined at interpreter exit, so one NVML call that never returns would keep the
    process from ever exiting."""

    def __init__(self, workers: int) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        for n in range(workers):
            threading.Thread(target=self._work, name=f"gpudisk-top-nvml-{n}", daemon=True).start()

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, item, out, i, done = job
            try:
                out[i] = fn(item)
            except BaseException as err:  # noqa: BLE001 - handed back to map()'s caller
                out[i] = err
            done.release()

    def map(self, fn, items: list) -> list:
        out: list = [None] * len(items)
        done = threading.Semaphore(0)
        for i, item in enumerate(items):
            self._jobs.put((fn, item, out, i, done))
        for _ in items:
            done.acquire()
        for result in out:
            if isinstance(result, BaseException):
                raise result
        return out

    def shutdown(self, workers: int) -> None:
        for _ in range(workers):
            self._jobs.put(None)


class GpuCollector:
    """Reads every GPU through NVML.  `nvml` is pynvml or a module-like object with its API
    (FakeNvml); its error classes are always reached through it.  `resolve_pid` maps a
    host PID into our PID namespace; `clock` is monotonic seconds, for the retry delays.
    `pcie_background` False reads PCIe throughput inline, every sample: for a simulated
    NVML on a simulated clock, whose calls cost nothing and where a background read would
    land at whatever simulated time the machine's load decides."""

    def __init__(self, nvml=None, resolve_pid: Callable[[int], Resolved] | None = None,
                 *, clock: Callable[[], float] = time.monotonic, pcie_background: bool = True) -> None:
        self._nvml = nvml
        self._resolve_pid = resolve_pid or _identity
        self._clock = clock
        self._initialised = False
        self._retry_init_at_s: float | None = None
        self._status = "unavailable: not sampled"
        self._driver_version: str | None = None
        self._gpus: dict[int, _Gpu] = {}
        self._lost_errors: tuple[type, ...] = ()
        self._unsupported_errors: tuple[type, ...] = ()
        self._pool: _DaemonPool | None = None
        self._pool_size = 0
        self._global_call: str | None = None   # nvmlInit / nvmlDeviceGetCount in progress
        self._pcie: PcieRefresher | None = None
        self._pcie_background = pcie_background
        self._members: dict[int, str] = {}   # NVML value type -> its c_nvmlValue_t member

    # ------------------------------------------------------------------ public
    def collect(self) -> GpuSnapshot:
        """All GPUs now.  Raises nothing for NVML failures (see the module docstring)."""
        if not self._ensure_init():
            return GpuSnapshot(status=self._status)
        nvml = self._nvml
        self._global_call = "nvmlDeviceGetCount"
        try:
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as err:
            self._shutdown()
            self._retry_init_at_s = self._clock() + RETRY_S
            self._status = "unavailable: " + self._init_reason(err)
            return GpuSnapshot(status=self._status)
        finally:
            self._global_call = None
        slots = [self._gpus.setdefault(i, _Gpu(i)) for i in range(count)]
        started = time.monotonic()
        if self._pool is not None:
            gpus = list(self._pool.map(self._read, slots))
        else:
            gpus = [self._read(gpu) for gpu in slots]
        # A driver slow to answer (a loaded or wedged one: every call holds its lock) would
        # keep the sampler count times as long in NVML.  Once reads are seen to take that
        # long, read the GPUs side by side (NVML is thread-safe and ctypes calls release
        # the GIL); while they are quick, threads would only cost CPU.
        if self._pool is None and count > 1 and time.monotonic() - started > SLOW_READ_S:
            self._pool_size = min(count, 16)
            self._pool = _DaemonPool(self._pool_size)
        return GpuSnapshot(status="ok", driver_version=self._driver_version, gpus=gpus)

    def stuck_call(self) -> str | None:
        """The NVML call in progress now, as 'nvmlDeviceGetPowerUsage on GPU 3' (for a
        call that does not return), or None.  Safe to call from another thread."""
        if self._global_call is not None:
            return self._global_call
        for gpu in list(self._gpus.values()):
            call = gpu.in_call
            if call is not None:
                return f"{call} on GPU {gpu.index}"
        return None

    def close(self) -> None:
        """nvmlShutdown, if initialised.  Raises nothing."""
        if self._pool is not None:
            self._pool.shutdown(self._pool_size)
            self._pool = None
        if self._pcie is not None:
            # a PCIe read in flight (20 ms) lands before nvmlShutdown pulls the library from
            # under it; one that hangs is not waited for longer
            self._pcie.wait_idle(CLOSE_WAIT_S)
            self._pcie.close()
        self._shutdown()

    def wait_pcie(self, timeout_s: float) -> bool:
        """Wait until no PCIe throughput read is in flight (collect/gpu_pcie.py): for tests
        and benches that need the values a sample asked for.  False on timeout."""
        return self._pcie is None or self._pcie.wait_idle(timeout_s)

    # ------------------------------------------------------------------ library
    def _ensure_init(self) -> bool:
        if self._initialised:
            return True
        now = self._clock()
        if self._retry_init_at_s is not None and now < self._retry_init_at_s:
            return False
        self._retry_init_at_s = now + RETRY_S
        if self._nvml is None:
            try:
                import pynvml
            except ImportError:
                self._status = "unavailable: nvidia-ml-py (pynvml) is not installed"
                return False
            self._nvml = pynvml
        nvml = self._nvml
        self._lost_errors = _classes(nvml, "NVMLError_GpuIsLost", "NVMLError_ResetRequired",
                                     "NVMLError_Unknown")
        # NVMLLibraryMismatchError: pynvml's versioned call (e.g. *_v3) is missing from an
        # older driver, which means "this driver cannot give it".
        self._unsupported_errors = _classes(nvml, "NVMLError_NotSupported", "NVMLError_FunctionNotFound",
                                            "NVMLError_NoPermission", "NVMLLibraryMismatchError")
        self._global_call = "nvmlInit"
        try:
            nvml.nvmlInit()
        except Exception as err:  # noqa: BLE001 - a foreign library's load: any failure is "unavailable"
            self._status = "unavailable: " + self._init_reason(err)
            return False
        finally:
            self._global_call = None
        self._initialised = True
        self._retry_init_at_s = None
        if self._pcie is None and self._pcie_background:
            self._pcie = PcieRefresher(nvml, self._clock, self._unsupported_errors)
        self._status = "ok"
        self._global_call = "nvmlSystemGetDriverVersion"
        try:
            self._driver_version = _text(nvml.nvmlSystemGetDriverVersion())
        except (nvml.NVMLError, AttributeError):
            self._driver_version = None
        finally:
            self._global_call = None
        return True

    def _init_reason(self, err: Exception) -> str:
        nvml = self._nvml
        if isinstance(err, nvml.NVMLError_LibraryNotFound):
            return "NVIDIA driver library (libnvidia-ml.so.1) not found"
        if isinstance(err, nvml.NVMLError_DriverNotLoaded):
            return "NVIDIA driver not loaded"
        if isinstance(err, nvml.NVMLError_NoPermission):
            return "no permission to use NVML"
        return f"NVML error: {_describe(err)}"

    def _shutdown(self) -> None:
        if self._initialised:
            for gpu in self._gpus.values():
                gpu.gpm.free(self._nvml)
                gpu.mig.free(self._nvml)
            if self._pcie is not None:
                self._pcie.forget()
            try:
                self._nvml.nvmlShutdown()
            except self._nvml.NVMLError:
                pass  # the library is going away anyway
        self._initialised = False
        self._gpus.clear()  # handles die with the library

    # ------------------------------------------------------------------ one GPU
    def _read(self, gpu: _Gpu) -> GpuRaw:
        nvml = self._nvml
        if gpu.error is not None and self._clock() < gpu.retry_at_s:
            return self._failed(gpu)
        try:
            if gpu.handle is None:
                gpu.handle = self._handle(gpu)
            raw = GpuRaw(index=gpu.index)
            self._read_static(gpu, raw)
            self._read_utilization(gpu, raw)
            self._read_gpm(gpu, raw)
            self._read_dynamic(gpu, raw)
        except _Lost as lost:
            gpu.handle, gpu.lost, gpu.error = None, True, str(lost)
            gpu.procs = None
            gpu.gpm.free(nvml)  # a GPU back from a reset starts its GPM pairs again
            gpu.mig.free(nvml)
            gpu.gpm, gpu.mig, gpu.proc_util = GpmState(), MigState(), ProcessUtil()
        except nvml.NVMLError as err:  # only from the handle: the GPU cannot be opened
            gpu.handle, gpu.lost, gpu.error = None, False, f"cannot open GPU: {_describe(err)}"
        else:
            gpu.error, gpu.lost = None, False
            return raw
        gpu.retry_at_s = self._clock() + RETRY_S
        return self._failed(gpu)

    def _failed(self, gpu: _Gpu) -> GpuRaw:
        return GpuRaw(index=gpu.index, name=gpu.name, uuid=gpu.uuid, pci_bus_id=gpu.pci_bus_id,
                      lost=gpu.lost, error=gpu.error)

    def _handle(self, gpu: _Gpu):
        """Raises _Lost, or NVMLError when the GPU cannot be opened (e.g. no permission)."""
        gpu.in_call = "nvmlDeviceGetHandleByIndex"
        try:
            return self._nvml.nvmlDeviceGetHandleByIndex(gpu.index)
        except self._lost_errors as err:
            raise _Lost(self._lost_reason(err)) from err
        finally:
            gpu.in_call = None

    def _read_static(self, gpu: _Gpu, raw: GpuRaw) -> None:
        # Read once; a transient failure (None, not unsupported) is tried again next time.
        if gpu.name is None:
            gpu.name = _text(self._call(gpu, "nvmlDeviceGetName"))
        if gpu.uuid is None:
            gpu.uuid = _text(self._call(gpu, "nvmlDeviceGetUUID"))
        if gpu.pci_bus_id is None:
            info = self._call(gpu, "nvmlDeviceGetPciInfo")
            gpu.pci_bus_id = _text(info.busId) if info is not None else None
        if gpu.minor_number is None:
            gpu.minor_number = self._call(gpu, "nvmlDeviceGetMinorNumber")
        raw.name, raw.uuid, raw.pci_bus_id = gpu.name, gpu.uuid, gpu.pci_bus_id
        raw.minor_number = gpu.minor_number

    def _read_utilization(self, gpu: _Gpu, raw: GpuRaw) -> None:
        nvml = self._nvml
        raw.util_samples = self._samples(gpu, nvml.NVML_GPU_UTILIZATION_SAMPLES)
        raw.mem_util_samples = self._samples(gpu, nvml.NVML_MEMORY_UTILIZATION_SAMPLES)
        # UtilizationRates only when samples cannot tell: sampling unsupported, or an idle GPU
        # whose sample buffer ran dry (drivers stop sampling then; without this an idle GPU
        # would read n/a instead of 0 %).
        if raw.util_samples and raw.mem_util_samples:
            return
        rates = self._call(gpu, "nvmlDeviceGetUtilizationRates")
        if rates is not None:
            if not raw.util_samples:
                raw.util_now_pct = float(rates.gpu)
            if not raw.mem_util_samples:
                raw.mem_util_now_pct = float(rates.memory)

    def _samples(self, gpu: _Gpu, sampling_type: int) -> list[tuple[int, float]] | None:
        """New (timestamp_us, value) samples since the last read; [] when there are none,
        None when the GPU does not sample or the call failed."""
        last_seen = gpu.last_seen_us.get(sampling_type, 0)
        result = self._call(gpu, "nvmlDeviceGetSamples", sampling_type, last_seen,
                            key=f"nvmlDeviceGetSamples:{sampling_type}", not_found=_NONE_NEW)
        if result is None:
            return None
        if result is _NONE_NEW:
            return []
        value_type, samples = result
        member = self._value_member(value_type)
        if not samples:
            return []
        # read through the structure's own field descriptors (collect/gpu_fields.py
        # struct_field: pynvml's __getattribute__ made this loop the sampler's costliest)
        cls = type(samples[0])
        stamp_of, value_of = struct_field(cls, "timeStamp"), struct_field(cls, "sampleValue")
        # Timestamp 0 marks an unused slot of the driver's ring buffer; the `> last_seen`
        # test also drops a sample a driver returns twice.
        pairs = [(ts, float(getattr(value_of(s), member)))
                 for s in samples if (ts := int(stamp_of(s))) > last_seen]
        if pairs:
            gpu.last_seen_us[sampling_type] = max(ts for ts, _ in pairs)
        return pairs

    def _value_member(self, value_type: int) -> str:
        member = self._members.get(value_type)
        if member is None:
            # utilization samples are unsigned int on every driver we know
            member = self._members[value_type] = value_member(self._nvml, value_type) or "uiVal"
        return member

    def _read_gpm(self, gpu: _Gpu, raw: GpuRaw) -> None:
        """GPM's figures for the interval (collect/gpu_gpm.py); PCIe traffic from them when
        the GPU gives it there.  Raises _Lost when the GPU stops answering."""
        gpu.in_call = "nvmlGpm*"
        try:
            # a GPU in MIG mode: per GPU instance (collect/gpu_mig.py); else the whole GPU
            mig = gpu.mig.read(self._nvml, gpu.handle, self._clock(), gpu.gpm, self._lost_errors,
                               self._unsupported_errors)
            if mig is not None:
                raw.gpm_mig, reading = mig.instances, mig.gpm
            else:
                reading = gpu.gpm.read(self._nvml, gpu.handle, self._clock(), self._lost_errors,
                                       self._unsupported_errors)
        except self._lost_errors as err:
            raise _Lost(self._lost_reason(err)) from err
        finally:
            gpu.in_call = None
        if reading is None:
            return
        raw.gpm_sm_active_pct, raw.gpm_sm_occupancy_pct = reading.sm_active_pct, reading.sm_occupancy_pct
        raw.gpm_tensor_active_pct, raw.gpm_dram_bw_pct = reading.tensor_active_pct, reading.dram_bw_pct
        raw.gpm_note = reading.note
        if reading.pcie_rx_kb_s is not None and reading.pcie_tx_kb_s is not None:
            raw.pcie_rx_kb_s, raw.pcie_tx_kb_s, raw.pcie_age_s = reading.pcie_rx_kb_s, reading.pcie_tx_kb_s, 0.0

    def _read_dynamic(self, gpu: _Gpu, raw: GpuRaw) -> None:
        nvml = self._nvml
        memory = self._call(gpu, "nvmlDeviceGetMemoryInfo")
        if memory is not None:
            raw.mem_used_bytes, raw.mem_total_bytes = int(memory.used), int(memory.total)
        raw.power_mw = self._call(gpu, "nvmlDeviceGetPowerUsage")
        raw.power_limit_mw = self._call(gpu, "nvmlDeviceGetEnforcedPowerLimit")
        raw.temp_c = self._call(gpu, "nvmlDeviceGetTemperature", nvml.NVML_TEMPERATURE_GPU)
        raw.sm_clock_mhz = self._call(gpu, "nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_SM)
        if raw.pcie_age_s is not None:
            pass  # GPM gave it this interval
        elif self._pcie is not None:
            raw.pcie_rx_kb_s, raw.pcie_tx_kb_s, raw.pcie_age_s = self._pcie.latest(gpu.index, gpu.handle)
        elif not self._pcie_background:
            raw.pcie_rx_kb_s = self._call(gpu, "nvmlDeviceGetPcieThroughput", nvml.NVML_PCIE_UTIL_RX_BYTES)
            raw.pcie_tx_kb_s = self._call(gpu, "nvmlDeviceGetPcieThroughput", nvml.NVML_PCIE_UTIL_TX_BYTES)
        self._read_fields(gpu, raw)
        procs = self._processes(gpu, raw)
        if procs is not None:
            raw.processes = [self._process(p, gpu.proc_util) for p in procs]

    def _read_fields(self, gpu: _Gpu, raw: GpuRaw) -> None:
        """The field values (collect/gpu_fields.py): the clock-event durations where the
        GPU counts any, else the bit mask of the reasons holding now; the energy counter,
        else nvmlDeviceGetTotalEnergyConsumption.  Raises _Lost."""
        if gpu.fields is None:
            gpu.fields = GpuFields(self._nvml)
        fields = gpu.fields
        if fields.usable:
            values = self._call(gpu, "nvmlDeviceGetFieldValues", fields.ids)
            if "nvmlDeviceGetFieldValues" in gpu.unsupported:
                fields.off()
            elif values is not None:
                fields.fill(raw, self._nvml, values)
        # a field NotSupported (or no field values at all): the functions, as before; a
        # transient failure of a field still asked is n/a this interval
        if not fields.energy:
            raw.energy_mj = self._call(gpu, "nvmlDeviceGetTotalEnergyConsumption")
        if fields.durations:
            return
        # "Throttle" was renamed "event" in driver 535; an older pynvml or driver has only
        # the old name.  Once the new one is known unsupported it is not asked again.
        raw.throttle_reasons = self._call(gpu, "nvmlDeviceGetCurrentClocksEventReasons")
        if "nvmlDeviceGetCurrentClocksEventReasons" in gpu.unsupported:
            raw.throttle_reasons = self._call(gpu, "nvmlDeviceGetCurrentClocksThrottleReasons")

    def _processes(self, gpu: _Gpu, raw: GpuRaw) -> list | None:
        """NVML's process list: read again when PROCESSES_REFRESH_S went by or the GPU's
        memory or utilization moved (see PROCESSES_REFRESH_S), else the last one."""
        util = (raw.util_samples[-1][1] if raw.util_samples
                else raw.util_now_pct)
        now = self._clock()
        if gpu.procs is not None and now - gpu.procs_at_s < PROCESSES_REFRESH_S \
                and not _moved(raw.mem_used_bytes, gpu.procs_mem_bytes, PROCESSES_MEM_MOVE_BYTES) \
                and not _moved(util, gpu.procs_util_pct, PROCESSES_UTIL_MOVE_PCT):
            return gpu.procs
        gpu.procs = self._call(gpu, "nvmlDeviceGetComputeRunningProcesses")
        gpu.procs_at_s, gpu.procs_mem_bytes, gpu.procs_util_pct = now, raw.mem_used_bytes, util
        if gpu.procs is not None and gpu.proc_util.supported:
            # per-process use at the list's cadence (collect/gpu_procutil.py)
            gpu.proc_util.refresh(lambda fn, *args, not_found: self._call(gpu, fn, *args, not_found=not_found),
                                  gpu.unsupported, {int(p.pid) for p in gpu.procs})
        return gpu.procs

    def _process(self, proc, util: ProcessUtil) -> GpuProcessRaw:
        pid = int(proc.pid)
        try:
            local_pid, ns_pid, name, cmdline, mapped = self._resolve_pid(pid)
        except Exception:  # noqa: BLE001 - a process may exit mid-lookup; it is then just unmapped
            local_pid, ns_pid, name, cmdline, mapped = None, None, None, None, False
        used = getattr(proc, "usedGpuMemory", None)
        sm, mem, at_us = util.of(pid)
        return GpuProcessRaw(pid=pid, used_gpu_mem_bytes=None if used is None else int(used),
                             local_pid=local_pid, ns_pid=ns_pid, name=name, cmdline=cmdline,
                             mapped=mapped, mapped_by=MAPPED_BY_PID if mapped else None,
                             sm_util_pct=sm, mem_util_pct=mem, util_at_us=at_us)

    # ------------------------------------------------------------------ one call
    def _call(self, gpu: _Gpu, function: str, *args, key: str | None = None, not_found=None):
        """nvml.<function>(handle, *args), or None when the GPU cannot give it.  Unsupported
        calls are remembered under `key` (default: the function name).  NVMLError_NotFound
        returns `not_found`.  Raises _Lost when the GPU stops answering."""
        nvml = self._nvml
        key = key or function
        if key in gpu.unsupported:
            return None
        fn = getattr(nvml, function, None)
        if fn is None:  # this nvidia-ml-py predates the function
            gpu.unsupported.add(key)
            return None
        gpu.in_call = function
        try:
            return fn(gpu.handle, *args)
        except self._lost_errors as err:
            raise _Lost(self._lost_reason(err)) from err
        except self._unsupported_errors:
            gpu.unsupported.add(key)
            return None
        except nvml.NVMLError_NotFound:
            return not_found
        except nvml.NVMLError:
            return None  # transient (timeout, busy): try again next second
        finally:
            gpu.in_call = None

    def _lost_reason(self, err: Exception) -> str:
        nvml = self._nvml
        if isinstance(err, nvml.NVMLError_GpuIsLost):
            return "GPU is lost"
        return f"GPU is lost ({_describe(err)})"


def _moved(now, then, by) -> bool:
    """now and then differ by `by` or more, or only one of them is known."""
    if now is None or then is None:
        return (now is None) != (then is None)
    return abs(now - then) >= by


def _classes(nvml, *names: str) -> tuple[type, ...]:
    # An older nvidia-ml-py may lack one of these classes; it then cannot raise it either.
    return tuple(getattr(nvml, name) for name in names if isinstance(getattr(nvml, name, None), type))


def _describe(err: Exception) -> str:
    # pynvml's __str__ may itself call into the library for an unknown code.
    try:
        return str(err) or type(err).__name__
    except Exception:  # noqa: BLE001
        return type(err).__name__
