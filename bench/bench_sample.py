#!/usr/bin/env python3
"""Cost of one full sample: read /proc/diskstats, parse, rates, for 4, 32 and 128 disks,
plus 8 GPUs through the real GPU collector over the NVML fake (time inside NVML calls
excluded, as a real driver's call time is not ours to spend).

Peer in the same run: psutil.disk_io_counters(perdisk=True), what glances samples disks
with, reading the same diskstats file (psutil.PROCFS_PATH).  psutil only parses; we
parse and compute every iostat -x rate, so the ratio is an upper bound on our overhead.

usage: python bench/bench_sample.py [--repeat N] [--json OUT]
Prints medians in microseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import psutil  # noqa: E402
from timing import median_us  # noqa: E402

from gpudisk_top.collect.diskstats import parse  # noqa: E402
from gpudisk_top.collect.gpu import GpuCollector  # noqa: E402
from gpudisk_top.model.disk import rates  # noqa: E402
from gpudisk_top.model.gpu import gpu_views  # noqa: E402
from gpudisk_top.sim.fake_nvml import FakeNvml  # noqa: E402


def diskstats_text(ndisks: int, step: int) -> str:
    lines = []
    for i in range(ndisks):
        base = (i + 1) * 1_000_000 + step * 5_000
        lines.append(f" 259 {i} nvme{i}n1 {base} {step} {base * 8} {base // 3} {base // 2} "
                     f"{step * 3} {base * 16} {base} 3 {base // 7} {base * 2} "
                     f"{step} 0 {step * 8} {step} {step * 2} {step * 5}")
    return "\n".join(lines) + "\n"


class TimedNvml:
    """Wraps an NVML module and adds up the time spent inside its calls."""

    def __init__(self, nvml) -> None:
        self._nvml = nvml
        self.inside_ns = 0

    def __getattr__(self, name):
        # the lookup itself is the module's cost too (the fake counts every lookup)
        t0 = time.perf_counter_ns()
        try:
            attr = getattr(self._nvml, name)
        finally:
            self.inside_ns += time.perf_counter_ns() - t0
        if not callable(attr) or isinstance(attr, type):
            return attr

        def timed(*args, **kwargs):
            t0 = time.perf_counter_ns()
            try:
                return attr(*args, **kwargs)
            finally:
                self.inside_ns += time.perf_counter_ns() - t0
        return timed


def bench_disks(ndisks: int, repeat: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="gdt-bench-") as procfs:
        path = os.path.join(procfs, "diskstats")
        texts = [diskstats_text(ndisks, s) for s in range(2)]
        state = {"i": 0, "prev": parse(texts[0])}

        def sample():
            with open(path) as f:
                cur = parse(f.read())
            rates(state["prev"], cur, 1.0)
            state["prev"] = cur

        with open(path, "w") as f:
            f.write(texts[1])
        ours_us = median_us(sample, repeat)
        psutil.PROCFS_PATH = procfs
        try:
            psutil_us = median_us(lambda: psutil.disk_io_counters(perdisk=True), repeat)
        finally:
            psutil.PROCFS_PATH = "/proc"
    return {"disks": ndisks, "ours_us": ours_us, "psutil_us": psutil_us,
            "ratio": ours_us / psutil_us}


def bench_gpus(ngpus: int, repeat: int) -> dict:
    fake = FakeNvml.with_gpus(ngpus)
    timed = TimedNvml(fake)
    collector = GpuCollector(nvml=timed)
    prev = collector.collect()
    totals, inside = [], []
    for _ in range(repeat):
        fake.advance(1.0)
        timed.inside_ns = 0
        t0 = time.perf_counter_ns()
        snap = collector.collect()
        gpu_views(snap, prev, None)
        totals.append(time.perf_counter_ns() - t0)
        inside.append(timed.inside_ns)
        prev = snap
    own = [t - i for t, i in zip(totals, inside)]
    return {"gpus": ngpus, "ours_excl_nvml_us": statistics.median(own) / 1000,
            "with_fake_nvml_us": statistics.median(totals) / 1000}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3000)
    ap.add_argument("--json", metavar="OUT")
    a = ap.parse_args()
    disks = [bench_disks(n, a.repeat) for n in (4, 32, 128)]
    gpus = bench_gpus(8, max(200, a.repeat // 10))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, psutil {psutil.__version__}")
    print(f"{'disks':>5} {'ours: read+parse+rates':>24} {'psutil: read+parse':>20} {'ratio':>6}")
    for d in disks:
        print(f"{d['disks']:>5} {d['ours_us']:>21.1f} us {d['psutil_us']:>17.1f} us {d['ratio']:>6.2f}")
    print(f"8 GPUs: {gpus['ours_excl_nvml_us']:.1f} us per sample in our code "
          f"(NVML calls excluded; {gpus['with_fake_nvml_us']:.1f} us with the fake's calls)")
    by_n = {d["disks"]: d for d in disks}
    full32 = by_n[32]["ours_us"] + gpus["ours_excl_nvml_us"]
    print(f"full sample, 32 disks + 8 GPUs: {full32:.1f} us (goal: under 1000 us)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"disks": disks, "gpus": gpus, "full_32_disks_8_gpus_us": full32}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
