"""Read host-wide counters: CPU time (/proc/stat), PSI, /proc/meminfo, and the counters of
a cgroup v2: the job's (its GPU process's cgroup), else the one we run in.

Everything returned is a raw cumulative counter or an instantaneous reading; the model
(gpudisk_top.model.host) derives percentages from two samples.  A source that is missing
or unreadable is left out (None, or a key absent), never an exception.

Cost per call: /proc/stat (only its leading cpu lines are parsed), three pressure files,
/proc/meminfo, and, inside a cgroup, io.stat, io.pressure, cpu.stat, cpu.pressure, cpu.max
and memory.stat.  Where the cgroup lives is looked up in /proc/PID/cgroup and
/proc/self/mountinfo at most every CGROUP_RESOLVE_S seconds.  A cgroup v1 host has no
"0::" line: no cgroup, and the model says n/a.
"""

from __future__ import annotations

import os
import threading
import time

from gpudisk_top.collect.mounts import unescape_mountinfo
from gpudisk_top.collect.roots import FileCache, Roots, read_text
from gpudisk_top.collect.sample import CgroupIo, CpuTimes, HostRaw, PsiTotals

CGROUP_RESOLVE_S = 30.0
PSI_RESOURCES = ("io", "cpu", "memory")

_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal",
               "guest", "guest_nice")


# ---------------------------------------------------------------------------- /proc/stat
def parse_stat_cpu(lines) -> tuple[CpuTimes | None, int]:
    """The aggregate cpu line and the number of cpuN lines of /proc/stat.

    Kernels older than 2.6.33 print fewer than ten values (no guest_nice, and before
    2.6.24 no guest); the missing ones read as 0, as sysstat does.
    """
    cpu: CpuTimes | None = None
    ncpu = 0
    for line in lines:
        if not line.startswith("cpu"):
            if cpu is not None or ncpu:
                break  # the cpu lines come first; the long intr line need not be split
            continue
        name, _, rest = line.partition(" ")
        if name == "cpu":
            try:
                values = [int(v) for v in rest.split()[: len(_CPU_FIELDS)]]
            except ValueError:
                continue
            cpu = CpuTimes(**dict(zip(_CPU_FIELDS, values)))
        elif name[3:].isdigit():
            ncpu += 1
    return cpu, ncpu


def _read_stat(roots: Roots, read=read_text) -> tuple[CpuTimes | None, int]:
    text = read(roots.proc("stat"))
    return parse_stat_cpu(text.splitlines()) if text is not None else (None, 0)


# ---------------------------------------------------------------------------- PSI
def parse_psi(text: str) -> PsiTotals | None:
    """A pressure file's cumulative totals; None without a parsable "some" line.

    full_us is None where the file has no "full" line (/proc/pressure/cpu before 5.13).
    """
    some_us: int | None = None
    full_us: int | None = None
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind not in ("some", "full"):
            continue
        total = None
        for item in rest.split():
            if item.startswith("total="):
                try:
                    total = int(item[6:])
                except ValueError:
                    total = None
        if total is None:
            continue
        if kind == "some":
            some_us = total
        else:
            full_us = total
    if some_us is None:
        return None
    return PsiTotals(some_us=some_us, full_us=full_us)


def _read_psi(roots: Roots, read=read_text) -> dict[str, PsiTotals]:
    psi: dict[str, PsiTotals] = {}
    for resource in PSI_RESOURCES:
        # a kernel booted with psi=0 has the files, but reading them fails (EOPNOTSUPP)
        text = read(roots.proc("pressure", resource))
        totals = parse_psi(text) if text is not None else None
        if totals is not None:
            psi[resource] = totals
    return psi


# ---------------------------------------------------------------------------- meminfo
# The figures of /proc/meminfo the model reads (model/host.py host_view): the total, then
# its parts.  The rest of the file (some 50 lines, most of them moving every second on a
# busy node: MemFree, Active, Slab, Committed_AS, ...) is neither kept nor recorded.
MEMINFO_FIELDS = ("MemTotal", "MemAvailable", "Cached", "Buffers", "Dirty", "Writeback")
_MEMINFO_WANTED = frozenset(MEMINFO_FIELDS)


