"""GPU collector and GPU model, through the one fake NVML (there is no GPU on this machine)."""

from __future__ import annotations

import ctypes
import subprocess
import sys
import time

import pynvml
import pytest

from gpudisk_top.collect.gpu import RETRY_S, GpuCollector
from gpudisk_top.collect.sample import GpuRaw, GpuSnapshot
from gpudisk_top.model.gpu import gpu_as_json, gpu_views, window_mean
from gpudisk_top.sim.fake_nvml import FakeGpu, FakeNvml

T0_US = 1_700_000_000_000_000  # an epoch time in µs, like the drivers' sample stamps


class Clock:
    """Monotonic seconds that only move when a test says so."""

    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


# ---------------------------------------------------------------------------- the fake
def test_fake_raises_pynvml_real_error_classes():
    for name in ("NVMLError", "NVMLError_GpuIsLost", "NVMLError_NotSupported", "NVMLError_NotFound",
                 "NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded", "NVMLError_NoPermission",
                 "NVMLError_FunctionNotFound", "NVMLError_Uninitialized"):
        assert getattr(FakeNvml, name) is getattr(pynvml, name)
        assert issubclass(getattr(FakeNvml, name), pynvml.NVMLError)
    assert FakeNvml.NVML_CLOCK_SM == pynvml.NVML_CLOCK_SM
    nvml = FakeNvml.with_gpus(2)
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(1)
    nvml.lose_gpu(1)
    with pytest.raises(pynvml.NVMLError_GpuIsLost) as info:
        nvml.nvmlDeviceGetPowerUsage(handle)
    assert type(info.value) is pynvml.NVMLError_GpuIsLost
    assert str(info.value) == "GPU is lost"
    with pytest.raises(pynvml.NVMLError_LibraryNotFound):
        FakeNvml.missing_library().nvmlInit()


def test_fake_returns_pynvml_structures_and_samples_every_sixth_of_a_second():
    nvml = FakeNvml(gpus=[FakeGpu(util_pct=40, mem_util_pct=10, mem_used_bytes=3 * 2**30,
                                  power_mw=300_000, processes=[(7, None)])], start_us=T0_US)
    nvml.nvmlInit()
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    memory = nvml.nvmlDeviceGetMemoryInfo(h)
    assert isinstance(memory, pynvml.c_nvmlMemory_t) and memory.used == 3 * 2**30
    assert isinstance(nvml.nvmlDeviceGetUtilizationRates(h), pynvml.c_nvmlUtilization_t)
    info = nvml.nvmlDeviceGetPciInfo(h)
    assert isinstance(info, pynvml.nvmlPciInfo_t) and info.busId == "00000000:18:00.0"
    with pytest.raises(pynvml.NVMLError_NotFound):  # no sample yet
        nvml.nvmlDeviceGetSamples(h, pynvml.NVML_GPU_UTILIZATION_SAMPLES, 0)
    nvml.advance(1.0)
    value_type, samples = nvml.nvmlDeviceGetSamples(h, pynvml.NVML_GPU_UTILIZATION_SAMPLES, 0)
    assert value_type == pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
    assert all(isinstance(s, pynvml.c_nvmlSample_t) for s in samples)
    assert [s.timeStamp - T0_US for s in samples] == [166667, 333333, 500000, 666667, 833333, 1000000]
    assert {s.sampleValue.uiVal for s in samples} == {40}
    assert nvml.nvmlDeviceGetTotalEnergyConsumption(h) == 300_000  # 300 W for 1 s
    [proc] = nvml.nvmlDeviceGetComputeRunningProcesses(h)
    assert (proc.pid, proc.usedGpuMemory) == (7, None)
    with pytest.raises(AttributeError):
        nvml.set_state(0, utilisation=3)


