"""The latest Model as Prometheus metric families, rendered when a scrape asks.

Naming follows Prometheus's conventions: a `gpudisk_top_` prefix, base units in the name
(seconds, bytes, ratios from 0 to 1, celsius, watts, hertz), `_total` on counters.  The
model keeps the tool's own units (ms, kB, %); every conversion is in the tables below.
A value the model has as None (n/a) is left out, never exported as 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from gpudisk_top import __version__
from gpudisk_top.exporter.labels import DeviceLabels
from gpudisk_top.model.detect import STATES
from gpudisk_top.model.select import DeviceFilter

P = "gpudisk_top_"
KIB = 1024
MIB = 2**20

# DiskRates attribute -> (metric name, factor to base units, help); iostat's kB is 1024 B
DISK_METRICS = (
    ("r_s", "disk_reads_per_second", 1, "Read requests completed per second (iostat r/s)."),
    ("rkb_s", "disk_read_bytes_per_second", KIB, "Bytes read per second (iostat rkB/s)."),
    ("rrqm_s", "disk_read_merges_per_second", 1, "Read requests merged per second (iostat rrqm/s)."),
    ("rrqm_pct", "disk_read_merges_ratio", 0.01, "Share of read requests merged (iostat %rrqm / 100)."),
    ("r_await_ms", "disk_read_await_seconds", 0.001, "Mean time a read request took, queue included (iostat r_await)."),
    ("rareq_kb", "disk_read_request_size_bytes", KIB, "Mean size of a read request (iostat rareq-sz)."),
    ("w_s", "disk_writes_per_second", 1, "Write requests completed per second (iostat w/s)."),
    ("wkb_s", "disk_written_bytes_per_second", KIB, "Bytes written per second (iostat wkB/s)."),
    ("wrqm_s", "disk_write_merges_per_second", 1, "Write requests merged per second (iostat wrqm/s)."),
    ("wrqm_pct", "disk_write_merges_ratio", 0.01, "Share of write requests merged (iostat %wrqm / 100)."),
    ("w_await_ms", "disk_write_await_seconds", 0.001, "Mean time a write request took, queue included (iostat w_await)."),
    ("wareq_kb", "disk_write_request_size_bytes", KIB, "Mean size of a write request (iostat wareq-sz)."),
    ("d_s", "disk_discards_per_second", 1, "Discard requests completed per second (iostat d/s)."),
    ("dkb_s", "disk_discarded_bytes_per_second", KIB, "Bytes discarded per second (iostat dkB/s)."),
    ("drqm_s", "disk_discard_merges_per_second", 1, "Discard requests merged per second (iostat drqm/s)."),
    ("drqm_pct", "disk_discard_merges_ratio", 0.01, "Share of discard requests merged (iostat %drqm / 100)."),
    ("d_await_ms", "disk_discard_await_seconds", 0.001, "Mean time a discard request took (iostat d_await)."),
    ("dareq_kb", "disk_discard_request_size_bytes", KIB, "Mean size of a discard request (iostat dareq-sz)."),
    ("f_s", "disk_flushes_per_second", 1, "Flush requests completed per second (iostat f/s)."),
    ("f_await_ms", "disk_flush_await_seconds", 0.001, "Mean time a flush request took (iostat f_await)."),
    ("aqu_sz", "disk_queue_size", 1, "Mean number of requests queued or in flight (iostat aqu-sz)."),
    ("util_pct", "disk_utilization_ratio", 0.01, "Share of time with at least one request in flight (iostat %util / 100)."),
)

# GpuView attribute -> (metric name, factor, help)
GPU_METRICS = (
    ("util_pct", "gpu_utilization_ratio", 0.01, "Share of the interval a kernel was running (NVML utilization.gpu / 100)."),
    ("mem_util_pct", "gpu_memory_utilization_ratio", 0.01, "Share of the interval device memory was read or written (NVML utilization.memory / 100)."),
    ("mem_used_mib", "gpu_memory_used_bytes", MIB, "Device memory in use."),
    ("mem_total_mib", "gpu_memory_total_bytes", MIB, "Device memory in all."),
    ("power_w", "gpu_power_watts", 1, "Power draw now."),
    ("power_avg_w", "gpu_power_average_watts", 1, "Mean power over the interval, from the energy counter."),
    ("power_limit_w", "gpu_power_limit_watts", 1, "Power limit."),
    ("temp_c", "gpu_temperature_celsius", 1, "GPU core temperature."),
    ("sm_clock_mhz", "gpu_sm_clock_hertz", 1e6, "SM clock."),
    ("pcie_rx_kb_s", "gpu_pcie_rx_bytes_per_second", KIB, "PCIe bytes received by the GPU per second (NVML's 20 ms window)."),
    ("pcie_tx_kb_s", "gpu_pcie_tx_bytes_per_second", KIB, "PCIe bytes sent by the GPU per second (NVML's 20 ms window)."),
)

# gpu_proc_io key -> (metric name, factor, help); summed over the GPU process and its children
GPU_PROC_METRICS = (
    ("read_kb_s", "gpu_process_read_bytes_per_second", KIB, "Bytes the GPU process and its descendants made the block layer read, per second (/proc/PID/io read_bytes)."),
    ("rchar_kb_s", "gpu_process_read_chars_per_second", KIB, "Bytes the GPU process and its descendants read through read() and friends, page cache hits included (/proc/PID/io rchar)."),
    ("write_kb_s", "gpu_process_written_bytes_per_second", KIB, "Bytes the GPU process and its descendants caused to be written, per second (/proc/PID/io write_bytes)."),
)

CPU_MODES = ("user", "nice", "system", "iowait", "steal", "idle")
PSI_RESOURCES = ("io", "cpu", "memory")
# HostView attribute (kB) -> metric name
HOST_MEMORY = (
    ("mem_total_kb", "host_memory_total_bytes", "Memory in all (MemTotal)."),
    ("mem_available_kb", "host_memory_available_bytes", "Memory available without swapping (MemAvailable)."),
    ("cached_kb", "host_memory_cached_bytes", "Page cache (Cached)."),
    ("buffers_kb", "host_memory_buffers_bytes", "Block device buffers (Buffers)."),
    ("dirty_kb", "host_memory_dirty_bytes", "Page cache waiting to be written back (Dirty)."),
    ("writeback_kb", "host_memory_writeback_bytes", "Page cache being written back now (Writeback)."),
)


@dataclass
class Frame:
    """What one update() handed over; rendered on scrape.  Nothing in it is mutated after."""

    model: object
    verdict: object = None
    episodes: Mapping[str, int] = field(default_factory=dict)
    free_space: tuple = ()
    alerts_fired: Mapping[str, int] = field(default_factory=dict)
    samples: int = 0


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


def _add(fam, labels, value, factor=1):
    if value is not None:
        fam.add_metric(labels, float(value) * factor)


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
        be served as now (stalled), only the meta families."""
        out = self._meta(frame)
        if frame is None or stalled:
            return out
        out += self._gpus(frame.model)
        out += self._disks(frame.model, frame.verdict)
        out += self._host(frame.model)
        out += self._verdict(frame)
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
        out.append(GaugeMetricFamily(P + "last_sample_timestamp_seconds",
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
        lost = GaugeMetricFamily(P + "gpu_lost", "1 when the GPU fell off the bus "
                                 "(NVML GpuIsLost), else 0.", labels=["gpu", "uuid"])
        fams = [GaugeMetricFamily(P + name, doc, labels=["gpu", "uuid"])
                for _, name, _, doc in GPU_METRICS]
        proc_labels = ["gpu", "uuid", "pid", "comm"]
        pmem = GaugeMetricFamily(P + "gpu_process_memory_used_bytes",
                                 "Device memory a compute process holds.", labels=proc_labels)
        pfams = [GaugeMetricFamily(P + name, doc, labels=proc_labels)
                 for _, name, _, doc in GPU_PROC_METRICS]
        for g in m.gpus:
            key = [str(g.index), g.uuid or ""]
            info.add_metric(key + [g.name or "", g.pci_bus_id or ""], 1)
            lost.add_metric(key, 1 if g.lost else 0)
            for fam, (attr, _, factor, _) in zip(fams, GPU_METRICS):
                _add(fam, key, getattr(g, attr), factor)
            for p in g.processes:
                plabels = key + [str(p.pid), p.name or ""]
                _add(pmem, plabels, p.gpu_mem_mib, MIB)
                io = m.gpu_proc_io.get(p.pid) or {}
                for fam, (k, _, factor, _) in zip(pfams, GPU_PROC_METRICS):
                    _add(fam, plabels, io.get(k), factor)
        return [up, info, lost, *fams, pmem, *pfams]

    def _disks(self, m, verdict) -> list:
        user = self.labels.names
        names = ["device", "mountpoint", "class", *user]
        fams = [GaugeMetricFamily(P + name, doc, labels=names) for _, name, _, doc in DISK_METRICS]
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
            for fam, (attr, _, factor, _) in zip(fams, DISK_METRICS):
                fam.add_metric(labels, getattr(rates, attr) * factor)
            if dev in sats:
                sat.add_metric(labels, 1 if sats[dev].saturated else 0)
        return [*fams, sat]

    def _host(self, m) -> list:
        h = m.host
        cpu = GaugeMetricFamily(P + "host_cpu_ratio", "Share of CPU time per mode over the "
                                "interval, as iostat's avg-cpu (system includes irq and softirq).",
                                labels=["mode"])
        some = GaugeMetricFamily(P + "host_pressure_some_ratio", "Share of the interval in "
                                 "which some task stalled on the resource (PSI some).",
                                 labels=["resource"])
        full = GaugeMetricFamily(P + "host_pressure_full_ratio", "Share of the interval in "
                                 "which all non-idle tasks stalled on the resource (PSI full).",
                                 labels=["resource"])
        cg_some = GaugeMetricFamily(P + "cgroup_io_pressure_some_ratio", "io.pressure some "
                                    "of the cgroup gpudisk-top runs in, over the interval.")
        cg_full = GaugeMetricFamily(P + "cgroup_io_pressure_full_ratio", "io.pressure full "
                                    "of the cgroup gpudisk-top runs in, over the interval.")
        mem = [GaugeMetricFamily(P + name, doc) for _, name, doc in HOST_MEMORY]
        out = [cpu, some, full, cg_some, cg_full, *mem]
        if h is None:
            return out
        for mode in CPU_MODES:
            _add(cpu, [mode], getattr(h, f"cpu_{mode}_pct"), 0.01)
        for res in PSI_RESOURCES:
            _add(some, [res], getattr(h, f"psi_{res}_some_pct"), 0.01)
            _add(full, [res], getattr(h, f"psi_{res}_full_pct"), 0.01)
        _add(cg_some, [], h.cgroup_io_some_pct, 0.01)
        _add(cg_full, [], h.cgroup_io_full_pct, 0.01)
        for fam, (attr, _, _) in zip(mem, HOST_MEMORY):
            _add(fam, [], getattr(h, attr), KIB)
        return out

    def _verdict(self, frame: Frame) -> list:
        state = GaugeMetricFamily(P + "state", "The starvation detector's state now, one-hot: "
                                  "1 for the current state, 0 for the others (with hysteresis, "
                                  "as the dashboard shows it).", labels=["state"])
        episodes = CounterMetricFamily(P + "episodes", "Starvation episodes opened, per state.",
                                       labels=["state"])
        fired = CounterMetricFamily(P + "alerts_fired", "Alert rules fired (actions run), per "
                                    "rule of the config file.", labels=["alert"])
        current = getattr(frame.verdict, "state", None)
        if current is not None:
            for s in STATES:
                state.add_metric([s], 1 if s == current else 0)
        for s in STATES:
            episodes.add_metric([s], frame.episodes.get(s, 0))
        for name in dict.fromkeys([*self.alert_names, *frame.alerts_fired]):
            fired.add_metric([name], frame.alerts_fired.get(name, 0))
        return [state, episodes, fired]

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
            _add(size, key, fs.size_bytes)
            _add(avail, key, fs.avail_bytes)
            _add(free, key, fs.free_bytes)
        return [up, size, avail, free]
