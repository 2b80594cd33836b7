"""Read /proc/self/mountstats into raw cumulative NFS client counters, one object per
NFS mount, keyed by mountpoint.

Format (Linux fs/nfs/super.c nfs_show_stats, net/sunrpc/stats.c rpc_clnt_show_stats,
net/sunrpc/xprtsock.c xs_*_print_stats, net/sunrpc/xprtrdma/transport.c
xprt_rdma_print_stats; the reader of reference is nfs-utils tools/nfs-iostat/nfs-iostat.py):

    device SRC mounted on MNT with fstype nfs|nfs4 statvers=1.0|1.1
        opts:   rw,vers=3,rsize=1048576,...,proto=tcp,nconnect=16,...
        age:    13968                       seconds since the mount
        events: 27 counters (inode revalidates, ... ; nfs-iostat.py NfsEventCounters)
        bytes:  normal_read normal_write direct_read direct_write server_read
                server_write read_pages write_pages
        RPC iostats version: 1.0|1.1  p/v: 100003/4 (nfs)
        xprt:   tcp|udp|rdma|local ...      one line per transport (nconnect=N: N lines)
        per-op statistics
                READ: ops trans major_timeouts bytes_sent bytes_recv queue_ms rtt_ms
                      execute_ms [errors]   (errors only with RPC iostats 1.1)

The xprt fields by transport, in the kernel's order (older kernels stop before the last
three):
    udp:   port bind_count sends recvs bad_xids req_u bklog_u [max_slots sending_u pending_u]
    tcp:   port bind_count connect_count connect_time idle_time sends recvs bad_xids
           req_u bklog_u [max_slots sending_u pending_u]
    local: as tcp without the port (AF_LOCAL)
    rdma:  as tcp up to bklog_u, then RPC/RDMA counters (read chunks, ...), kept as extra
connect_time and idle_time are printed in seconds (jiffies / HZ).  nfs-iostat.py reads
rdma's backlog one field early (words[10], which is req_u); we follow the kernel.

Other filesystems appear as "device X mounted on Y with fstype Z" with nothing after it:
they are skipped.  Nothing here raises on garbled text: a line that cannot be parsed is
left out and the rest of its mount is kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudisk_top.collect.mounts import unescape_mountinfo
from gpudisk_top.collect.roots import FileCache, Roots, read_text

NFS_FSTYPES = frozenset(("nfs", "nfs4"))

# bytes: in the kernel's order (enum nfs_stat_bytecounters)
BYTES_FIELDS = ("normal_read_bytes", "normal_write_bytes", "direct_read_bytes",
                "direct_write_bytes", "server_read_bytes", "server_write_bytes",
                "read_pages", "write_pages")

# the per-op counters, in the kernel's order (_print_rpc_iostats)
OP_FIELDS = ("ops", "trans", "major_timeouts", "bytes_sent", "bytes_recv", "queue_ms",
             "rtt_ms", "execute_ms")

# the xprt counters every transport prints, by position after the transport name
_XPRT_COMMON = ("bind_count", "connect_count", "connect_time_s", "idle_time_s", "sends",
                "recvs", "bad_xids", "req_u", "bklog_u")
_XPRT_LAYOUTS = {
    # name: (fields in order, how many must be there)
    "tcp": (("port",) + _XPRT_COMMON + ("max_slots", "sending_u", "pending_u"), 10),
    "local": (_XPRT_COMMON + ("max_slots", "sending_u", "pending_u"), 9),
    "udp": (("port", "bind_count", "sends", "recvs", "bad_xids", "req_u", "bklog_u",
             "max_slots", "sending_u", "pending_u"), 7),
    "rdma": (("port",) + _XPRT_COMMON, 10),
}


@dataclass(slots=True)
class NfsBytesRaw:
    """The `bytes:` line: what applications and the server moved, in bytes (pages for
    the last two).  normal_* went through the page cache, direct_* were O_DIRECT, and
    server_* is what READ and WRITE RPCs carried."""

    normal_read_bytes: int
    normal_write_bytes: int
    direct_read_bytes: int
    direct_write_bytes: int
    server_read_bytes: int
    server_write_bytes: int
    read_pages: int
    write_pages: int


@dataclass(slots=True)
class NfsXprtRaw:
    """One `xprt:` line, or the sum of a mount's lines (NfsMountRaw.xprt).  A field the
    transport does not print is None: udp has no connect fields, statvers 1.0 has no
    max_slots / sending_u / pending_u, local has no port."""

    transport: str                 # tcp | udp | rdma | local
    port: int | None
    bind_count: int
    connect_count: int | None
    connect_time_s: int | None
    idle_time_s: int | None
    sends: int
    recvs: int
    bad_xids: int
    req_u: int                     # sum over sends of the requests in flight
    bklog_u: int                   # sum over sends of the backlog queue length
    max_slots: int | None = None
    sending_u: int | None = None
    pending_u: int | None = None
    extra: tuple[int, ...] = ()    # rdma's RPC/RDMA counters, as printed


@dataclass(slots=True)
class NfsOpRaw:
    """One per-op statistics line.  Times are cumulative milliseconds; errors is None
    where the kernel prints no errors column (RPC iostats 1.0).  Not frozen: an NFSv4
    mount prints ~70 of these, and a frozen dataclass costs four times as much to make."""

    ops: int
    trans: int
    major_timeouts: int
    bytes_sent: int
    bytes_recv: int
    queue_ms: int
    rtt_ms: int
    execute_ms: int
    errors: int | None = None


@dataclass(slots=True)
class NfsMountRaw:
    """One NFS mount of /proc/self/mountstats: raw cumulative counters only.

    xprt is the sum of every xprt line (nconnect=N prints N): counters add up, port
    and transport are the first line's, idle_time_s is the smallest; xprts holds each
    line as printed.  A line that was missing or garbled leaves its field None (empty
    for events, xprts and ops).
    """

    source: str                    # server:/export
    mountpoint: str
    fstype: str                    # nfs | nfs4
    statvers: str                  # "1.0", "1.1", as printed
    opts: dict[str, str] = field(default_factory=dict)   # flag options map to ""
    age_s: int | None = None
    events: tuple[int, ...] = ()
    io_bytes: NfsBytesRaw | None = None
    rpc_iostats_version: str | None = None
    xprt: NfsXprtRaw | None = None
    xprts: tuple[NfsXprtRaw, ...] = ()
    ops: dict[str, NfsOpRaw] = field(default_factory=dict)


U64 = 1 << 64     # the kernel's counters are u64 (unsigned long, ktime in ms): no more


def _uint(token: str) -> int | None:
    """A u64 counter, or None: not digits, or more than 64 bits (no kernel printed it;
    and int() of a 5,000-digit token would raise)."""
    if not (token.isascii() and token.isdigit() and len(token) <= 20):
        return None
    value = int(token)
    return value if value < U64 else None


def _recorded_u64(counters: dict) -> dict:
    """The counters a recording holds that could be a kernel's: whole numbers in [0, 2^64)."""
    return {k: v for k, v in counters.items()
            if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < U64}