# ---------------------------------------------------------------------------- collector
def test_eight_gpus_with_processes():
    nvml = FakeNvml.with_gpus(8, start_us=T0_US)
    for i in range(8):
        nvml.set_state(i, util_pct=10 * i, mem_util_pct=i, mem_used_bytes=(i + 1) * 2**30,
                       power_mw=100_000 + i, power_limit_mw=700_000, temp_c=40 + i,
                       sm_clock_mhz=1500 + i, pcie_rx_kb_s=1000 * i, pcie_tx_kb_s=i,
                       processes=[(5000 + i, 512 * 2**20), (6000 + i, None)])
    # a GPU that counts no clock-event duration: the reasons holding now, from the bit mask
    nvml.set_state(3, clocks_event_reasons=pynvml.nvmlClocksEventReasonSwPowerCap
                   | pynvml.nvmlClocksEventReasonHwSlowdown, unsupported={"nvmlDeviceGetFieldValues"})

    def resolve(pid):
        if pid >= 6000:
            return None, None, None, None, False  # another PID namespace
        return pid - 4000, 1, f"train{pid}", f"python train.py --rank {pid - 5000}", True

    collector = GpuCollector(nvml, resolve_pid=resolve)
    first = collector.collect()
    assert collector.wait_pcie(10)  # PCIe throughput is read off the sampling path
    nvml.advance(1.0)
    snap = collector.collect()

    assert snap.status == "ok" and snap.driver_version == "550.54.15"
    assert [g.index for g in snap.gpus] == list(range(8))
    assert len({g.uuid for g in snap.gpus}) == 8 and len({g.pci_bus_id for g in snap.gpus}) == 8
    g5 = snap.gpus[5]
    assert (g5.name, g5.pci_bus_id) == ("NVIDIA H100 80GB HBM3", "00000000:AB:00.0")
    assert (g5.mem_used_bytes, g5.power_mw, g5.temp_c, g5.sm_clock_mhz) == (6 * 2**30, 100_005, 45, 1505)
    assert (g5.pcie_rx_kb_s, g5.pcie_tx_kb_s) == (5000, 5)
    assert [v for _, v in g5.util_samples] == [50.0] * 6
    assert g5.util_now_pct is None  # samples worked: no UtilizationRates call
    assert nvml.call_count("nvmlDeviceGetUtilizationRates") == 8  # only the first, empty read
    mapped, unmapped = g5.processes
    assert (mapped.pid, mapped.local_pid, mapped.ns_pid, mapped.name, mapped.mapped) == (5005, 1005, 1, "train5005", True)
    assert mapped.used_gpu_mem_bytes == 512 * 2**20
    assert (unmapped.pid, unmapped.local_pid, unmapped.used_gpu_mem_bytes, unmapped.mapped) == (6005, None, None, False)
    # static values are read once, not every second
    assert nvml.call_count("nvmlDeviceGetName") == 8 and nvml.call_count("nvmlDeviceGetPciInfo") == 8

    views = gpu_views(snap, first, (T0_US, T0_US + 1_000_000))
    v3 = views[3]
    assert v3.throttle_reasons == ["sw_power_cap", "hw_slowdown"]
    assert (v3.util_pct, v3.util_source, v3.mem_used_mib, v3.power_w) == (30.0, "samples", 4096.0, 100.003)
    assert v3.processes[0].gpu_mem_mib == 512.0 and v3.processes[1].gpu_mem_mib is None
    assert v3.power_avg_w == pytest.approx(100.003)
    doc = gpu_as_json(v3)
    assert doc["processes"][0] == {"pid": 5003, "local_pid": 1003, "ns_pid": 1, "name": "train5003",
                                   "cmdline": "python train.py --rank 3", "gpu_mem_mib": 512.0,
                                   "mapped": True, "mapped_by": "pid", "sm_util_pct": None,
                                   "mem_util_pct": None, "util_age_s": None}
    for key in ("index", "name", "uuid", "pci_bus_id", "lost", "util_pct", "mem_util_pct",
                "mem_used_mib", "mem_total_mib", "power_w", "power_limit_w", "temp_c",
                "sm_clock_mhz", "pcie_rx_kb_s", "pcie_tx_kb_s", "throttle_reasons"):
        assert key in doc


def test_identity_mapping_and_a_failing_resolver():
    nvml = FakeNvml(gpus=[FakeGpu(processes=[(42, 2**20)])])
    [proc] = GpuCollector(nvml).collect().gpus[0].processes
    assert (proc.local_pid, proc.ns_pid, proc.name, proc.mapped) == (42, 42, None, True)

    def exits_mid_lookup(pid):
        raise ProcessLookupError(pid)

    [proc] = GpuCollector(nvml, resolve_pid=exits_mid_lookup).collect().gpus[0].processes
    assert (proc.pid, proc.local_pid, proc.mapped) == (42, None, False)


