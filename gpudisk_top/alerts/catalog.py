"""The metrics an alert rule may test, named as the model names them (units in the name):

  disk_<iostat attribute>   per device: disk_util_pct, disk_r_await_ms, disk_aqu_sz, ...
  gpu_<attribute>           per GPU: gpu_util_pct, gpu_temp_c, gpu_mem_used_pct, gpu_lost, ...
  host_<attribute>          the node: host_psi_io_some_pct, host_cpu_iowait_pct, ...

Each observation is (subject, value): the device name, the GPU index, or "" for the host.
"""

from __future__ import annotations

import fnmatch
from dataclasses import fields

from gpudisk_top.model.disk import RATE_FIELDS
from gpudisk_top.model.host import HostView
from gpudisk_top.model.select import DEFAULT_KINDS

DISK_METRICS = {f"disk_{name}": name for name in RATE_FIELDS}

_GPU_ATTRS = ("util_pct", "mem_util_pct", "mem_used_mib", "mem_total_mib", "power_w",
              "power_avg_w", "power_limit_w", "temp_c", "sm_clock_mhz", "pcie_rx_kb_s",
              "pcie_tx_kb_s")
GPU_METRICS = {f"gpu_{name}": name for name in _GPU_ATTRS}
GPU_METRICS["gpu_mem_used_pct"] = None    # derived: used / total * 100
GPU_METRICS["gpu_lost"] = None            # 1 for a GPU that fell off the bus

_NOT_NUMBERS = ("ncpu", "cgroup_path", "cgroup_io")
HOST_METRICS = {f"host_{f.name}": f.name for f in fields(HostView) if f.name not in _NOT_NUMBERS}

METRICS = (*DISK_METRICS, *GPU_METRICS, *HOST_METRICS)


def family(metric: str) -> str:
    """'disk', 'gpu' or 'host'."""
    return metric.split("_", 1)[0]


def _matches(patterns: tuple[str, ...], *names: str) -> bool:
    return any(fnmatch.fnmatchcase(n, p.removeprefix("/dev/")) for p in patterns for n in names)


def disk_subjects(model, devices: tuple[str, ...], mountpoints: tuple[str, ...]) -> list[str]:
    """The devices a disk rule watches.  Globs match whole disks and dm/md devices (as
    the disk table shows them); a partition is watched when named exactly.  Without any
    selector: every device the disk table shows by default."""
    out = []
    for name in model.disks:
        info = model.devices.get(name)
        if info is None:
            continue
        default_kind = info.kind in DEFAULT_KINDS and not info.hidden
        if devices:
            exact = any(p.removeprefix("/dev/") in (name, info.display_name) for p in devices)
            if not (exact or (default_kind and _matches(devices, name, info.display_name))):
                continue
        elif not default_kind:
            continue
        elif not mountpoints:
            counters = model.sample.disks.get(name)
            if counters is None or counters.total_ios() == 0:
                continue     # iostat's rule: a device that never did I/O is not shown
        if mountpoints and not _matches(mountpoints, *info.mountpoints):
            continue
        out.append(name)
    return out


def observe(model, metric: str, devices=(), mountpoints=(), gpus=None) -> list[tuple[str, float | None]]:
    """(subject, value) for every subject the rule selects; value None means n/a."""
    kind = family(metric)
    if kind == "disk":
        if model.interval_s <= 0 or not model.disks:
            return []     # the first sample has no rates yet
        attr = DISK_METRICS[metric]
        return [(name, getattr(model.disks[name], attr))
                for name in disk_subjects(model, devices, mountpoints)]
    if kind == "gpu":
        out = []
        for g in model.gpus:
            if gpus is not None and g.index not in gpus:
                continue
            out.append((str(g.index), gpu_value(g, metric)))
        return out
    if model.host is None:
        return []
    return [("", getattr(model.host, HOST_METRICS[metric]))]


def gpu_value(g, metric: str) -> float | None:
    if metric == "gpu_lost":
        return 1.0 if g.lost else 0.0
    if metric == "gpu_mem_used_pct":
        if g.mem_used_mib is None or not g.mem_total_mib:
            return None
        return g.mem_used_mib / g.mem_total_mib * 100.0
    return getattr(g, GPU_METRICS[metric])
