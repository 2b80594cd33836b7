"""NFS client rates over one interval, from two NfsMountRaw samples of the same mount.

Formulas.  The reference is nfs-utils' nfsiostat (tools/nfs-iostat/nfs-iostat.py,
DeviceData.compare_iostats, __print_rpc_op_stats and display_iostats), with d(x) the
counter's change over the interval:
  per op (READ, WRITE, GETATTR, ...), as nfsiostat prints them:
    ops_s           = d(ops) / interval_s
    kb_s            = (d(bytes_sent) + d(bytes_recv)) / 1024 / interval_s
                      (both directions and the RPC headers, as nfsiostat's kB/s)
    kb_per_op       = (d(bytes_sent) + d(bytes_recv)) / 1024 / d(ops)
    retrans         = d(trans) - d(ops);  retrans_pct = retrans * 100 / d(ops)
    rtt_ms_per_op   = d(rtt_ms) / d(ops)       "avg RTT (ms)"
    execute_ms_per_op = d(execute_ms) / d(ops) "avg exe (ms)"
    queue_ms_per_op = d(queue_ms) / d(ops)     "avg queue (ms)"
    errors          = d(errors), None where the kernel prints no errors column
  per mount:
    ops_s           = d(xprt sends) / interval_s           nfsiostat's "op/s"
    backlog_avg     = d(xprt bklog_u) / d(xprt sends)
The kernel adds the backlog queue's length to bklog_u at every send (xprt_transmit), so
backlog_avg is the mean number of requests waiting for a transport slot as each request
was sent: above 0, the mount has more requests than slots.  nfsiostat's "rpc bklog"
column divides that again by the interval (display_iostats:
`backlog = (float(backlogutil) / sends) / sample_time`), which makes it depend on the
interval; we do not copy that division.  With nconnect the xprt lines are summed
(collect.nfsstats.sum_xprts).

Read throughput, three ways, for three questions:
  read_kb_s         READ RPC traffic, as nfsiostat's kB/s for read (headers included);
  server_read_kb_s  d(bytes: server_read) / 1024 / interval_s: the file data READ
                    replies carried, what the server delivered;
  app_read_kb_s     d(bytes: normal_read + direct_read) / 1024 / interval_s: what
                    applications read, page-cache hits included.
app below server means read-ahead fetched more than was used; app above server means the
page cache served part of it.

Where we differ from nfsiostat, on purpose: a latency or per-op size over an interval
with no ops is None (nfsiostat prints 0.000, which reads as a fast server); a counter
that went down (a remount, or a new mount at the same mountpoint) makes every rate that
uses it None, never negative (nfsiostat prints the negative difference); a retrans below
zero (the kernel updates ops and trans apart, so a read can see one without the other)
is None.

What cannot be real is not passed on (the disks' rule, model/disk.py): an interval with a
rate beyond what any device can carry (MAX_OPS_S, MAX_DATA_BYTES_S), a backlog beyond the
transport's queue, or a mean request time longer than the mount has existed gives no
rates at all, and `dropped` says why; so does a counter that went down.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudisk_top.collect.nfsstats import NfsMountRaw, NfsOpRaw
from gpudisk_top.model.disk import beyond_ceilings

# the ops NfsRates names on its own; every op is in NfsRates.ops
READ_OP = "READ"
WRITE_OP = "WRITE"


@dataclass(slots=True)
class NfsOpRates:
    """One RPC procedure over one interval (nfsiostat's columns).  None: not computable
    (no ops in the interval for the per-op means, a counter that went down)."""

    ops_s: float | None = None
    kb_s: float | None = None
    kb_per_op: float | None = None
    retrans: int | None = None
    retrans_s: float | None = None
    retrans_pct: float | None = None
    rtt_ms_per_op: float | None = None
    execute_ms_per_op: float | None = None
    queue_ms_per_op: float | None = None
    errors: int | None = None
    errors_s: float | None = None


@dataclass(slots=True)
class NfsRates:
    """One NFS mount over one interval.  The read_* fields are the READ op's; ops holds
    every op present in both samples.  None: not computable (see the module docstring)."""

    mountpoint: str
    interval_s: float
    ops_s: float | None = None               # RPC requests sent a second (xprt sends)
    backlog_avg: float | None = None         # requests waiting for a slot, mean per send
    retrans_s: float | None = None           # retransmissions a second, all ops
    read_ops_s: float | None = None
    read_kb_s: float | None = None
    read_kb_per_op: float | None = None
    read_retrans_s: float | None = None
    read_rtt_ms_per_op: float | None = None
    read_execute_ms_per_op: float | None = None
    read_queue_ms_per_op: float | None = None
    server_read_kb_s: float | None = None
    app_read_kb_s: float | None = None
    write_ops_s: float | None = None
    write_kb_s: float | None = None
    write_rtt_ms_per_op: float | None = None
    write_execute_ms_per_op: float | None = None
    ops: dict[str, NfsOpRates] = field(default_factory=dict)
    # why rates are missing: the mount was mounted again, a counter went down (that
    # counter's rates are None), or the interval is impossible (every rate None)
    dropped: str | None = None


def _delta(cur: int | None, prev: int | None) -> int | None:
    if cur is None or prev is None or cur < prev:
        return None
    return cur - prev


def _per(numerator: int | None, denominator: int | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def op_rates(cur: NfsOpRaw, prev: NfsOpRaw, interval_s: float) -> NfsOpRates:
    """nfsiostat's columns for one op over interval_s seconds (> 0)."""
    d_ops = _delta(cur.ops, prev.ops)
    d_trans = _delta(cur.trans, prev.trans)
    d_sent = _delta(cur.bytes_sent, prev.bytes_sent)
    d_recv = _delta(cur.bytes_recv, prev.bytes_recv)
    d_kb = (d_sent + d_recv) / 1024 if d_sent is not None and d_recv is not None else None
    retrans = d_trans - d_ops if d_trans is not None and d_ops is not None else None
    if retrans is not None and retrans < 0:
        retrans = None
    errors = _delta(cur.errors, prev.errors)
    return NfsOpRates(
        ops_s=d_ops / interval_s if d_ops is not None else None,
        kb_s=d_kb / interval_s if d_kb is not None else None,
        kb_per_op=_per(d_kb, d_ops),
        retrans=retrans,
        retrans_s=retrans / interval_s if retrans is not None else None,
        retrans_pct=_per(retrans * 100 if retrans is not None else None, d_ops),
        rtt_ms_per_op=_per(_delta(cur.rtt_ms, prev.rtt_ms), d_ops),
        execute_ms_per_op=_per(_delta(cur.execute_ms, prev.execute_ms), d_ops),
        queue_ms_per_op=_per(_delta(cur.queue_ms, prev.queue_ms), d_ops),
        errors=errors,
        errors_s=errors / interval_s if errors is not None else None,
    )


def _kb_s(cur: int | None, prev: int | None, interval_s: float) -> float | None:
    d = _delta(cur, prev)
    return d / 1024 / interval_s if d is not None else None


def nfs_rates(cur: NfsMountRaw, prev: NfsMountRaw, interval_s: float) -> NfsRates:
    """The rates of one mount between prev and cur, taken interval_s seconds apart.

    Never raises.  Every rate is None when interval_s is not above 0, when the two
    samples are of different mounts (another source or fstype at the mountpoint), or
    when the mount's age went down (it was mounted again).
    """
    out = NfsRates(mountpoint=cur.mountpoint, interval_s=interval_s)
    if not interval_s > 0 or cur.source != prev.source or cur.fstype != prev.fstype:
        return out
    if cur.age_s is not None and prev.age_s is not None and cur.age_s < prev.age_s:
        out.dropped = (f"mounted again (its age went from {prev.age_s} to {cur.age_s} s): "
                       "no rates this interval")
        return out
    out = _nfs_rates(cur, prev, interval_s, out)
    why = _impossible(out, cur.age_s)
    if why is not None:
        return NfsRates(mountpoint=cur.mountpoint, interval_s=interval_s,
                        dropped=f"no rates this interval: {why}")
    out.dropped = _went_down(cur, prev)
    return out


# the counters of an op whose fall is said (errors is optional)
_OP_COUNTERS = ("ops", "trans", "bytes_sent", "bytes_recv", "rtt_ms", "execute_ms",
                "queue_ms", "errors")


def _went_down(cur: NfsMountRaw, prev: NfsMountRaw) -> str | None:
    """One line naming the first counter that went down (its rates are None), or None."""
    pairs = []
    if cur.xprt is not None and prev.xprt is not None:
        pairs += [("xprt sends", cur.xprt.sends, prev.xprt.sends),
                  ("xprt bklog_u", cur.xprt.bklog_u, prev.xprt.bklog_u)]
    for name, op in cur.ops.items():
        before = prev.ops.get(name)
        if before is not None:
            pairs += [(f"{name} {f}", getattr(op, f), getattr(before, f)) for f in _OP_COUNTERS]
    for label, now, was in pairs:
        if now is not None and was is not None and now < was:
            return (f"{label} went down from {was} to {now} (its statistics were reset): "
                    "what uses it is n/a this interval")
    return None


# the transport's backlog queue length is an unsigned short (struct rpc_wait_queue.qlen),
# so its mean over the sends cannot be more
MAX_BACKLOG = 65535


def _impossible(r: NfsRates, age_s: int | None) -> str | None:
    """Why this interval cannot be real (the disks' ceilings, model/disk.py; a backlog
    beyond its queue; a request longer than the mount has existed), or None."""
    ops = [("op/s", r.ops_s), ("retrans/s", r.retrans_s)]
    data = [("server read kB/s", r.server_read_kb_s), ("app read kB/s", r.app_read_kb_s)]
    for name, op in r.ops.items():
        ops += [(f"{name} ops/s", op.ops_s), (f"{name} retrans/s", op.retrans_s),
                (f"{name} errors/s", op.errors_s)]
        data.append((f"{name} kB/s", op.kb_s))
    why = beyond_ceilings(ops, data)
    if why is not None:
        return why
    if r.backlog_avg is not None and not r.backlog_avg <= MAX_BACKLOG:
        return f"a backlog of {r.backlog_avg:.3g} is more than its queue holds ({MAX_BACKLOG})"
    if age_s is not None:
        longest_ms = (age_s + 1) * 1000.0
        for name, op in r.ops.items():
            for what, ms in (("RTT", op.rtt_ms_per_op), ("exe", op.execute_ms_per_op),
                             ("queue", op.queue_ms_per_op)):
                if ms is not None and not ms <= longest_ms:
                    return (f"{name} avg {what} {ms:.3g} ms is longer than the mount has "
                            f"existed ({age_s} s)")
    return None


def _nfs_rates(cur: NfsMountRaw, prev: NfsMountRaw, interval_s: float,
               out: NfsRates) -> NfsRates:
    if cur.xprt is not None and prev.xprt is not None:
        d_sends = _delta(cur.xprt.sends, prev.xprt.sends)
        out.ops_s = d_sends / interval_s if d_sends is not None else None
        out.backlog_avg = _per(_delta(cur.xprt.bklog_u, prev.xprt.bklog_u), d_sends)
    retrans_total = 0
    for name, op in cur.ops.items():
        before = prev.ops.get(name)
        if before is None:
            continue
        rates = op_rates(op, before, interval_s)
        out.ops[name] = rates
        if retrans_total is not None:
            retrans_total = retrans_total + rates.retrans if rates.retrans is not None else None
    if out.ops and retrans_total is not None:
        out.retrans_s = retrans_total / interval_s
    read = out.ops.get(READ_OP)
    if read is not None:
        out.read_ops_s, out.read_kb_s, out.read_kb_per_op = read.ops_s, read.kb_s, read.kb_per_op
        out.read_retrans_s = read.retrans_s
        out.read_rtt_ms_per_op = read.rtt_ms_per_op
        out.read_execute_ms_per_op = read.execute_ms_per_op
        out.read_queue_ms_per_op = read.queue_ms_per_op
    write = out.ops.get(WRITE_OP)
    if write is not None:
        out.write_ops_s, out.write_kb_s = write.ops_s, write.kb_s
        out.write_rtt_ms_per_op = write.rtt_ms_per_op
        out.write_execute_ms_per_op = write.execute_ms_per_op
    b, pb = cur.io_bytes, prev.io_bytes
    if b is not None and pb is not None:
        out.server_read_kb_s = _kb_s(b.server_read_bytes, pb.server_read_bytes, interval_s)
        app_d_normal = _delta(b.normal_read_bytes, pb.normal_read_bytes)
        app_d_direct = _delta(b.direct_read_bytes, pb.direct_read_bytes)
        if app_d_normal is not None and app_d_direct is not None:
            out.app_read_kb_s = (app_d_normal + app_d_direct) / 1024 / interval_s
    return out