def test_unsupported_fields_are_none_and_not_retried():
    # (the energy counter comes from field values where it can: an nvidia-ml-py without either)
    nvml = FakeNvml(gpus=[FakeGpu(), FakeGpu()],
                    missing={"nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetFieldValues"})
    nvml.set_state(0, unsupported={"nvmlDeviceGetPowerUsage", "nvmlDeviceGetPcieThroughput",
                                   "nvmlDeviceGetTemperature", "nvmlDeviceGetComputeRunningProcesses"},
                   errors={"nvmlDeviceGetEnforcedPowerLimit": pynvml.NVMLError_NoPermission,
                           "nvmlDeviceGetClockInfo": pynvml.NVMLError_FunctionNotFound})
    collector = GpuCollector(nvml)
    for _ in range(3):
        nvml.advance(1.0)
        snap = collector.collect()
    g0, g1 = snap.gpus
    assert (g0.power_mw, g0.power_limit_mw, g0.temp_c, g0.sm_clock_mhz, g0.pcie_rx_kb_s,
            g0.pcie_tx_kb_s, g0.processes, g0.energy_mj) == (None,) * 8
    assert (g1.power_mw, g1.temp_c, g1.sm_clock_mhz, g1.processes) == (70_000, 32, 1980, [])
    assert g1.energy_mj is None  # the installed "pynvml" lacks the function
    assert g0.mem_used_bytes == 0 and not g0.lost and g0.error is None
    for function in ("nvmlDeviceGetPowerUsage", "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetTemperature",
                     "nvmlDeviceGetClockInfo", "nvmlDeviceGetPcieThroughput",
                     "nvmlDeviceGetComputeRunningProcesses"):
        assert nvml.call_count(function, 0) == 1, function
    assert nvml.call_count("nvmlDeviceGetPowerUsage", 1) == 3
    assert nvml.call_count("nvmlDeviceGetMemoryInfo", 0) == 3


@pytest.mark.parametrize("make", [
    # (GPUs that count no clock-event duration: where one does, the durations are read)
    lambda: FakeNvml(gpus=[FakeGpu(clocks_event_reasons=0x20)],
                     missing={"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetFieldValues"}),
    lambda: FakeNvml(gpus=[FakeGpu(clocks_event_reasons=0x20, unsupported={"nvmlDeviceGetFieldValues"}, errors={
        "nvmlDeviceGetCurrentClocksEventReasons": pynvml.NVMLError_FunctionNotFound})]),
])
def test_clock_reasons_fall_back_to_the_throttle_name(make):
    nvml = make()
    collector = GpuCollector(nvml)
    for _ in range(3):
        snap = collector.collect()
    assert snap.gpus[0].throttle_reasons == 0x20
    assert nvml.call_count("nvmlDeviceGetCurrentClocksEventReasons") <= 1
    assert nvml.call_count("nvmlDeviceGetCurrentClocksThrottleReasons") == 3
    assert gpu_views(snap, None, None)[0].throttle_reasons == ["sw_thermal"]


def test_gpu_lost_mid_run_others_still_read():
    clock = Clock()
    nvml = FakeNvml.with_gpus(4)
    collector = GpuCollector(nvml, clock=clock)
    assert not any(g.lost for g in collector.collect().gpus)
    nvml.lose_gpu(2)
    for i in (0, 1, 3):
        nvml.set_state(i, power_mw=200_000 + i)
    snap = collector.collect()
    lost = snap.gpus[2]
    assert (lost.lost, lost.error) == (True, "GPU is lost")
    assert lost.uuid == nvml.gpus[2].uuid and lost.power_mw is None  # still says which GPU it was
    assert [g.power_mw for g in snap.gpus if not g.lost] == [200_000, 200_001, 200_003]

    calls = sum(n for (_, i), n in nvml.calls.items() if i == 2)
    clock.now_s += 1
    assert collector.collect().gpus[2].lost
    assert sum(n for (_, i), n in nvml.calls.items() if i == 2) == calls  # not hammered each second

    nvml.set_state(2, lost=False)  # the GPU came back after a reset
    clock.now_s += RETRY_S
    back = collector.collect().gpus[2]
    assert (back.lost, back.error, back.power_mw) == (False, None, 70_000)


@pytest.mark.parametrize("error, text", [
    (pynvml.NVMLError_ResetRequired, "GPU is lost (GPU requires restart)"),
    (pynvml.NVMLError_Unknown, "GPU is lost (Unknown Error)"),
])
def test_reset_required_and_unknown_mark_the_gpu_lost(error, text):
    nvml = FakeNvml.with_gpus(2)
    nvml.set_state(0, errors={"nvmlDeviceGetMemoryInfo": error})
    g0, g1 = GpuCollector(nvml).collect().gpus
    assert (g0.lost, g0.error) == (True, text)
    assert not g1.lost and g1.mem_total_bytes == 81559 * 2**20