def _uints(tokens: list[str]) -> list[int] | None:
    """Every token as an unsigned integer, or None if one is not."""
    # one test of the joined digits, not one per token: ~550 per-op lines a second on a
    # node with 8 NFSv4 mounts, and this was most of their cost
    digits = "".join(tokens)
    if not (digits.isascii() and digits.isdigit()):
        return None if digits else []
    if max(map(len, tokens)) > 20:       # beyond 64 bits (and int() raises past 4,300)
        return None
    values = list(map(int, tokens))
    return values if max(values) < U64 else None


def _parse_device(parts: list[str]) -> tuple[str, str, str, str | None] | None:
    """(source, mountpoint, fstype, statvers or None) of a `device` line, else None.
    "no device mounted on ..." is how the kernel prints a mount without a source."""
    try:
        at = parts.index("mounted")
    except ValueError:
        return None
    if (at < 1 or len(parts) < at + 6 or parts[at + 1] != "on" or parts[at + 3] != "with"
            or parts[at + 4] != "fstype"):
        return None
    if parts[0] == "device" and at == 2:
        source = unescape_mountinfo(parts[1])
    elif parts[:2] == ["no", "device"] and at == 2:
        source = ""
    else:
        return None
    statvers = None
    for token in parts[at + 6:]:
        if token.startswith("statvers="):
            statvers = token[len("statvers="):]
    return source, unescape_mountinfo(parts[at + 2]), parts[at + 5], statvers


