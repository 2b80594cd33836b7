"""Where the --delayacct lock lives: one place per kernel, since the sysctl is one per kernel.

kernel.task_delayacct is not namespaced: a container's write switches it for the whole
node.  /run is per mount namespace: a container (or `unshare -m`, or a systemd unit with
PrivateTmp) has a /run of its own, and a lock kept there cannot see the host's
gpudisk-top, nor the host's it.  So the lock is kept only where every instance on the
kernel finds the same directory:

- in the host's mount namespace: /run/gpudisk-top/delayacct;
- in another mount namespace that still sees the host's processes (a container with
  --pid=host and the right to look into PID 1, e.g. --privileged): the host's /run, through
  /proc/1/root (the same inode, so the same flock);
- anywhere else no place is shared, and lock_place() says why: --delayacct then does not
  switch the setting (collect/delayacct.py).

The markers also carry the kernel's boot_id, so one left from an earlier boot (a /run that
is not a tmpfs) is never taken for this boot's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

RUN_DIR = "/run/gpudisk-top/delayacct"
HOST_RUN_DIR = "/proc/1/root/run/gpudisk-top/delayacct"
BOOT_ID = "/proc/sys/kernel/random/boot_id"
# the initial namespaces' inode numbers are fixed by the kernel (include/linux/proc_ns.h:
# PROC_PID_INIT_INO since 3.8; the mount namespace's, 0xEFFFFFF8, since 6.18; before it
# the initial mount namespace's number is allocated at boot like any other)
INIT_PID_NS_INO = 0xEFFFFFFC
INIT_MNT_NS_INO = 0xEFFFFFF8


@dataclass(frozen=True, slots=True)
class Place:
    """lock_dir: where every gpudisk-top on this kernel keeps its lock; None, and `why`
    (one clause), where no such place can be found from here."""

    lock_dir: str | None
    boot_id: str = ""
    why: str = ""


def boot_id() -> str:
    """This boot's id (36 characters); "" where the kernel does not say."""
    try:
        with open(BOOT_ID, "rb") as f:
            text = f.read(64).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return text if len(text) == 36 and text.replace("-", "").isalnum() else ""


def _ino(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _same_file(a: str, b: str) -> bool | None:
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return None
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def lock_place(run_dir: str = RUN_DIR, host_run_dir: str = HOST_RUN_DIR) -> Place:
    """The lock directory shared by every gpudisk-top --delayacct on this kernel, or why
    there is none here.  Never raises."""
    bid = boot_id()
    if not bid:
        return Place(None, why=f"{BOOT_ID} cannot be read, so a lock cannot be tied to this boot")
    pid_ns, mnt_ns = _ino("/proc/self/ns/pid"), _ino("/proc/self/ns/mnt")
    if pid_ns is None or mnt_ns is None:
        return Place(None, bid, "this process's namespaces cannot be read from /proc/self/ns")
    if pid_ns != INIT_PID_NS_INO:
        return Place(None, bid, "this process runs in a PID namespace of its own (a container "
                     "without --pid=host), where a gpudisk-top on the host cannot be seen")
    host_mnt = _ino("/proc/1/ns/mnt")
    same_root = _same_file("/", "/proc/1/root")
    if host_mnt is None:
        # PID 1 cannot be looked into (no CAP_SYS_PTRACE, a hardened init): only the
        # kernel's own numbering can still say this is the first mount namespace
        if mnt_ns == INIT_MNT_NS_INO:
            return Place(run_dir, bid)
        return Place(None, bid, "this process is not in the host's mount namespace (a "
                     "container, `unshare -m`, a service with PrivateTmp), whose /run the "
                     "host's gpudisk-top does not share, and /proc/1 cannot be looked into "
                     "to reach the host's")
    if host_mnt == mnt_ns and same_root is not False:
        return Place(run_dir, bid)
    if same_root is None:
        return Place(None, bid, "this process is not in the host's mount namespace and "
                     "/proc/1/root cannot be reached for the host's /run")
    return Place(host_run_dir, bid)