@pytest.mark.parametrize("make, status", [
    (FakeNvml.missing_library, "unavailable: NVIDIA driver library (libnvidia-ml.so.1) not found"),
    (FakeNvml.driver_not_loaded, "unavailable: NVIDIA driver not loaded"),
    (FakeNvml.no_permission, "unavailable: no permission to use NVML"),
    (lambda: FakeNvml(init_error=pynvml.NVMLError_LibRmVersionMismatch),
     "unavailable: NVML error: RM has detected an NVML/RM version mismatch."),
])
def test_init_failures_become_status_text(make, status):
    collector = GpuCollector(make())
    snap = collector.collect()
    assert snap == GpuSnapshot(status=status)
    collector.close()  # nothing to shut down, and no exception


def test_init_is_retried_at_most_every_30_s():
    clock = Clock()
    nvml = FakeNvml.driver_not_loaded(gpus=[FakeGpu()])
    collector = GpuCollector(nvml, clock=clock)
    assert collector.collect().status == "unavailable: NVIDIA driver not loaded"
    nvml.init_error = None  # the driver finishes loading
    clock.now_s += RETRY_S - 1
    assert collector.collect().status == "unavailable: NVIDIA driver not loaded"
    assert nvml.call_count("nvmlInit") == 1
    clock.now_s += 1
    snap = collector.collect()
    assert snap.status == "ok" and len(snap.gpus) == 1
    collector.collect()
    assert nvml.call_count("nvmlInit") == 2  # once initialised, never again


def test_device_count_failing_later_makes_nvml_unavailable():
    clock = Clock()
    nvml = FakeNvml.with_gpus(2)
    collector = GpuCollector(nvml, clock=clock)
    assert collector.collect().status == "ok"
    nvml.count_error = pynvml.NVMLError_DriverNotLoaded
    assert collector.collect() == GpuSnapshot(status="unavailable: NVIDIA driver not loaded")
    assert nvml.init_count == 0  # shut down, to be initialised again later
    nvml.count_error = None
    clock.now_s += RETRY_S
    assert len(collector.collect().gpus) == 2


def test_close_shuts_nvml_down():
    nvml = FakeNvml.with_gpus(1)
    collector = GpuCollector(nvml)
    collector.collect()
    assert nvml.init_count == 1
    collector.close()
    assert nvml.init_count == 0 and nvml.call_count("nvmlShutdown") == 1
    collector.close()
    assert nvml.call_count("nvmlShutdown") == 1


# ---------------------------------------------------------------------------- utilization
def test_samples_are_averaged_over_exactly_the_window():
    nvml = FakeNvml(gpus=[FakeGpu()], start_us=T0_US)
    start, end = T0_US + 10_000_000, T0_US + 11_000_000
    nvml.push_samples(0, util=[(start - 100_000, 100), (start, 100), (start + 200_000, 30),
                               (start + 500_000, 60), (end, 90), (end + 100_000, 0)],
                      mem_util=[(start + 1, 7), (end + 1, 99)])
    collector = GpuCollector(nvml)
    snap = collector.collect()
    assert len(snap.gpus[0].util_samples) == 6  # first read: the whole buffer
    [view] = gpu_views(snap, None, (start, end))
    assert view.util_pct == 60.0  # (30 + 60 + 90) / 3: the boundary sample at `start` is outside
    assert view.mem_util_pct == 7.0
    assert view.util_source == "samples"

    # the next read asks only for samples newer than the newest seen
    nvml.push_samples(0, util=[(end + 200_000, 20), (end + 300_000, 40)])
    util = collector.collect().gpus[0].util_samples
    assert util == [(end + 200_000, 20.0), (end + 300_000, 40.0)]


def test_window_mean_falls_back_to_all_samples_then_none():
    samples = [(10, 20.0), (20, 40.0)]
    assert window_mean(samples, (100, 200)) == 30.0  # none inside: all returned
    assert window_mean(samples, None) == 30.0
    assert window_mean(samples, (10, 20)) == 40.0
    assert window_mean([], (0, 10)) is None and window_mean(None, None) is None


