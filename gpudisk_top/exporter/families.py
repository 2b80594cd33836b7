"""The latest Model as Prometheus metric families, rendered when a scrape asks.

Naming follows Prometheus's conventions: a `gpudisk_top_` prefix, base units in the name
(seconds, bytes, ratios from 0 to 1, celsius, watts, hertz), `_total` on counters.  The
model keeps the tool's own units (ms, kB, %); each metric's family name, HELP line and
conversion are in the vocabulary (model/vocab.py); the families below that are not a
number of the model (build info, the state, episodes, alerts, watched paths) are this
module's.  A value the model has as None (n/a) is left out, never exported as 0.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from gpudisk_top import __version__
from gpudisk_top.exporter.gauges import add, fill, gauges
from gpudisk_top.exporter.jobseries import gpus_starved, job_families, job_ledger_families
from gpudisk_top.exporter.labels import DeviceLabels
from gpudisk_top.verdict.detect import OWN_CAUSE_STATES, STATES, UNAVAILABLE
from gpudisk_top.verdict.gaps import GAP_INTERVALS, GAP_MIN_S
from gpudisk_top.verdict.ledger import CAUSES, Ledger
from gpudisk_top.model.busy_tier import PROM_BUSY_SOURCE, PROM_BUSY_SOURCE_HELP
from gpudisk_top.model.select import DeviceFilter
from gpudisk_top.model.health import STATUSES
from gpudisk_top.model.metric import PROM_PREFIX
from gpudisk_top.model.vocab import (DISK, GPU, GPU_COMPUTED, GPU_PROCESS, GPU_PROCESS_IO,
                                     GPUS_STARVED, HEALTH, HOST, LAST_SAMPLE, LEDGER, MOUNT,
                                     STATE_SINCE, VERDICT_INFO)
from gpudisk_top.textsafe import printable

P = PROM_PREFIX


@dataclass
class Frame:
    """What one update() handed over; rendered on scrape.  Nothing in it is mutated after."""

    model: object
    verdict: object = None
    episodes: Mapping[str, int] = field(default_factory=dict)
    free_space: tuple = ()
    alerts_fired: Mapping[str, int] = field(default_factory=dict)
    samples: int = 0
    # the stall ledger since the exporter started (verdict/ledger.py): a copy, never mutated
    ledger: Ledger | None = None
    # each job's series (exporter/jobseries.py JobBook.series): a snapshot, and how many
    # jobs were left out
    jobs: tuple = ()
    jobs_left_out: int = 0


def episode_counts(episodes) -> dict[str, int]:
    """{state: episodes that state opened}, from a Detector's `episodes` list or a mapping."""
    if episodes is None:
        return {}
    if isinstance(episodes, Mapping):
        return {str(k): int(v) for k, v in episodes.items()}
    counts: dict[str, int] = {}
    for ep in episodes:
        counts[ep.state] = counts.get(ep.state, 0) + 1
    return counts


REASON_MAX_CHARS = 200
_RUNNING_FOR = re.compile(r" for \d+(?:\.\d+)? s\b")


def reason_label(reason: str) -> str:
    """A reason as a label value: control characters escaped, at most REASON_MAX_CHARS,
    and without a hung call's running time ("has not answered for 12.0 s"), which would
    make a new series every sample."""
    text = printable(_RUNNING_FOR.sub("", reason or ""))
    return text if len(text) <= REASON_MAX_CHARS else text[:REASON_MAX_CHARS - 1] + "…"


