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
    their age (Model.procs_age_s): what was last measured, said as such; its GPU
    processes' totals (Model.gpu_proc_io, the loaders' time included) are the read's too,
    made once (ProcLink), not this interval's disks weighed against older rates;
  - where there is no read before to take them against (a session's first, the first
    interval after a seek or a gap into a slow stretch), the rates are None: n/a, as at
    any first sample, until the next read.

A recording keeps each sample's procs_age_s (record/v2 "t/procs_age_ms"), so a replay
takes the same rates at the same samples as the live session did.
"""

from __future__ import annotations

from dataclasses import dataclass

# two reads closer than this are one read (a recording keeps the age in whole ms; reads
# are at least an interval, 0.25 s, apart)
SAME_READ_S = 0.01


@dataclass(slots=True, eq=False)
class ProcLink:
    """What a sample's process rates are taken against (Sample.procs_base): a link this
    rule derives and keeps, never recorded.  The samples that carry one read share it,
    with the rows and the GPU processes' totals the read's interval made of it (views,
    totals: made once at the read, read only): their process figures are the read's,
    all of them, loaders' time included, as a replay makes them too."""

    base: dict | None           # the processes' counters before (None: no rates)
    base_mono_s: float
    views: dict | None = None   # the read's Model.procs
    totals: dict | None = None  # the read's Model.gpu_proc_io


def read_mono_s(sample) -> float:
    """When the sample's processes were read, in its monotonic seconds."""
    return sample.mono_s - (sample.procs_age_s or 0.0)


def proc_interval(sample, last) -> tuple[ProcLink | None, float, float]:
    """(what `sample`'s rates are taken against, None: no rates; the span of those rates
    in seconds; how old the rows are, seconds, 0 when read in `sample`).  Keeps the link
    on `sample` (Sample.procs_base) for the samples after it that carry the same read.
    Never raises."""
    age_s = sample.procs_age_s or 0.0
    if last is None:
        return None, 0.0, age_s
    t_cur, t_last = read_mono_s(sample), read_mono_s(last)
    if not age_s or t_cur - t_last > SAME_READ_S:
        # read since: rates over the span since the last read (another stepper that took
        # the same step made the same link: one is kept)
        link = sample.procs_base
        if link is None or link.base is not last.procs:
            link = ProcLink(last.procs, t_last)
    else:
        link = last.procs_base            # the same read: its rates, carried
    if link is None:
        return None, 0.0, age_s
    if sample.procs_base is None:
        sample.procs_base = link
    return link, t_cur - link.base_mono_s, age_s
