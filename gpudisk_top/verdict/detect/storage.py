"""The reads the job waits on: a block device (saturated, or latency-bound with headroom
left), a network or FUSE mount, and the stall nothing explains (undiagnosed: what is
saturated elsewhere, what is not).  Each rule takes one interval's Model, the Job and the
devices' Saturation and returns an IntervalState with its evidence, or None where it does
not hold; classify.py asks them in order.  The device a partition belongs to is named as
the disk table shows it (display)."""

from __future__ import annotations

from gpudisk_top.collect.blockdev import device_stack
from gpudisk_top.model.health import evidence_clause, health_of
from gpudisk_top.model.host import busy_pct
from gpudisk_top.model.present import pct
from gpudisk_top.model.snapshot import Model
from gpudisk_top.model.vocab import DISK
from gpudisk_top.verdict.ceiling import headroom
from gpudisk_top.verdict.detect.evidence import (Culprit, culprits_clause, culprits_of,
                                                 storage_advice)
from gpudisk_top.verdict.detect.job import Job
from gpudisk_top.verdict.detect.remote import mount_advice, mount_evidence
from gpudisk_top.verdict.detect.saturation import Saturation
from gpudisk_top.verdict.detect.states import IntervalState
from gpudisk_top.verdict.detect.thresholds import Thresholds

_PREFERRED_KINDS = ("disk", "dm", "md")  # what the disk table shows by default
# loaders blocked on reads less than this share of the time do not wait on the device,
# however saturated it is (by others): 64 workers sharing an HDD queue of 9 are each
# blocked 14 % of the time, and that is waiting
HARDLY_BLOCKED_PCT = 5.0


def display(model: Model, name: str) -> str:
    info = model.devices.get(name)
    return info.display_name if info else name


def health_clause(model: Model, name: str) -> str:
    """'; composite temperature 78 °C, above its 75 °C warning for 14 min: thermal
    throttling' when the disk under `name` is hot or logs media errors (model/health.py
    evidence_clause): a dying or throttling disk looks saturated by every other number."""
    clause = evidence_clause(health_of(model.health, model.devices, name))
    return f"; {clause}" if clause else ""


def feeding_devices(model: Model, job: Job, sats) -> list[Saturation]:
    """Saturated devices under files the job's readers have open, best first."""
    found = {n: sats[n] for n in _job_read_devices(model, job)
             if n in sats and sats[n].saturated and sats[n].read_kb_s > 0}
    return _rank(model, found.values())


def _rank(model: Model, sats) -> list[Saturation]:
    def key(s: Saturation):
        info = model.devices.get(s.name)
        preferred = info is not None and info.kind in _PREFERRED_KINDS
        return (not preferred, -(s.await_ms / s.baseline_ms if s.baseline_ms else 0), s.name)
    return sorted(sats, key=key)


