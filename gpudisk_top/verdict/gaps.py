"""What an interval is: the one rule that makes a gap in sampling a gap, not GPU time.

Two samples of one session bound an interval of (sample.mono_s - last.mono_s) seconds,
and everything per interval (rates, the GPUs' utilization, the stall ledger's
GPU-seconds, the report's covered time) is counted over it.  That holds while the
sampler ran: NVML keeps a GPU's utilization samples for a few seconds only, so over a
sampler frozen (SIGSTOP, a host suspended, a process swapped out) its "interval" is a
few seconds of utilization stretched over the whole span, and a damaged or hostile
recording can put any number there (a 1e9 s jump of the monotonic clock read as 222,222
GPU-hours lost).  So an interval is a gap when

  - it is longer than GAP_INTERVALS times the session's cadence (the interval the sampler
    was set to: the sample's own, else the session's) and than GAP_MIN_S, or
  - it is longer than GAP_MIN_S and its monotonic clock ran more than CLOCK_STEP_S
    ahead of the wall clock: a monotonic clock cannot outrun the wall clock unless one of
    the two is wrong, so nothing confirms that length (an interval longer than its
    session's whole wall span is one), whatever the cadence, known or not.  A short
    interval across a wall clock stepped back (NTP) is still an interval; or
  - its length is not a finite number.

A gap is counted nowhere (no rates, no GPU time, no covered seconds): the sample after it
starts afresh, as a session's first does, and the gap is said with its length
(verdict/ledger.py Ledger.gaps; the report's ledger section, serve's
gpudisk_top_sample_gap_seconds_total).  verdict/step.py Stepper.step applies it, so the
live screen, `serve`, the recorder's summaries, `report`, `--recompute` and `export`
split the same intervals; a cut summary block's intervals (report/tally.py) ask
previous_sample() here.
"""

from __future__ import annotations

import math

# more than this many of the session's intervals without a sample is a gap...
GAP_INTERVALS = 10
# ...and never less than this (at -i 0.1, a GC pause or a busy CPU is not a gap): NVML's
# utilization samples cover about this long, so a shorter interval is still measured
GAP_MIN_S = 5.0
# A wall clock that moved this much more or less than the monotonic clock between two
# samples stepped (NTP after boot, a VM resumed, a suspended host): beyond NTP's slewing
# (at most 0.5 ms a second) and a late sample, well inside what would skew an episode.
# verdict/step.py's clock_stepped() and the rule above both read it.
CLOCK_STEP_S = 10.0


def cadence_of(value) -> float | None:
    """A declared cadence (a sample's interval_s, a session header's), None unless it is a
    finite positive number of seconds: a header is read as untrusted input."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def limit_s(cadence_s: float | None) -> float | None:
    """The longest interval that is not a gap at this cadence; None when no cadence is
    known (then only the clocks tell)."""
    cadence_s = cadence_of(cadence_s)
    return None if cadence_s is None else max(GAP_MIN_S, GAP_INTERVALS * cadence_s)


def gap_s(mono_dt_s: float, wall_dt_s: float, cadence_s: float | None) -> float | None:
    """The gap's length (its monotonic seconds; 0.0 where they are not a number) when an
    interval of mono_dt_s (wall_dt_s by the wall clock) at that cadence is a gap, else
    None.  Never raises."""
    if not (math.isfinite(mono_dt_s) and mono_dt_s > 0):
        # no interval at all (a clock that stood still or went back) is not a gap: the
        # model gives it no rates and the ledger counts nothing of it
        return None if math.isfinite(mono_dt_s) else 0.0
    if mono_dt_s > GAP_MIN_S and math.isfinite(wall_dt_s) and mono_dt_s - wall_dt_s > CLOCK_STEP_S:
        return mono_dt_s
    limit = limit_s(cadence_s)
    return mono_dt_s if limit is not None and mono_dt_s > limit else None


def between(last, sample, cadence_s: float | None = None) -> float | None:
    """gap_s() of the interval from Sample `last` to Sample `sample`; the cadence is the
    sample's own interval_s where it says it, else cadence_s."""
    if last is None:
        return None
    cadence = cadence_of(getattr(sample, "interval_s", None)) or cadence_s
    return gap_s(sample.mono_s - last.mono_s, sample.wall_s - last.wall_s, cadence)


def previous_sample(rec, i: int):
    """The sample the interval ending at sample i of a Recording starts from: None at a
    session's first sample and after a gap (the sample starts afresh)."""
    if i <= 0 or rec.starts_session(i):
        return None
    last = rec.sample(i - 1)
    sample = rec.sample(i)
    return None if between(last, sample, rec.interval_at(i)) is not None else last


__all__ = ["CLOCK_STEP_S", "GAP_INTERVALS", "GAP_MIN_S", "between", "cadence_of", "gap_s", "limit_s",
           "previous_sample"]
