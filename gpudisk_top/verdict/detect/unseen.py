"""The stall of a job whose processes cannot be seen from here: what the verdict says
instead of a cause.

Where NVML's host PIDs name nothing in the procfs read (another PID namespace, and
collect/devmap.py matched nothing), or the job's processes are seen but none of their I/O
can be read (another user's, as non-root), nothing tells whether its loaders wait on
reads, on CPUs or on nothing.  The host's CPU figures cannot stand in for them: the busy
CPUs may be the job's own, and a busy host beside a job that waits on its disk made the
verdict blame "the host's CPUs taken by other processes" (issue 38: as root, seconds
apart, the same job's workers were 93-98 % asleep).  So the verdict is `undiagnosed-stall`
of kind `unseen`: it names no cause and no what-if, says why the job cannot be seen and
how to see it, and what can still be said (its GPUs, the busiest disk, the host's CPU) as
figures, not as causes.  A saturated device is judged before this rule
(storage.disk's branch for an unseen job): its saturation is the device's own evidence,
which needs no process, and that verdict says it is not a proven cause.
"""

from __future__ import annotations

from gpudisk_top.model.host import busy_pct
from gpudisk_top.model.present import pct
from gpudisk_top.model.snapshot import Model
from gpudisk_top.verdict.detect.cpu import top_others
from gpudisk_top.verdict.detect.job import Job
from gpudisk_top.verdict.detect.states import IntervalState
from gpudisk_top.verdict.detect.storage import display

UNSEEN = "unseen"      # the kind of an undiagnosed-stall whose job cannot be seen


def unseen(model: Model, job: Job, sats) -> IntervalState | None:
    """The state of a stalled job that cannot be seen from here, or None where it can.
    Never raises."""
    unseen_by = job.unseen_reason()
    if unseen_by is None:
        return None
    why, fix = unseen_by
    what = "processes" if not job.visible else "reads"
    parts = [f"the job's {what} cannot be seen from here ({why}), so no cause is named"]
    if sats:
        s = max(sats.values(), key=lambda x: x.read_kb_s + x.write_kb_s)
        state = "saturated" if s.saturated else "not saturated"
        parts.append(f"busiest disk {s.latency(display(model, s.name))}, {state}")
    if job.visible and job.time is not None:
        parts.append(job.time.describe())    # on a CPU and waiting for one: not the reads
    busiest = top_others(model, job)
    if busiest:
        parts.append(f"the busiest processes seen from here: {busiest}")
    busy = busy_pct(model.host)
    if busy is not None:
        # said as a figure, as storage.undiagnosed says it, never as others' load: whose
        # the busy CPUs are cannot be told
        whose = ", the job's share of the busy ones unknown" if not job.visible else ""
        parts.append(f"CPU idle {pct(100 - busy)} (iowait counted as idle){whose}")
    return IntervalState("undiagnosed-stall", kind=UNSEEN, detail="; ".join(parts),
                         advice=f"to find the cause, see the job's processes: {fix}")
