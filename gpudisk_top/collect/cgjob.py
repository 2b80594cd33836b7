"""Each job's cgroup v2 totals, at O(1) a job: what its cgroup's own files say.

The kernel keeps, for every cgroup v2, the totals of everything its processes did, summed
over its whole subtree at the moment they are read (rstat):
  - cpu.stat: usage_usec, user_usec, system_usec (there whether or not the cpu controller
    is on), nr_periods, nr_throttled, throttled_usec (with a cpu.max limit);
  - io.stat: per block device ("MAJ:MIN"), rbytes, wbytes, rios, wios, charged at bio
    submission to the submitting task's cgroup, writeback to the cgroup that dirtied the
    pages (with the io controller; writeback needs the memory controller too);
  - cpu.pressure, io.pressure, memory.pressure: PSI's some/full totals (microseconds);
  - memory.stat: anon, file, file_dirty, file_writeback (bytes, gauges).
Six small files a job (about 10 us a second) against the hundreds of per-process files the
sampler reads for the same job: what the model needs to tell whether a job is fed
(model/cgjob.py) before it needs to know which of its processes is not.

What it owns: reading those files for a set of job cgroups each sample (`CgJobReader.read`:
paths as /proc/PID/cgroup's "0::" line gives them, relative to the cgroup v2 root), kept
open and read again with pread (collect/roots.py FileCache); mapping io.stat's devices to
the node's diskstats names; telling a cgroup removed and made again under the same path
(its directory's inode, the kernfs node id, is new: stat before and after the reads, so
that one sample never mixes two cgroups' files); which cgroup is a job's (`job_cgroup`:
the one all its GPU processes share, or their common ancestor where it is deep enough to
be no one else's).  It returns raw counters; rates are the model's.

Bounds: MAX_CGROUPS cgroups a sample (more: the rest are not read), MAX_DEVICES devices a
cgroup (io.stat's further lines are left out), MAX_STAT_BYTES a file (past it, the file is
not read), MAX_PATH characters a path; paths with "." or ".." parts, NULs or not absolute
are refused.  A file the cgroup does not have (io.stat where the io controller is off,
memory.stat without memory, PSI off) is looked for again every MISSING_RECHECK_S, not each
sample.  The root cgroup is not a job's (its totals are the node's): never read.

Where there is no cgroup v2 tree under the Roots' sysfs (a cgroup v1 host, no /sys in a
container), read() returns {} and `reason` says why: the sampler's path stays as it was.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from gpudisk_top.collect.cgscan import cgroup2_root
from gpudisk_top.collect.host import IO_STAT_KEYS, parse_flat_keyed, parse_io_stat, parse_psi
from gpudisk_top.collect.roots import FileCache, Roots
from gpudisk_top.collect.sample import PsiTotals

MAX_CGROUPS = 64             # job cgroups read a sample (a node runs a few dozen jobs at most)
MAX_DEVICES = 64             # devices kept a cgroup's io.stat
MAX_STAT_BYTES = 64 * 1024   # memory.stat is ~1.5 kB; io.stat ~100 bytes a device
MAX_PATH = 4096
MISSING_RECHECK_S = 30.0     # a controller switched on later makes its files appear

CPU_KEYS = ("usage_usec", "user_usec", "system_usec", "nr_periods", "nr_throttled",
            "throttled_usec")
MEMORY_KEYS = ("anon", "file", "file_dirty", "file_writeback")
PSI_FILES = (("cpu", "cpu.pressure"), ("io", "io.pressure"), ("memory", "memory.pressure"))
FILES = ("cpu.stat", "io.stat", "memory.stat") + tuple(name for _, name in PSI_FILES)


class CgDeviceIo(NamedTuple):
    """One device's line of io.stat: its "MAJ:MIN" (what pairs two samples' lines: a name
    the node gave to another device since is not the same device) and its counters."""

    dev: str
    rbytes: int
    wbytes: int
    rios: int
    wios: int


@dataclass(frozen=True, slots=True)
class CgJobRaw:
    """A job cgroup's totals at one sample.  path: as /proc/PID/cgroup shows it ("/a/b");
    inode: its directory's (a cgroup made again under the same path has another); cpu:
    CPU_KEYS it has; io: the node's device name -> its io.stat line, for the devices
    /proc/diskstats lists; io_unlisted: io.stat lines of devices it does not (or past
    MAX_DEVICES); psi: "cpu" | "io" | "memory" -> totals; memory: MEMORY_KEYS it has;
    read_mono_s: when it was read (read()'s now_s): a sample's own time may be well before
    (its processes' reads come first), and a rate over the wrong span is that much off;
    lacking: FILES it does not have (io.stat without the io controller on v2: its io is
    n/a, where an io.stat with no line is a cgroup that did no I/O)."""

    path: str
    inode: int
    cpu: dict[str, int] = field(default_factory=dict)
    io: dict[str, CgDeviceIo] = field(default_factory=dict)
    io_unlisted: int = 0
    psi: dict[str, PsiTotals] = field(default_factory=dict)
    memory: dict[str, int] = field(default_factory=dict)
    read_mono_s: float | None = None
    lacking: frozenset[str] = frozenset()


def valid_path(path) -> bool:
    """Whether `path` is a cgroup path we read: absolute, under MAX_PATH characters, no
    NUL, no empty, "." or ".." part, not the root."""
    if not isinstance(path, str) or not path.startswith("/") or len(path) > MAX_PATH:
        return False
    if "\0" in path or path == "/":
        return False
    return all(part not in ("", ".", "..") for part in path[1:].split("/"))


def device_names(disks: Mapping) -> dict[str, str]:
    """{"MAJ:MIN": name} of a sample's diskstats counters (name -> DiskCounters)."""
    return {f"{c.major}:{c.minor}": name for name, c in disks.items()}


MIN_SHARED_DEPTH = 3   # a common ancestor shallower (system.slice, user.slice/user-N.slice) is others' too


def job_cgroup(paths) -> str | None:
    """The cgroup that holds every one of a job's GPU processes: theirs where they share
    one, else their deepest common ancestor where it is MIN_SHARED_DEPTH deep or more
    (Slurm's ranks in task_0, task_1, ...: the step's; a pod's containers: the pod's);
    None where it is shallower (processes in two services of system.slice: the slice's
    totals are other jobs' too), the root, or no path is known."""
    split = [p.strip("/").split("/") for p in paths if isinstance(p, str) and p.startswith("/")]
    if not split:
        return None
    common = split[0]
    for parts in split[1:]:
        n = 0
        while n < len(common) and n < len(parts) and common[n] == parts[n]:
            n += 1
        common = common[:n]
    common = [c for c in common if c]
    if not common or (len(common) < MIN_SHARED_DEPTH and any(parts != common for parts in split)):
        return None
    return "/" + "/".join(common)


class CgJobReader:
    """Reads job cgroups' totals each sample (see the module's docstring).

        reader = CgJobReader(roots)
        raw = reader.read(["/system.slice/slurmstepd.scope/job_7"], device_names(disks))
        # {path: CgJobRaw} of the cgroups that are there; reader.close() at the end
    """

    def __init__(self, roots: Roots) -> None:
        self.roots = roots
        self.root = cgroup2_root(roots)
        self.reason: str | None = (None if self.root is not None
                                   else "no cgroup v2 tree under " + roots.sys("fs", "cgroup"))
        self._files = FileCache(max_files=MAX_CGROUPS * len(FILES), max_bytes=MAX_STAT_BYTES)
        # path -> (inode, the files it lacked, when that was looked at, monotonic s)
        self._known: dict[str, tuple[int, frozenset[str], float]] = {}
        self.refused = 0        # paths refused (valid_path) or past MAX_CGROUPS, last read

    def read(self, paths: Iterable[str], devices: Mapping[str, str],
             now_s: float | None = None) -> dict[str, CgJobRaw]:
        """{path: its totals} of the cgroups of `paths` that are there (at most
        MAX_CGROUPS; refused and missing ones are left out).  devices: {"MAJ:MIN": name}
        of the node's diskstats (device_names).  Never raises."""
        if self.root is None:
            return {}
        now_s = time.monotonic() if now_s is None else now_s
        wanted: list[str] = []
        refused = 0
        for path in paths:
            if not valid_path(path) or len(wanted) >= MAX_CGROUPS:
                refused += 1
            elif path not in wanted:
                wanted.append(path)
        self.refused = refused
        for gone in [p for p in self._known if p not in wanted]:
            self._forget(gone)
        out = {}
        for path in wanted:
            raw = self._read_one(path, devices, now_s)
            if raw is not None:
                out[path] = raw
        return out

    def _forget(self, path: str) -> None:
        self._known.pop(path, None)
        base = self.root + path
        for name in FILES:
            self._files.forget(os.path.join(base, name))

    def _inode(self, base: str) -> int | None:
        try:
            return os.stat(base).st_ino
        except OSError:
            return None

    def _read_one(self, path: str, devices: Mapping[str, str], now_s: float) -> CgJobRaw | None:
        base = self.root + path
        inode = self._inode(base)
        if inode is None:
            self._forget(path)
            return None
        known = self._known.get(path)
        if known is None or known[0] != inode or now_s - known[2] >= MISSING_RECHECK_S:
            missing: frozenset[str] = frozenset()
            checked_s = now_s
        else:
            missing, checked_s = known[1], known[2]
        texts: dict[str, str] = {}
        lacked = set()
        for name in FILES:
            if name in missing:
                continue
            text = self._files.read(os.path.join(base, name))
            if text is None:
                lacked.add(name)
            else:
                texts[name] = text
        if self._inode(base) != inode:
            # removed (and perhaps made again) while we read: its files may be two
            # cgroups'; the next sample reads the new one from the start
            self._forget(path)
            return None
        if "cpu.stat" not in texts:
            self._forget(path)      # a cgroup v2 directory always has cpu.stat
            return None
        lacking = frozenset(missing | lacked)
        self._known[path] = (inode, lacking, checked_s)
        cpu = parse_flat_keyed(texts["cpu.stat"], CPU_KEYS)
        if "usage_usec" not in cpu:
            return None
        io: dict[str, CgDeviceIo] = {}
        unlisted = 0
        io_text = texts.get("io.stat")
        if io_text is not None:
            for dev, counters in parse_io_stat(io_text).items():
                name = devices.get(dev)
                if (name is None or len(io) >= MAX_DEVICES
                        or not all(k in counters for k in IO_STAT_KEYS)):
                    unlisted += 1
                    continue
                io[name] = CgDeviceIo(dev, *(counters[k] for k in IO_STAT_KEYS))
        psi = {}
        for resource, name in PSI_FILES:
            text = texts.get(name)
            totals = parse_psi(text) if text is not None else None
            if totals is not None:
                psi[resource] = totals
        memory_text = texts.get("memory.stat")
        memory = parse_flat_keyed(memory_text, MEMORY_KEYS) if memory_text is not None else {}
        return CgJobRaw(path, inode, cpu, io, unlisted, psi, memory, now_s, lacking)

    def close(self) -> None:
        """Close the files kept open."""
        self._files.close()
        self._known.clear()
