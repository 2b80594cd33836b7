"""Map the host PIDs NVML reports to PIDs in the procfs we read.

NVML reports PIDs as the initial (host) PID namespace sees them.  When the procfs we read
is the host's, a host PID names /proc/<pid> directly and the process's PID inside its own
container is the last entry of its NSpid line.  When the procfs belongs to another PID
namespace (we run in a container with its own /proc), a host PID names nothing here:
NSpid lists PIDs from the procfs's own namespace downwards, never the host's, so no
translation exists and the process is reported as not visible.
"""

from __future__ import annotations

import os
import re
import time

from gpudisk_top.collect.roots import Roots, open_source_file, read_bytes, read_text

# include/linux/proc_ns.h: the inode number of the initial PID namespace, fixed since 3.8
PROC_PID_INIT_INO = 0xEFFFFFFC

_NS_LINK = re.compile(r"^pid:\[(\d+)\]$")

Resolved = tuple[int | None, int | None, str | None, str | None, bool]
_UNMAPPED: Resolved = (None, None, None, None, False)

# A resolved process is kept while it lives and re-read this often (its name and command
# line change only with exec or setproctitle): NVML lists the same processes every sample,
# 8 or more of them, and three file reads each were a third of a sample's cost.
RESOLVE_REFRESH_S = 10.0
MAX_CACHED = 1024


def _ns_inode(path: str) -> int | None:
    """The namespace inode from a "pid:[N]" link; None when unreadable (a non-root reader
    may not follow another user's ns links) or not a PID namespace link."""
    try:
        target = os.readlink(path)
    except OSError:
        return None
    m = _NS_LINK.match(target)
    return int(m.group(1)) if m else None


def parse_nspid(status_text: str) -> list[int] | None:
    """The NSpid line of a status file: PIDs from the procfs's namespace down to the
    process's own; None on kernels before 4.1 (no NSpid line) or when garbled."""
    for line in status_text.splitlines():
        if line.startswith("NSpid:"):
            try:
                return [int(v) for v in line[6:].split()]
            except ValueError:
                return None
    return None


def read_comm(roots: Roots, pid: int) -> str | None:
    text = read_text(roots.proc(str(pid), "comm"))
    if text is None:
        return None
    return text.rstrip("\n") or None


def read_cmdline(roots: Roots, pid: int) -> str | None:
    """The command line, NULs turned into spaces; None for a kernel thread, a zombie or
    an unreadable file."""
    try:
        raw = read_bytes(roots.proc(str(pid), "cmdline"))
    except OSError:
        return None
    text = raw.replace(b"\0", b" ").decode("utf-8", errors="replace").strip()
    return text or None


class PidMapper:
    """Resolves host PIDs against one procfs.  Whether that procfs is the host's is
    decided on first use and kept: a mounted procfs never changes namespace."""

    def __init__(self, roots: Roots, refresh_s: float = RESOLVE_REFRESH_S) -> None:
        self.roots = roots
        self._host_ns: bool | None = None
        self._decided = False
        self.reason: str | None = None  # why PIDs are not mapped, once decided
        self.refresh_s = refresh_s
        # host_pid -> (fd of its /proc/PID/stat, when resolved, the answer).  The open fd
        # is the process's identity: once that process is reaped, reading it fails
        # (ESRCH), even when the PID is reused, so a new process is never shown under an
        # old one's name.
        self._known: dict[int, tuple[int, float, Resolved]] = {}

    @property
    def host_namespace(self) -> bool | None:
        """True: the procfs is the initial PID namespace's; False: another namespace's;
        None: it cannot be told (then nothing is mapped, see reason)."""
        if not self._decided:
            self._host_ns, self.reason = self._detect()
            self._decided = True
        return self._host_ns

    def _detect(self) -> tuple[bool | None, str | None]:
        ino = _ns_inode(self.roots.proc("1", "ns", "pid"))
        if ino is None:
            # Following /proc/1/ns/pid needs ptrace access to PID 1.  Our own link names
            # the procfs's namespace only when we live in that namespace, which a single
            # NSpid entry in our own status proves.
            status = read_text(self.roots.proc("self", "status"))
            nspid = parse_nspid(status) if status is not None else None
            if nspid is not None and len(nspid) == 1:
                ino = _ns_inode(self.roots.proc("self", "ns", "pid"))
        if ino is None:
            return None, (f"cannot tell whether {self.roots.procfs} is the host's PID "
                          "namespace (its 1/ns/pid is unreadable)")
        if ino != PROC_PID_INIT_INO:
            return False, f"{self.roots.procfs} belongs to a container's PID namespace"
        return True, None

    def resolve(self, host_pid: int) -> Resolved:
        """(local_pid, ns_pid, name, cmdline, mapped) for a PID NVML reported.

        local_pid is the PID to read under the procfs, ns_pid the process's PID inside its
        own namespace.  A process that is not visible from this PID namespace, or that has
        exited, is (None, None, None, None, False).  Never raises: an unreadable field is
        None.
        """
        if self.host_namespace is not True or host_pid <= 0:
            return _UNMAPPED
        now = time.monotonic()
        known = self._known.get(host_pid)
        if known is not None:
            fd, at, answer = known
            if now - at < self.refresh_s and _alive(fd):
                return answer
            self._forget(host_pid)
        answer = self._read(host_pid)
        if answer[4]:
            try:
                fd = open_source_file(self.roots.proc(str(host_pid), "stat"))
            except OSError:
                return answer
            if len(self._known) >= MAX_CACHED:
                self._forget(next(iter(self._known)))
            self._known[host_pid] = (fd, now, answer)
        return answer

    def _read(self, host_pid: int) -> Resolved:
        status = read_text(self.roots.proc(str(host_pid), "status"))
        if status is None and not os.path.isdir(self.roots.proc(str(host_pid))):
            return _UNMAPPED  # exited
        nspid = parse_nspid(status) if status is not None else None
        return (
            host_pid,
            nspid[-1] if nspid else None,
            read_comm(self.roots, host_pid),
            read_cmdline(self.roots, host_pid),
            True,
        )

    def _forget(self, host_pid: int) -> None:
        fd, _, _ = self._known.pop(host_pid)
        try:
            os.close(fd)
        except OSError:
            pass

    def close(self) -> None:
        for pid in list(self._known):
            self._forget(pid)


def _alive(fd: int) -> bool:
    """Whether the process whose /proc/PID/stat fd is open still exists (a zombie does)."""
    try:
        return bool(os.pread(fd, 1, 0))
    except OSError:
        return False
