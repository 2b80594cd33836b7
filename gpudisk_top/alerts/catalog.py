"""The metrics an alert rule may test, named as the model names them (units in the name):

  disk_<iostat attribute>   per device: disk_util_pct, disk_r_await_ms, disk_aqu_sz, ...
  gpu_<attribute>           per GPU: gpu_util_pct, gpu_temp_c, gpu_mem_used_pct, gpu_lost, ...
  host_<attribute>          the node: host_psi_io_some_pct, host_cpu_iowait_pct, ...
  disk_health_<field>       per device, the health of the disk it lives on (model/health.py,
                            read every few minutes): disk_health_media_errors_gained,
                            disk_health_spare_margin_pct, disk_health_above_warning_c,
                            disk_health_failing, disk_health_temperature_c, ...

The names and what they mean are the vocabulary's (model/vocab.py: Family.qualified of
each metric with `alert`).  Each observation is (subject, value): the device name, the
GPU index, or "" for the host.
"""

from __future__ import annotations

import fnmatch

from gpudisk_top.model import vocab
from gpudisk_top.model.health import health_of, health_value
from gpudisk_top.model.select import DEFAULT_KINDS

# rule's metric -> (kind, the attribute it reads); GPU_COMPUTED's are gpu_value()'s
_METRICS = {fam.qualified(m): (fam.kind, m.field)
            for fam in (vocab.DISK, vocab.GPU, vocab.GPU_COMPUTED, vocab.HOST, vocab.HEALTH,
                        vocab.HEALTH_COMPUTED)
            for m in fam if m.alert}
METRICS = tuple(_METRICS)
_HEALTH = vocab.HEALTH.kind


def family(metric: str) -> str:
    """'disk', 'gpu' or 'host' (a disk_health metric is a disk's: it selects devices
    as the disk metrics do).  Raises KeyError for a name not in METRICS."""
    kind = _METRICS[metric][0]
    return "disk" if kind == _HEALTH else kind


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
        source, attr = _METRICS[metric]
        if source == _HEALTH:
            return [(name, _health_value(model, name, attr))
                    for name in disk_subjects(model, devices, mountpoints)]
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


def _health_value(model, name: str, attr: str) -> float | None:
    """The health number of the disk `name` lives on; None while it is not read."""
    view = health_of(model.health, model.devices, name)
    return None if view is None else health_value(view, attr)


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