def test_double_valued_samples_keep_their_fraction():
    nvml = FakeNvml(gpus=[FakeGpu()], start_us=T0_US, sample_value_type=pynvml.NVML_VALUE_TYPE_DOUBLE)
    nvml.push_samples(0, util=[(T0_US + 1, 37.5)], mem_util=[(T0_US + 1, 12.25)])
    raw = GpuCollector(nvml).collect().gpus[0]
    assert (raw.util_samples, raw.mem_util_samples) == ([(T0_US + 1, 37.5)], [(T0_US + 1, 12.25)])


def test_sampling_not_supported_falls_back_to_utilization_rates():
    nvml = FakeNvml(gpus=[FakeGpu(util_pct=83, mem_util_pct=41, unsupported={"nvmlDeviceGetSamples"})])
    collector = GpuCollector(nvml)
    for _ in range(3):
        nvml.advance(1.0)
        snap = collector.collect()
    raw = snap.gpus[0]
    assert (raw.util_samples, raw.mem_util_samples) == (None, None)
    assert (raw.util_now_pct, raw.mem_util_now_pct) == (83.0, 41.0)
    assert nvml.call_count("nvmlDeviceGetSamples") == 2  # once per sampling type, then remembered
    assert nvml.call_count("nvmlDeviceGetUtilizationRates") == 3
    [view] = gpu_views(snap, None, (0, 1))
    assert (view.util_pct, view.mem_util_pct, view.util_source) == (83.0, 41.0, "rates")


def test_idle_gpu_with_no_new_samples_reads_zero_not_na():
    nvml = FakeNvml(gpus=[FakeGpu(util_pct=0, mem_util_pct=0)], idle_samples=False)
    collector = GpuCollector(nvml)
    for _ in range(2):
        nvml.advance(1.0)
        raw = collector.collect().gpus[0]
    assert raw.util_samples == [] and raw.util_now_pct == 0.0  # NotFound: empty, not unsupported
    assert nvml.call_count("nvmlDeviceGetSamples") == 4
    [view] = gpu_views(GpuSnapshot(status="ok", gpus=[raw]), None, None)
    assert (view.util_pct, view.util_source) == (0.0, "rates")


def test_model_units_and_lost_gpu_view():
    cur = GpuRaw(index=0, mem_used_bytes=1536 * 2**20, mem_total_bytes=80 * 2**30, power_mw=123_456,
                 power_limit_mw=700_000, energy_mj=5_250_000, throttle_reasons=0x1 | 0x80 | 0x40)
    prev = GpuRaw(index=0, energy_mj=5_000_000)
    [v] = gpu_views(GpuSnapshot("ok", gpus=[cur]), GpuSnapshot("ok", gpus=[prev]), (0, 500_000))
    assert (v.mem_used_mib, v.mem_total_mib, v.power_w, v.power_limit_w) == (1536.0, 81920.0, 123.456, 700.0)
    assert v.power_avg_w == 500.0  # 250 J over 0.5 s
    assert v.throttle_reasons == ["gpu_idle", "hw_thermal", "hw_power_brake"]
    assert (v.util_pct, v.util_source, v.mem_util_pct) == (None, None, None)
    [lost] = gpu_views(GpuSnapshot("ok", gpus=[GpuRaw(index=1, lost=True, error="GPU is lost")]), None, None)
    assert gpu_as_json(lost)["lost"] is True and lost.processes == [] and lost.throttle_reasons == []


# ---------------------------------------------------------------------------- the real pynvml
def test_real_pynvml_without_a_driver_is_unavailable():
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        driver = False
    else:
        driver = True
    collector = GpuCollector()
    snap = collector.collect()
    collector.close()
    if driver:  # a GPU machine: whatever it says, it says it as a status
        assert snap.status == "ok" or snap.status.startswith("unavailable: ")
    else:
        assert snap == GpuSnapshot(status="unavailable: NVIDIA driver library (libnvidia-ml.so.1) not found")


def test_pynvml_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    assert GpuCollector().collect().status == "unavailable: nvidia-ml-py (pynvml) is not installed"