def _parse_opts(text: str) -> dict[str, str]:
    opts: dict[str, str] = {}
    for item in text.split(","):
        key, _, value = item.strip().partition("=")
        if key:
            opts[key] = value
    return opts


def parse_xprt(parts: list[str]) -> NfsXprtRaw | None:
    """One `xprt:` line split in words (without "xprt:"), or None when its transport is
    unknown or it has too few or non-numeric fields."""
    if not parts or parts[0] not in _XPRT_LAYOUTS:
        return None
    names, required = _XPRT_LAYOUTS[parts[0]]
    values = _uints(parts[1:])
    if values is None or len(values) < required:
        return None
    if parts[0] == "rdma":
        fields_ = dict(zip(names, values))
        extra = tuple(values[len(names):])
    else:
        # max_slots, sending_u and pending_u come as three or not at all (statvers 1.0)
        usable = len(names) if len(values) >= len(names) else required
        fields_ = dict(zip(names[:usable], values))
        extra = ()
    return NfsXprtRaw(transport=parts[0], port=fields_.get("port"),
                      bind_count=fields_["bind_count"],
                      connect_count=fields_.get("connect_count"),
                      connect_time_s=fields_.get("connect_time_s"),
                      idle_time_s=fields_.get("idle_time_s"),
                      sends=fields_["sends"], recvs=fields_["recvs"],
                      bad_xids=fields_["bad_xids"], req_u=fields_["req_u"],
                      bklog_u=fields_["bklog_u"], max_slots=fields_.get("max_slots"),
                      sending_u=fields_.get("sending_u"),
                      pending_u=fields_.get("pending_u"), extra=extra)


def _sum_optional(values) -> int | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def sum_xprts(xprts: tuple[NfsXprtRaw, ...]) -> NfsXprtRaw | None:
    """The transports of one mount as one: counters add up; transport and port are the
    first's; idle_time_s is the smallest (the transport used last).  None when empty."""
    if not xprts:
        return None
    if len(xprts) == 1:
        return xprts[0]
    first = xprts[0]
    idle = [x.idle_time_s for x in xprts if x.idle_time_s is not None]
    return NfsXprtRaw(
        transport=first.transport, port=first.port,
        bind_count=sum(x.bind_count for x in xprts),
        connect_count=_sum_optional(x.connect_count for x in xprts),
        connect_time_s=_sum_optional(x.connect_time_s for x in xprts),
        idle_time_s=min(idle) if idle else None,
        sends=sum(x.sends for x in xprts), recvs=sum(x.recvs for x in xprts),
        bad_xids=sum(x.bad_xids for x in xprts), req_u=sum(x.req_u for x in xprts),
        bklog_u=sum(x.bklog_u for x in xprts),
        max_slots=_sum_optional(x.max_slots for x in xprts),
        sending_u=_sum_optional(x.sending_u for x in xprts),
        pending_u=_sum_optional(x.pending_u for x in xprts),
        extra=tuple(map(sum, zip(*(x.extra for x in xprts)))) if first.extra else (),
    )


def parse_op(line: str) -> tuple[str, NfsOpRaw] | None:
    """One per-op line ("READ: 1298 1298 0 ..."), or None when it is not one.  A ninth
    number is the errors column; numbers past it (a future kernel's) are ignored."""
    return _parse_op_parts(line.split())


