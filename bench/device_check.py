#!/usr/bin/env python3
"""What a real GPU says of the sampler's NVML calls and of its busy figure, in one JSON
file, in at most about 90 s (issue 40; ../shared/device/gpu_check.sh runs it when a GPU
is lent):

- `calls`: the median and max time of each NVML call the sampler makes (--calls of each,
  1,000 by default; nvmlDeviceGetPcieThroughput, 20 ms in the driver and asked off the
  sampling path, 20 times), and `over_2ms`: the sampling path's calls whose median is
  above 2 ms (the issue's bound: none);
- `gpu_read_ms`: the collector's whole GPU read for every GPU (median of 30, 110 ms apart);
- `gpm`: per GPU whether nvmlGpmQueryDeviceSupport says yes, and whether GPM works for
  an unprivileged user (a child as uid 65534 when run as root);
- `workloads`: idle, a one-thread spinning kernel (torch.cuda._sleep), a large half
  matrix multiply: per phase the median of utilization.gpu, GPM SM activity, the busy
  figure's source and power, each throttle reason's share of the interval (and whether
  it came from clock-event durations or the bit mask) and NVML's per-process SM
  utilization of the busiest process, as the collector reads them once a second.

`--fake` runs every step on the stand-in NVML instead (its GPUs told to behave as an
H100's would: 20 ms PCIe calls, SM activity 1% under the one-thread kernel), so that the
script is tested where no GPU is.

usage: python bench/device_check.py OUTDIR [--fake] [--calls N] [--phase-s S]
Exit status 0 when the JSON was written (whatever it says), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from gpudisk_top.collect.gpu import GpuCollector  # noqa: E402
from gpudisk_top.collect.gpu_fields import GpuFields  # noqa: E402
from gpudisk_top.model.gpu import gpu_views  # noqa: E402

LIMIT_MS = 2.0
PCIE_CALLS = 20
# What each workload sets on the stand-in (--fake): H100 figures, as the issue expects them.
# (the workload a process on it; the matmul at the power cap a third of the time)
_PROC = dict(processes=[(4242, 2**30)])
FAKE_PHASES = {"idle": dict(util_pct=0, sm_active_pct=None, power_mw=70_000),
               "one-thread": dict(util_pct=100, sm_active_pct=1.0, power_mw=120_000, **_PROC,
                                  process_util={4242: (100, 0)}),
               "matmul": dict(util_pct=100, sm_active_pct=97.0, power_mw=650_000, **_PROC,
                              process_util={4242: (100, 60)}, throttle_pct={74: 33.0})}
# The child that loads the GPU: one line "phase NAME" as each phase starts.
WORKLOAD = r"""
import sys, time, torch
phase_s = float(sys.argv[1])
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
print("phase one-thread", flush=True)
end = time.monotonic() + phase_s
while time.monotonic() < end:
    torch.cuda._sleep(10_000_000)   # a kernel of one thread, spinning
    torch.cuda.synchronize()
a = torch.randn(8192, 8192, device="cuda", dtype=torch.half); b = torch.randn_like(a)
print("phase matmul", flush=True)
end = time.monotonic() + phase_s
while time.monotonic() < end:
    for _ in range(20):
        a @ b
    torch.cuda.synchronize()
