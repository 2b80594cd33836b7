"""The one timer of the micro-benchmarks (bench_sample.py, bench_netfs.py): the median of
many calls, after warming up, in microseconds; and the one rule for how long a running
`record` is watched (bench_cost.py, bench_record.py)."""

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


def recorder_window_error(seconds: float, warmup: float, interval_s: float = 1.0) -> str | None:
    """None, or one line saying why watching a running `record` from `warmup` to `seconds`
    would misstate its CPU: the recorder derives its summaries (the model and the detector
    over every sample) SUMMARY_SAMPLES samples at a time (record/derived.py), so only a
    window of whole such periods holds them in proportion (a window of 25 s holds none:
    the figures of issue 41's stops two to six; one of 55 s after a 5 s warm-up, none or
    one, as the start-up moves it).  The callers import gpudisk_top first."""
    from gpudisk_top.record.derived import SUMMARY_SAMPLES

    period_s = SUMMARY_SAMPLES * interval_s
    periods = (seconds - warmup) / period_s
    if periods >= 1 and abs(periods - round(periods)) < 1e-9:
        return None
    return (f"--seconds less --warmup must be whole periods of {period_s:g} s, not "
            f"{seconds - warmup:g} s (record derives its summaries {SUMMARY_SAMPLES} samples "
            f"at a time): e.g. --seconds {warmup + period_s:g} --warmup {warmup:g}")
