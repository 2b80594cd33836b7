"""A network or FUSE mount over one interval, from two MountRaw samples (collect/mounts.py).

NFS: the READ operation's rates as nfs-utils' nfsiostat computes them, and the
transport's backlog (model/nfs.py owns the formulas).  Lustre: read kB/s and latency
(model/lustre.py).  FUSE: `waiting`, the requests the daemon has not answered yet (a
level, at the sample), and the daemon's CPU and its read() bytes (sockets and files: its
network, mostly).  A counter that went down (a remount) gives None, never a negative rate;
an interval whose rates no device could carry (the disks' ceilings), or a `waiting` no
kernel could count, gives none at all; `dropped` says why either way.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudisk_top.collect import lustre, nfsstats
from gpudisk_top.collect.sample import MountRaw
from gpudisk_top.model.lustre import lustre_rates
from gpudisk_top.model.nfs import nfs_rates


@dataclass(slots=True)
class MountView:
    mountpoint: str
    fstype: str
    source: str
    kind: str                       # nfs | lustre | fuse | network
    waiting: int | None = None      # FUSE: requests in flight at the sample
    read_ops_s: float | None = None
    read_kb_s: float | None = None
    rtt_ms: float | None = None     # NFS: per READ, the server's round trip
    exec_ms: float | None = None    # NFS: per READ, queued to done; Lustre: per read
    queue_ms: float | None = None
    retrans_s: float | None = None
    backlog: float | None = None
    daemon_pid: int | None = None
    daemon_cpu_pct: float | None = None
    daemon_rchar_kb_s: float | None = None
    job_read_ms: float | None = None  # seen from the job: off-CPU time per read() (loaders)
    readers: int = 0                # the job's processes with files on it
    blocked: int = 0                # ... and in a read() on it at the sample
    dropped: str | None = None      # why rates or `waiting` are missing this interval

    @property
    def label(self) -> str:
        """'/data (nfs4 10.0.0.5:/ds)'."""
        return f"{self.mountpoint} ({self.fstype} {self.source})"


def _unusable(cur: MountRaw, prev: MountRaw) -> str | None:
    """Why some of the counters cannot be used (the readers leave such values out, and
    what needs them is None): one no kernel could print (not a u64), or one the previous
    sample had that this one lacks (its line could not be read).  None when all can."""
    for raw in (cur, prev):
        for key, value in raw.counters.items():
            if key != "waiting" and not (isinstance(value, int) and not isinstance(value, bool)
                                         and 0 <= value < 1 << 64):
                shown = f"{value:.3g}" if isinstance(value, (int, float)) else repr(value)[:40]
                return f"counter {key} = {shown} is not a 64-bit count: what uses it is n/a"
    lost = sorted(k for k in prev.counters if k not in cur.counters and k != "waiting")
    if lost:
        return (f"counter{'s' * (len(lost) > 1)} {', '.join(lost[:3])} could not be read "
                "this sample: what uses them is n/a")
    return None


def _rates(v: MountView, cur: MountRaw, prev: MountRaw, interval_s: float) -> None:
    """The kind's own rates, from the counters a recording keeps of them."""
    unusable = _unusable(cur, prev)
    if cur.kind == "nfs":
        r = nfs_rates(nfsstats.from_counters(cur.mountpoint, cur.fstype, cur.source, cur.counters),
                      nfsstats.from_counters(prev.mountpoint, prev.fstype, prev.source,
                                             prev.counters), interval_s)
        v.read_ops_s, v.read_kb_s = r.read_ops_s, r.read_kb_s
        v.rtt_ms, v.exec_ms = r.read_rtt_ms_per_op, r.read_execute_ms_per_op
        v.queue_ms, v.retrans_s, v.backlog = r.read_queue_ms_per_op, r.read_retrans_s, r.backlog_avg
        v.dropped = r.dropped
    elif cur.kind == "lustre":
        r = lustre_rates(lustre.from_counters(cur.mountpoint, cur.counters),
                         lustre.from_counters(prev.mountpoint, prev.counters), interval_s)
        v.read_ops_s, v.read_kb_s, v.exec_ms = r.read_ops_s, r.read_kb_s, r.read_latency_ms_per_op
        v.dropped = r.dropped
    if v.dropped is None and cur.kind in ("nfs", "lustre"):
        v.dropped = unusable


# FUSE's `waiting` is an atomic_t (struct fuse_conn.num_waiting): an int, never below 0
MAX_WAITING = (1 << 31) - 1


def _waiting(value) -> tuple[int | None, str | None]:
    """FUSE's `waiting` as read or recorded: (the count, None), or (None, why not)."""
    if value is None:
        return None, None
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_WAITING:
        return value, None
    return None, (f"FUSE waiting {value!r} cannot be (the kernel's count is 0 to "
                  f"{MAX_WAITING}): not shown")


def mount_views(cur: dict[str, MountRaw], prev: dict[str, MountRaw] | None,
                procs: dict, interval_s: float) -> dict[str, MountView]:
    """Every mount of cur; procs: the model's ProcViews (the job's, its daemons')."""
    out: dict[str, MountView] = {}
    for mp, raw in cur.items():
        waiting, bad_waiting = _waiting(raw.counters.get("waiting"))
        v = MountView(mp, raw.fstype, raw.source, raw.kind, waiting=waiting,
                      daemon_pid=raw.daemon_pid, dropped=bad_waiting)
        p = prev.get(mp) if prev is not None else None
        if p is not None and interval_s > 0 and p.kind == raw.kind and p.source == raw.source:
            _rates(v, raw, p, interval_s)
        daemon = procs.get(raw.daemon_pid) if raw.daemon_pid is not None else None
        if daemon is not None:
            v.daemon_cpu_pct, v.daemon_rchar_kb_s = daemon.cpu_pct, daemon.rchar_kb_s
        for view in procs.values():
            if view.root_pid is not None and mp in view.mounts:
                v.readers += 1
                v.blocked += view.blocked_on == mp
        out[mp] = v
    return out


def like_disk(v: MountView) -> dict[str, float | None]:
    """What a mount's numbers stand for in iostat's columns, for its row beside the
    disks and on the timeline: reads/s, read kB/s, the latency of a read (the mount's own
    where it keeps one, else the job's view) and the requests queued."""
    return {"r_s": v.read_ops_s, "rkb_s": v.read_kb_s,
            "r_await_ms": v.exec_ms if v.exec_ms is not None else v.job_read_ms,
            "aqu_sz": v.waiting if v.waiting is not None else v.backlog}
