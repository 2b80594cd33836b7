"""Storage that is not a local disk: which mounts the job's files live on, and what they say.

A dataset on NFS, Lustre or a FUSE mount (s3fs, gcsfuse, mountpoint-s3, JuiceFS,
blobfuse) never shows in /proc/diskstats.  A process's open files and file mappings give
their st_dev (collect/procio.py); a block device's is its MAJ:MIN, a network or FUSE
filesystem's an anonymous 0:N.  /proc/PID/mountinfo (proc(5)) names the mount of each
st_dev: field 3 MAJ:MIN, field 5 the mountpoint, after the " - " separator the fstype
and the source.  Read from the job's own mountinfo (its mount namespace, in a container)
and kept for MOUNTS_REFRESH_S.

Each mount the job uses that is not a local block device becomes a MountRaw with its
counters as the kernel keeps them (all cumulative but `waiting`, a level):
  FUSE    /sys/fs/fuse/connections/N/waiting: requests sent to the daemon and not yet
          answered (N is the minor number of the mount's st_dev; Documentation/
          filesystems/fuse.rst "Control filesystem"); the daemon is found by the
          /dev/fuse it holds open and the mountpoint on its command line.
  NFS     /proc/self/mountstats: READ ops, transmissions, bytes, queue, RTT and execute
          time, the transport's sends and backlog (collect/nfsstats.py).
  Lustre  llite stats: read_bytes samples and sum, read latency where kept (collect/lustre.py).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from gpudisk_top.collect.roots import Roots, read_bytes, read_text
from gpudisk_top.collect.sample import MountRaw

MOUNTS_REFRESH_S = 30.0
DAEMON_REFRESH_S = 30.0

NETWORK_FS = {"nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "glusterfs", "gpfs", "wekafs",
              "beegfs", "9p", "afs", "virtiofs", "orangefs", "pvfs2"}
MEMORY_FS = {"tmpfs", "ramfs"}
PSEUDO_FS = {"proc", "sysfs", "cgroup", "cgroup2", "devtmpfs", "devpts", "mqueue", "debugfs",
             "tracefs", "securityfs", "pstore", "bpf", "autofs", "hugetlbfs", "configfs",
             "fusectl", "binfmt_misc", "nsfs", "rpc_pipefs", "efivarfs", "selinuxfs"}
# the kinds whose reads the detector looks at here (a block device has diskstats)
REMOTE_KINDS = ("nfs", "lustre", "fuse", "network")


def mount_kind(fstype: str, major: int) -> str:
    """block | nfs | lustre | fuse | network | memory | overlay | pseudo | other."""
    if fstype in ("nfs", "nfs4"):
        return "nfs"
    if fstype == "lustre":
        return "lustre"
    if fstype in ("fuse", "fuseblk") or fstype.startswith("fuse."):
        return "fuse"
    if fstype in NETWORK_FS:
        return "network"
    if fstype in MEMORY_FS:
        return "memory"
    if fstype == "overlay":
        return "overlay"
    if fstype in PSEUDO_FS:
        return "pseudo"
    return "block" if major != 0 else "other"


_ESCAPE = re.compile(r"\\([0-7]{3})")


def unescape_mountinfo(field_text: str) -> str:
    """A mountinfo path field as it is: space, tab, newline and backslash are escaped as
    \\ooo octal there (the one owner of this rule: blockdev, host and this module)."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field_text)


@dataclass(slots=True, frozen=True)
class MountInfo:
    mountpoint: str
    fstype: str
    source: str
    major: int
    minor: int
    kind: str


def parse_mountinfo(text: str) -> dict[tuple[int, int], MountInfo]:
    """(major, minor) -> the mount of that st_dev.  A filesystem mounted twice (a bind
    mount) keeps the mount of its root ("/" in field 4), else the first listed."""
    out: dict[tuple[int, int], MountInfo] = {}
    for line in text.splitlines():
        fields = line.split()
        try:
            sep = fields.index("-", 6)
            major, minor = (int(x) for x in fields[2].split(":"))
        except ValueError:
            continue
        if sep + 2 >= len(fields):
            continue
        fstype = fields[sep + 1]
        info = MountInfo(unescape_mountinfo(fields[4]), fstype, unescape_mountinfo(fields[sep + 2]),
                         major, minor, mount_kind(fstype, major))
        key = (major, minor)
        if key not in out or (fields[3] == "/" and out[key].mountpoint != "/"):
            out[key] = info
    return out


