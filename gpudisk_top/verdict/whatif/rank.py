"""Every fix worth having, best first: the registry's fixes (verdict/whatif/fixes.py) run on
one interval's pipeline, each gain made a WhatIf with its confidence.

`confidence` is "measured" when every input was read in the interval (delay accounting's
blocked time, schedstat's wait, a probe for a device the loaders read), "estimated"
otherwise, and `basis` names the gap.  No input, no prediction: never a made-up number."""

from __future__ import annotations

from gpudisk_top.verdict.whatif.device import probe_target
from gpudisk_top.verdict.whatif.fixes import (CHECKPOINT, FIXES, REGISTRY, Fix, Gain,
                                              device_gap)
from gpudisk_top.verdict.whatif.pipeline import Pipeline
from gpudisk_top.verdict.whatif.result import ESTIMATED, MEASURED, WhatIf
from gpudisk_top.verdict.whatif.solver import Solver

WORTH = 1.02            # a fix gaining less than 2 % is not offered


def predict(p: Pipeline, state: str, kind: str | None) -> list[WhatIf]:
    """Every fix worth having, best first (equal gains in REGISTRY's order)."""
    if p.gpu_util is None or p.gpu_util <= 0:
        p.gpu_util = 0.005
    out: list[WhatIf] = []
    gaps = _gaps(p)
    # in a checkpoint stall the trainer waits for its save: the loaders' and the CPUs'
    # figures of that time say nothing of what would gain
    stall = state == "checkpoint-stall"
    solver = Solver(p)
    for fix in REGISTRY:
        if (fix.family == CHECKPOINT) != stall:
            continue
        gain = fix.predict(p, state, gaps, solver)
        if gain is not None and gain.speedup >= WORTH:
            out.append(_whatif(p, fix, gain))
    return ranked(out)


def ranked(whatif: list[WhatIf]) -> list[WhatIf]:
    """Predictions best first, equal gains in REGISTRY's order: every list of them."""
    return sorted(whatif, key=lambda x: (-x.speedup, FIXES.index(x.fix)))


def _gaps(p: Pipeline) -> list[str]:
    gaps = []
    if p.io_estimated and p.b > 0:
        gaps.append("blocked time estimated as reads x r_await (no delay accounting)")
    if p.w is None and p.loaders:
        gaps.append("no run-queue wait (schedstat)")
    return gaps


def _whatif(p: Pipeline, fix: Fix, gain: Gain) -> WhatIf:
    u = p.gpu_util * 100
    basis = gain.basis
    conf = ESTIMATED if gain.gaps else MEASURED
    if gain.gaps:
        basis = basis + ["missing: " + ", ".join(gain.gaps)]
    now = u if gain.gpu_now_pct is None else gain.gpu_now_pct
    after = min(100.0, u * gain.speedup) if gain.gpu_util_pct is None else gain.gpu_util_pct
    cap = gain.cap
    gap = device_gap(p)
    # the short form every surface prints beside the gain (result.py line): what to run
    hint = None if gap is None or gap not in gain.gaps else (
        f"{'probe of ' + p.device + ' ignored' if p.probe_doubt else 'no probe of ' + (p.device or 'the device')}"
        f": gpudisk-top probe {probe_target(p)}")
    return WhatIf(fix=fix.name, speedup=gain.speedup, gpu_util_pct=after, gpu_now_pct=now,
                  confidence=conf, basis="; ".join(basis),
                  cap=cap.sentence if cap else None, limit=cap.limit if cap else None,
                  from_=gain.from_, to=gain.to, pids=gain.pids, who=gain.who,
                  unprobed=hint)
