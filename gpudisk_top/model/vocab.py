"""The one vocabulary: every metric's names, and the JSON of a verdict and an episode.

A number of the model goes by several names: its attribute (DiskRates.r_await_ms), the
header a person reads ("r_await"), its key in JSON, its column in CSV and its name in an
alert rule ("disk_r_await_ms"), and its Prometheus family in base units
("gpudisk_top_disk_read_await_seconds").  They are written here once; `--once`, `report`,
`export`, the Prometheus exporter, alert rules and the timeline read them from here.
tests/test_vocab.py checks each family against the model's dataclasses.

What a Metric and a Family say, and the model's units, are model/metric.py's.  Its
family (Family.kind: disk, gpu, host) prefixes the name that CSV columns and alert rules
use (Family.qualified: "disk_util_pct", "gpu_temp_c", "host_psi_io_some_pct").  Numbers
in the model's units become Prometheus's base units by one table (metric.BASE_FACTOR).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

from gpudisk_top.collect.gpu_fields import THROTTLE_FIELDS
from gpudisk_top.model.metric import KIB, Family, Metric
from gpudisk_top.model.timefmt import clock


def mb_s(kb_s: float | None) -> float | None:
    """iostat's MB/s from its kB/s: rMB/s = rkB/s / 1024, iostat's kB being KiB and its MB
    MiB (2^20 bytes).  The one conversion: every MB/s gpudisk-top shows (the disk table,
    the processes' rates, the verdicts' evidence, the fleet) goes through here, so a
    process never reads more than the disk it reads from.  None stays None."""
    return None if kb_s is None else kb_s / KIB


def _decimals(family: Family, decimals: int, **but: int) -> Family:
    """The family with its metrics read to `decimals` places (but: field -> places)."""
    return Family(family.kind, tuple(replace(m, decimals=but.get(m.field, decimals))
                                     for m in family))


# ---------------------------------------------------------------------------- disks
# DiskRates (model/disk.py), one device over one interval: iostat -x's columns, in its order.
DISK = Family("disk", (
    Metric("r_s", "/s", "r/s", "Read requests completed per second (iostat r/s).",
           prom="disk_reads_per_second"),
    Metric("rkb_s", "kB/s", "rkB/s", "Bytes read per second (iostat rkB/s).",
           prom="disk_read_bytes_per_second"),
    Metric("rrqm_s", "/s", "rrqm/s", "Read requests merged per second (iostat rrqm/s).",
           prom="disk_read_merges_per_second"),
    Metric("rrqm_pct", "%", "%rrqm", "Share of read requests merged (iostat %rrqm / 100).",
           prom="disk_read_merges_ratio"),
    Metric("r_await_ms", "ms", "r_await",
           "Mean time a read request took, queue included (iostat r_await).",
           prom="disk_read_await_seconds"),
    Metric("rareq_kb", "kB", "rareq-sz", "Mean size of a read request (iostat rareq-sz).",
           prom="disk_read_request_size_bytes"),
    Metric("w_s", "/s", "w/s", "Write requests completed per second (iostat w/s).",
           prom="disk_writes_per_second"),
    Metric("wkb_s", "kB/s", "wkB/s", "Bytes written per second (iostat wkB/s).",
           prom="disk_written_bytes_per_second"),
    Metric("wrqm_s", "/s", "wrqm/s", "Write requests merged per second (iostat wrqm/s).",
           prom="disk_write_merges_per_second"),
    Metric("wrqm_pct", "%", "%wrqm", "Share of write requests merged (iostat %wrqm / 100).",
           prom="disk_write_merges_ratio"),
    Metric("w_await_ms", "ms", "w_await",
           "Mean time a write request took, queue included (iostat w_await).",
           prom="disk_write_await_seconds"),
    Metric("wareq_kb", "kB", "wareq-sz", "Mean size of a write request (iostat wareq-sz).",
           prom="disk_write_request_size_bytes"),
    Metric("d_s", "/s", "d/s", "Discard requests completed per second (iostat d/s).",
           prom="disk_discards_per_second"),
    Metric("dkb_s", "kB/s", "dkB/s", "Bytes discarded per second (iostat dkB/s).",
           prom="disk_discarded_bytes_per_second"),
    Metric("drqm_s", "/s", "drqm/s", "Discard requests merged per second (iostat drqm/s).",
           prom="disk_discard_merges_per_second"),
    Metric("drqm_pct", "%", "%drqm", "Share of discard requests merged (iostat %drqm / 100).",
           prom="disk_discard_merges_ratio"),
    Metric("d_await_ms", "ms", "d_await", "Mean time a discard request took (iostat d_await).",
           prom="disk_discard_await_seconds"),
    Metric("dareq_kb", "kB", "dareq-sz", "Mean size of a discard request (iostat dareq-sz).",
           prom="disk_discard_request_size_bytes"),
    Metric("f_s", "/s", "f/s", "Flush requests completed per second (iostat f/s).",
           prom="disk_flushes_per_second"),
    Metric("f_await_ms", "ms", "f_await", "Mean time a flush request took (iostat f_await).",
           prom="disk_flush_await_seconds"),
    Metric("aqu_sz", "requests", "aqu-sz",
           "Mean number of requests queued or in flight (iostat aqu-sz).",
           prom="disk_queue_size"),
    Metric("util_pct", "%", "%util",
           "Share of time with at least one request in flight (iostat %util / 100).",
           prom="disk_utilization_ratio"),
))

# The dashboard's disk table shows iostat -m's MB/s (vocab.mb_s) where -x shows kB/s
# (DiskRates.rmb_s, wmb_s)
DISK_MB = Family("disk", (
    Metric("rmb_s", "MB/s", "rMB/s", "MiB read per second (iostat -m rMB/s: rkB/s / 1024).",
           csv=False, alert=False),
    Metric("wmb_s", "MB/s", "wMB/s", "MiB written per second (iostat -m wMB/s: wkB/s / 1024).",
           csv=False, alert=False),
))

# The disk metrics the timeline can show, in the order its key cycles through them
# (model/history.py computes IOPS and MB/s from a device's DiskRates).
TIMELINE = Family("disk", (
    DISK["util_pct"],
    replace(DISK["r_await_ms"], label="r_await ms"),     # a chart's legend needs the unit
    Metric("iops", "/s", "IOPS", "Reads and writes completed per second (r/s + w/s).",
           csv=False, alert=False),
    Metric("mb_s", "MB/s", "MB/s", "MiB read and written per second ((rkB/s + wkB/s) / 1024).",
           csv=False, alert=False),
    DISK["aqu_sz"],
))

# ---------------------------------------------------------------------------- GPUs
# what the throttle reasons NVML counts durations of are called (collect/gpu_fields.py
# THROTTLE_FIELDS has them, their fields and their order): label, what holds the clocks
_THROTTLE_WORDS = {
    "sw_power_cap": ("thr pwr%", "the software power cap"),
    "hw_power_brake": ("thr brake%", "an external power brake (hardware)"),
    "sw_thermal": ("thr therm%", "the software thermal limit"),
    "hw_thermal": ("thr hw therm%", "a hardware thermal slowdown"),
    "sync_boost": ("thr sync%", "sync boost (the slowest GPU of its group)"),
}
_THROTTLE = tuple((reason, *_THROTTLE_WORDS[reason], const.removeprefix("NVML_FI_DEV_"))
                  for reason, const in THROTTLE_FIELDS)
GPU = _decimals(Family("gpu", (
    Metric("util_pct", "%", "util%",
           "The GPU's busy figure over the interval: GPM SM activity where the GPU gives it "
           "(busy_source gpm-sm-active), else the share of it a kernel was running "
           "(NVML utilization.gpu / 100).",
           prom="gpu_utilization_ratio"),
    Metric("mem_util_pct", "%", "mem%",
           "Share of the interval device memory was read or written (NVML utilization.memory / 100).",
           prom="gpu_memory_utilization_ratio"),
    Metric("mem_used_mib", "MiB", "mem used MiB", "Device memory in use.",
           prom="gpu_memory_used_bytes"),
    Metric("mem_total_mib", "MiB", "mem total MiB", "Device memory in all.",
           prom="gpu_memory_total_bytes"),
    Metric("power_w", "W", "power W", "Power draw now.", prom="gpu_power_watts"),
    Metric("power_avg_w", "W", "avg power W",
           "Mean power over the interval, from the energy counter.",
           prom="gpu_power_average_watts"),
    # a setting, not a reading of the interval: no CSV column
    Metric("power_limit_w", "W", "power limit W", "Power limit.", prom="gpu_power_limit_watts",
           csv=False),
    Metric("temp_c", "C", "temp C", "GPU core temperature.", prom="gpu_temperature_celsius"),
    Metric("sm_clock_mhz", "MHz", "SM MHz", "SM clock.", prom="gpu_sm_clock_hertz"),
    Metric("pcie_rx_kb_s", "kB/s", "PCIe rx kB/s",
           "PCIe bytes received by the GPU per second (NVML's 20 ms window).",
           prom="gpu_pcie_rx_bytes_per_second"),
    Metric("pcie_tx_kb_s", "kB/s", "PCIe tx kB/s",
           "PCIe bytes sent by the GPU per second (NVML's 20 ms window).",
           prom="gpu_pcie_tx_bytes_per_second"),
    # GPM (Hopper and later): the tiers beside the busy figure (model/gpu.py)
    Metric("gpu_util_pct", "%", "util.gpu%",
           "Share of the interval at least one kernel was running (NVML utilization.gpu / 100), "
           "whatever the busy figure's tier: one thread reads 1.", prom="gpu_nvml_utilization_ratio"),
    Metric("sm_active_pct", "%", "SM act%", "Share of SMs busy over the interval (GPM SM_UTIL / 100).",
           prom="gpu_sm_active_ratio"),
    Metric("sm_occupancy_pct", "%", "SM occ%",
           "Warps resident as a share of the SMs' maximum (GPM SM_OCCUPANCY / 100).",
           prom="gpu_sm_occupancy_ratio"),
    Metric("tensor_active_pct", "%", "tensor%",
           "Share of the interval the SMs ran tensor instructions (GPM ANY_TENSOR_UTIL / 100).",
           prom="gpu_tensor_active_ratio"),
    Metric("dram_bw_pct", "%", "DRAM bw%",
           "DRAM bandwidth used as a share of the peak (GPM DRAM_BW_UTIL / 100).",
           prom="gpu_dram_bandwidth_ratio"),
    # throttling as the share of the interval each reason held (model/gpu.py _throttle)
    *(Metric(f"throttle_{reason}_pct", "%", label, f"Share of the interval the clocks were held "
             f"down for {meaning} (NVML clock-event duration {field}; n/a where the GPU "
             "counts none: throttle_source mask).", prom="gpu_clock_throttle_ratio",
             prom_label=("reason", reason))
      for reason, label, meaning, field in _THROTTLE),
)), 0, util_pct=1, gpu_util_pct=1, sm_active_pct=1, sm_occupancy_pct=1, tensor_active_pct=1,
    dram_bw_pct=1, **{f"throttle_{r}_pct": 1 for r, *_ in _THROTTLE})
# NVML's whole percents, MiB, W, C, MHz; a mean utilization and a throttled share to 0.1

# Numbers computed from a GpuView rather than read off one of its attributes: alert rules
# test them (alerts/catalog.py gpu_value() computes them); `lost` is also exported.
GPU_COMPUTED = Family("gpu", (
    Metric("mem_used_pct", "%", "mem used%",
           "Device memory in use, as a share of all (mem_used_mib / mem_total_mib x 100).",
           csv=False),
    Metric("lost", "", "lost", "1 when the GPU fell off the bus (NVML GpuIsLost), else 0.",
           prom="gpu_lost", csv=False),
))

# A compute process on a GPU (GpuProcessView).
GPU_PROCESS = Family("gpu_process", (
    Metric("gpu_mem_mib", "MiB", "GPU MiB", "Device memory a compute process holds.",
           prom="gpu_process_memory_used_bytes", csv=False, alert=False, decimals=0),
    # NVML's per-process sample (collect/gpu_procutil.py): over its own sample period, of
    # some age (util_age_s in JSON), not over the interval
    Metric("sm_util_pct", "%", "sm%", "The process's SM utilization in NVML's last sample of "
           "it (nvmlDeviceGetProcessesUtilizationInfo smUtil / 100; util_age_s says how old).",
           prom="gpu_process_sm_utilization_ratio", csv=False, alert=False, decimals=0),
    Metric("mem_util_pct", "%", "mem%", "The process's memory utilization in NVML's last sample "
           "of it (memUtil / 100).", prom="gpu_process_memory_utilization_ratio", csv=False,
           alert=False, decimals=0),
))

# The I/O of a GPU process and its descendants, summed (Model.gpu_proc_io, model/procs.py
# tree_totals): in `--once --json` each process of a GPU has these keys.
GPU_PROCESS_IO = Family("gpu_process", (
    Metric("read_kb_s", "kB/s", "read kB/s",
           "Bytes the GPU process and its descendants made the block layer read, per second "
           "(/proc/PID/io read_bytes).",
           prom="gpu_process_read_bytes_per_second", csv=False, alert=False),
    Metric("rchar_kb_s", "kB/s", "rchar kB/s",
           "Bytes the GPU process and its descendants read through read() and friends, page "
           "cache hits included (/proc/PID/io rchar).",
           prom="gpu_process_read_chars_per_second", csv=False, alert=False),
    Metric("write_kb_s", "kB/s", "write kB/s",
           "Bytes the GPU process and its descendants caused to be written, per second "
           "(/proc/PID/io write_bytes).",
           prom="gpu_process_written_bytes_per_second", csv=False, alert=False),
    Metric("cache_pct", "%", "cached%",
           "Of the bytes the GPU process and its descendants read through read() (rchar), "
           "the share that made no block I/O (read_bytes): served by the page cache. Not "
           "given for processes with files on a network or FUSE mount.",
           prom="gpu_process_page_cache_read_ratio", csv=False, alert=False),
    Metric("nprocs", "processes", "procs",
           "Processes in the tree whose I/O is summed: the GPU process and its descendants.",
           json_key="tree_processes", csv=False, alert=False, decimals=0),
))

# ---------------------------------------------------------------------------- mounts
# MountView (model/mounts.py): a network or FUSE mount the job reads, over one interval.
MOUNT = Family("mount", (
    Metric("read_ops_s", "/s", "r/s",
           "Reads served per second: NFS READ operations (mountstats), Lustre read calls.",
           prom="mount_read_operations_per_second", csv=False),
    Metric("read_kb_s", "kB/s", "rkB/s", "Bytes read from the mount per second (NFS: READ "
           "replies' bytes, as nfsiostat's kB/s; Lustre: llite read_bytes).",
           prom="mount_read_bytes_per_second", csv=False),
    Metric("rtt_ms", "ms", "rtt", "NFS: mean round trip of a READ to the server (nfsiostat's "
           "avg RTT).", prom="mount_read_rtt_seconds", csv=False),
    Metric("exec_ms", "ms", "exe", "Mean time of a read from the client's queue to its reply "
           "(NFS: nfsiostat's avg exe; Lustre: llite read latency).",
           prom="mount_read_latency_seconds", csv=False),
    Metric("queue_ms", "ms", "queue", "NFS: mean time a READ waited in the client's queue.",
           prom="mount_read_queue_seconds", csv=False),
    Metric("retrans_s", "/s", "retrans/s", "NFS: READ retransmissions per second.",
           prom="mount_read_retransmissions_per_second", csv=False),
    Metric("backlog", "requests", "backlog", "NFS: mean length of the transport's backlog "
           "queue a request met (mountstats xprt bklog_u / sends).",
           prom="mount_transport_backlog", csv=False),
    Metric("waiting", "requests", "waiting", "FUSE: requests sent to the daemon and not "
           "answered yet (/sys/fs/fuse/connections/N/waiting).",
           prom="mount_fuse_waiting_requests", csv=False),
    Metric("daemon_cpu_pct", "%", "daemon%", "FUSE: its daemon's CPU, % of one CPU.",
           prom="mount_fuse_daemon_cpu_ratio", csv=False),
    Metric("job_read_ms", "ms", "job r_await", "Seen from the job: the time its loaders spend "
           "off a CPU per read() call while they wait on the mount (/proc/PID/stat, "
           "schedstat and io syscr; model/loaders.py).", prom="mount_job_read_latency_seconds",
           csv=False),
    Metric("readers", "processes", "readers", "The job's processes with files on the mount.",
           prom="mount_job_processes", csv=False, alert=False),
    Metric("blocked", "processes", "blocked", "Of those, the ones in a read() of it at the "
           "sample (/proc/PID/syscall).", prom="mount_job_processes_in_read", csv=False,
           alert=False),
))

# ---------------------------------------------------------------------------- device health
# DiskHealth (collect/sample.py), one reading of a physical disk's SMART / NVMe health,
# read every few minutes (collect/health.py; judged by model/health.py).  Prometheus names
# follow prometheus-community/smartctl_exporter's (smartctl_device_temperature,
# _percentage_used, _available_spare, _media_errors, _num_err_log_entries,
# _power_on_seconds, ...) under gpudisk_top_disk_health_, in base units.
HEALTH = _decimals(Family("disk_health", (
    Metric("temperature_c", "C", "temp C",
           "Drive temperature now (NVMe: the composite temperature).",
           csv=False, prom="disk_health_temperature_celsius"),
    Metric("warning_temp_c", "C", "warn C",
           "Temperature from which the drive warns, and NVMe drives throttle (NVMe WCTEMP; "
           "ATA: SCT's highest recommended operating temperature).",
           csv=False, prom="disk_health_temperature_warning_celsius"),
    Metric("critical_temp_c", "C", "crit C",
           "Temperature the drive must not reach (NVMe CCTEMP; ATA: SCT's limit; SCSI: the "
           "drive trip temperature).", csv=False, prom="disk_health_temperature_critical_celsius"),
    Metric("warning_temp_time_min", "min", "min>warn",
           "NVMe: time at or above the warning temperature over the drive's life.",
           csv=False, prom="disk_health_temperature_above_warning_seconds", counter=True),
    Metric("critical_temp_time_min", "min", "min>crit",
           "NVMe: time at or above the critical temperature over the drive's life.",
           csv=False, prom="disk_health_temperature_above_critical_seconds", counter=True),
    Metric("percentage_used_pct", "%", "used%",
           "Life used, as the drive estimates it (NVMe Percentage Used; ATA: endurance "
           "used); 1 at the rated endurance, may go beyond.",
           csv=False, prom="disk_health_percentage_used_ratio"),
    Metric("available_spare_pct", "%", "spare%",
           "NVMe: spare capacity left (1 is all of it).", csv=False, prom="disk_health_available_spare_ratio"),
    Metric("available_spare_threshold_pct", "%", "spare min%",
           "NVMe: the spare below which the drive raises a critical warning.",
           csv=False, prom="disk_health_available_spare_threshold_ratio"),
    Metric("media_errors", "errors", "media err",
           "Unrecovered data integrity errors over the drive's life (NVMe Media and Data "
           "Integrity Errors; SCSI: uncorrected read, write and verify errors).",
           csv=False, prom="disk_health_media_errors", counter=True),
    Metric("error_log_entries", "entries", "err log",
           "Entries in the drive's error log over its life (NVMe Error Information Log "
           "Entries; ATA: SMART error log count).",
           csv=False, prom="disk_health_error_log_entries", counter=True),
    Metric("unsafe_shutdowns", "shutdowns", "unsafe",
           "NVMe: power lost without a shutdown notification, over the drive's life.",
           csv=False, prom="disk_health_unsafe_shutdowns", counter=True),
    Metric("reallocated_sectors", "sectors", "realloc",
           "Sectors remapped to spares (ATA 5 Reallocated_Sector_Ct raw; SCSI: grown "
           "defect list).", csv=False, prom="disk_health_reallocated_sectors"),
    Metric("pending_sectors", "sectors", "pending",
           "ATA 197 Current_Pending_Sector: unreadable sectors waiting to be remapped.",
           csv=False, prom="disk_health_pending_sectors"),
    Metric("offline_uncorrectable", "sectors", "offl unc",
           "ATA 198 Offline_Uncorrectable: sectors the offline scan could not read.",
           csv=False, prom="disk_health_offline_uncorrectable_sectors"),
    Metric("power_on_hours", "h", "power-on h", "Time powered on over the drive's life.",
           csv=False, prom="disk_health_power_on_seconds"),
    Metric("critical_warning", "", "crit warn",
           "NVMe SMART/Health log Critical Warning bits (0: none).",
           csv=False, prom="disk_health_critical_warning"),
)), 0)    # whole degrees, percents, counts and hours, as smartctl prints them

# Numbers computed from a disk's health (model/health.py health_value) for alert rules;
# `failing` is exported as part of the status.
HEALTH_COMPUTED = Family("disk_health", (
    Metric("spare_margin_pct", "%", "spare margin%",
           "NVMe: spare left above its threshold (available_spare_pct - "
           "available_spare_threshold_pct); below 0 the drive is failing.", csv=False),
    Metric("above_warning_c", "C", "over warn C",
           "Degrees above the drive's warning temperature (negative: below it).", csv=False),
    Metric("media_errors_gained", "errors", "new media err",
           "Media errors since this run's first reading of the drive.", csv=False),
    Metric("failing", "", "failing",
           "1 when the drive's health is failing (model/health.py classify), else 0.",
           csv=False),
    Metric("warning", "", "warning",
           "1 when the drive's health is warning or failing, else 0.", csv=False),
))


# ---------------------------------------------------------------------------- the stall ledger
# verdict/ledger.py: the GPU time the job's GPUs did not use, by cause.  GPU-seconds in the
# model, its JSON and Prometheus; GPU-hours (LEDGER_HOURS) where a person reads them, and
# money (COST) where the config gives [ledger] gpu_hour_cost.
LEDGER = Family("ledger", (
    Metric("lost_gpu_s", "GPU-s", "lost",
           "GPU time the job's GPUs did not use, by cause (the detector's state: "
           "disk-starved, cpu-starved, checkpoint-stall, straggler, undiagnosed; healthy: "
           "what the job leaves unused when it runs well), per GPU interval x (reference - "
           "utilization), the reference being the job's healthy median utilization where "
           "known, else 1 (verdict/ledger.py).",
           prom="gpu_seconds", counter=True, csv=False, alert=False, decimals=1),
    Metric("idle_gpu_s", "GPU-s", "idle",
           "GPU time of GPUs with no compute process (no job), never lost to a cause.",
           prom="gpu_idle_seconds", counter=True, csv=False, alert=False, decimals=1),
    Metric("device_lost_gpu_s", "GPU-s", "by device",
           "GPU time lost while disk-starved, by the device (kernel name) or network/FUSE "
           "mountpoint the verdict blamed.",
           prom="gpu_seconds_by_device", counter=True, csv=False, alert=False, decimals=1),
))
# a ledger's GPU-seconds as a person reads them, and what they cost
LEDGER_HOURS = Metric("gpu_h", "GPU-h", "GPU-h", "GPU-hours: GPU-seconds / 3600.",
                      csv=False, alert=False, decimals=2)
COST = Metric("cost", "", "cost", "GPU-hours x [ledger] gpu_hour_cost (the config's price "
              "of one GPU-hour, in its currency).", csv=False, alert=False, decimals=2)


def gpu_hours(gpu_s: float | None, width: int | None = None) -> str:
    """GPU-seconds as every surface writes GPU-hours ("3.20")."""
    return LEDGER_HOURS.text(None if gpu_s is None else gpu_s / 3600.0, width=width)


def cost_text(gpu_s: float, gpu_hour_cost: float | None, currency: str = "") -> str | None:
    """What GPU-seconds cost at the config's price of a GPU-hour ("12.80 USD"); None
    without a price."""
    if gpu_hour_cost is None:
        return None
    amount = COST.text(gpu_s / 3600.0 * gpu_hour_cost)
    return f"{amount} {currency}" if currency else amount


# ---------------------------------------------------------------------------- the node's own
# The families the exporter writes for the node as a whole (exporter/families.py), which
# are no Metric's, under the names the fleet reads back (fleet/queries.py, fleet/table.py)
VERDICT_INFO = "verdict_info"
STATE_SINCE = "state_since_timestamp_seconds"
GPUS_STARVED = "gpus_starved"
LAST_SAMPLE = "last_sample_timestamp_seconds"
# each job's on a shared node (exporter/jobseries.py), labelled JOB_LABELS: never `job` or
# `instance`, which Prometheus sets on every series it scrapes
JOB_LABELS = ("job_id", "job_name", "job_source")
JOB_INFO = "job_info"
JOB_STATE = "job_state"
JOB_GPUS_STARVED = "job_gpus_starved"
JOB_LOST = "job_gpu_lost_seconds"      # LEDGER["lost_gpu_s"], one job's (its HELP and unit)
JOB_EPISODES = "job_episodes"
JOB_ENDED = "job_ended_timestamp_seconds"


# ---------------------------------------------------------------------------- the host
# (the HELP of host_cpu_ratio and host_pressure_*_ratio, one series per mode or resource,
# is metric.PROM_FAMILY_HELP's)
def _cpu(mode: str, meaning: str) -> Metric:
    return Metric(f"cpu_{mode}_pct", "%", f"%{mode}", meaning, prom="host_cpu_ratio",
                  prom_label=("mode", mode))


def psi_metric(resource: str, kind: str, prom_prefix: str = "host", of: str = "",
               source: str = "PSI", **extra) -> Metric:
    """The one wording of a pressure figure (PSI some or full of io, cpu or memory): the
    host's, or (of, source, prom_prefix) a cgroup's (model/cgjob_words.py)."""
    who = "some task" if kind == "some" else "all non-idle tasks"
    return Metric(f"psi_{resource}_{kind}_pct", "%", f"{resource} {kind}",
                  f"Share of the interval in which {who}{of} stalled on {resource} "
                  f"({source} {kind}).",
                  prom=f"{prom_prefix}_pressure_{kind}_ratio", prom_label=("resource", resource),
                  **extra)


def _memory(name: str, prom_word: str, label: str, meaning: str) -> Metric:
    return Metric(name, "kB", label, meaning, prom=f"host_memory_{prom_word}_bytes")


# iostat's avg-cpu, in its order
AVG_CPU = (
    _cpu("user", "CPU time in user mode, guests included (iostat %user)."),
    _cpu("nice", "CPU time in user mode at a lower priority (iostat %nice)."),
    _cpu("system", "CPU time in the kernel, irq and softirq included (iostat %system)."),
    _cpu("iowait", "CPU time idle with a read or write outstanding (iostat %iowait)."),
    _cpu("steal", "CPU time a hypervisor gave another guest (iostat %steal)."),
    _cpu("idle", "CPU time idle, no I/O outstanding (iostat %idle)."),
)

# HostView (model/host.py), in its order (its JSON's and the CSV's); its cgroup_path and
# cgroup_io (a path, rates per device) are not metrics.
HOST = Family("host", (
    Metric("ncpu", "CPUs", "CPUs", "CPUs online.", alert=False),
    *AVG_CPU,
    Metric("irq_pct", "%", "%irq", "CPU time serving interrupts, irq and softirq (inside "
           "%system): the kernel's work for I/O completions.", prom="host_cpu_irq_ratio"),
    psi_metric("io", "some"), psi_metric("io", "full"),
    psi_metric("cpu", "some"), psi_metric("cpu", "full"),
    psi_metric("memory", "some"), psi_metric("memory", "full"),
    _memory("mem_total_kb", "total", "total", "Memory in all (MemTotal)."),
    _memory("mem_available_kb", "available", "available",
            "Memory available without swapping (MemAvailable)."),
    _memory("cached_kb", "cached", "page cache", "Page cache (Cached)."),
    _memory("buffers_kb", "buffers", "buffers", "Block device buffers (Buffers)."),
    _memory("dirty_kb", "dirty", "dirty", "Page cache waiting to be written back (Dirty)."),
    _memory("writeback_kb", "writeback", "writeback",
            "Page cache being written back now (Writeback)."),
    Metric("cgroup_io_some_pct", "%", "cgroup io some",
           "io.pressure some of the job's cgroup (its GPU process's; gpudisk-top's own without a job), over the interval.",
           prom="cgroup_io_pressure_some_ratio"),
    Metric("cgroup_io_full_pct", "%", "cgroup io full",
           "io.pressure full of the job's cgroup (its GPU process's; gpudisk-top's own without a job), over the interval.",
           prom="cgroup_io_pressure_full_ratio"),
    Metric("cgroup_pid", "PID", "cgroup of",
           "Whose cgroup the cgroup numbers are: a GPU process's (the job's); none: "
           "gpudisk-top's own.", alert=False),
    Metric("cgroup_cpu_some_pct", "%", "cgroup cpu some",
           "cpu.pressure some of the cgroup, over the interval."),
    Metric("cgroup_cpu_full_pct", "%", "cgroup cpu full",
           "cpu.pressure full of the cgroup, over the interval."),
    Metric("cgroup_throttled_pct", "%", "throttled%",
           "Share of the CFS periods in which the cgroup ran out of its CPU quota and was "
           "held off the CPUs (cpu.stat nr_throttled / nr_periods)."),
    Metric("cgroup_cpu_limit_cpus", "CPUs", "CPU limit",
           "CPUs the cgroup may use (cpu.max: quota / period); none: no limit."),
    Metric("cgroup_cpu_used_cpus", "CPUs", "CPUs used",
           "CPUs the cgroup used over the interval (cpu.stat usage_usec)."),
    Metric("cgroup_page_cache_kb", "kB", "cgroup page cache",
           "The cgroup's page cache (memory.stat file)."),
    Metric("cgroup_dirty_kb", "kB", "cgroup dirty",
           "The cgroup's page cache waiting to be written back (memory.stat file_dirty)."),
))


# ---------------------------------------------------------------------------- verdicts, episodes
def iso_time(wall_s: float) -> str:
    """A wall-clock time as every output writes it: ISO 8601 with milliseconds and the
    local zone offset, e.g. 2026-11-30T01:40:00.123+00:00."""
    return dt.datetime.fromtimestamp(wall_s).astimezone().isoformat(timespec="milliseconds")


def verdict_json(verdict) -> dict | None:
    """An interval's verdict (a Verdict, verdict/detect) as `--once --json` and `export
    --format jsonl` write it: the reported state (with hysteresis), the GPUs, devices and
    processes it names, its evidence (reason), advice, the kind of starvation, and the
    processes outside the job its evidence names as reading the blamed device (culprits:
    pid, name, device, read_share_pct, read_kb_s), and what each fix would gain (whatif:
    verdict/whatif.py WhatIf.as_json, best first).  None for no verdict."""
    if verdict is None:
        return None
    job = verdict.job
    return {"state": verdict.state, "job_id": job.id if job is not None else None,
            "job_name": job.name if job is not None else None,
            "gpus": verdict.gpus, "devices": verdict.devices,
            "processes": verdict.processes, "reason": verdict.reason, "advice": verdict.advice,
            "kind": verdict.kind, "culprits": [c.as_json() for c in verdict.culprits],
            "whatif": [w.as_json() for w in verdict.whatif]}


def job_json(verdict, ledger_json: dict | None) -> dict:
    """One job of the node (a job's Verdict, its `job` a model/jobs.py JobInfo) as every
    JSON surface writes it: its id, source, name, GPU indices, GPU processes' host PIDs,
    cgroup, its cgroup's totals over the interval (model/cgjob_words.py; null: n/a), its
    verdict (verdict_json's schema) and its ledger (Ledger.as_json)."""
    job = verdict.job
    return {"id": job.id, "source": job.source, "name": job.name, "gpus": list(job.gpus),
            "pids": list(job.pids), "cgroup": job.cgroup,
            "cgroup_totals": job.cgroup_totals_json(), "verdict": verdict_json(verdict),
            "ledger": ledger_json}


def phase_json(p, lost_gpu_s: float | None = None, episode_end_s: float | None = None) -> dict:
    """One phase of an episode (verdict/detect/phases.py Phase): its span, its kind and
    devices, its GPUs' mean utilization, its culprits summed over it (each with the
    seconds it was named, its mean share and a `clause` as every surface says it), its
    latest evidence, advice and predictions, and lost_gpu_s, the ledger's count of it
    (Ledger.lost_of_phase; None where it was not counted); episode_end_s: the end of
    its episode, where its last phase ends."""
    end = p.end_s(episode_end_s)
    mean = p.mean_util_pct
    return {
        "start": iso_time(p.start_wall_s), "end": iso_time(end),
        "start_s": p.start_wall_s, "end_s": end, "duration_s": round(end - p.start_wall_s, 3),
        "kind": p.kind, "devices": list(p.devices),
        "mean_util_pct": None if mean is None else round(mean, 1),
        "intervals": p.intervals, "lost_gpu_s": lost_gpu_s,
        "culprits": [c.as_json() for c in p.culprits],
        "reason": p.reason, "advice": p.advice,
        "whatif": [w.as_json() for w in p.whatif],
    }


def phase_line(n: int, p: dict) -> str:
    """A phase (phase_json) in one line, the report's and the episodes screen's:
    'phase 2 08:23:58, 35 s: saturated vda; pid 912 (fio), 91% of its reads for 35 s;
    GPU 6% mean; lost 0.03 GPU-h' (the clauses are the machine's text: the caller escapes)."""
    head = f"phase {n} {clock(p['start_s'])}, {p['duration_s']:.0f} s: {p['kind'] or 'starved'}"
    if p["devices"]:
        head += " " + ",".join(p["devices"])
    parts = [head, *(c["clause"] for c in p["culprits"][:3])]
    if p["mean_util_pct"] is not None:
        parts.append(f"GPU {p['mean_util_pct']:.0f}% mean")
    if p["lost_gpu_s"] is not None:
        parts.append(f"lost {gpu_hours(p['lost_gpu_s'])} GPU-h")
    return "; ".join(parts)


def episode_json(e, lost_gpu_s: float = 0.0, phase_lost: list | None = None) -> dict:
    """A starvation episode (an Episode, verdict/detect) as `report --json` writes it (and
    `export --format perfetto` takes a slice's args from): its times as ISO text and as
    Unix seconds (an episode still open ends at its latest interval in its state), its
    duration in s, what it names, its evidence, culprits (as verdict_json's) and advice,
    the lowest GPU utilization seen and its intervals in its state, and lost_gpu_s, the
    GPU-seconds lost to it (the ledger's, verdict/ledger.py Ledger.lost_of); its GPUs'
    mean utilization, its culprits summed over it (culprits: its latest interval's), and
    its phases (phase_json; phase_lost: each one's lost GPU-seconds)."""
    end = e.end_wall_s if e.end_wall_s is not None else e.last_wall_s
    return {
        "id": e.id, "state": e.state, "job_id": e.job_id, "job_name": e.job_name,
        "start": iso_time(e.start_wall_s), "end": iso_time(end),
        "start_s": e.start_wall_s, "end_s": end,
        "duration_s": round(e.duration_s(), 3),
        "gpus": list(e.gpus), "devices": list(e.devices), "processes": list(e.processes),
        "reason": e.reason, "advice": e.advice, "kind": e.kind,
        "min_util_pct": None if e.min_util_pct is None else round(e.min_util_pct, 1),
        "intervals": e.intervals,
        "lost_gpu_s": lost_gpu_s,
        "culprits": [c.as_json() for c in e.culprits],
        "whatif": [w.as_json() for w in e.whatif],
        "mean_util_pct": None if e.mean_util_pct is None else round(e.mean_util_pct, 1),
        "culprits_summed": [c.as_json() for c in e.culprit_sums()],
        "phases": [phase_json(p, phase_lost[k] if phase_lost and k < len(phase_lost) else None,
                              end) for k, p in enumerate(e.phases)],
    }


# ---------------------------------------------------------------------------- device health
# A disk's health status (model/health.py STATUSES) as every screen and the text report
# show it: a glyph and a short word, so that the meaning never rests on colour alone
# (NO_COLOR, 16 colours).  A disk the poller has no reading of shows NO_HEALTH.
# a device's class (collect/blockdev.py dev_class) in at most 5 cells: the disk table, the
# device detail, --once and report's tables
CLASS_TAG = {"NVMe": "NVMe", "SSD": "SSD", "HDD": "HDD", "virtual": "virt", "unknown": "?"}
HEALTH_BADGE = {"ok": "✓ OK", "warning": "! warn", "failing": "✗ FAIL", "unknown": "? n/a"}
NO_HEALTH = "—"
