"""The slow cadence of per-process reads, switched on for a live session (issue 41).

`record`, `serve` and the dashboard read the processes every sample only while a job may
be starved, else every DETAIL_SLOW_S (collect/detail.py says when, verdict/detail.py
with which figures, model/detail.py what the rates are between reads).  --once reads them
at both its samples: it reports one interval.  A source that is not the live Sampler
(the simulator of --demo) has no cadence: these do nothing to it."""

from __future__ import annotations


def slow_detail(source, thresholds=None) -> None:
    """Give a live Sampler its cadence, with the detector's thresholds."""
    if not hasattr(source, "detail"):
        return
    from gpudisk_top.collect.detail import DetailCadence
    from gpudisk_top.verdict.detail import DetailWatch

    source.detail = DetailCadence(DetailWatch(thresholds))


def after_step(source, verdict) -> None:
    """Tell the source's cadence what the step made of the sample it took: a job starved
    keeps every process read."""
    cadence = getattr(source, "detail", None)
    if cadence is not None:
        from gpudisk_top.verdict.detail import wanted

        cadence.wanted = wanted(verdict)