def sample_age(age_s: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(P + "sample_age_seconds", "Seconds since the latest sample was "
                             "handed to the exporter; past 3 intervals the data series are "
                             "left out (sampling stalled).", value=age_s)


class Renderer:
    """Frame -> metric families.  `labels` adds user labels to disk series; `dev_filter`
    chooses the disks, as the disk table does (whole disks and dm/md that did I/O)."""

    def __init__(self, labels: DeviceLabels | None = None, dev_filter: DeviceFilter | None = None,
                 alert_names: Iterable[str] = (), source: str = "live") -> None:
        self.labels = labels or DeviceLabels()
        self.dev_filter = dev_filter or DeviceFilter()
        self.alert_names = tuple(alert_names)
        self.source = source

    def render(self, frame: Frame | None, stalled: bool = False) -> list:
        """Every family; before the first update, only build_info; for a frame too old to
        be served as now (stalled), only the meta families and the ledger's counters (what
        was counted stays counted: a counter that vanished while sampling stalled would
        read as a reset to anything that rates it)."""
        out = self._meta(frame)
        if frame is None:
            return out
        if stalled:
            return out + self._ledger(frame) + job_ledger_families(frame.jobs)
        out += self._gpus(frame.model)
        out += self._disks(frame.model, frame.verdict)
        out += self._host(frame.model)
        out += self._mounts(frame.model)
        out += self._health(frame.model)
        out += self._verdict(frame)
        out += self._ledger(frame)
        out += job_families(frame.jobs, frame.jobs_left_out)
        out += self._paths(frame)
        return out

    # ------------------------------------------------------------------ families
    def _meta(self, frame: Frame | None) -> list:
        info = GaugeMetricFamily(P + "build_info", "Always 1; labels say which gpudisk-top "
                                 "runs and where its numbers come from.",
                                 labels=["version", "source"])
        info.add_metric([__version__, self.source], 1)
        out = [info]
        if frame is None:
            return out
        m = frame.model
        out.append(GaugeMetricFamily(P + LAST_SAMPLE,
                                     "When the latest sample was taken (Unix time).", value=m.wall_s))
        out.append(GaugeMetricFamily(P + "sample_interval_seconds",
                                     "Length of the interval the latest rates cover.",
                                     value=m.interval_s))
        out.append(CounterMetricFamily(P + "samples", "Samples taken since start.",
                                       value=frame.samples))
        return out

    def _gpus(self, m) -> list:
        up = GaugeMetricFamily(P + "gpus_available", "1 when NVML could be read, else 0 "
                               "(no driver, no permission).", value=1 if m.gpu_status == "ok" else 0)
        info = GaugeMetricFamily(P + "gpu_info", "Always 1; the GPU's name and PCI bus id.",
                                 labels=["gpu", "uuid", "name", "pci_bus_id"])
        lost_metric = GPU_COMPUTED["lost"]
        lost = GaugeMetricFamily(P + lost_metric.prom, lost_metric.prom_help, labels=["gpu", "uuid"])
        # the tier the utilization series is, one series a GPU (a GPU that changes tier
        # changes series: the old one goes stale at once, as verdict_info's does)
        busy = GaugeMetricFamily(P + PROM_BUSY_SOURCE, PROM_BUSY_SOURCE_HELP,
                                 labels=["gpu", "uuid", "source"])
        fams = gauges(GPU, ["gpu", "uuid"])
        proc_labels = ["gpu", "uuid", "pid", "comm"]
        pmem = gauges(GPU_PROCESS, proc_labels)
        pfams = gauges(GPU_PROCESS_IO, proc_labels)
        for g in m.gpus:
            key = [str(g.index), g.uuid or ""]
            info.add_metric(key + [g.name or "", g.pci_bus_id or ""], 1)
            lost.add_metric(key, 1 if g.lost else 0)
            if not g.lost:
                busy.add_metric(key + [g.busy_source], 1)
            fill(fams, GPU, key, g)
            for p in g.processes:
                plabels = key + [str(p.pid), p.name or ""]
                fill(pmem, GPU_PROCESS, plabels, p)
                fill(pfams, GPU_PROCESS_IO, plabels, m.gpu_proc_io.get(p.pid) or {})
        return [up, info, lost, busy, *fams.values(), *pmem.values(), *pfams.values()]

    def _disks(self, m, verdict) -> list:
        user = self.labels.names
        names = ["device", "mountpoint", "class", *user]
        fams = gauges(DISK, names)
        sat = GaugeMetricFamily(P + "disk_saturated", "1 when the starvation detector judges "
                                "the device saturated this interval (latency, queue, "
                                "throughput and io pressure together), else 0.", labels=names)
        sats = getattr(verdict, "saturation", None) or {}
        for dev, rates in m.disks.items():
            info = m.devices.get(dev)
            if info is None or not self.dev_filter.selected(info, m.sample.disks.get(dev)):
                continue
            extra = self.labels.for_device(dev, info.display_name)
            labels = [dev, ",".join(info.mountpoints), info.dev_class,
                      *(extra.get(k, "") for k in user)]
            fill(fams, DISK, labels, rates)
            if dev in sats:
                sat.add_metric(labels, 1 if sats[dev].saturated else 0)
        return [*fams.values(), sat]

    def _mounts(self, m) -> list:
        """The network and FUSE mounts the job reads (model/mounts.py); no families
        at all where it reads none."""
        if not m.mounts:
            return []
        fams = gauges(MOUNT, ["mountpoint", "fstype", "source"])
        for v in m.mounts.values():
            fill(fams, MOUNT, [v.mountpoint, v.fstype, v.source], v)
        return list(fams.values())

    def _health(self, m) -> list:
        """Each physical disk's SMART / NVMe health as last read (model/health.py), named
        after prometheus-community/smartctl_exporter's smartctl_device_* where it has
        the number; no families at all where health is not read (--health-interval 0,
        --demo)."""
        if not m.health:
            return []
        user = self.labels.names
        names = ["device", *user]
        info = GaugeMetricFamily(P + "disk_health_info", "Always 1; the drive's model, serial "
                                 "and firmware, and where its health was read (smartctl, sysfs).",
                                 labels=names + ["model", "serial", "firmware", "protocol",
                                                 "source"])
        readable = GaugeMetricFamily(P + "disk_health_readable", "1 when the drive's health "
                                     "could be read, else 0 (virtio, no permission, no "
                                     "smartctl).", labels=names)
        status = GaugeMetricFamily(P + "disk_health_status", "The drive's health, one-hot: 1 "
                                   "for its status (ok, warning, failing, unknown), 0 for the "
                                   "others (gpudisk-top's rule: model/health.py classify).",
                                   labels=names + ["status"])
        passed = GaugeMetricFamily(P + "disk_health_smart_status", "1 when the drive's own "
                                   "SMART self-assessment passed, 0 when it failed "
                                   "(smartctl_device_smart_status).", labels=names)
        read_at = GaugeMetricFamily(P + "disk_health_read_timestamp_seconds", "When the "
                                    "drive's health was last read (Unix time).", labels=names)
        fams = gauges(HEALTH, names)
        for dev in sorted(m.health):
            view = m.health[dev]
            h = view.reading
            info_dev = m.devices.get(dev)
            extra = self.labels.for_device(dev, info_dev.display_name if info_dev else dev)
            labels = [dev, *(extra.get(k, "") for k in user)]
            info.add_metric(labels + [h.model or "", h.serial or "", h.firmware or "",
                                      h.protocol or "", h.source or ""], 1)
            readable.add_metric(labels, 1 if h.readable else 0)
            for s in STATUSES:
                status.add_metric(labels + [s], 1 if s == view.status else 0)
            add(read_at, labels, h.read_wall_s or None)
            if h.smart_passed is not None:
                passed.add_metric(labels, 1 if h.smart_passed else 0)
            if h.readable:
                fill(fams, HEALTH, labels, h)
        return [info, readable, status, passed, read_at, *fams.values()]

    def _host(self, m) -> list:
        fams = gauges(HOST, [])
        if m.host is not None:
            fill(fams, HOST, [], m.host)
        # a scrape has always listed memory last, after CPU and the node's and the
        # cgroup's pressure
        return sorted(fams.values(), key=lambda fam: fam.name.startswith(P + "host_memory_"))

    def _verdict(self, frame: Frame) -> list:
        state = GaugeMetricFamily(P + "state", "The starvation detector's state now, one-hot: "
                                  "1 for the current state, 0 for the others (with hysteresis, "
                                  "as the dashboard shows it).", labels=["state"])
        episodes = CounterMetricFamily(P + "episodes", "Starvation episodes opened, per state.",
                                       labels=["state"])
        fired = CounterMetricFamily(P + "alerts_fired", "Alert rules fired (actions run), per "
                                    "rule of the config file.", labels=["alert"])
        since = GaugeMetricFamily(P + STATE_SINCE, "When the current "
                                  "state began (Unix time): an episode's start, else the first "
                                  "interval shown in the state.")
        info = GaugeMetricFamily(P + VERDICT_INFO, "Always 1; what the current verdict "
                                 "blames: its state, kind (saturated, latency-bound, "
                                 "remote-mount, throttled, own, others; empty if none), the "
                                 "devices (comma-joined) and the GPUs (comma-joined indexes).",
                                 labels=["state", "kind", "devices", "gpus"])
        culprit = GaugeMetricFamily(P + "verdict_culprit_read_ratio", "Share (0-1) of the "
                                    "blamed device's reads taken by each process outside the "
                                    "job that the current verdict's evidence names (its "
                                    "culprits); no series when it names none.",
                                    labels=["pid", "name", "device"])
        own = ", ".join(OWN_CAUSE_STATES[:-1]) + " or " + OWN_CAUSE_STATES[-1]
        starved = GaugeMetricFamily(P + GPUS_STARVED, "GPUs the node's own input or output "
                                    f"path starves: the verdict's GPUs in state {own}; 0 "
                                    "otherwise (straggler and undiagnosed-stall GPUs wait on "
                                    "a peer, not on this node).")
        unavailable = GaugeMetricFamily(P + "gpus_unavailable_info", "Always 1, present only "
                                        "while the state is unavailable (no GPU can be read); "
                                        "reason: why (no driver, an NVML error, a hung driver "
                                        "call, every GPU lost).", labels=["reason"])
        whatif = GaugeMetricFamily(P + "whatif_speedup", "What each fix would gain: the "
                                   "job's predicted speed factor (1.11: 11% faster) if the fix "
                                   "were made, one series per fix the current verdict predicts "
                                   "(workers, others, neighbour, cache, storage, "
                                   "checkpoint, fewer-workers; verdict/whatif.py); none while "
                                   "healthy.",
                                   labels=["fix"])
        v = frame.verdict
        if v is not None:
            for w in v.whatif:
                whatif.add_metric([w.fix], round(w.speedup, 3))
            if v.state == UNAVAILABLE:
                unavailable.add_metric([reason_label(v.reason)], 1)
            for s in STATES:
                state.add_metric([s], 1 if s == v.state else 0)
            if v.since_wall_s is not None:
                since.add_metric([], v.since_wall_s)
            info.add_metric([v.state, v.kind or "", ",".join(v.devices),
                             ",".join(str(g) for g in v.gpus)], 1)
            starved.add_metric([], gpus_starved(v))
            for c in v.culprits:
                add(culprit, [str(c.pid), c.name or "", c.device], c.read_share_pct, 0.01)
        for s in STATES:
            episodes.add_metric([s], frame.episodes.get(s, 0))
        for name in dict.fromkeys([*self.alert_names, *frame.alerts_fired]):
            fired.add_metric([name], frame.alerts_fired.get(name, 0))
        return [state, since, info, culprit, starved, unavailable, episodes, fired, whatif]

    def _ledger(self, frame: Frame) -> list:
        """The stall ledger's counters (verdict/ledger.py), from 0 at the exporter's start:
        every cause always (increase() needs a series from the start), each device or
        mount once blamed."""
        lost, idle, by_device = (LEDGER["lost_gpu_s"], LEDGER["idle_gpu_s"],
                                 LEDGER["device_lost_gpu_s"])
        ledger = frame.ledger or Ledger()
        cause = CounterMetricFamily(lost.prom_name, lost.prom_help, labels=["cause"])
        for c in CAUSES:
            cause.add_metric([c], ledger.by_cause.get(c, 0.0) * lost.prom_factor)
        idle_fam = CounterMetricFamily(idle.prom_name, idle.prom_help,
                                       value=ledger.idle_gpu_s * idle.prom_factor)
        dev = CounterMetricFamily(by_device.prom_name, by_device.prom_help, labels=["device"])
        for name, v in sorted(ledger.by_device.items()):
            dev.add_metric([name], v * by_device.prom_factor)
        # gaps in sampling (verdict/gaps.py: the process stopped, the host suspended): said
        # here, counted in none of the above
        gaps = CounterMetricFamily(P + "sample_gaps", "Gaps in sampling (no sample for more "
                                   f"than {GAP_INTERVALS} intervals, at least {GAP_MIN_S:g} s), "
                                   "counted as no GPU time.", value=ledger.gap_count)
        gap_s = CounterMetricFamily(P + "sample_gap_seconds", "Seconds of those gaps.",
                                    value=ledger.gap_s)
        return [cause, idle_fam, dev, gaps, gap_s]

    def _paths(self, frame: Frame) -> list:
        labels = ["path", "device"]
        up = GaugeMetricFamily(P + "path_up", "1 when the watched path answered statvfs, else 0.",
                               labels=labels)
        size = GaugeMetricFamily(P + "path_size_bytes", "Size of the filesystem holding the "
                                 "watched path.", labels=labels)
        avail = GaugeMetricFamily(P + "path_avail_bytes", "Bytes an unprivileged writer can "
                                  "still use there (df's Avail).", labels=labels)
        free = GaugeMetricFamily(P + "path_free_bytes", "Free bytes there, root's reserve "
                                 "included.", labels=labels)
        by_dev = {(i.major, i.minor): i.name for i in frame.model.devices.values()}
        for fs in frame.free_space:
            key = [fs.path, by_dev.get((fs.dev_major, fs.dev_minor), "")]
            up.add_metric(key, 1 if fs.ok else 0)
            add(size, key, fs.size_bytes)
            add(avail, key, fs.avail_bytes)
            add(free, key, fs.free_bytes)
        return [up, size, avail, free]
