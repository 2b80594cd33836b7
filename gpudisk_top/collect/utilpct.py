"""A GPU utilization read from outside is a percentage, or it is not a reading: the one
rule, at both edges where utilizations come in (the NVML collector, collect/gpu.py, and
a recording's samples, record/reader.py).

NVML gives utilization as an unsigned integer percent (0-100).  What else can arrive: a
driver's -1 wrapped to 4294967295, a recording damaged or written by hand with NaN, an
infinity, -50 or 1e308.  Such a value would reach a chart (a NaN once aborted the text
report), a JSON export (refused: "Out of range float values"), an episode's
min_util_pct or the stall ledger, so it never goes further than here: a utilization
sample that is not a finite number from 0 to 100 is dropped, a "now" reading becomes
None (n/a, as an unsupported one), and a recorded interval's window (UtilWindow) whose
mean is not one becomes None.  Nothing else of the sample changes.  Never raises.
"""

from __future__ import annotations

import dataclasses
import math

from gpudisk_top.collect.sample import GpuRaw, GpuSnapshot, UtilWindow

LOW_PCT, HIGH_PCT = 0.0, 100.0


def is_pct(value) -> bool:
    """A utilization: a finite number (not a bool) from 0 to 100."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and LOW_PCT <= value <= HIGH_PCT)


def _window(samples):
    """(samples kept, whether any was dropped) for a list of (timestamp, value) or a
    recording's UtilWindow."""
    if samples is None:
        return None, False
    if type(samples) is UtilWindow:
        n, total = samples.count, samples.sum_pct
        ok = (isinstance(n, int) and n > 0 and isinstance(total, (int, float))
              and is_pct(total / n))
        return (samples, False) if ok else (None, True)
    kept = [s for s in samples if is_pct(s[1])]
    return kept, len(kept) != len(samples)


def check_gpu(raw: GpuRaw) -> list[str]:
    """Drop what is not a percentage from one GPU's utilization fields (util_samples,
    mem_util_samples, util_now_pct, mem_util_now_pct), in place; the names of the fields
    that held something else ([] when everything was a percentage)."""
    dropped = []
    for name in ("util_samples", "mem_util_samples"):
        kept, bad = _window(getattr(raw, name))
        if bad:
            dropped.append(name)
            setattr(raw, name, kept)
    for name in ("util_now_pct", "mem_util_now_pct"):
        value = getattr(raw, name)
        if value is not None and not is_pct(value):
            dropped.append(name)
            setattr(raw, name, None)
    return dropped


def check_snapshot(snapshot: GpuSnapshot | None) -> str | None:
    """check_gpu() on every GPU of a snapshot; one line saying what was dropped, None
    when nothing was."""
    if snapshot is None:
        return None
    bad = [(raw.index, fields) for raw in snapshot.gpus if (fields := check_gpu(raw))]
    if not bad:
        return None
    names = sorted({f for _, fields in bad for f in fields})
    gpus = ", ".join(str(index) for index, _ in bad[:16]) + (", ..." if len(bad) > 16 else "")
    return (f"GPU {gpus}: a utilization that is not a percentage (0-100) read as n/a "
            f"({', '.join(names)})")


def checked(sample):
    """The sample itself when every utilization in it is a percentage, else a copy whose
    GPUs had check_snapshot() (the sample given is left as it is: what a recorder writes
    is what it was given)."""
    if sample.gpu is None or all(not _needs_check(raw) for raw in sample.gpu.gpus):
        return sample
    gpus = [dataclasses.replace(raw) for raw in sample.gpu.gpus]
    copy = dataclasses.replace(sample, gpu=dataclasses.replace(sample.gpu, gpus=gpus))
    check_snapshot(copy.gpu)
    return copy


def _needs_check(raw: GpuRaw) -> bool:
    """check_gpu() would drop something (nothing changed here)."""
    return (any(_window(getattr(raw, name))[1] for name in ("util_samples", "mem_util_samples"))
            or any(v is not None and not is_pct(v)
                   for v in (raw.util_now_pct, raw.mem_util_now_pct)))


__all__ = ["check_gpu", "check_snapshot", "checked", "is_pct"]