"""


def stand_in():
    from gpudisk_top.sim.fake_nvml import FakeGpu, FakeNvml

    return FakeNvml(gpus=[FakeGpu(gpm_supported=True), FakeGpu(gpm_supported=True)],
                    pcie_delay_s=0.02)


def nvml_module(fake: bool):
    if fake:
        return stand_in()
    import pynvml

    return pynvml


def timed(fn, n: int) -> dict:
    times_us, error = [], None
    for _ in range(n):
        t0 = time.perf_counter()
        try:
            fn()
        except Exception as err:  # noqa: BLE001 - recorded: what the driver says is the finding
            error = f"{type(err).__name__}: {err}"
        times_us.append((time.perf_counter() - t0) * 1e6)
    return {"median_us": round(statistics.median(times_us), 1), "max_us": round(max(times_us), 1),
            "calls": n, "error": error}


def call_times(nvml, n: int) -> dict:
    """Each NVML call the sampler makes, on GPU 0."""
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    calls = {
        "nvmlDeviceGetSamples(GPU)": lambda: _samples(nvml, h, nvml.NVML_GPU_UTILIZATION_SAMPLES),
        "nvmlDeviceGetSamples(MEMORY)": lambda: _samples(nvml, h, nvml.NVML_MEMORY_UTILIZATION_SAMPLES),
        "nvmlDeviceGetUtilizationRates": lambda: nvml.nvmlDeviceGetUtilizationRates(h),
        "nvmlDeviceGetMemoryInfo": lambda: nvml.nvmlDeviceGetMemoryInfo(h),
        "nvmlDeviceGetPowerUsage": lambda: nvml.nvmlDeviceGetPowerUsage(h),
        "nvmlDeviceGetEnforcedPowerLimit": lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(h),
        "nvmlDeviceGetTotalEnergyConsumption": lambda: nvml.nvmlDeviceGetTotalEnergyConsumption(h),
        "nvmlDeviceGetTemperature": lambda: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU),
        "nvmlDeviceGetClockInfo": lambda: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM),
        "nvmlDeviceGetCurrentClocksEventReasons": lambda: nvml.nvmlDeviceGetCurrentClocksEventReasons(h),
        "nvmlDeviceGetComputeRunningProcesses": lambda: nvml.nvmlDeviceGetComputeRunningProcesses(h),
        # the clock-event durations and the energy counter, in one call (collect/gpu_fields.py)
        "nvmlDeviceGetFieldValues": lambda: nvml.nvmlDeviceGetFieldValues(h, GpuFields(nvml).ids),
        # per-process use, with the process list (collect/gpu_procutil.py)
        "nvmlDeviceGetProcessesUtilizationInfo": lambda: _not_found(
            nvml, lambda: nvml.nvmlDeviceGetProcessesUtilizationInfo(h, 0)),
        "nvmlDeviceGetProcessUtilization": lambda: _not_found(
            nvml, lambda: nvml.nvmlDeviceGetProcessUtilization(h, 0)),
    }
    out = {name: timed(fn, n) for name, fn in calls.items()}
    try:
        first, second = nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()
        out["nvmlGpmSampleGet"] = timed(lambda: nvml.nvmlGpmSampleGet(h, first), n)
        nvml.nvmlGpmSampleGet(h, second)
        request = _metrics_request(nvml, first, second)
        out["nvmlGpmMetricsGet"] = timed(lambda: nvml.nvmlGpmMetricsGet(request), n)
        nvml.nvmlGpmSampleFree(first)
        nvml.nvmlGpmSampleFree(second)
    except Exception as err:  # noqa: BLE001 - a GPU without GPM
        out["nvmlGpmSampleGet"] = {"error": f"{type(err).__name__}: {err}"}
    out["nvmlDeviceGetPcieThroughput (off the sampling path)"] = timed(
        lambda: nvml.nvmlDeviceGetPcieThroughput(h, nvml.NVML_PCIE_UTIL_RX_BYTES), PCIE_CALLS)
    return out


def _samples(nvml, h, kind):
    try:
        return nvml.nvmlDeviceGetSamples(h, kind, 0)
    except nvml.NVMLError_NotFound:
        return None   # no sample yet: an answer, not an error


def _not_found(nvml, call):
    try:
        return call()
    except nvml.NVMLError_NotFound:
        return None   # no sample newer than asked: an answer, not an error


def _metrics_request(nvml, first, second):
    request = nvml.c_nvmlGpmMetricsGet_t()
    request.version = nvml.NVML_GPM_METRICS_GET_VERSION
    request.numMetrics = 1
    request.sample1, request.sample2 = first, second
    request.metrics[0].metricId = nvml.NVML_GPM_METRIC_SM_UTIL
    return request


def gpu_read_ms(nvml, fake: bool) -> dict:
    collector = GpuCollector(nvml)
    collector.collect()
    times = []
    for _ in range(30):
        time.sleep(0.11)   # GPM samples >= 100 ms apart, as at 1 Hz
        if fake:
            nvml.advance_to(time.time())
        t0 = time.perf_counter()
        snap = collector.collect()
        times.append((time.perf_counter() - t0) * 1000)
    collector.close()
    return {"gpus": len(snap.gpus), "median_ms": round(statistics.median(times), 3),
            "max_ms": round(max(times), 3)}


def gpm_support(nvml) -> list[dict]:
    out = []
    for i in range(nvml.nvmlDeviceGetCount()):
        h = nvml.nvmlDeviceGetHandleByIndex(i)
        try:
            out.append({"index": i, "supported": bool(nvml.nvmlGpmQueryDeviceSupport(h).isSupportedDevice)})
        except Exception as err:  # noqa: BLE001 - the finding
            out.append({"index": i, "supported": False, "error": f"{type(err).__name__}: {err}"})
    return out


def gpm_probe(fake: bool) -> dict:
    """GPM through the collector in this process: what an unprivileged child reports."""
    nvml = nvml_module(fake)
    collector = GpuCollector(nvml)
    collector.collect()
    time.sleep(0.15)
    if fake:
        nvml.advance_to(time.time())
    g = collector.collect().gpus[0]
    collector.close()
    return {"uid": os.geteuid(), "dropped": os.geteuid() != 0, "sm_active_pct": g.gpm_sm_active_pct, "note": g.gpm_note}


def unprivileged(fake: bool) -> dict:
    def drop() -> None:
        if os.geteuid() == 0 and not fake:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
    argv = [sys.executable, os.path.abspath(__file__), "-", "--gpm-probe"] + (["--fake"] if fake else [])
    try:
        run = subprocess.run(argv, capture_output=True, text=True, timeout=30, preexec_fn=drop,
                             cwd="/")
        return json.loads(run.stdout) if run.returncode == 0 else {"error": run.stderr[-400:]}
    except (subprocess.TimeoutExpired, ValueError, OSError) as err:
        return {"error": f"{type(err).__name__}: {err}"}


def workloads(nvml, fake: bool, phase_s: float) -> list[dict]:
    collector = GpuCollector(nvml)
    prev = collector.collect()
    phases: list[dict] = []

    def measure(name: str) -> None:
        nonlocal prev
        rows = []
        end = time.monotonic() + phase_s
        while time.monotonic() < end:
            time.sleep(min(1.0, phase_s / 3))
            if fake:
                nvml.advance_to(time.time())
            snap = collector.collect()
            rows.append(gpu_views(snap, prev, None)[0])
            prev = snap
        rows = rows[1:] or rows   # the first straddles the phase's start
        phases.append({"name": name, "samples": len(rows),
                       "gpu_util_pct": _median([r.gpu_util_pct for r in rows]),
                       "sm_active_pct": _median([r.sm_active_pct for r in rows]),
                       "busy_source": rows[-1].busy_source if rows else None,
                       "power_w": _median([r.power_w for r in rows]),
                       "throttle_source": rows[-1].throttle_source if rows else None,
                       "throttle_pct": {reason: _median([r.throttle_pct[reason] for r in rows])
                                        for reason in rows[-1].throttle_pct} if rows else None,
                       # NVML's per-process sample of the busiest process (the workload)
                       "process_sm_util_pct": _median([max((p.sm_util_pct for p in r.processes
                                                            if p.sm_util_pct is not None), default=None)
                                                       for r in rows])})

    if fake:
        for name, state in FAKE_PHASES.items():
            nvml.set_state(0, **state)
            measure(name)
    else:
        measure("idle")
        child = subprocess.Popen([sys.executable, "-c", WORKLOAD, str(phase_s + 1)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # a child that never says a phase (torch without CUDA, a wedged driver) ends by this
        threading.Timer(30 + 3 * phase_s, child.kill).start()
        try:
            for line in child.stdout:
                if line.startswith("phase "):
                    measure(line.split()[1])
        finally:
            child.kill()
            err = child.communicate(timeout=10)[1]
        if len(phases) < 3:
            phases.append({"name": "workload failed", "error": err[-400:]})
    collector.close()
    return phases


def _median(values):
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 2) if values else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--fake", action="store_true", help="the stand-in NVML, not a driver")
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--phase-s", type=float, default=8.0)
    ap.add_argument("--gpm-probe", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.gpm_probe:
        print(json.dumps(gpm_probe(a.fake)))
        return 0
    if a.calls < 1 or a.phase_s <= 0:
        ap.error("--calls and --phase-s must be positive")
    started = time.monotonic()
    nvml = nvml_module(a.fake)
    nvml.nvmlInit()
    out: dict = {"fake": a.fake, "driver": str(nvml.nvmlSystemGetDriverVersion())}
    out["gpu_name"] = str(nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(0)))
    out["calls"] = call_times(nvml, a.calls)
    out["over_2ms"] = [name for name, c in out["calls"].items()
                       if "off the sampling path" not in name and c.get("median_us", 0) > LIMIT_MS * 1000]
    out["gpu_read_ms"] = gpu_read_ms(nvml, a.fake)
    out["gpm"] = {"support": gpm_support(nvml), "unprivileged": unprivileged(a.fake)}
    out["workloads"] = workloads(nvml, a.fake, a.phase_s)
    nvml.nvmlShutdown()
    out["elapsed_s"] = round(time.monotonic() - started, 1)
    os.makedirs(a.outdir, exist_ok=True)
    path = os.path.join(a.outdir, "device_check.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=2)
    print(f"{path}: {out['elapsed_s']} s; calls over {LIMIT_MS} ms: {out['over_2ms'] or 'none'}; "
          f"GPU read {out['gpu_read_ms']['median_ms']} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
