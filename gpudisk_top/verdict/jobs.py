"""The node's verdict from its jobs' verdicts: the one rule of which job's verdict is the
node's (the worst), shared by the Stepper (verdict/step.py) and `--once` (one_interval).

A node's state is the worst of its jobs': a GPU that no driver can read first, then a
job starved by the node's own input path (disk, CPU, checkpoint writes: OWN_CAUSE_STATES),
then a straggler or an undiagnosed stall, then healthy, then idle.  Between jobs in the
same state, the one with more GPUs, then the one with the lowest GPU.  The node's
verdict is that job's verdict with every job's verdict in `jobs` (the job's own stays
as it is: nothing downstream writes into what it was handed)."""

from __future__ import annotations

from dataclasses import replace

from gpudisk_top.model.snapshot import Model
from gpudisk_top.verdict.detect import Detector, Thresholds, Verdict, one_interval
from gpudisk_top.verdict.detect.states import OWN_CAUSE_STATES, STARVED_STATES, UNAVAILABLE


def severity(state: str) -> int:
    if state == UNAVAILABLE:
        return 6
    if state in OWN_CAUSE_STATES:
        return 5
    if state in STARVED_STATES:
        return 4
    return 1 if state == "healthy" else 0


def _key(v: Verdict):
    gpus = v.job.gpus if v.job is not None else tuple(v.gpus)
    return (-severity(v.state), -len(gpus), gpus[:1])


def node_verdict(verdicts: list[Verdict]) -> Verdict:
    """The node's verdict of its jobs' (at least one): the worst, carrying them all."""
    worst = min(verdicts, key=_key)
    return replace(worst, jobs=list(verdicts))


def once_verdict(model: Model, thresholds: Thresholds | None = None) -> Verdict:
    """`--once`'s verdict: every job's single interval (one_interval), the node's the
    worst; with no job, the node's own."""
    if not model.jobs:
        return one_interval(model, thresholds)
    sats = Detector(thresholds).assess_devices(model)
    return node_verdict([one_interval(model, thresholds, info, sats) for info in model.jobs])
