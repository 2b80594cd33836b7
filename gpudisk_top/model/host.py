"""Host CPU, PSI, memory and cgroup I/O over one interval, from two HostRaw samples.

CPU percentages are sysstat's iostat avg-cpu (iostat.c write_cpu_stat and
write_plain_cpu_stat, common.c ll_sp_value and get_interval):
  tot   = user + nice + system + idle + iowait + irq + softirq + steal
          (guest and guest_nice are already inside user and nice, so they are not added)
  itv   = tot(cur) - tot(prev), an unsigned long long, and 1 when it is 0
  pct(x) = 0 when x went down (a dyn-tick race can move a counter back), else
           (x(cur) - x(prev)) / itv * 100
  %system = pct(system + irq + softirq);  %idle is 0 when idle went down.
PSI percentages are the share of the interval that tasks stalled:
  delta(total_us) / (interval_s * 1e6) * 100, clamped to [0, 100].
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from gpudisk_top.collect.host import MEMINFO_FIELDS
from gpudisk_top.collect.sample import CgroupIo, CpuTimes, HostRaw, PsiTotals

_MASK64 = 0xFFFFFFFFFFFFFFFF


@dataclass(slots=True)
class HostView:
    """The host over one interval.  Every field is None when it cannot be computed (no
    previous sample, a source that is absent on this kernel, ...)."""

    ncpu: int | None = None
    cpu_user_pct: float | None = None
    cpu_nice_pct: float | None = None
    cpu_system_pct: float | None = None       # system + irq + softirq, as iostat
    cpu_iowait_pct: float | None = None
    cpu_steal_pct: float | None = None
    cpu_idle_pct: float | None = None
    irq_pct: float | None = None              # irq + softirq alone (inside cpu_system_pct):
                                              # the kernel's work for I/O completions
    psi_io_some_pct: float | None = None
    psi_io_full_pct: float | None = None
    psi_cpu_some_pct: float | None = None
    psi_cpu_full_pct: float | None = None
    psi_memory_some_pct: float | None = None
    psi_memory_full_pct: float | None = None
    mem_total_kb: int | None = None
    mem_available_kb: int | None = None
    cached_kb: int | None = None
    buffers_kb: int | None = None
    dirty_kb: int | None = None
    writeback_kb: int | None = None
    cgroup_path: str | None = None
    # "MAJ:MIN" -> {"read_kb_s", "write_kb_s", "r_s", "w_s"}; a value is None when its
    # counter went down
    cgroup_io: dict[str, dict[str, float | None]] | None = None
    cgroup_io_some_pct: float | None = None
    cgroup_io_full_pct: float | None = None
    cgroup_pid: int | None = None             # whose cgroup: a GPU process's (the job's); None: ours
    cgroup_cpu_some_pct: float | None = None  # cpu.pressure
    cgroup_cpu_full_pct: float | None = None
    # CFS bandwidth (cpu.max): the share of enforcement periods in which the cgroup ran out
    # of quota and was held off the CPUs (cpu.stat nr_throttled / nr_periods), its limit
    # and what it used, in CPUs
    cgroup_throttled_pct: float | None = None
    cgroup_cpu_limit_cpus: float | None = None
    cgroup_cpu_used_cpus: float | None = None
    cgroup_page_cache_kb: int | None = None   # memory.stat file: the job's page cache
    cgroup_dirty_kb: int | None = None        # memory.stat file_dirty


HOST_FIELDS = tuple(f.name for f in fields(HostView))


def _valid_interval(interval_s: float) -> bool:
    return math.isfinite(interval_s) and interval_s > 0


# ---------------------------------------------------------------------------- CPU
def _cpu_total(c: CpuTimes) -> int:
    return c.user + c.nice + c.system + c.idle + c.iowait + c.irq + c.softirq + c.steal


def _cpu_pcts(cur: CpuTimes, prev: CpuTimes) -> dict[str, float]:
    itv = (_cpu_total(cur) - _cpu_total(prev)) & _MASK64
    if not itv:  # get_interval(): "Paranoia checking"
        itv = 1

    def pct(now: int, before: int) -> float:  # ll_sp_value()
        return 0.0 if now < before else (now - before) / itv * 100.0

    return {
        "cpu_user_pct": pct(cur.user, prev.user),
        "cpu_nice_pct": pct(cur.nice, prev.nice),
        "cpu_system_pct": pct(cur.system + cur.irq + cur.softirq,
                              prev.system + prev.irq + prev.softirq),
        "cpu_iowait_pct": pct(cur.iowait, prev.iowait),
        "cpu_steal_pct": pct(cur.steal, prev.steal),
        "cpu_idle_pct": pct(cur.idle, prev.idle),
        "irq_pct": pct(cur.irq + cur.softirq, prev.irq + prev.softirq),
    }


# ---------------------------------------------------------------------------- PSI
def _stall_pct(cur_us: int | None, prev_us: int | None, interval_s: float) -> float | None:
    if cur_us is None or prev_us is None or not _valid_interval(interval_s):
        return None
    pct = (cur_us - prev_us) / (interval_s * 1e6) * 100.0
    return min(100.0, max(0.0, pct))


def _psi_pcts(cur: PsiTotals | None, prev: PsiTotals | None,
              interval_s: float) -> tuple[float | None, float | None]:
    if cur is None or prev is None:
        return None, None
    return (_stall_pct(cur.some_us, prev.some_us, interval_s),
            _stall_pct(cur.full_us, prev.full_us, interval_s))


# ---------------------------------------------------------------------------- cgroup
def cpu_limit(cpu_max: str | None) -> float | None:
    """CPUs a cgroup may use from its cpu.max ("QUOTA PERIOD" in µs, "max" for none)."""
    parts = (cpu_max or "").split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        quota, period = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    return quota / period if period > 0 else None


def _cgroup_cpu(view: "HostView", cur: CgroupIo, prev: CgroupIo, interval_s: float) -> None:
    view.cgroup_cpu_some_pct, view.cgroup_cpu_full_pct = _psi_pcts(
        cur.cpu_pressure, prev.cpu_pressure, interval_s)
    now, before = cur.cpu_stat, prev.cpu_stat
    periods = now.get("nr_periods", 0) - before.get("nr_periods", 0)
    throttled = now.get("nr_throttled", 0) - before.get("nr_throttled", 0)
    if "nr_periods" in now and "nr_periods" in before and periods > 0 and throttled >= 0:
        view.cgroup_throttled_pct = min(100.0, throttled / periods * 100.0)
    used = now.get("usage_usec", 0) - before.get("usage_usec", 0)
    if "usage_usec" in now and "usage_usec" in before and used >= 0 and _valid_interval(interval_s):
        view.cgroup_cpu_used_cpus = used / (interval_s * 1e6)


def _cgroup_io_rates(cur: CgroupIo, prev: CgroupIo,
                     interval_s: float) -> dict[str, dict[str, float | None]]:
    def per_s(key: str, now: dict[str, int], before: dict[str, int],
              scale: float = 1.0) -> float | None:
        if key not in now or key not in before or now[key] < before[key]:
            return None
        return (now[key] - before[key]) / scale / interval_s

    out: dict[str, dict[str, float | None]] = {}
    for dev, now in cur.io_stat.items():
        before = prev.io_stat.get(dev)
        if before is None:
            continue  # a device that appeared: its counters start at an unknown point
        out[dev] = {
            "read_kb_s": per_s("rbytes", now, before, 1024.0),
            "write_kb_s": per_s("wbytes", now, before, 1024.0),
            "r_s": per_s("rios", now, before),
            "w_s": per_s("wios", now, before),
        }
    return out


# ---------------------------------------------------------------------------- meminfo
# The kernel counts memory in pages: no figure of /proc/meminfo is below 0, none is above
# what a 64-bit address space holds (2^64 bytes: 2^54 kB), MemTotal is never 0, and no
# part of memory is larger than all of it.  A figure outside that is a broken file (a
# container's lxcfs gone wrong, a hand-made --procfs, a damaged recording), not a reading:
# it is said, and not shown ("total -0.00 GiB" was).  Checked here, not where it is read,
# so a recording keeps what the file said and its replay is judged by the same rule.
MEMINFO_MAX_KB = 1 << 54
MEMINFO_PARTS = tuple(f for f in MEMINFO_FIELDS if f != "MemTotal")   # collect/host.py's


def meminfo_checked(kb: dict[str, int]) -> tuple[dict[str, int], list[str]]:
    """(the figures of kb, parse_meminfo's, that a kernel could print; a warning line for
    each one left out).  Never raises."""
    out: dict[str, int] = {}
    problems: list[str] = []
    total = kb.get("MemTotal")
    if total is not None:
        if 0 < total <= MEMINFO_MAX_KB:
            out["MemTotal"] = total
        else:
            problems.append(f"meminfo: MemTotal {total} kB is impossible (a machine's is "
                            "above 0 and at most 2^54 kB); the memory total is not shown")
            total = None
    for name in MEMINFO_PARTS:
        value = kb.get(name)
        if value is None:
            continue
        if 0 <= value <= (total if total is not None else MEMINFO_MAX_KB):
            out[name] = value
        else:
            bound = "MemTotal" if total is not None else "any memory"
            problems.append(f"meminfo: {name} {value} kB is impossible (below 0 or above "
                            f"{bound}); it is not shown")
    return out, problems


# ---------------------------------------------------------------------------- view
def host_view(cur: HostRaw, prev: HostRaw | None, interval_s: float,
              warnings: list[str] | None = None) -> HostView:
    """The host over the interval from prev to cur (interval_s seconds apart).

    Never raises.  Memory fields come from cur alone, those a kernel could not have
    written left out (meminfo_checked; the line that says so appended to `warnings`);
    rates and percentages are None without prev, without a valid interval, or where
    either sample lacks the source.
    """
    mem, problems = meminfo_checked(cur.meminfo_kb)
    if warnings is not None:
        warnings.extend(problems)
    view = HostView(
        ncpu=cur.ncpu,
        mem_total_kb=mem.get("MemTotal"),
        mem_available_kb=mem.get("MemAvailable"),
        cached_kb=mem.get("Cached"),
        buffers_kb=mem.get("Buffers"),
        dirty_kb=mem.get("Dirty"),
        writeback_kb=mem.get("Writeback"),
        cgroup_path=cur.cgroup.path if cur.cgroup is not None else None,
    )
    cg = cur.cgroup
    if cg is not None:
        view.cgroup_pid = cg.pid
        view.cgroup_cpu_limit_cpus = cpu_limit(cg.cpu_max)
        if "file" in cg.memory_stat:
            view.cgroup_page_cache_kb = cg.memory_stat["file"] // 1024
        if "file_dirty" in cg.memory_stat:
            view.cgroup_dirty_kb = cg.memory_stat["file_dirty"] // 1024
    if prev is None:
        return view

    if cur.cpu is not None and prev.cpu is not None:
        for name, value in _cpu_pcts(cur.cpu, prev.cpu).items():
            setattr(view, name, value)

    for resource in ("io", "cpu", "memory"):
        some, full = _psi_pcts(cur.psi.get(resource), prev.psi.get(resource), interval_s)
        setattr(view, f"psi_{resource}_some_pct", some)
        setattr(view, f"psi_{resource}_full_pct", full)

    # a cgroup that changed (we were moved) has counters that do not continue
    if (cur.cgroup is not None and prev.cgroup is not None
            and cur.cgroup.path == prev.cgroup.path):
        if _valid_interval(interval_s):
            view.cgroup_io = _cgroup_io_rates(cur.cgroup, prev.cgroup, interval_s)
        view.cgroup_io_some_pct, view.cgroup_io_full_pct = _psi_pcts(
            cur.cgroup.io_pressure, prev.cgroup.io_pressure, interval_s)
        _cgroup_cpu(view, cur.cgroup, prev.cgroup, interval_s)
    return view


def busy_pct(h: HostView | None) -> float | None:
    """The host's CPUs running something, in % of all of them: iowait is idle time."""
    if h is None or h.cpu_idle_pct is None:
        return None
    return max(0.0, 100.0 - h.cpu_idle_pct - (h.cpu_iowait_pct or 0.0))


