"""The CPUs the job waits on: its loaders on a CPU or waiting for one, by their own work
(own), held off by other processes (others, named), by the job's cgroup quota
(throttled), or the training loop itself (trainer).  Each rule takes one interval's
Model and the Job and returns an IntervalState with its evidence, or None where it does
not hold; classify.py asks them in order.  iowait is idle time here, as top, vmstat and
mpstat count it."""

from __future__ import annotations

import math

from gpudisk_top.model.host import busy_pct, others_cpu_pct
from gpudisk_top.model.present import pct, pid_name
from gpudisk_top.model.snapshot import Model
from gpudisk_top.verdict.detect.job import Job
from gpudisk_top.verdict.detect.states import IntervalState, mean
from gpudisk_top.verdict.detect.storage import quietest_storage
from gpudisk_top.verdict.detect.thresholds import Thresholds
from gpudisk_top.verdict.whatif import ACTIVE_PCT

# the training loop itself: its GPU process on a CPU or waiting for one at least
# TRAINER_BUSY_PCT of the time, and with its GPU share TRAINER_STEP_PCT or more (it hardly
# waits for batches), while its loaders sleep on a full prefetch queue (asleep at least
# TRAINER_ASLEEP_PCT): a step is its Python, then its GPU work
TRAINER_BUSY_PCT = 20.0
TRAINER_STEP_PCT = 80.0
TRAINER_ASLEEP_PCT = 50.0
# the job's processes together hold this share of the CPUs it may use: its own crowd
JOB_CPU_FULL_PCT = 90.0
# the job's cgroup held off the CPUs by its quota (cpu.max) in at least this share of its
# enforcement periods: its loaders' wait for a CPU is the quota's, kind "throttled"
THROTTLED_PCT = 20.0
# where the loaders' reads cannot be read (not root), the CPUs are named only when the
# loaders are on a CPU or waiting for one more than this share of their time: their reads
# can take at most the rest, so the CPUs are the larger part whatever the reads are
UNREAD_IO_CPU_PCT = 50.0


def trainer(t: Thresholds, model: Model, job: Job) -> IntervalState | None:
    """The training loop itself is the bottleneck: its GPU process on a CPU (or
    waiting for one) most of the time while its loaders sleep on a full prefetch
    queue.  Whose CPUs it waits for says whether others are to blame."""
    lt = job.time if job.visible else None
    if lt is None or lt.kind != "DataLoader worker" or lt.asleep_pct < TRAINER_ASLEEP_PCT:
        return None
    if job.io_unreadable:
        return None     # loaders blocked on reads we cannot read would look asleep
    workers = {v.pid for v in job.workers}
    trainers = [v for v in job.members if v.pid not in workers and v.cpu_pct is not None]
    if not trainers:
        return None
    busy = max(trainers, key=lambda v: v.cpu_pct + (v.cpu_wait_pct or 0.0))
    own = busy.cpu_pct + (busy.cpu_wait_pct or 0.0)
    util = mean([g.util_pct for g in job.gpus])
    if own < TRAINER_BUSY_PCT or util is None or own + util < TRAINER_STEP_PCT:
        return None
    wait = busy.cpu_wait_pct
    line = (f"the trainer {pid_name(busy.pid, busy.name)} {pct(busy.cpu_pct)} on a CPU"
            + (f", {pct(wait)} waiting for one" if wait is not None else "")
            + f"; its loaders asleep: {lt.describe()}")
    details = [line]
    advice = ("the training loop's own Python is the bottleneck: profile the step "
              "(torch.profiler, py-spy), move work into the DataLoader workers or onto "
              "the GPU, fewer synchronisations (.item(), .cpu())")
    if wait is not None and wait >= t.loader_cpu_wait_pct:
        others = top_others(model, job)
        _job_cpu, others_cpu, ncpu = cpu_holders(model, job)
        if others:
            details.append(f"the CPUs are taken by {others}")
        elif others_cpu:
            details.append(f"the CPUs are taken by processes outside the job "
                           f"({others_cpu / 100:.1f} of the host's {ncpu} CPUs)")
    return IntervalState("cpu-starved", kind="trainer", detail="; ".join(details),
                         advice=advice)


