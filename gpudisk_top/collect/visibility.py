"""What cannot be seen from where we run, each with its fix.

Inside `docker exec` the tool may have no /sys, its own PID namespace, no root and no
PSI.  Each of those silently empties part of the screen (device classes, the GPU
processes, other users' I/O counters, pressure), so each is said once, where the user
looks first: the dashboard's header, --once and its JSON `warnings`, the recorder's
start.  Decided when the sampler starts (none of them changes while we run) and kept.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from gpudisk_top.collect.roots import Roots, read_bytes

# what each blind spot is called in JSON (`blind_spots`), an API like the verdict states
NO_SYSFS = "no-sysfs"
PID_NAMESPACE = "pid-namespace"
NOT_ROOT = "not-root"
NO_PSI = "no-psi"


@dataclass(frozen=True, slots=True)
class BlindSpot:
    """One thing we cannot see: its key, what is missing and what it costs, the fix."""

    key: str
    what: str
    fix: str

    def line(self) -> str:
        return f"{self.what} (fix: {self.fix})"


def _sysfs(roots: Roots) -> BlindSpot | None:
    block = roots.sys("block")
    try:
        empty = not os.listdir(block)
    except OSError:
        empty = True
    if not empty:
        return None
    return BlindSpot(NO_SYSFS, f"no {block}: device classes (NVMe, SSD, HDD), models and "
                     "partitions are unknown",
                     "mount the host's /sys read-only, e.g. docker run -v /sys:/sys:ro, or pass "
                     "--sysfs PATH")


def _pid_namespace(host_namespace: bool | None, reason: str | None,
                   roots: Roots) -> BlindSpot | None:
    if host_namespace is True:
        return None
    why = reason or f"{roots.procfs} is not the host's PID namespace"
    return BlindSpot(PID_NAMESPACE, f"{why}: NVML's host PIDs name nothing here, so GPU "
                     "processes are matched by the device files they hold open",
                     "run the container with --pid=host, or mount the host's /proc and pass "
                     "--procfs /host/proc")


def _root(euid: int) -> BlindSpot | None:
    if euid == 0:
        return None
    return BlindSpot(NOT_ROOT, "not root: other users' processes' I/O counters and delays "
                     "are unreadable", "run as root: sudo, or docker exec -u 0")


def _psi(roots: Roots) -> BlindSpot | None:
    path = roots.proc("pressure", "io")
    try:
        read_bytes(path, max_bytes=4096)   # the bounded reader: a FIFO or device is refused
        return None
    except OSError as err:
        why = "absent" if not os.path.exists(path) else (err.strerror or str(err))
    return BlindSpot(NO_PSI, f"no pressure stall information ({path}: {why}): io and cpu "
                     "pressure are n/a", "a kernel of 4.20 or later booted with psi=1")


def blind_spots(roots: Roots, host_namespace: bool | None, namespace_reason: str | None,
                euid: int | None = None) -> list[BlindSpot]:
    """What cannot be seen from `roots` by this process.  host_namespace and its reason
    are collect.pidmap.PidMapper's decision (True: the host's PID namespace)."""
    euid = os.geteuid() if euid is None else euid
    found = [_sysfs(roots), _pid_namespace(host_namespace, namespace_reason, roots),
             _root(euid), _psi(roots)]
    return [b for b in found if b is not None]
