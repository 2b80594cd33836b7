"""Who is loading which disk: every followed process's block I/O beside the rates of the
devices its files live on (the I/O view, `i`, and the verdict's "sdb saturated by pid
912 (rsync), 88% of its reads").

A process's read_bytes and write_bytes (/proc/PID/io, what pidstat -d and iotop show)
are not split by device.  A process is put on the device the verdict names when it has
files there, else on the device its files live on that moved the most data this interval (a file on a partition counts for the partition: its disk
and what lies under it share the load, collect.blockdev.device_stack); its share of
that device is its rate over the device's (iostat's rkB/s, wkB/s), at most 100%.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudisk_top.collect.blockdev import device_stack
from gpudisk_top.model.procs import ProcView


@dataclass(slots=True)
class IoRow:
    """One process over one interval, beside the device it loads."""

    view: ProcView
    device: str | None          # the device its files live on that moved the most data
    read_share_pct: float | None    # of that device's reads (rkB/s), None: no device rate
    write_share_pct: float | None
    job: bool                   # a GPU process or one of its descendants

    @property
    def io_kb_s(self) -> float:
        return (self.view.read_kb_s or 0.0) + (self.view.write_kb_s or 0.0)


def _share_pct(part: float | None, whole: float) -> float | None:
    if part is None or whole <= 0:
        return None
    return min(100.0, part / whole * 100.0)


def _row(model, view: ProcView, device: str | None) -> IoRow:
    rates = model.disks.get(device) if device is not None else None
    return IoRow(view, device,
                 _share_pct(view.read_kb_s, rates.rkb_s) if rates else None,
                 _share_pct(view.write_kb_s, rates.wkb_s) if rates else None,
                 view.root_pid is not None)


def _device_of(model, view: ProcView, first=()) -> str | None:
    """The device a process is put on: one of `first` (the verdict's) it has files on,
    else the one of its devices that moved the most data."""
    names = [d for d in view.devices or () if d in model.devices]
    if not names:
        return None
    named = [d for d in names if d in first]
    if named:
        return named[0]
    return max(names, key=lambda d: (model.disks[d].rkb_s + model.disks[d].wkb_s
                                     if d in model.disks else -1.0, d))


def io_rows(model, first: tuple[str, ...] | list[str] = ()) -> list[IoRow]:
    """Every process of the model with block I/O rates this interval, busiest first; those
    loading a device in `first` (the verdict's) before the rest, as the disk table puts
    that device first.  A process whose rates are not known yet (first seen) has 0."""
    rows = [_row(model, v, _device_of(model, v, first)) for v in model.procs.values()
            if v.read_kb_s is not None or v.write_kb_s is not None or v.root_pid is not None]
    rows.sort(key=lambda r: (r.device not in first, -r.io_kb_s, r.view.pid))
    return rows


def readers_of(model, device: str) -> list[IoRow]:
    """The processes reading from `device` (their files live on it or on a device over
    it), the biggest share of its reads first."""
    out = []
    for v in model.procs.values():
        if not v.read_kb_s:
            continue
        on = [d for d in v.devices or () if device in device_stack(model.devices, d)]
        if on:
            out.append(_row(model, v, device))
    out.sort(key=lambda r: (-(r.view.read_kb_s or 0.0), r.view.pid))
    return out


def container_of(cgroup: str | None) -> str:
    """A cgroup path as people name it: 'docker 3f2a1b9c0d4e' for a Docker or containerd
    scope, 'pod 7c1e…' for a Kubernetes pod, the systemd unit (rsync.service), or the
    path's last part; '-' when unknown."""
    if not cgroup:
        return "-"
    parts = [p for p in cgroup.split("/") if p]
    for part in reversed(parts):
        for prefix, label in (("docker-", "docker"), ("cri-containerd-", "containerd"),
                              ("crio-", "cri-o"), ("libpod-", "podman")):
            if part.startswith(prefix):
                return f"{label} {part[len(prefix):].split('.')[0][:12]}"
    if "docker" in parts:
        i = parts.index("docker")
        if i + 1 < len(parts):
            return f"docker {parts[i + 1][:12]}"
    for part in parts:
        if part.startswith("kubepods") and part.endswith(".slice") and "-pod" in part:
            return "pod " + part.split("-pod", 1)[1].removesuffix(".slice")[:12]
        if part.startswith("pod") and len(part) > 10:
            return "pod " + part[3:15]
    return parts[-1] if parts else "/"