def cpu(t: Thresholds, model: Model, job: Job, sats) -> IntervalState | None:
    """The loaders on a CPU or waiting for one.  When their time is known it alone
    decides: a busy host whose CPUs the loaders do not wait for is not the job's
    cause.  When it is not (no schedstat), the host's CPU and pressure do.  A job that
    cannot be seen is not judged here (unseen.py): the busy CPUs may be its own."""
    h = model.host
    if not job.visible:
        # its loaders cannot be read, and the host's CPU cannot stand in for them: the
        # busy CPUs may be the job's own (issue 38; unseen.py says so instead)
        return None
    lt = job.time
    details = []
    taken = False            # the loaders wait for CPUs that others hold
    if lt is not None:
        if lt.io_claim_pct is not None and lt.io_claim_pct > lt.cpu_share_pct:
            return None      # the loaders wait on reads more than on CPUs
        if (job.io_unreadable and lt.cpu_share_pct <= UNREAD_IO_CPU_PCT
                and not job_fills_cpus(t, model, job)):
            return None      # their unreadable reads may be the larger part
        loaders = [v for v in (job.workers or job.members) if v.cpu_pct is not None]
        # wrappers and launchers (timeout, torchrun's agent) asleep beside the workers
        # they start are not loaders: they would dilute the count of busy ones
        active = [v for v in loaders if v.cpu_pct + (v.cpu_wait_pct or 0.0)
                  + (v.io_wait_pct or 0.0) >= ACTIVE_PCT]
        loaders = active or loaders
        hot = [v for v in loaders
               if (v.cpu_pct or 0) + (v.cpu_wait_pct or 0) >= t.loader_cpu_pct]
        waiting = (lt.cpu_wait_pct is not None and lt.cpu_wait_pct >= t.loader_cpu_wait_pct
                   and lt.cpu_wait_pct >= (lt.io_claim_pct or 0.0))
        if len(hot) >= max(1, math.ceil(0.75 * len(loaders))):
            kind = "DataLoader worker" if job.workers else "process"
            cpu = mean([v.cpu_pct for v in hot])
            waits = [v.cpu_wait_pct for v in hot if v.cpu_wait_pct is not None]
            wait = mean(waits) if waits else None
            taken = wait is not None and wait >= t.loader_cpu_wait_pct
            line = (f"{len(hot)} {kind}{'s' if len(hot) != 1 else ''} of "
                    f"{job.describe().split(' and ')[0]} at {pct(cpu)} CPU"
                    f"{' each' if len(hot) > 1 else ''}")
            if wait is not None:
                line += f", waiting {pct(wait)} of the time for a CPU"
            details.append(line)
        elif waiting:
            taken = True
            details.append(lt.describe())
        elif job_fills_cpus(t, model, job):
            pass            # its wrappers dilute the loaders' mean: the job's sum says it
        elif lt.cpu_wait_pct is not None:
            return None
    if lt is None or (not details and lt.cpu_wait_pct is None):
        # no run-queue wait to tell whether the loaders wait for CPUs (too many of them
        # new to this interval, or the kernel has no schedstat): the host's CPU decides,
        # weighed against the job's own CPU, which is known (cpu_holders)
        host_busy = busy_pct(h)
        if host_busy is not None and 100 - host_busy < t.host_idle_pct:
            details.append(f"host CPU {pct(host_busy)} busy (iowait counted as idle)")
            taken = True
        if h is not None and h.psi_cpu_some_pct is not None and h.psi_cpu_some_pct >= t.cpu_pressure_pct:
            details.append(f"cpu pressure {pct(h.psi_cpu_some_pct)}")
            taken = True
        if not details:
            return None
    crowded = False          # the CPUs the loaders wait for are the job's own
    job_cpu, others_cpu, ncpu = cpu_holders(model, job)
    if not details and lt is not None and job_fills_cpus(t, model, job):
        crowded = True
        details.append(f"the job's own {len(job.members)} processes take "
                       f"{job_cpu / 100:.1f} of the host's {ncpu} CPUs, others "
                       f"{others_cpu / 100:.1f} (summed over the job: its wrappers and "
                       f"idle helpers cannot hide it)")
    elif taken and lt is not None and job_cpu is not None and job_cpu >= others_cpu:
        crowded, taken = True, False
        details.append(f"the job's own {len(job.members)} processes take "
                       f"{job_cpu / 100:.1f} of the host's {ncpu} CPUs, others "
                       f"{others_cpu / 100:.1f}")
    if taken:
        others = top_others(model, job)
        if others:
            details.append(f"the CPUs are taken by {others}")
        elif job_cpu is not None:
            # the busy CPUs' owners are not in our PID namespace (other containers)
            details.append(f"the CPUs are taken by processes outside the job "
                           f"({others_cpu / 100:.1f} of the host's {ncpu} CPUs), none "
                           "of them visible from here")
    quiet = quietest_storage(model, job, sats)
    if quiet:
        details.append(quiet)
    if job.io_unreadable and lt is not None:
        details.append(f"their reads cannot be read (not root): at most "
                       f"{pct(100 - lt.cpu_share_pct)} of their time")
    if taken:
        advice = ("the host's CPUs are taken by other processes: fewer or lower-priority "
                  "competing processes (nice), CPU pinning for the job, or a larger node")
    elif crowded:
        advice = ("the job's own processes crowd the CPUs: no more DataLoader workers "
                  "(plus the trainer's threads) than CPUs, lighter decoding and "
                  "augmentation, or a node with more CPUs")
    else:
        advice = ("the job's own loaders are busy: more DataLoader workers (num_workers) "
                  "if CPUs are free, or lighter decoding and augmentation (or on the "
                  "GPU: DALI)")
    kind = "others" if taken else "own"
    throttled = quota_throttled(h)
    if throttled:
        # a CPU-quota'd job looks exactly like a starved one: its loaders wait for CPUs
        # that are idle, held off by its cgroup's quota
        kind = "throttled"
        details.insert(0, throttled)
        advice = ("the job's cgroup runs out of its CPU quota: raise its CPU limit (docker "
                  "--cpus, Kubernetes resources.limits.cpu, cpu.max), or fewer DataLoader "
                  "workers so that the quota covers them")
    return IntervalState("cpu-starved", kind=kind, detail="; ".join(details), advice=advice)


