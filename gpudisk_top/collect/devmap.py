"""Find the GPU processes NVML reports when its PIDs name nothing in our procfs.

NVML reports host PIDs.  In a container with its own PID namespace (docker without
--pid=host) they name nothing in the /proc we read, so the job would be invisible.  The
job is still here, holding its GPU's device file open: /dev/nvidiaN, N being the GPU's
minor number (nvmlDeviceGetMinorNumber).  Per GPU, NVML's unmapped entries are matched to
the processes in our procfs with an fd on that file:

  - one entry, one holder: that is the process;
  - as many holders as entries, more than one: matched by GPU memory, NVML's
    usedGpuMemory against the bytes each holder maps of the device file, when both
    orders are strict (no ties, nothing unknown);
  - no holder of the GPU's file at all (a driver that hands out descriptors another
    way): the holders of /dev/nvidiactl or /dev/nvidia-uvm, else the processes that map
    libcuda.so, when exactly one GPU waits and the counts are one and one.

Anything else is ambiguous: nothing is guessed, and a warning says what was seen.  Our own
process is never a holder: NVML holds /dev/nvidiactl and the GPUs' files open in it once
initialised, beside the job.  Only processes we may read are found (another user's fd
links need root), so a match is taken only where every process could be read: with one
we may not read, the job may be that one, and a holder we can read may be anybody's
(issue 38: as non-root the job was mapped to gpudisk-top itself).  The scan reads
every process's fd directory, so it runs only while NVML lists processes that no PID
mapped, and is repeated only when NVML's list changes or every RESCAN_S seconds.
"""

from __future__ import annotations

import os
import time

from gpudisk_top.collect.pidmap import parse_nspid, read_cmdline, read_comm
from gpudisk_top.collect.roots import Roots, read_bytes, read_text
from gpudisk_top.collect.sample import MAPPED_BY_DEVICE_FILE, GpuSnapshot

RESCAN_S = 10.0
# where the nvidia device files are; a test points it at a directory of stand-ins (a
# device node cannot be opened without the driver), the fd links read are the real ones
DEV_DIR = "/dev"
DRIVER_FILES = ("nvidiactl", "nvidia-uvm")
CUDA_LIBRARY = "libcuda.so"