class MountTable:
    """The mounts of the job's mount namespace by st_dev, re-read every MOUNTS_REFRESH_S
    (a namespace's mounts seldom change), and the daemons of its FUSE mounts."""

    def __init__(self, roots: Roots) -> None:
        self.roots = roots
        self._tables: dict[str, tuple[float, dict]] = {}   # mnt namespace -> (when, table)
        self._daemons: dict[str, tuple[float, int | None]] = {}  # mountpoint -> (when, pid)

    def of(self, pid: int, now: float) -> dict[tuple[int, int], MountInfo]:
        """The mount table pid sees (its mount namespace's), {} when it cannot be read."""
        try:
            ns = os.readlink(self.roots.proc(str(pid), "ns", "mnt"))
        except OSError:
            ns = f"pid:{pid}"
        hit = self._tables.get(ns)
        if hit is not None and now - hit[0] < MOUNTS_REFRESH_S:
            return hit[1]
        text = read_text(self.roots.proc(str(pid), "mountinfo"))
        table = parse_mountinfo(text) if text is not None else {}
        self._tables[ns] = (now, table)
        return table

    def fuse_daemon(self, mountpoint: str, now: float) -> int | None:
        """The process serving a FUSE mount: one that holds /dev/fuse open and names the
        mountpoint on its command line (s3fs BUCKET /mnt/x, gcsfuse B /mnt/x, ...).  None
        when there is not exactly one (say so rather than guess)."""
        hit = self._daemons.get(mountpoint)
        if hit is not None and now - hit[0] < DAEMON_REFRESH_S:
            return hit[1]
        found = []
        try:
            pids = [int(n) for n in os.listdir(self.roots.procfs) if n.isdigit()]
        except OSError:
            pids = []
        target = mountpoint.rstrip("/") or "/"
        for pid in pids:
            raw = read_text(self.roots.proc(str(pid), "cmdline"))
            if not raw or target not in raw.split("\0"):
                continue
            if self._holds_dev_fuse(pid):
                found.append(pid)
        pid = found[0] if len(found) == 1 else None
        self._daemons[mountpoint] = (now, pid)
        return pid

    def _holds_dev_fuse(self, pid: int) -> bool:
        fd_dir = self.roots.proc(str(pid), "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            return False
        for fd in fds[:4096]:
            try:
                if os.readlink(os.path.join(fd_dir, fd)) == "/dev/fuse":
                    return True
            except OSError:
                continue
        return False


def fuse_waiting(roots: Roots, minor: int) -> int | None:
    """Requests a FUSE connection has sent to its daemon and not had answered yet.  None
    where fusectl is not mounted on /sys/fs/fuse/connections (systemd mounts it; else
    `mount -t fusectl none /sys/fs/fuse/connections`).  Its files cannot be pread (ESPIPE):
    the one read loop (roots.read_fd) reads them from the start with read()."""
    try:
        return int(read_bytes(roots.sys("fs", "fuse", "connections", str(minor), "waiting"), 64))
    except (OSError, ValueError):
        return None


class MountCollector:
    """The MountRaw of every network and FUSE mount the job's processes have files on."""

    def __init__(self, roots: Roots, table: MountTable, kind_counters=None) -> None:
        """kind_counters: {kind: read_counters(roots, [MountRaw], pid=PID) -> {mountpoint:
        counters}} (PID: a job process that sees those mounts), the readers of each kind's own statistics (collect/nfsstats.py for
        NFS's mountstats, collect/lustre.py for Lustre's stats)."""
        self.roots = roots
        self.table = table
        self.kind_counters = kind_counters or {}

    def collect(self, procs, now: float) -> dict[str, MountRaw]:
        """procs: the sample's ProcIoRaw; the job's are those with a root_pid."""
        where: dict[str, int] = {}          # mountpoint -> a job process that sees it
        for p in procs.values():
            if p.root_pid is not None:
                for mp in p.mounts:
                    where.setdefault(mp, p.pid)
        if not where:
            return {}
        out: dict[str, MountRaw] = {}
        for mp, pid in sorted(where.items()):
            info = next((m for m in self.table.of(pid, now).values() if m.mountpoint == mp), None)
            if info is None:
                continue
            raw = MountRaw(mp, info.fstype, info.source, info.kind)
            if info.kind == "fuse":
                waiting = fuse_waiting(self.roots, info.minor)
                if waiting is not None:
                    raw.counters["waiting"] = waiting
                raw.daemon_pid = self.table.fuse_daemon(mp, now)
            out[mp] = raw
        for kind, read in self.kind_counters.items():
            # per process that sees them: a mount's statistics are read through the job's
            # own /proc/PID (its mount namespace), not ours, which in a container differ
            by_pid: dict[int, list[MountRaw]] = {}
            for raw in out.values():
                if raw.kind == kind:
                    by_pid.setdefault(where[raw.mountpoint], []).append(raw)
            for pid, mine in by_pid.items():
                for mp, counters in read(self.roots, mine, pid=pid).items():
                    out[mp].counters.update(counters)
        return out
