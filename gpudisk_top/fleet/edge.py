"""The fleet's edge: what a node's exporter may say, checked once for the table and the
timeline alike (check_value), and the labels that carry a list or a GPU's index read
strictly (label_list, gpu_index).  A number outside its metric's physical range is dropped
and counted by the caller, never shown as given.  No I/O, never raises.
"""

from __future__ import annotations

import math

from gpudisk_top.fleet.queries import (EVIDENCE_DISK, EVIDENCE_MOUNT, GPU_UTIL, P,
                                       REC_GPU_UTIL_SUM, REC_GPUS, REC_GPUS_READ, TIMELINE_DISK)
from gpudisk_top.model.disk import BUSY_SLACK_FACTOR, MAX_DATA_BYTES_S
from gpudisk_top.model.vocab import GPUS_STARVED, JOB_ENDED, JOB_GPUS_STARVED, LAST_SAMPLE, STATE_SINCE

# What an exporter may say, checked here once for the table and the timeline alike: a
# number outside its metric's physical range (a negative await, a GPU at -500 % or 1e308,
# a state begun in the year 31,000) is not shown as given, it is dropped and counted
# (NodeRow.bad_series), and the rest of the node's row and the table stand.
TIMESTAMP_SPAN_S = 10 * 365.25 * 86400      # timestamps within 10 years of now
MAX_GPUS = 4096
_RATIO = (0.0, 1.0)
_TIMESTAMPS = {"", P + STATE_SINCE, P + LAST_SAMPLE, P + JOB_ENDED}
# a device's number, by its unit in the model: what can be true of it in base units
_BOUNDS = {"%": (0.0, BUSY_SLACK_FACTOR), "ms": (0.0, TIMESTAMP_SPAN_S), "requests": (0.0, 1e9),
           "/s": (0.0, 1e8), "kB/s": (0.0, MAX_DATA_BYTES_S)}
_RANGES = {P + GPUS_STARVED: (0.0, MAX_GPUS), P + JOB_GPUS_STARVED: (0.0, MAX_GPUS),
           GPU_UTIL.prom_name: _RATIO,
           REC_GPUS: (0.0, MAX_GPUS), REC_GPUS_READ: (0.0, MAX_GPUS),
           REC_GPU_UTIL_SUM: (0.0, MAX_GPUS),
           **{m.prom_name: _BOUNDS[m.unit] for m in (
               *EVIDENCE_DISK, *(m for m, _, _ in EVIDENCE_MOUNT), *(m for m, _ in TIMELINE_DISK))}}


def check_value(name: str, value: float | None, now_s: float) -> bool:
    """True when `value` of the metric `name` ("" for max_over_time's timestamp) can be
    true: a timestamp within TIMESTAMP_SPAN_S of now_s, any other number of a metric we
    read within its range.  NaN (Prometheus's "no value") passes: it is shown as none.
    Never raises."""
    if value is None or math.isnan(value):
        return True
    if name in _TIMESTAMPS:
        return abs(value - now_s) <= TIMESTAMP_SPAN_S
    lo, hi = _RANGES.get(name, (-math.inf, math.inf))
    return math.isfinite(value) and lo <= value <= hi


def gpu_index(text: str | None) -> int | None:
    """A GPU's index from a label: ASCII digits only ('²' and '٣' are digits to
    str.isdigit, not to int or to us), at most MAX_GPUS."""
    if not text or not text.isascii() or not text.isdigit() or len(text) > 6:
        return None
    n = int(text)
    return n if n < MAX_GPUS else None


def label_list(text: str | None) -> list[str]:
    """A label's comma-separated list (a verdict's devices, gpus), empty items left out."""
    return [t for t in (text or "").split(",") if t]