def others_cpu_pct(h: HostView | None, job_cpu_pct: float) -> float | None:
    """The CPU the job's neighbours take from it, in % of one CPU (as pidstat's %CPU):
    everything busy that is not the job's (processes, interrupts, steal), less what
    processes at a lower priority ran (/proc/stat's nice: CFS gives a job at nice 0 ~98 %
    of a CPU it shares with one at nice 19, so that time is the job's to take).  Where the
    job's own CPU does not fit in the time not niced, the job is niced itself: then every
    other busy second counts.  None where the host's CPU is not known."""
    busy = busy_pct(h)
    if busy is None or not h.ncpu:
        return None
    busy_cpu = busy * h.ncpu
    niced = (h.cpu_nice_pct or 0.0) * h.ncpu
    if job_cpu_pct <= busy_cpu - niced + 5.0:
        return max(0.0, busy_cpu - niced - job_cpu_pct)
    return max(0.0, busy_cpu - job_cpu_pct)


def host_as_json(view: HostView) -> dict:
    """The view as a JSON-ready dict, one key per HostView field (None for n/a)."""
    out = {}
    for name in HOST_FIELDS:
        value = getattr(view, name)
        if isinstance(value, dict):
            value = {dev: dict(rates) for dev, rates in value.items()}
        out[name] = value
    return out