def test_gpu_modules_never_import_textual():
    code = ("import sys, gpudisk_top.collect.gpu, gpudisk_top.model.gpu, gpudisk_top.sim.fake_nvml; "
            "sys.exit('textual' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_slow_driver_calls_are_read_side_by_side():
    """A driver that takes 40 ms a call (a loaded one, under its lock): 8 GPUs one after
    the other would keep the sampler 320 ms in NVML; after one slow round the GPUs are
    read in parallel."""
    import time as _time

    from gpudisk_top.collect.gpu import GpuCollector
    from gpudisk_top.sim.fake_nvml import FakeNvml

    class SlowPower(FakeNvml):
        def nvmlDeviceGetPowerUsage(self, handle):
            _time.sleep(0.04)
            return super().nvmlDeviceGetPowerUsage(handle)

    collector = GpuCollector(nvml=SlowPower.with_gpus(8))
    t0 = _time.monotonic()
    first = collector.collect()
    serial_s = _time.monotonic() - t0
    t0 = _time.monotonic()
    second = collector.collect()
    parallel_s = _time.monotonic() - t0
    collector.close()
    assert serial_s >= 0.3
    assert parallel_s < serial_s / 3
    assert [g.index for g in second.gpus] == list(range(8))
    assert [g.uuid for g in second.gpus] == [g.uuid for g in first.gpus]


def test_the_fake_hangs_a_call_after_so_many_calls_until_unhang():
    """The fake's hang by call count (tests/standin.py): a hang that starts after so many
    samples, however slowly a loaded machine takes them."""
    import threading

    nvml = FakeNvml.with_gpus(2)
    nvml.nvmlInit()
    gpu0, gpu1 = (nvml.nvmlDeviceGetHandleByIndex(i) for i in range(2))
    nvml.hang("nvmlDeviceGetPowerUsage", gpu=0, after_calls=2)
    for _ in range(2):
        nvml.nvmlDeviceGetPowerUsage(gpu0)   # the two calls that still answer
    for _ in range(5):
        nvml.nvmlDeviceGetPowerUsage(gpu1)   # counted on GPU 0 only, and never hung
    done = threading.Event()
    blocked = threading.Thread(target=lambda: (nvml.nvmlDeviceGetPowerUsage(gpu0), done.set()),
                               daemon=True)
    blocked.start()
    assert not done.wait(0.3)                # the third call on GPU 0 blocks
    nvml.unhang()
    assert done.wait(5)
    nvml.nvmlDeviceGetPowerUsage(gpu0)       # and none hangs again


def test_process_list_asked_every_refresh_or_when_memory_or_utilization_moves():
    """nvmlDeviceGetComputeRunningProcesses (slow on a real driver, under its lock) is
    asked every PROCESSES_REFRESH_S, and at once when the GPU's used memory or utilization
    moved: a process that starts or ends takes or frees its memory."""
    from gpudisk_top.collect import gpu as gpu_mod

    now = [100.0]
    nvml = FakeNvml.with_gpus(1)
    nvml.set_state(0, mem_used_bytes=10 * 2**30, processes=[(11, 2**30)])
    asked = []
    real = nvml.nvmlDeviceGetComputeRunningProcesses

    def counted(handle):
        asked.append(now[0])
        return real(handle)
    nvml.nvmlDeviceGetComputeRunningProcesses = counted
    collector = GpuCollector(nvml, clock=lambda: now[0])

    def pids():
        return [p.pid for p in collector.collect().gpus[0].processes]
    assert pids() == [11] and len(asked) == 1
    nvml.set_state(0, processes=[(11, 2**30), (12, 2**30)])   # memory as it was
    now[0] += 1.0
    assert pids() == [11] and len(asked) == 1                 # the list read last stands
    now[0] += gpu_mod.PROCESSES_REFRESH_S
    assert pids() == [11, 12] and len(asked) == 2             # its time came
    nvml.set_state(0, processes=[(12, 2**30)],
                   mem_used_bytes=10 * 2**30 - gpu_mod.PROCESSES_MEM_MOVE_BYTES)
    now[0] += 1.0
    assert pids() == [12] and len(asked) == 3                 # memory freed: at once
    nvml.set_state(0, processes=[(12, 2**30), (13, 2**30)], util_pct=90.0)
    wall = time.time()
    nvml.advance_to(wall)
    now[0] += 1.0
    pids()
    asked_before = len(asked)
    nvml.advance_to(wall + 1.0)                               # utilization as it was
    now[0] += 1.0
    assert pids() == [12, 13] and len(asked) == asked_before
    nvml.set_state(0, processes=[(12, 2**30)], util_pct=90.0 - gpu_mod.PROCESSES_UTIL_MOVE_PCT)
    nvml.advance_to(wall + 2.0)
    now[0] += 1.0
    assert pids() == [12] and len(asked) == asked_before + 1  # utilization fell: at once
