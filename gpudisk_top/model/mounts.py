"""A network or FUSE mount over one interval, from two MountRaw samples (collect/mounts.py).

NFS, per the READ operation, as nfs-utils' nfsiostat computes them (tools/nfs-iostat/
nfs-iostat.py, __print_rpc_op_stats): ops/s = d(ops) / t; kB/s = d(bytes received) /
1024 / t; avg RTT and avg exe (ms) = d(rtt) / d(ops) and d(execute) / d(ops); avg queue
= d(queue) / d(ops); retransmissions = d(transmissions) - d(ops).  The transport's
backlog: d(bklog_u) / d(sends), the mean backlog queue length a request saw
(mountstats' xprt line, as `mountstats --xprt` shows it).
Lustre llite: read kB/s from read_bytes' sum; ms per read from the read latency counter
(usec) where the client keeps one.
FUSE: `waiting`, the requests the daemon has not answered yet (a level, at the sample),
and the daemon's CPU and its read() bytes (sockets and files: its network, mostly).
A counter that went down (a remount) gives None, never a negative rate.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudisk_top.collect.sample import MountRaw


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

    @property
    def label(self) -> str:
        """'/data (nfs4 10.0.0.5:/ds)'."""
        return f"{self.mountpoint} ({self.fstype} {self.source})"


def _delta(cur: dict, prev: dict, key: str) -> int | None:
    a, b = cur.get(key), prev.get(key)
    if a is None or b is None or a < b:
        return None
    return a - b


def _per(num: int | None, den: int | None, scale: float = 1.0) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num / den * scale


def mount_views(cur: dict[str, MountRaw], prev: dict[str, MountRaw] | None,
                procs: dict, interval_s: float) -> dict[str, MountView]:
    """Every mount of cur; procs: the model's ProcViews (the job's, its daemons')."""
    out: dict[str, MountView] = {}
    for mp, raw in cur.items():
        v = MountView(mp, raw.fstype, raw.source, raw.kind, waiting=raw.counters.get("waiting"),
                      daemon_pid=raw.daemon_pid)
        p = prev.get(mp) if prev is not None else None
        if p is not None and interval_s > 0 and p.kind == raw.kind:
            c, q = raw.counters, p.counters
            ops = _delta(c, q, "read_ops")
            v.read_ops_s = _per(ops, 1, 1 / interval_s)
            v.rtt_ms = _per(_delta(c, q, "read_rtt_ms"), ops)
            v.exec_ms = _per(_delta(c, q, "read_exec_ms"), ops)
            v.queue_ms = _per(_delta(c, q, "read_queue_ms"), ops)
            trans = _delta(c, q, "read_trans")
            v.retrans_s = (trans - ops) / interval_s if trans is not None and ops is not None else None
            v.backlog = _per(_delta(c, q, "xprt_bklog_u"), _delta(c, q, "xprt_sends"))
            received = _delta(c, q, "read_bytes_recv")
            if received is None:                      # Lustre: read_bytes' sum
                received = _delta(c, q, "read_bytes_sum")
                samples = _delta(c, q, "read_bytes_samples")
                v.read_ops_s = v.read_ops_s if samples is None else samples / interval_s
                v.exec_ms = _per(_delta(c, q, "read_usec_sum"), _delta(c, q, "read_usec_samples"),
                                 1e-3)
            v.read_kb_s = None if received is None else received / 1024 / interval_s
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
