"""Model.new(sample, last): every rate of one interval, derived from two raw samples.

Live mode and replay both build Models this way, so the screens, the report and the
exporters cannot tell them apart.

A device whose interval is physically impossible (model/disk.py implausible(): a counter
went down, more busy time than wall time, ...) is in `devices` but not in `disks`; its
reason is in `disk_dropped` and a line in `warnings`.  Every reader of `disks` therefore
shows such a device as n/a (never 0) for that interval.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudisk_top.collect.detail import DETAIL_SLOW_S
from gpudisk_top.collect.sample import DeviceInfo, Sample
from gpudisk_top.model.detail import proc_interval
from gpudisk_top.model.jobs import JobInfo, cgroup_intervals, jobs_of
from gpudisk_top.model.disk import DiskDeltas, DiskRates, checked_intervals
from gpudisk_top.model.gpu import GpuView, gpu_views
from gpudisk_top.model.health import HealthView, health_views
from gpudisk_top.model.host import HostView, host_view
from gpudisk_top.model.loaders import loader_time, tree_loaders
from gpudisk_top.model.mounts import MountView, mount_views
from gpudisk_top.model.procs import ProcView, proc_views, tree_totals


@dataclass
class Model:
    """One interval (last.mono_s, sample.mono_s]."""

    wall_s: float
    interval_s: float
    sample: Sample
    disks: dict[str, DiskRates] = field(default_factory=dict)
    # the counter differences each device's rates were made of (the same devices as
    # `disks`): what the recorder's summaries add up, exact integers
    disk_deltas: dict[str, DiskDeltas] = field(default_factory=dict)
    devices: dict[str, DeviceInfo] = field(default_factory=dict)
    gpu_status: str = ""
    gpus: list[GpuView] = field(default_factory=list)
    host: HostView | None = None
    procs: dict[int, ProcView] = field(default_factory=dict)
    mounts: dict[str, MountView] = field(default_factory=dict)  # network and FUSE mounts
    # per GPU process (host PID): its own and its descendants' I/O, summed, and where its
    # loaders' time went ("loaders": a model.loaders.LoaderTime, or None)
    gpu_proc_io: dict[int, dict] = field(default_factory=dict)
    # device -> why its rates were dropped this interval (in `devices`, not in `disks`)
    disk_dropped: dict[str, str] = field(default_factory=dict)
    # each physical disk's health as the slow poller last read it (model/health.py), by
    # kernel name; {} when not read (shared between Models of the same poll: read only)
    health: dict[str, HealthView] = field(default_factory=dict)
    # what the model found wrong in this interval, one line each; what the collectors
    # could not read is in sample.warnings
    warnings: list[str] = field(default_factory=list)
    # the jobs on the node (model/jobs.py), by their lowest GPU
    jobs: list[JobInfo] = field(default_factory=list)
    # the processes' rows (model/detail.py): how old they are (0: read at this sample's
    # end), the span their rates cover (the interval's at the full cadence), and the slow
    # cadence they are read at while it is in force (None: every sample)
    procs_age_s: float = 0.0
    procs_span_s: float = 0.0
    detail_s: float | None = None

    @property
    def all_warnings(self) -> list[str]:
        """Every warning of the interval, as `--once`, its JSON and the dashboard's `!`
        say them: the collectors' (each blind spot with its fix first) then the model's."""
        return [*self.sample.warnings, *self.warnings]

    @classmethod
    def new(cls, sample: Sample, last: Sample | None) -> "Model":
        """Derive the interval ending at `sample`.  With no `last` (the first sample),
        rates are empty and instantaneous readings still show."""
        interval_s = sample.mono_s - last.mono_s if last is not None else 0.0
        model = cls(wall_s=sample.wall_s, interval_s=interval_s, sample=sample,
                    devices=sample.devices, gpu_status=sample.gpu.status,
                    health=health_views(sample.health))
        if last is not None:
            model.disks, model.disk_deltas, model.disk_dropped = checked_intervals(
                last.disks, sample.disks, interval_s)
            model.warnings.extend(f"{name}: no disk rates this interval: {why}"
                                  for name, why in model.disk_dropped.items())
        window_us = (int(last.wall_s * 1e6), int(sample.wall_s * 1e6)) if last is not None else None
        model.gpus = gpu_views(sample.gpu, last.gpu if last is not None else None, window_us)
        model.host = host_view(sample.host, last.host if last is not None else None, interval_s,
                               model.warnings)
        link, model.procs_span_s, model.procs_age_s = proc_interval(sample, last)
        carried = link is not None and model.procs_age_s > 0 and link.views is not None
        # a sample that carries the last read has its rows, made once (model/detail.py)
        model.procs = link.views if carried else proc_views(
            sample.procs, link.base if link is not None else None, model.procs_span_s)
        model.detail_s = DETAIL_SLOW_S if sample.procs_age_s is not None else None
        model.mounts = mount_views(sample.mounts, last.mounts if last is not None else None,
                                   model.procs, interval_s)
        model.warnings.extend(f"{mp}: {v.dropped}" for mp, v in model.mounts.items()
                              if v.dropped is not None)
        model.jobs = jobs_of(model.gpus, sample.procs, cgroup_intervals(last, sample, interval_s))
        gpu_local = {p.local_pid for g in model.gpus for p in g.processes}
        made = link.totals if carried else {}
        for gpu in model.gpus:
            for proc in gpu.processes:
                if proc.pid not in model.gpu_proc_io:
                    totals = made.get(proc.pid)
                    if totals is None:
                        totals = tree_totals(model.procs, proc.pid)
                        pool, kind = tree_loaders(model.procs, proc.pid, gpu_local)
                        totals["loaders"] = loader_time(model.disks, pool, kind,
                                                        devices=model.devices)
                    model.gpu_proc_io[proc.pid] = totals
                    lt = totals["loaders"]
                    if lt is not None and lt.mount in model.mounts:
                        model.mounts[lt.mount].job_read_ms = lt.mount_read_ms
        if link is not None and not carried and link.views is None and model.procs_age_s == 0:
            # the read's rows and totals, for the samples that carry it (shared: read only)
            link.views, link.totals = model.procs, dict(model.gpu_proc_io)
        return model