def parse_meminfo(text: str) -> dict[str, int]:
    """The MEMINFO_FIELDS of a /proc/meminfo that are "Name: N kB" lines; any other line,
    and a field whose line is not that, is left out."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        name = name.strip()
        if not sep or name not in _MEMINFO_WANTED:
            continue
        parts = rest.split()
        if len(parts) != 2 or parts[1] != "kB":
            continue
        try:
            out[name] = int(parts[0])
        except ValueError:
            continue
    return out


# ---------------------------------------------------------------------------- cgroup v2
# The counters of an io.stat line that are read (model/host.py _cgroup_io_rates, the job's
# cgroup: collect/cgjob.py): discards (dbytes, dios) and iocost's cost.* keys, which move
# every second where iocost is on, are neither kept nor recorded
IO_STAT_KEYS = ("rbytes", "wbytes", "rios", "wios")
_IO_STAT_WANTED = frozenset(IO_STAT_KEYS)


def parse_io_stat(text: str) -> dict[str, dict[str, int]]:
    """io.stat: "MAJ:MIN rbytes=.. wbytes=.. rios=.. wios=.. dbytes=.. dios=..", one device
    a line.  Its IO_STAT_KEYS that are integers are kept; the rest is skipped."""
    out: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts or ":" not in parts[0]:
            continue
        counters: dict[str, int] = {}
        for item in parts[1:]:
            key, sep, value = item.partition("=")
            if not sep or key not in _IO_STAT_WANTED:
                continue
            try:
                counters[key] = int(value)
            except ValueError:
                continue
        out[parts[0]] = counters
    return out


def parse_self_cgroup(text: str) -> str | None:
    """The cgroup v2 path from /proc/PID/cgroup (the "0::/path" line, relative to our
    cgroup namespace), None on a v1-only host."""
    for line in text.splitlines():
        if line.startswith("0::"):
            return line[3:].strip() or "/"
    return None


def parse_process_cgroup(text: str) -> str | None:
    """Which cgroup a process is in, for people to read (the I/O view's cgroup column):
    its v2 path where the host has one other than the root, else the first v1 hierarchy
    (name=systemd, memory, cpu, blkio, in that order) that places it below the root.
    None when every line says "/" or the text has none."""
    v2 = parse_self_cgroup(text)
    if v2 not in (None, "/"):
        return v2
    v1 = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[0] != "0":
            for controller in parts[1].split(","):
                v1[controller] = parts[2].strip()
    for controller in ("name=systemd", "memory", "cpu", "blkio"):
        path = v1.get(controller)
        if path not in (None, "", "/"):
            return path
    return None


def cgroup2_mounts(text: str) -> list[tuple[str, str]]:
    """(root, mountpoint) of every cgroup2 mount in a mountinfo text.

    root is the cgroup directory shown at the mountpoint: "/" for the whole hierarchy,
    the container's own cgroup when a container mounts only its subtree.  The fstype comes
    after the "-" separator, since the optional fields before it vary in number.
    """
    mounts: list[tuple[str, str]] = []
    for line in text.splitlines():
        fields = line.split()
        try:
            sep = fields.index("-", 6)
        except ValueError:
            continue
        if sep + 1 < len(fields) and fields[sep + 1] == "cgroup2":
            mounts.append((unescape_mountinfo(fields[3]), unescape_mountinfo(fields[4])))
    return mounts


def _relative_to(path: str, root: str) -> str | None:
    """path below root, as a relative path ("" for root itself); None when outside."""
    root = root.rstrip("/")
    if path == root or (root == "" and path == "/"):
        return ""
    if path.startswith(root + "/"):
        return path[len(root) + 1:]
    return None


def _mountpoint_dir(roots: Roots, mountpoint: str) -> str:
    # A mountpoint under /sys follows --sysfs, so a host tree at /host/sys is read there.
    if mountpoint == "/sys":
        return roots.sysfs
    if mountpoint.startswith("/sys/"):
        return roots.sys(mountpoint[len("/sys/"):])
    return mountpoint


def resolve_cgroup(roots: Roots, read=read_text, pid: int | None = None
                   ) -> tuple[str | None, str | None]:
    """(the cgroup v2 path of pid, or ours when None; the directory that holds its
    files), either None when unknown.

    The path is relative to our cgroup namespace, and so is the root field of mountinfo:
    the cgroup's directory is the mountpoint plus the path below the mount's root.  A
    cgroup2 mount whose root does not contain our cgroup cannot show it.  read: how a
    file is read (the sampler's FileCache.read, which keeps why one could not be read).
    """
    text = read(roots.proc("self" if pid is None else str(pid), "cgroup"))
    path = parse_self_cgroup(text) if text is not None else None
    if path is None:
        return None, None
    mountinfo = read(roots.proc("self", "mountinfo"))
    if mountinfo is None:
        return path, None
    for root, mountpoint in cgroup2_mounts(mountinfo):
        rel = _relative_to(path, root)
        if rel is None:
            continue
        base = _mountpoint_dir(roots, mountpoint)
        directory = os.path.join(base, rel) if rel else base
        if os.path.isdir(directory):
            return path, directory
    return path, None


_cgroup_cache: dict[tuple, tuple[float, str | None, str | None]] = {}
_cgroup_lock = threading.Lock()


def forget_cgroup_cache() -> None:
    """Drop the cached cgroup lookups, so the next read_host resolves them again."""
    with _cgroup_lock:
        _cgroup_cache.clear()


def _cached_cgroup(roots: Roots, read=read_text, pid: int | None = None
                   ) -> tuple[str | None, str | None]:
    now = time.monotonic()
    key = (roots, pid)
    with _cgroup_lock:
        hit = _cgroup_cache.get(key)
        if hit is not None and now - hit[0] < CGROUP_RESOLVE_S:
            return hit[1], hit[2]
    path, directory = resolve_cgroup(roots, read, pid)
    with _cgroup_lock:
        if len(_cgroup_cache) > 64:
            _cgroup_cache.clear()     # jobs come and go: PIDs of the past are not kept
        _cgroup_cache[key] = (now, path, directory)
    return path, directory


# memory.stat's page cache keys: what the job's cgroup has cached, dirty, under writeback
MEMORY_STAT_KEYS = ("file", "file_dirty", "file_writeback")
# cpu.stat's keys read of our own cgroup (model/host.py _cgroup_cpu: used CPUs, throttling)
CPU_STAT_KEYS = ("usage_usec", "nr_periods", "nr_throttled")


def parse_flat_keyed(text: str, keys=None) -> dict[str, int]:
    """cpu.stat, memory.stat: "key value" lines; integers only, `keys` only when given."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and (keys is None or parts[0] in keys):
            try:
                out[parts[0]] = int(parts[1])
            except ValueError:
                continue
    return out


def _read_cgroup(roots: Roots, read=read_text, pid: int | None = None) -> CgroupIo | None:
    path, directory = _cached_cgroup(roots, read, pid)
    if path is None:
        return None

    def text(name: str) -> str | None:
        return read(os.path.join(directory, name)) if directory else None

    io_text = text("io.stat")
    # The root cgroup of a hybrid host has no io.stat (the io controller is on v1), and
    # its io.pressure is /proc/pressure/io again: nothing worth a row.
    if path == "/" and io_text is None:
        return None
    io_pressure, cpu_stat, cpu_pressure = text("io.pressure"), text("cpu.stat"), text("cpu.pressure")
    cpu_max, memory_stat = text("cpu.max"), text("memory.stat")
    return CgroupIo(
        path=path,
        io_stat=parse_io_stat(io_text) if io_text is not None else {},
        io_pressure=parse_psi(io_pressure) if io_pressure is not None else None,
        pid=pid,
        cpu_stat=(parse_flat_keyed(cpu_stat, CPU_STAT_KEYS)
                  if cpu_stat is not None else {}),
        cpu_pressure=parse_psi(cpu_pressure) if cpu_pressure is not None else None,
        cpu_max=cpu_max.strip() or None if cpu_max is not None else None,
        memory_stat=(parse_flat_keyed(memory_stat, MEMORY_STAT_KEYS)
                     if memory_stat is not None else {}),
    )


# ---------------------------------------------------------------------------- host
def read_host(roots: Roots, files: FileCache | None = None, job_pid: int | None = None
              ) -> HostRaw:
    """One host sample.  Never raises: an unreadable source is None or an absent key.
    files: keep the files open between samples (the sampler's FileCache).  job_pid: a
    GPU process (in our procfs) whose cgroup is read instead of ours; ours when its
    cgroup cannot be found (it exited, or another user's and we are not root)."""
    read = files.read if files is not None else read_text
    cpu, ncpu = _read_stat(roots, read)
    meminfo = read(roots.proc("meminfo"))
    return HostRaw(
        cpu=cpu,
        ncpu=ncpu or 1,
        psi=_read_psi(roots, read),
        meminfo_kb=parse_meminfo(meminfo) if meminfo is not None else {},
        cgroup=(job_pid is not None and _read_cgroup(roots, read, job_pid)) or _read_cgroup(roots, read),
    )
