"""Cumulative host and per-process counters of a simulated node: /proc/stat CPU ticks,
PSI totals, /proc/meminfo, and /proc/PID/io plus CPU ticks of the job's processes and of
unrelated ones.

Like the disk counters, they are exact floats printed floored, so rates derived by the
model (gpudisk_top.model.host, .procs) give back the phase's numbers.  CPU time is in
USER_HZ ticks (100 a second per CPU, the value every Linux build exports).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpudisk_top.collect.sample import CpuTimes, HostRaw, ProcIoRaw, PsiTotals

USER_HZ = 100
MB = 2**20
_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


@dataclass
class ProcCounters:
    """One simulated process: identity and cumulative counters (bytes, ticks)."""

    pid: int
    ppid: int
    root_pid: int | None
    name: str
    cmdline: str
    devices: tuple[str, ...] = ()
    rchar: float = 0.0
    wchar: float = 0.0
    read_bytes: float = 0.0
    write_bytes: float = 0.0
    cpu_ticks: float = 0.0

    def add(self, interval_s: float, *, rchar_mb_s: float = 0.0, read_mb_s: float = 0.0,
            wchar_mb_s: float = 0.0, write_mb_s: float = 0.0, cpu_pct: float = 0.0) -> None:
        self.rchar += rchar_mb_s * MB * interval_s
        self.read_bytes += read_mb_s * MB * interval_s
        self.wchar += wchar_mb_s * MB * interval_s
        self.write_bytes += write_mb_s * MB * interval_s
        self.cpu_ticks += cpu_pct / 100.0 * USER_HZ * interval_s

    def reset(self) -> None:
        """A new process under the same PID: its counters start again from zero."""
        self.rchar = self.wchar = self.read_bytes = self.write_bytes = self.cpu_ticks = 0.0

    def raw(self) -> ProcIoRaw:
        return ProcIoRaw(pid=self.pid, ppid=self.ppid, root_pid=self.root_pid, name=self.name,
                         cmdline=self.cmdline, rchar=math.floor(self.rchar),
                         wchar=math.floor(self.wchar), read_bytes=math.floor(self.read_bytes),
                         write_bytes=math.floor(self.write_bytes),
                         cpu_ticks=math.floor(self.cpu_ticks), devices=self.devices)


@dataclass
class HostCounters:
    """The node's CPU ticks and PSI totals since boot, and its memory now."""

    ncpu: int
    cpu: dict[str, float] = field(default_factory=dict)
    psi_us: dict[str, float] = field(default_factory=dict)   # "io.some", "io.full", ...
    meminfo_kb: dict[str, int] = field(default_factory=dict)

    @classmethod
    def booted(cls, ncpu: int, uptime_s: float) -> HostCounters:
        """Counters of a node up uptime_s seconds, mostly idle until now."""
        total = ncpu * USER_HZ * uptime_s
        shares = {"user": 0.08, "system": 0.015, "softirq": 0.005, "iowait": 0.002}
        cpu = {f: total * shares.get(f, 0.0) for f in _CPU_FIELDS}
        cpu["idle"] = total - sum(cpu.values())
        psi = {"io.some": uptime_s * 1e6 * 0.004, "io.full": uptime_s * 1e6 * 0.002,
               "cpu.some": uptime_s * 1e6 * 0.01, "cpu.full": 0.0,
               "memory.some": uptime_s * 1e6 * 0.0005, "memory.full": uptime_s * 1e6 * 0.0002}
        return cls(ncpu=ncpu, cpu=cpu, psi_us=psi)

    def add_cpu(self, interval_s: float, busy_pct: float, iowait_pct: float) -> None:
        """busy_pct of all CPUs ran (user 80 %, system 15 %, softirq 5 % of it); iowait_pct
        of them waited on I/O, the rest idled."""
        total = self.ncpu * USER_HZ * interval_s
        busy = min(max(busy_pct, 0.0), 100.0) / 100.0
        iowait = min(max(iowait_pct, 0.0) / 100.0, 1.0 - busy)
        self.cpu["user"] += total * busy * 0.80
        self.cpu["system"] += total * busy * 0.15
        self.cpu["softirq"] += total * busy * 0.05
        self.cpu["iowait"] += total * iowait
        self.cpu["idle"] += total * (1.0 - busy - iowait)

    def add_psi(self, interval_s: float, resource: str, some_pct: float, full_pct: float) -> None:
        some = min(max(some_pct, 0.0), 100.0)
        full = min(max(full_pct, 0.0), some)
        self.psi_us[f"{resource}.some"] += some / 100.0 * interval_s * 1e6
        self.psi_us[f"{resource}.full"] += full / 100.0 * interval_s * 1e6

    def raw(self) -> HostRaw:
        cpu = CpuTimes(**{f: math.floor(v) for f, v in self.cpu.items()})
        psi = {r: PsiTotals(some_us=math.floor(self.psi_us[f"{r}.some"]),
                            full_us=math.floor(self.psi_us[f"{r}.full"]))
               for r in ("io", "cpu", "memory")}
        return HostRaw(cpu=cpu, ncpu=self.ncpu, psi=psi, meminfo_kb=dict(self.meminfo_kb))
