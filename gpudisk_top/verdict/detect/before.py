"""The neighbour fix measured by the job itself: its pace before the neighbour came.

The what-if's `neighbour` prediction (verdict/whatif/fixes.py) works the device's queue
without the neighbour's reads through the probe's curve, one interval at a time: it
knows nothing of what the job did before, and the curve's unit is a 4 KiB read, so a
neighbour of 64 KiB reads at queue depth 32 (issue 38's fio) weighs like one of 4 KiB
(predicted x1.4; stopping it measured x5).  An episode that held a phase without that
neighbour (verdict/detect/phases.py: its cause then another, or none) has measured what
the job does on this device without it: its GPUs' mean utilization then.  That is the
prediction here, "measured", in place of the curve's: stop the neighbour and the job goes
back to its pace of the phase before (no faster: the device's own limits of then still
hold).  Only where the job ran there for MIN_BEFORE_INTERVALS and was faster than now.
"""

from __future__ import annotations

from dataclasses import replace

from gpudisk_top.verdict.detect.phases import Phase, culprit_key, lead_culprit
from gpudisk_top.verdict.whatif import WhatIf
from gpudisk_top.verdict.whatif.rank import WORTH, ranked
from gpudisk_top.verdict.whatif.result import MEASURED

MIN_BEFORE_INTERVALS = 3      # a phase shorter than this says too little of the job's pace
# a culprit with this much of a phase's reads (mean) was there: that phase is not "before"
THERE_SHARE_PCT = 10.0


def with_before(raw, phases: list[Phase]):
    """raw (an IntervalState) with its neighbour prediction from the phase before its
    leading culprit came, where the open episode's phases hold one: a new IntervalState
    (raw is not written into), its predictions best first; raw itself otherwise."""
    lead = lead_culprit(raw.culprits)
    if lead is None or raw.gpu_util_pct is None:
        return raw
    key = culprit_key(lead)
    # the phases it was not in; of those, the one the job went fastest in: a phase after
    # it came but before it was named (the node scan finds a new reader within seconds)
    # was already its, and slower
    without = [(n, p) for n, p in enumerate(phases)
               if key not in p.cause_culprits and not any(s.key == key and _took(s) for s in p.culprits)
               and p.own_util_n >= MIN_BEFORE_INTERVALS and p.own_mean_util_pct is not None]
    if not without:
        return raw
    # its pace there: over its own cause's intervals (the few of the neighbour's before
    # the hysteresis held are not the job's pace without it)
    n, p = max(without, key=lambda np_: np_[1].own_mean_util_pct)
    mean = p.own_mean_util_pct
    # the job's pace with it: its phase's mean so far (one interval's utilization of a
    # starved job is a few steps, 2 % or 4 %), this interval's until it has one
    now = raw.gpu_util_pct
    mine = phases[-1] if phases and key in phases[-1].cause_culprits else None
    if mine is not None and mine.own_util_n >= MIN_BEFORE_INTERVALS and mine.own_mean_util_pct:
        now = mine.own_mean_util_pct
    if now <= 0:
        return raw
    speedup = mean / now
    if speedup < WORTH:
        return raw
    fix = WhatIf(fix="neighbour", speedup=speedup, gpu_util_pct=mean,
                 gpu_now_pct=now, confidence=MEASURED,
                 basis=(f"{lead.who()} {lead.read_share_pct:.0f}% of {lead.device}'s reads; "
                        f"without it the job's GPUs were at {mean:.0f}% mean over "
                        f"{p.own_util_n} intervals (phase {n + 1} of this episode) on the same "
                        f"device, {now:.0f}% with it"),
                 pids=list(lead.pids or (lead.pid,)), who=lead.who())
    rest = [w for w in raw.whatif if w.fix != "neighbour"]
    return replace(raw, whatif=ranked([fix, *rest]))


def _took(s) -> bool:
    """Did this culprit take a real part of a phase's reads (not a brief reader)?"""
    share = s.mean_share_pct
    return share is not None and share >= THERE_SHARE_PCT and s.intervals >= MIN_BEFORE_INTERVALS