def disk(t: Thresholds, model: Model, job: Job, sats, mixed: bool = False) -> IntervalState | None:
    """mixed: the reads hold a real share beside a wait for others' CPUs and their
    fixes gain more (_whatif): judged as storage even under loader_io_wait_pct."""
    if job.visible:
        lt = job.time
        # the reads' claim: an estimate cut to the shares' 100 % still weighs in full
        # against the CPU (model/loaders.py)
        io = lt.io_claim_pct if lt is not None else None
        feeding = feeding_devices(model, job, sats)
        # a saturated device the job reads from is the cause unless the loaders' time
        # says they are CPU-bound instead (then reads are not what they wait on)
        cpu_bound = (lt is not None and lt.cpu_share_pct >= t.loader_cpu_pct
                     and lt.cpu_share_pct > (io or 0.0))
        # ... and unless they are hardly ever blocked on reads (their reads are few,
        # or served from the page cache: the device is busy with others' I/O)
        waits = io is None or io >= HARDLY_BLOCKED_PCT
        if feeding and not cpu_bound and waits:
            kind, s = "saturated", feeding[0]
        elif io is not None and (io >= t.loader_io_wait_pct or mixed) and not cpu_bound:
            # blocked on reads a large share of the time, and not CPU-bound: however
            # long they also wait for a CPU (others' load beside the job), the reads
            # are what a job of synchronous readers waits on
            kind, s = "latency-bound", _device_of(model, lt.device, sats)
        else:
            return None
        culprits: list[Culprit] = []
        if s is None:
            detail = f"{lt.describe()}; {job.describe()}"
        else:
            share = min(100.0, job.read_kb_s / s.read_kb_s * 100) if s.read_kb_s else 0.0
            evidence = (s.evidence(display(model, s.name)) if kind == "saturated"
                        else _headroom(model, s, lt)) + health_clause(model, s.name)
            mine = f"{pct(share)} of its reads from {job.describe()}"
            culprits = culprits_of(model, s.name, job=job) if share < 90 else []
            if culprits and sum(c.read_share_pct or 0.0 for c in culprits) > share:
                # the neighbour holds more of the device than the job: named first, so
                # that a banner cut to its first clauses still says who
                detail = f"{evidence}; read by {culprits_clause(culprits)}; {mine}"
            elif culprits:
                detail = (f"{evidence}; {mine}; {'also ' if share >= 10 else ''}read by "
                          f"{culprits_clause(culprits)}")
            else:
                detail = f"{evidence}; {mine}"
            if lt is not None and lt.io_wait_pct is not None:
                detail += f"; {lt.describe()}"
        advice = (_disk_advice(model, job, s, culprits) if kind == "saturated" else
                  "the device has headroom: more DataLoader workers (num_workers), larger "
                  "or parallel reads (bigger files or chunks, a thread pool or io_uring "
                  "per worker), and prefetch (prefetch_factor)")
        return IntervalState("disk-starved", kind=kind,
                             devices=[s.name] if s is not None else [], detail=detail,
                             advice=advice, culprits=culprits)
    else:
        busy = [s for s in sats.values() if s.saturated and s.read_kb_s > 0]
        if not busy:
            return None
        s = max(busy, key=lambda x: x.read_kb_s)
        detail = (f"{s.evidence(display(model, s.name))}{health_clause(model, s.name)}; "
                  f"the job's processes cannot "
                  f"be seen from here (another PID namespace, or no permission), so this "
                  f"is the busiest saturated disk, not a proven cause")
        culprits = culprits_of(model, s.name, job=job)
        if culprits:
            detail += f"; read by {culprits_clause(culprits)}"
    return IntervalState("disk-starved", kind="saturated", devices=[s.name], detail=detail,
                         advice=_disk_advice(model, job, s, culprits),
                         culprits=culprits)


def mount(t: Thresholds, model: Model, job: Job) -> IntervalState | None:
    """The loaders wait on reads from a network or FUSE mount (model/loaders.py): no
    block device shows it, so it is told by where they sleep, with the mount's own
    numbers as its evidence."""
    lt = job.time if job.visible else None
    if lt is None or lt.mount_wait_pct is None or lt.mount_wait_pct < t.loader_io_wait_pct:
        return None
    if lt.cpu_share_pct >= t.loader_cpu_pct:
        return None                 # CPU-bound loaders: their reads are not the wait
    m = model.mounts.get(lt.mount)
    if m is None:
        return None
    detail = (f"{m.label}: {mount_evidence(m)}; {lt.mount_blocked} of {lt.count} "
              f"{lt.kind}s in a read of it at the sample, {pct(lt.mount_wait_pct)} of their "
              f"time waiting on it" + (f", {lt.mount_read_ms:.1f} ms a read" if lt.mount_read_ms
                                       is not None else "")
              + f"; {job.describe()}")
    return IntervalState("disk-starved", kind="remote-mount", devices=[m.mountpoint],
                         detail=detail, advice=mount_advice(m))


