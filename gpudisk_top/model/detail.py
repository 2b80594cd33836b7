"""The one rule for the processes' rates where a sample did not read them (issue 41).

A sampler at the slow cadence (collect/detail.py) reads the processes every
DETAIL_SLOW_S while every job is healthy; the samples between carry the last read
(Sample.procs, the same counters) and say how old it is (Sample.procs_age_s).  Every
reader of a Model (the verdict, the ledger, the what-if, the dashboard, the exporter,
--once, a recording's replay and report) gets its process rows from proc_interval(), so
none of them sees a zero rate or a vanished process for an interval nobody read:

  - a sample that read the processes has rates over the span since the read before it:
    one interval at the full cadence; after a slow stretch, the seconds since the last
    read (the counters' differences over the time between the two reads: exact, nothing
    lost or counted twice, the interval's own second averaged with those before it);
  - a sample that did not has the rows of the last read, with that read's rates, and
    their age (Model.procs_age_s): what was last measured, said as such;
  - where there is no read before to take them against (a session's first, the first
    interval after a seek or a gap into a slow stretch), the rates are None: n/a, as at
    any first sample, until the next read.

A recording keeps each sample's procs_age_s (record/v2 "t/procs_age_ms"), so a replay
takes the same rates at the same samples as the live session did.
"""

from __future__ import annotations

# two reads closer than this are one read (a recording keeps the age in whole ms; reads
# are at least an interval, 0.25 s, apart)
SAME_READ_S = 0.01


def read_mono_s(sample) -> float:
    """When the sample's processes were read, in its monotonic seconds."""
    return sample.mono_s - (sample.procs_age_s or 0.0)


def proc_interval(sample, last) -> tuple[dict | None, float, float]:
    """(the processes' counters `sample`'s rates are taken against, None: no rates; the
    span of those rates in seconds; how old the rows are, seconds, 0 when read in
    `sample`).  Keeps the link on `sample` (Sample.procs_base) for the samples after it
    that carry the same read.  Never raises."""
    age_s = sample.procs_age_s or 0.0
    if last is None:
        return None, 0.0, age_s
    t_cur, t_last = read_mono_s(sample), read_mono_s(last)
    if not age_s or t_cur - t_last > SAME_READ_S:
        base = (last.procs, t_last)       # read since: rates over the span since the last
    else:
        base = last.procs_base            # the same read: its rates, carried
    if base is None:
        return None, 0.0, age_s
    if sample.procs_base is None:
        sample.procs_base = base
    return base[0], t_cur - base[1], age_s