class DeviceFileMapper:
    """Maps NVML's unmapped GPU processes to processes of our procfs by device file."""

    def __init__(self, roots: Roots, rescan_s: float = RESCAN_S) -> None:
        self.roots = roots
        self.dev_dir = DEV_DIR
        self.rescan_s = rescan_s
        self._key: tuple | None = None
        self._at = float("-inf")
        self._answer: tuple[dict, list[str]] = ({}, [])

    def apply(self, snapshot: GpuSnapshot) -> list[str]:
        """Fill in the unmapped processes of snapshot that can be matched; the warnings
        (one line each) for what could not be."""
        waiting = {g.index: g for g in snapshot.gpus
                   if g.processes and any(not p.mapped for p in g.processes)}
        if not waiting:
            return []
        key = tuple((i, g.minor_number, tuple(sorted(p.pid for p in g.processes if not p.mapped)))
                    for i, g in sorted(waiting.items()))
        now = time.monotonic()
        if key != self._key or now - self._at >= self.rescan_s:
            self._answer = self._match(waiting)
            self._key, self._at = key, now
        matches, warnings = self._answer
        for g in waiting.values():
            for p in g.processes:
                local = matches.get((g.index, p.pid))
                if p.mapped or local is None:
                    continue
                status = read_text(self.roots.proc(str(local), "status"))
                if status is None:
                    continue        # exited since the scan: left unmapped
                nspid = parse_nspid(status)
                p.local_pid = local
                p.ns_pid = nspid[-1] if nspid else local
                p.name = read_comm(self.roots, local)
                p.cmdline = read_cmdline(self.roots, local)
                p.mapped = True
                p.mapped_by = MAPPED_BY_DEVICE_FILE
        return warnings

    # ------------------------------------------------------------------ matching
    def _match(self, waiting: dict) -> tuple[dict, list[str]]:
        holders, unreadable = self._holders()
        matches: dict[tuple[int, int], int] = {}
        warnings: list[str] = []
        if unreadable:
            gpus = ", ".join(str(i) for i in sorted(waiting))
            total = sum(1 for g in waiting.values() for p in g.processes if not p.mapped)
            warnings.append(f"GPU {gpus}: NVML lists {total} process{'es' if total != 1 else ''} "
                            f"this PID namespace cannot see, and {unreadable} process"
                            f"{'es' if unreadable != 1 else ''} here cannot be read (not root): "
                            f"not matched")
            return matches, warnings
        no_file = []
        for index, g in sorted(waiting.items()):
            entries = [p for p in g.processes if not p.mapped]
            if g.minor_number is None:
                no_file.append((index, entries))
                continue
            path = os.path.join(self.dev_dir, f"nvidia{g.minor_number}")
            pids = sorted(holders.get(path, ()))
            if not pids:
                no_file.append((index, entries))
                continue
            got = self._pair(entries, pids, path)
            if got is None:
                warnings.append(f"GPU {index}: NVML lists {len(entries)} process"
                                f"{'es' if len(entries) != 1 else ''} this PID namespace cannot "
                                f"see and {len(pids)} here hold {path} open "
                                f"({', '.join(map(str, pids[:8]))}): not matched")
                continue
            for p, local in got:
                matches[(index, p.pid)] = local
        if no_file:
            self._fallback(no_file, holders, matches, warnings)
        return matches, warnings

    def _pair(self, entries: list, pids: list[int], path: str):
        """[(entry, local pid)], or None when the holders cannot be told apart."""
        if len(entries) != len(pids):
            return None
        if len(entries) == 1:
            return [(entries[0], pids[0])]
        used = [p.used_gpu_mem_bytes for p in entries]
        mapped = [self._mapped_bytes(pid, path) for pid in pids]
        if None in used or None in mapped or len(set(used)) < len(used) \
                or len(set(mapped)) < len(mapped):
            return None
        by_used = sorted(entries, key=lambda p: p.used_gpu_mem_bytes)
        by_mapped = [pid for _, pid in sorted(zip(mapped, pids))]
        return list(zip(by_used, by_mapped))

    def _fallback(self, no_file: list, holders: dict, matches: dict, warnings: list) -> None:
        taken = set(matches.values())
        driver = set()
        for name in DRIVER_FILES:
            driver |= holders.get(os.path.join(self.dev_dir, name), set())
        how = f"{os.path.join(self.dev_dir, 'nvidiactl')} or nvidia-uvm open"
        candidates = sorted(driver - taken)
        if not candidates:
            candidates, how = sorted(set(self._cuda_mappers()) - taken), f"{CUDA_LIBRARY} mapped"
        total = sum(len(entries) for _, entries in no_file)
        if len(no_file) == 1 and total == 1 and len(candidates) == 1:
            index, entries = no_file[0]
            matches[(index, entries[0].pid)] = candidates[0]
            return
        gpus = ", ".join(str(i) for i, _ in no_file)
        warnings.append(f"GPU {gpus}: NVML lists {total} process{'es' if total != 1 else ''} "
                        f"this PID namespace cannot see; no process here holds the GPU's "
                        f"device file, {len(candidates)} with {how}: not matched")

    # ------------------------------------------------------------------ reading /proc
    def _pids(self) -> list[str]:
        try:
            return [e for e in os.listdir(self.roots.procfs) if e.isdigit()]
        except OSError:
            return []

    def _holders(self) -> tuple[dict[str, set[int]], int]:
        """(nvidia device file path -> the PIDs (of our procfs) with an fd on it, less
        ours and those whose ancestor holds it too: a DataLoader worker forked after CUDA
        started inherits its parent's descriptors, but only the parent is NVML's process;
        how many processes' fds could not be read)."""
        found, unreadable = self._scan()
        parents = {pid: self._ppid(pid) for pids in found.values() for pid in pids}
        out = {}
        for path, pids in found.items():
            out[path] = {pid for pid in pids if not self._below(pid, pids, parents)}
        return out, unreadable

    def _self_pid(self) -> int:
        """Our PID in the procfs read (its `self` link), else ours."""
        try:
            return int(os.readlink(self.roots.proc("self")))
        except (OSError, ValueError):
            return os.getpid()

    def _ppid(self, pid: int) -> int | None:
        stat = read_text(self.roots.proc(str(pid), "stat"))
        if stat is None:
            return None
        try:
            return int(stat[stat.rindex(")") + 2:].split()[1])
        except (ValueError, IndexError):
            return None

    def _below(self, pid: int, holders: set[int], parents: dict) -> bool:
        """Whether an ancestor of pid (within 64 generations) is in holders."""
        seen = 0
        parent = parents.get(pid)
        while parent and seen < 64:
            if parent in holders:
                return True
            if parent not in parents:
                parents[parent] = self._ppid(parent)
            parent = parents[parent]
            seen += 1
        return False

    def _scan(self) -> tuple[dict[str, set[int]], int]:
        """(nvidia device file path -> the PIDs (of our procfs) but ours with an fd on it,
        how many processes' fd directories we may not read)."""
        prefix = os.path.join(self.dev_dir, "nvidia")
        out: dict[str, set[int]] = {}
        me = str(self._self_pid())
        unreadable = 0
        for pid in self._pids():
            if pid == me:
                continue
            fd_dir = self.roots.proc(pid, "fd")
            try:
                fds = os.listdir(fd_dir)
            except PermissionError:
                unreadable += 1    # another user's: it may hold the file
                continue
            except OSError:
                continue       # exited
            for fd in fds:
                try:
                    target = os.readlink(os.path.join(fd_dir, fd))
                except OSError:
                    continue
                if target.startswith(prefix):
                    out.setdefault(target, set()).add(int(pid))
        return out, unreadable

    def _mapped_bytes(self, pid: int, path: str) -> int | None:
        """Bytes of address space pid maps from path; None when its maps are unreadable."""
        try:
            text = read_bytes(self.roots.proc(str(pid), "maps")).decode(errors="replace")
        except OSError:
            return None
        total = 0
        for line in text.splitlines():
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5] == path:
                start, end = fields[0].split("-")
                total += int(end, 16) - int(start, 16)
        return total

    def _cuda_mappers(self) -> list[int]:
        out = []
        me = str(self._self_pid())
        for pid in self._pids():
            if pid == me:
                continue
            try:
                text = read_bytes(self.roots.proc(pid, "maps"))
            except OSError:
                continue
            if CUDA_LIBRARY.encode() in text:
                out.append(int(pid))
        return out