def _device_of(model: Model, leaf: str | None, sats) -> Saturation | None:
    """The disk (or dm/md device) a partition belongs to, as the disk table shows it."""
    if leaf is None:
        return None
    stack = [n for n in device_stack(model.devices, leaf) if n in sats]
    preferred = [n for n in stack if model.devices.get(n) is not None
                 and model.devices[n].kind in _PREFERRED_KINDS]
    pick = (preferred or stack or [None])[0]
    return sats.get(pick) if pick is not None else None


def _headroom(model: Model, s: Saturation, lt) -> str:
    """'vda at 30752.00 r/s (peak seen 98000), r_await 0.07 ms, aqu-sz 2.20: not
    saturated, so each synchronous read of 4 KiB waits 0.07 ms'."""
    ceiling = headroom(s)     # the probe's ceiling where believed (verdict/ceiling.py)
    size = f" of {lt.read_kb:.0f} KiB" if lt.read_kb else ""
    return (f"{display(model, s.name)} at {DISK['r_s'].text(s.r_s)} r/s{ceiling}, "
            f"{s.latency('', baseline=False)}: not saturated, so each "
            f"synchronous read{size} waits {DISK['r_await_ms'].text(s.await_ms)} ms")


def _disk_advice(model: Model, job: Job, s: Saturation | None,
                 culprits: list[Culprit]) -> str:
    """verdict/detect/evidence.py storage_advice for the device `s` the job waits on."""
    job_seen = job.visible and job.running
    return storage_advice(model.host, culprits,
                          display(model, s.name) if s is not None else "the device",
                          job.direct_reads if job_seen else None,
                          job.data_kb if job_seen else None)


def quietest_storage(model: Model, job: Job, sats) -> str | None:
    names = [n for dev in job.device_readers for n in device_stack(model.devices, dev)
             if n in sats]
    if not names:
        return None
    s = max((sats[n] for n in names), key=lambda x: x.read_kb_s)
    return f"storage not saturated ({s.latency(display(model, s.name), baseline=False)})"


def _job_read_devices(model: Model, job: Job) -> list[str]:
    """Devices (and the devices under them) that the job's reading processes have files on."""
    readers = {v.pid for v in job.members if (v.read_kb_s or 0) > 0}
    return [n for dev, pids in job.device_readers.items() if readers.intersection(pids)
            for n in device_stack(model.devices, dev)]


def undiagnosed(model: Model, job: Job, sats) -> IntervalState:
    feeding = [n for n in _job_read_devices(model, job) if n in sats]
    elsewhere = [s for s in sats.values() if s.saturated and s.name not in feeding]
    # a saturated device the job reads from, which its loaders' time says they do not
    # wait on (_disk): said so, not "nothing saturated"
    ignored = [display(model, s.name) for s in feeding_devices(model, job, sats)]
    parts = [f"{', '.join(ignored)} saturated, but the job's loaders are not waiting on "
             f"{'its' if len(ignored) == 1 else 'their'} reads" if ignored else
             "nothing the job reads from is saturated" if elsewhere else "nothing saturated"]
    pool = [sats[n] for n in feeding] or list(sats.values())
    if pool:
        s = max(pool, key=lambda x: x.read_kb_s + x.write_kb_s)
        parts.append(f"busiest disk {s.latency(display(model, s.name))}")
    culprits: list[Culprit] = []
    for s in sorted(elsewhere, key=lambda x: x.name):
        others = culprits_of(model, s.name, job=job)
        culprits += others
        by = f" (read by {culprits_clause(others)})" if others else ""
        parts.append(f"{display(model, s.name)} saturated{by}, but the job does not "
                     "read from it")
    busy = busy_pct(model.host)
    if busy is not None:
        parts.append(f"CPU idle {pct(100 - busy)} (iowait counted as idle)")
    lt = job.time if job.visible else None
    if lt is not None:
        parts.append(lt.describe())
    if not job.visible:
        parts.append("the job's processes cannot be seen from here")
    return IntervalState("undiagnosed-stall", detail="; ".join(parts), culprits=culprits,
                         advice="profile the step (torch.profiler): synchronisation, "
                                "small kernels or a host-side wait")