def _parse_op_parts(parts: list[str]) -> tuple[str, NfsOpRaw] | None:
    name = parts[0] if parts else ""
    if len(name) < 2 or name[-1] != ":" or len(parts) < 9:
        return None
    tokens = parts[1:10]
    digits = "".join(tokens)       # _uints, inlined: this runs for every op of every mount
    if not (digits.isascii() and digits.isdigit()) or max(map(len, tokens)) > 20:
        return None
    values = list(map(int, tokens))
    if max(values) >= U64:                 # no kernel prints more than 64 bits
        return None
    return name[:-1], NfsOpRaw(*values)   # the ninth, when there, is errors


def parse(text: str) -> dict[str, NfsMountRaw]:
    """Parse /proc/self/mountstats text into {mountpoint: NfsMountRaw} for its NFS mounts
    (fstype nfs or nfs4 with a statvers).  A mountpoint listed twice (one mount over
    another) keeps the last, the one that is visible.

    The kernel ends every line with a newline, so a last line without one was cut short
    (a partial read) and may have lost digits: it is not used.  Never raises.
    """
    mounts: dict[str, NfsMountRaw] = {}
    lines = text.split("\n")
    lines.pop()   # "" after the final newline, or the cut-off last line: never used
    mount: NfsMountRaw | None = None
    xprts: list[NfsXprtRaw] = []
    in_ops = False

    def finish() -> None:
        if mount is not None:
            mount.xprts = tuple(xprts)
            mount.xprt = sum_xprts(mount.xprts)

    for line in lines:
        parts = line.split()
        if not parts:
            continue
        head = parts[0]
        if head in ("device", "no") and line[:1] in ("d", "n"):
            device = _parse_device(parts)
            if device is None:
                continue
            finish()
            mount, xprts, in_ops = None, [], False
            source, mountpoint, fstype, statvers = device
            if fstype in NFS_FSTYPES and statvers is not None:
                mount = NfsMountRaw(source=source, mountpoint=mountpoint, fstype=fstype,
                                    statvers=statvers)
                mounts[mountpoint] = mount
            continue
        if mount is None:
            continue
        if in_ops:
            op = _parse_op_parts(parts)
            if op is not None:
                mount.ops[op[0]] = op[1]
            continue
        if head == "opts:":
            mount.opts = _parse_opts("".join(parts[1:]))
        elif head == "age:":
            mount.age_s = _uint(parts[1]) if len(parts) == 2 else None
        elif head == "events:":
            mount.events = tuple(_uints(parts[1:]) or ())
        elif head == "bytes:":
            values = _uints(parts[1:])
            mount.io_bytes = NfsBytesRaw(*values[:8]) if values and len(values) >= 8 else None
        elif head == "RPC" and parts[1:3] == ["iostats", "version:"] and len(parts) > 3:
            mount.rpc_iostats_version = parts[3]
        elif head == "xprt:":
            xprt = parse_xprt(parts[1:])
            if xprt is not None:
                xprts.append(xprt)
        elif head == "per-op" and parts[1:] == ["statistics"]:
            in_ops = True
    finish()
    return mounts


def read(roots: Roots, files: FileCache | None = None) -> dict[str, NfsMountRaw]:
    """Read and parse <procfs>/self/mountstats.  files: a roots.FileCache that keeps the
    file open between samples.  Never raises: an unreadable or missing file (no procfs,
    a kernel without NFS) gives {}."""
    path = roots.proc("self", "mountstats")
    text = files.read(path) if files is not None else read_text(path)
    return parse(text) if text is not None else {}


# ---------------------------------------------------------------------------- recorded
# What a recording keeps of an NFS mount (MountRaw.counters): READ's per-op counters and
# the transport's sends and backlog, as flat integers; from_counters() gives them back.
_READ_KEYS = tuple(f"read_{f}" for f in OP_FIELDS)