def job_fills_cpus(t: Thresholds, model: Model, job: Job) -> bool:
    """The job's processes together take JOB_CPU_FULL_PCT of the CPUs it may use (the
    host's, or its cgroup's cpu.max where lower), and the host has no idle CPU left."""
    h = model.host
    job_cpu, _others, ncpu = cpu_holders(model, job)
    if job_cpu is None or not ncpu:
        return False
    cpus = float(ncpu)
    if h.cgroup_pid is not None and h.cgroup_cpu_limit_cpus:
        cpus = min(cpus, h.cgroup_cpu_limit_cpus)
    busy = busy_pct(h)
    return (job_cpu >= JOB_CPU_FULL_PCT * cpus
            and (busy is None or 100 - busy < t.host_idle_pct or cpus < ncpu))


def quota_throttled(h) -> str | None:
    """The job's cgroup held off the CPUs by its quota in THROTTLED_PCT or more of the
    periods: the evidence, else None."""
    if h is None or h.cgroup_throttled_pct is None or h.cgroup_throttled_pct < THROTTLED_PCT:
        return None
    whose = "the job's cgroup" if h.cgroup_pid is not None else "this cgroup"
    line = f"{whose} {h.cgroup_path}: CPU throttled {pct(h.cgroup_throttled_pct)} of periods"
    if h.cgroup_cpu_limit_cpus is not None:
        line += f" (limit {h.cgroup_cpu_limit_cpus:.1f} CPUs"
        line += f", used {h.cgroup_cpu_used_cpus:.1f})" if h.cgroup_cpu_used_cpus is not None else ")"
    if h.cgroup_cpu_some_pct is not None:
        line += f", cpu pressure {pct(h.cgroup_cpu_some_pct)}"
    return line


def cpu_holders(model: Model, job: Job) -> tuple[float | None, float, int]:
    """(the job's CPU, everybody else's, the host's CPUs), in % of one CPU: whose are
    the CPUs the loaders wait for.  iowait is idle."""
    h = model.host
    known = [v.cpu_pct for v in job.members if v.cpu_pct is not None]
    others = others_cpu_pct(h, sum(known)) if known else None
    if others is None:
        return None, 0.0, 0
    return sum(known), others, h.ncpu


def top_others(model: Model, job: Job, n: int = 3) -> str | None:
    """'pid 812 (ffmpeg) 180% CPU, pid 90 (tar) 95%': the busiest processes outside
    the job, as the collector follows them (model.procs not of the job; another job's
    named as its: 'pid 4121 (python) of job slurm 1001 (train.py) 99% CPU')."""
    mine = {v.pid for v in job.members}
    others = sorted((v for v in model.procs.values()
                     if (job.info is not None or v.root_pid is None) and v.pid not in mine
                     and (v.cpu_pct or 0) >= 5),
                    key=lambda v: -(v.cpu_pct or 0))[:n]
    if not others:
        return None
    owner = {pid: info for info in model.jobs for pid in info.pids}

    def who(v) -> str:
        info = owner.get(v.root_pid) if v.root_pid is not None else None
        return pid_name(v.pid, v.name) + (f" of job {info.name}" if info is not None else "")
    return ", ".join(f"{who(v)} {pct(v.cpu_pct)} CPU" for v in others)
