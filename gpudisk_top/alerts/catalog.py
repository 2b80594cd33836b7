"""The metrics an alert rule may test, named as the model names them (units in the name):

  disk_<iostat attribute>   per device: disk_util_pct, disk_r_await_ms, disk_aqu_sz, ...
  gpu_<attribute>           per GPU: gpu_util_pct, gpu_temp_c, gpu_mem_used_pct, gpu_lost, ...
  host_<attribute>          the node: host_psi_io_some_pct, host_cpu_iowait_pct, ...

The names and what they mean are the vocabulary's (model/vocab.py: Family.qualified of
each metric with `alert`).  Each observation is (subject, value): the device name, the
GPU index, or "" for the host.
"""

from __future__ import annotations

import fnmatch

from gpudisk_top.model import vocab
from gpudisk_top.model.select import DEFAULT_KINDS

# rule's metric -> (kind, the attribute it reads); GPU_COMPUTED's are gpu_value()'s
_METRICS = {fam.qualified(m): (fam.kind, m.field)
            for fam in (vocab.DISK, vocab.GPU, vocab.GPU_COMPUTED, vocab.HOST)
            for m in fam if m.alert}
METRICS = tuple(_METRICS)


def family(metric: str) -> str:
    """'disk', 'gpu' or 'host'.  Raises KeyError for a name not in METRICS."""
    return _METRICS[metric][0]


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
        attr = _METRICS[metric][1]
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
    return [("", getattr(model.host, _METRICS[metric][1]))]


def gpu_value(g, metric: str) -> float | None:
    """The value of a GPU metric for one GpuView; vocab.GPU_COMPUTED's are computed here."""
    attr = _METRICS[metric][1]
    if attr == "lost":
        return 1.0 if g.lost else 0.0
    if attr == "mem_used_pct":
        if g.mem_used_mib is None or not g.mem_total_mib:
            return None
        return g.mem_used_mib / g.mem_total_mib * 100.0
    return getattr(g, attr)
