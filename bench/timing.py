"""The one timer of the micro-benchmarks (bench_sample.py, bench_netfs.py): the median of
many calls, after warming up, in microseconds."""

from __future__ import annotations

import statistics
import time


def median_us(fn, repeat: int, warmup: int = 200) -> float:
    for _ in range(min(warmup, repeat)):  # warm caches and the allocator
        fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - t0)
    return statistics.median(samples) / 1000