def mount_counters(raw: NfsMountRaw) -> dict[str, int]:
    out: dict[str, int] = {}
    op = raw.ops.get("READ")
    if op is not None:
        out.update(zip(_READ_KEYS, (getattr(op, f) for f in OP_FIELDS)))
        if op.errors is not None:
            out["read_errors"] = op.errors
    if raw.xprt is not None:
        out["xprt_sends"], out["xprt_bklog_u"] = raw.xprt.sends, raw.xprt.bklog_u
    if raw.age_s is not None:
        out["age_s"] = raw.age_s
    return out


def from_counters(mountpoint: str, fstype: str, source: str, counters: dict) -> NfsMountRaw:
    """The NfsMountRaw that mount_counters() was taken from, as far as it keeps it.  A
    value that no kernel could have printed (not a u64) is left out."""
    counters = _recorded_u64(counters)
    raw = NfsMountRaw(source=source, mountpoint=mountpoint, fstype=fstype, statvers="",
                      age_s=counters.get("age_s"))
    if all(k in counters for k in _READ_KEYS):
        raw.ops["READ"] = NfsOpRaw(*(counters[k] for k in _READ_KEYS), counters.get("read_errors"))
    if "xprt_sends" in counters and "xprt_bklog_u" in counters:
        raw.xprt = NfsXprtRaw(transport="", port=None, bind_count=0, connect_count=None,
                              connect_time_s=None, idle_time_s=None,
                              sends=counters["xprt_sends"], recvs=0, bad_xids=0, req_u=0,
                              bklog_u=counters["xprt_bklog_u"])
    return raw


def quick_counters(text: str, wanted) -> dict[str, dict]:
    """mount_counters() of the wanted NFS mountpoints straight from the text: each mount's
    block is found by its device line, and in it only age, the xprt lines and READ are
    read (the sampler's every-second path: a node's 8 NFSv4 mounts print 550 op lines,
    which parse() would split).  The same numbers as parse() (tests/test_netfs_stats.py)."""
    out: dict[str, dict] = {}
    if not text.endswith("\n"):
        text = text[:text.rfind("\n") + 1]     # a cut-off last line is never used
    for block in ("\n" + text).split("\ndevice ")[1:]:
        head, _, body = block.partition("\n")
        device = _parse_device(("device " + head).split())
        if device is None or device[1] not in wanted or device[2] not in NFS_FSTYPES \
                or device[3] is None:
            continue
        raw = NfsMountRaw(source=device[0], mountpoint=device[1], fstype=device[2],
                          statvers=device[3])
        xprts = []
        for line in body.split("\n"):
            stripped = line.lstrip()
            if stripped.startswith("xprt:"):
                xprt = parse_xprt(stripped.split()[1:])
                if xprt is not None:
                    xprts.append(xprt)
            elif stripped.startswith("age:"):
                parts = stripped.split()
                raw.age_s = _uint(parts[1]) if len(parts) == 2 else None
            elif stripped.startswith("per-op"):
                break
        raw.xprt = sum_xprts(tuple(xprts))
        at = body.find(" READ: ")
        if at < 0:
            at = body.find("\tREAD: ")
        if at >= 0:
            op = parse_op(body[at:body.find("\n", at)])
            if op is not None:
                raw.ops["READ"] = op[1]
        out[raw.mountpoint] = mount_counters(raw)
    return out


def read_counters(roots: Roots, mounts, files: FileCache | None = None,
                  pid: int | None = None) -> dict[str, dict]:
    """{mountpoint: mount_counters} of those NFS mounts (the job's MountRaw), from the
    mountstats of `pid` (a job process that sees them: its mount namespace names them as
    the MountRaw do), else our own."""
    path = roots.proc(str(pid) if pid is not None else "self", "mountstats")
    text = files.read(path) if files is not None else read_text(path)
    if text is None:
        return {}
    return quick_counters(text, {m.mountpoint for m in mounts})
