#!/usr/bin/env python3
"""The sampler's GPU read for 8 GPUs, before and after PCIe throughput left the sampling
path (issue 40), in one run, on the stand-in NVML told to take 20 ms per
nvmlDeviceGetPcieThroughput call as a real driver does (it measures over that window).

"before" is collect/gpu.py as of --before (a git revision, loaded from git into this
process), "before_fields" as of --before-fields (the revision before throttling came from
field values and per-process use was asked: the bit mask every sample), "after" is the
working tree's, without GPM and with GPM (PCIe from GPM, no PcieThroughput call at all).
Every GPU is throttled part of the time (its clock-event durations move), runs two
processes, one with a per-process sample, so each path the sampler takes is timed.  Each collector reads 8 GPUs once per simulated second (its
clock moves 1 s per sample, the fake's too, and the background PCIe reads asked are let
finish between samples, outside the timing); the figure is the median wall time of one
collect() over --samples samples, after one warm-up sample (the old code's first read is
serial and slower still; it is printed apart), with the mean (per-process use is asked
every 5th sample, with the process list) and the NVML calls a GPU a sample.

usage: python bench/bench_gpu_read.py [--samples N] [--before REV] [--before-fields REV]
                                      [--pcie-delay-ms MS] [--json OUT]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from gpudisk_top.collect.gpu import GpuCollector  # noqa: E402
from gpudisk_top.sim.fake_nvml import FakeGpu, FakeNvml  # noqa: E402

BEFORE = "130c10e^"     # the commit before PCIe left the sampling path
BEFORE_FIELDS = "d20b147^"  # the commit before clock-event durations and per-process use
PCIE_DELAY_S = 0.02
NGPUS = 8


def old_collector_class(rev: str):
    """GpuCollector as collect/gpu.py was at `rev`.  Raises CalledProcessError when git
    cannot show it."""
    text = subprocess.run(["git", "-C", ROOT, "show", f"{rev}:gpudisk_top/collect/gpu.py"],
                          check=True, capture_output=True, text=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(text)
    spec = importlib.util.spec_from_file_location("gpudisk_top_gpu_before", f.name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    os.unlink(f.name)
    return module.GpuCollector


def run(collector_class, samples: int, gpm: bool, pcie_delay_s: float) -> dict:
    power_cap = FakeNvml.NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP
    nvml = FakeNvml(gpus=[FakeGpu(util_pct=90, gpm_supported=gpm, pcie_rx_kb_s=100_000,
                                  mem_used_bytes=40 * 2**30, throttle_pct={power_cap: 30.0},
                                  processes=[(4000 + i, 30 * 2**30), (5000 + i, 2**30)],
                                  process_util={4000 + i: (85, 30)})
                          for i in range(NGPUS)], pcie_delay_s=pcie_delay_s)
    now = [1000.0]
    collector = collector_class(nvml, clock=lambda: now[0])
    t0 = time.perf_counter()
    collector.collect()
    first_ms = (time.perf_counter() - t0) * 1000
    times_ms = []
    for _ in range(samples):
        now[0] += 1.0
        nvml.advance(1.0)
        t0 = time.perf_counter()
        collector.collect()
        times_ms.append((time.perf_counter() - t0) * 1000)
        # the rest of the simulated second, in which the background PCIe reads land
        getattr(collector, "wait_pcie", lambda timeout_s: True)(1.0)
    pcie_calls = nvml.call_count("nvmlDeviceGetPcieThroughput")
    calls = sum(n for (_, index), n in nvml.calls.items() if index is not None)
    collector.close()
    return {"median_ms": statistics.median(times_ms), "mean_ms": statistics.fmean(times_ms),
            "max_ms": max(times_ms), "first_ms": first_ms,
            "pcie_calls_per_gpu_s": pcie_calls / NGPUS / (samples + 1),
            "calls_per_gpu_sample": calls / NGPUS / (samples + 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--before", default=BEFORE)
    ap.add_argument("--before-fields", default=BEFORE_FIELDS)
    ap.add_argument("--pcie-delay-ms", type=float, default=PCIE_DELAY_S * 1000,
                    help="time of each nvmlDeviceGetPcieThroughput (0: the stand-in's own)")
    ap.add_argument("--json", metavar="OUT")
    a = ap.parse_args()
    delay_s = a.pcie_delay_ms / 1000
    results = {
        "before": run(old_collector_class(a.before), a.samples, False, delay_s),
        "before_fields": run(old_collector_class(a.before_fields), a.samples, False, delay_s),
        "after": run(GpuCollector, a.samples, False, delay_s),
        "after_gpm": run(GpuCollector, a.samples, True, delay_s),
    }
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; {NGPUS} GPUs, "
          f"{a.pcie_delay_ms:.0f} ms per nvmlDeviceGetPcieThroughput, {a.samples} samples")
    print(f"{'':14} {'median ms':>10} {'mean ms':>8} {'max ms':>8} {'first ms':>9} "
          f"{'PCIe calls/GPU/s':>17} {'calls/GPU/sample':>17}")
    for name, r in results.items():
        print(f"{name:14} {r['median_ms']:>10.2f} {r['mean_ms']:>8.2f} {r['max_ms']:>8.2f} "
              f"{r['first_ms']:>9.2f} {r['pcie_calls_per_gpu_s']:>17.2f} {r['calls_per_gpu_sample']:>17.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
