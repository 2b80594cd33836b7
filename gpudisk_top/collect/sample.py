"""The raw sample: what every collector read at one moment, before any rate is derived.

A Sample holds cumulative counters and instantaneous readings only.  The model derives
every rate from two Samples (`Model.new(sample, last)`), the recorder stores Samples as
they are, and a replay feeds them back to the same model.

Units are in the names.  A reading that could not be taken is None (shown as n/a).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudisk_top.collect.diskstats import DiskCounters


# ---------------------------------------------------------------------------- disks
@dataclass(slots=True)
class DeviceInfo:
    """What a block device is; changes rarely, so it is refreshed every few seconds."""

    name: str                      # kernel name, as in /proc/diskstats ("dm-0", "nvme0n1")
    display_name: str              # what users call it: /dev/mapper name for dm ("vg-root")
    major: int = 0
    minor: int = 0
    kind: str = "disk"             # disk | partition | dm | md | nvme-path | loop | ram | zram | sr | other
    parent: str | None = None      # the whole disk of a partition, the head of an NVMe path
    slaves: tuple[str, ...] = ()   # devices under a dm/md device (/sys/block/X/slaves)
    rotational: bool | None = None
    dev_class: str = "unknown"     # NVMe | SSD | HDD | virtual | unknown
    model: str | None = None
    mountpoints: tuple[str, ...] = ()  # every mountpoint whose data lives on this device
    hidden: bool = False           # NVMe multipath path device (nvmeXcYnZ), hidden in /dev
    # its read ceiling as `gpudisk-top probe` measured it on this host (None: not probed):
    # 4 KiB random reads a second at queue depth 32, and 1 MiB sequential MiB a second
    ceiling_iops: float | None = None
    ceiling_mib_s: float | None = None
    probed_read_ms: float | None = None   # a 4 KiB read at queue depth 1 (1 / its IOPS)
    # a loop device's: the device its backing file lives on, which gets its reads again
    # (sysfs links no such pair: found through the mount holding the file; None: unknown)
    backing: str | None = None


# ---------------------------------------------------------------------------- GPUs
@dataclass(slots=True, frozen=True)
class UtilWindow:
    """NVML utilization samples of one interval as a recording keeps them (format v2):
    the sum and number of the samples model.gpu.window_mean() averages for that interval,
    which gives back the same mean.  The collector never makes one; a reader does."""

    sum_pct: float
    count: int


def window_values(samples: list[tuple[int, float]], window_us: tuple[int, int] | None
                  ) -> list[float]:
    """The values of the NVML samples that describe one interval: those stamped in
    (start, end] µs, or all of them when none is (or there is no window).  The one rule:
    model.gpu.window_mean() averages these, and a recording keeps their sum and number
    (record/v2/ util_window)."""
    if window_us is not None:
        start_us, end_us = window_us
        inside = [value for ts, value in samples if start_us < ts <= end_us]
        if inside:
            return inside
    return [value for _, value in samples]


MAPPED_BY_PID = "pid"
MAPPED_BY_DEVICE_FILE = "device-file"


@dataclass(slots=True)
class GpuProcessRaw:
    """One compute process on a GPU, as NVML reports it, mapped into our PID namespace."""

    pid: int                       # the PID NVML gave: a host PID
    used_gpu_mem_bytes: int | None
    local_pid: int | None = None   # the PID to read under --procfs; None when not mapped
    ns_pid: int | None = None      # the PID inside the process's own (container) namespace
    name: str | None = None
    cmdline: str | None = None
    mapped: bool = False           # False: not visible from this PID namespace
    # how local_pid was found: MAPPED_BY_PID (NVML's PID names it in our procfs) or
    # MAPPED_BY_DEVICE_FILE (our procfs is a container's: the process holding the GPU's
    # /dev/nvidiaN open, collect/devmap.py); None while not mapped
    mapped_by: str | None = None
    # NVML's last per-process sample (collect/gpu_procutil.py): SM and memory utilization
    # over its sample period, and the CPU time it was stamped (epoch µs); None: none came
    sm_util_pct: int | None = None
    mem_util_pct: int | None = None
    util_at_us: int | None = None


@dataclass(slots=True)
class GpuRaw:
    """One GPU at one moment.  Utilization samples are raw NVML samples, so the model can
    average them over exactly the sampling interval."""

    index: int
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    minor_number: int | None = None  # N of /dev/nvidiaN (nvmlDeviceGetMinorNumber)
    lost: bool = False             # NVMLError_GpuIsLost (or a reset-required error)
    error: str | None = None       # why this GPU could not be read, when lost
    # nvmlDeviceGetSamples: (timestamp_us, value_pct) pairs since the previous read;
    # None when the driver does not support sampling (then *_util_now_pct is used).
    # Read from a recording of format v2: a UtilWindow (or [] when there were none).
    util_samples: list[tuple[int, float]] | UtilWindow | None = None
    mem_util_samples: list[tuple[int, float]] | UtilWindow | None = None
    # nvmlDeviceGetUtilizationRates: NVML's own last sample period
    util_now_pct: float | None = None
    mem_util_now_pct: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    power_mw: int | None = None
    power_limit_mw: int | None = None
    energy_mj: int | None = None   # nvmlDeviceGetTotalEnergyConsumption, cumulative
    temp_c: int | None = None
    sm_clock_mhz: int | None = None
    pcie_rx_kb_s: int | None = None  # NVML's own 20 ms window, in KB/s
    pcie_tx_kb_s: int | None = None
    # nvmlClocksEventReason* bit mask: the reasons holding at the read; on a GPU that
    # counts clock-event durations (below), those whose count advanced since the read before
    throttle_reasons: int | None = None
    processes: list[GpuProcessRaw] | None = None
    # GPM over the interval since the previous read (collect/gpu_gpm.py), None where the
    # GPU has none or fell back; gpm_note says why a GPU with GPM fell back
    gpm_sm_active_pct: float | None = None
    gpm_sm_occupancy_pct: float | None = None
    gpm_tensor_active_pct: float | None = None
    gpm_dram_bw_pct: float | None = None
    gpm_note: str | None = None
    # a GPU in MIG mode: per GPU instance [id, SMs, GPM SM activity % or None]
    # (collect/gpu_mig.py); gpm_sm_active_pct is then theirs weighted by SMs
    gpm_mig: list[list] | None = None
    pcie_age_s: float | None = None  # how old pcie_*_kb_s are (collect/gpu_pcie.py)
    # nanoseconds the clocks were held down for each reason since the driver loaded
    # (NVML field values, collect/gpu_fields.py), and NVML's stamp of that read (epoch
    # µs); None where the GPU does not count that reason (then throttle_reasons, the bit
    # mask, is read where it counts none)
    throttle_sw_power_cap_ns: int | None = None
    throttle_hw_power_brake_ns: int | None = None
    throttle_sw_thermal_ns: int | None = None
    throttle_hw_thermal_ns: int | None = None
    throttle_sync_boost_ns: int | None = None
    throttle_at_us: int | None = None


UNAVAILABLE_PREFIX = "unavailable: "    # GpuSnapshot.status without GPUs: + the reason


@dataclass(slots=True)
class GpuSnapshot:
    """All GPUs, or why there are none: status is "ok" or "unavailable: <reason>"."""

    status: str = "unavailable: not sampled"
    driver_version: str | None = None
    gpus: list[GpuRaw] = field(default_factory=list)

    def local_pids(self) -> dict[int, int]:
        """Each GPU process seen from here: its PID in our namespace -> its host PID (the
        lowest GPU's first); the processes a sample follows (collect/sampler.py)."""
        return {p.local_pid: p.pid for g in self.gpus for p in (g.processes or ())
                if p.local_pid is not None}


# ---------------------------------------------------------------------------- host
@dataclass(slots=True)
class CpuTimes:
    """The aggregate "cpu" line of /proc/stat, in clock ticks (USER_HZ)."""

    user: int = 0
    nice: int = 0
    system: int = 0
    idle: int = 0
    iowait: int = 0
    irq: int = 0
    softirq: int = 0
    steal: int = 0
    guest: int = 0
    guest_nice: int = 0


@dataclass(slots=True)
class PsiTotals:
    """Cumulative stall time from a pressure file's total= fields, in microseconds."""

    some_us: int
    full_us: int | None = None     # /proc/pressure/cpu had no "full" line before Linux 5.13


@dataclass(slots=True)
class CgroupIo:
    """A cgroup v2: the job's (its GPU process's, `pid`), else the one we run in (pid
    None).  Its own counters, when readable; an absent file is an empty dict or None."""

    path: str
    io_stat: dict[str, dict[str, int]] = field(default_factory=dict)  # "MAJ:MIN" -> rbytes, wbytes, rios, wios
    io_pressure: PsiTotals | None = None
    pid: int | None = None         # the process whose cgroup this is (our procfs); None: ours
    # cpu.stat's usage_usec and, with the cpu controller, nr_periods and nr_throttled
    # (CFS bandwidth: a CPU-quota'd pod): collect/host.py CPU_STAT_KEYS
    cpu_stat: dict[str, int] = field(default_factory=dict)
    cpu_pressure: PsiTotals | None = None
    cpu_max: str | None = None     # cpu.max as the kernel prints it: "max 100000", "400000 100000"
    memory_stat: dict[str, int] = field(default_factory=dict)  # file, file_dirty, file_writeback (bytes)


@dataclass(slots=True)
class HostRaw:
    cpu: CpuTimes | None = None
    ncpu: int = 1
    psi: dict[str, PsiTotals] = field(default_factory=dict)  # "io" | "cpu" | "memory"; absent: n/a
    meminfo_kb: dict[str, int] = field(default_factory=dict)  # MemTotal, MemAvailable, Cached, Dirty, ...
    cgroup: CgroupIo | None = None


# ---------------------------------------------------------------------------- processes
@dataclass(slots=True)
class ProcIoRaw:
    """/proc/PID/io, CPU time and where the time went, of one GPU process or one of its
    descendants.  Its time counters are the whole process's, all its threads summed
    (cpu_ticks as the kernel sums them; run_delay_ns and blkio_ticks by
    collect/threadtime.py), except for the processes outside the job (root_pid None),
    whose waits are their leading thread's."""

    pid: int                       # the PID under --procfs
    ppid: int | None = None
    root_pid: int | None = None    # the GPU process (host PID) this one descends from
    name: str | None = None
    cmdline: str | None = None
    rchar: int | None = None       # None: permission denied, or the process exited
    wchar: int | None = None
    read_bytes: int | None = None
    write_bytes: int | None = None
    cpu_ticks: int | None = None   # utime + stime, clock ticks
    devices: tuple[str, ...] | None = None  # block devices its open files and mappings live on
    state: str | None = None       # R, S, D, ... at the sample (/proc/PID/stat field 3)
    # time runnable, waiting for a CPU (schedstat field 2), summed over its threads
    # (task/TID/schedstat): thread-ns, so N threads waiting at once add N ns a ns, and a
    # rate of it passes 100 % of the interval (model/procs.py says how it is then used);
    # a thread that exited keeps its time as last read, so the sum never goes down
    run_delay_ns: int | None = None
    # time blocked on block I/O, clock ticks (stat field 42), summed over its threads the
    # same way; None while kernel.task_delayacct is off, and where its leading thread's
    # cannot have been measured (procio.py); a thread forked before accounting was on
    # adds 0 for ever (a lower bound then)
    blkio_ticks: int | None = None
    syscr: int | None = None       # read system calls (/proc/PID/io)
    cgroup: str | None = None      # its cgroup path (collect.host.parse_process_cgroup)
    mounts: tuple[str, ...] = ()   # network and FUSE mounts its files live on (mountpoints)
    blocked_on: str | None = None  # the one of them it was in a read() of, at the sample
    direct_reads: bool | None = None  # one of its data files (collect/procio.py) is open with
                                      # O_DIRECT; None: it has none, or they cannot be read
    data_kb: int | None = None     # the size of its data files read through the page cache
    sys_ticks: int | None = None   # of cpu_ticks, the kernel's (stime): a cold buffered read
                                   # spends most of its CPU there, a cached one little
    # a GPU process's job, (id, source, name) as collect/jobid.py tells it; None on every
    # other process, and where it was not looked at (a recording made before jobs were)
    job: tuple[str, str, str] | None = None


# ---------------------------------------------------------------------------- mounts
@dataclass(slots=True)
class MountRaw:
    """One mount the job has files on that is not a local block device, at one sample.
    counters: what the kernel keeps for it, by kind (collect/mounts.py says which); all
    cumulative but "waiting" (FUSE requests in flight now)."""

    mountpoint: str
    fstype: str
    source: str
    kind: str
    daemon_pid: int | None = None          # a FUSE mount's daemon, where it was found
    counters: dict[str, int] = field(default_factory=dict)


# ---------------------------------------------------------------------------- device health
HEALTH_SMARTCTL = "smartctl"       # DiskHealth.source: smartctl --json
HEALTH_SYSFS = "sysfs"             # the kernel's own view of an NVMe controller (no smartctl)
HEALTH_SIMULATED = "simulated"     # the simulator's (--demo)


@dataclass(slots=True)
class DiskHealth:
    """One reading of a physical disk's health (SMART, NVMe SMART/Health log, sysfs).

    Read slowly (collect/health.py, every few minutes, never on the sampling thread).
    Counters are cumulative over the device's life, as the drive keeps them; a field the
    drive or the source does not give is None (n/a), never 0.  model/health.py judges a
    reading (status, reasons) and compares two (trend)."""

    device: str                     # kernel name of the whole disk ("nvme0n1", "sda")
    read_wall_s: float = 0.0        # when it was read, seconds since the epoch
    source: str | None = None       # HEALTH_SMARTCTL | HEALTH_SYSFS | HEALTH_SIMULATED; None: none
    readable: bool = False
    unreadable_reason: str | None = None   # one line, when not readable
    protocol: str | None = None     # "NVMe" | "ATA" | "SCSI"
    model: str | None = None
    serial: str | None = None
    firmware: str | None = None
    smart_passed: bool | None = None       # the drive's overall self-assessment
    critical_warning: int | None = None    # NVMe SMART/Health log byte 0, a bit mask
    temperature_c: float | None = None     # NVMe: the composite temperature
    warning_temp_c: float | None = None    # NVMe WCTEMP; ATA: SCT's highest recommended
    critical_temp_c: float | None = None   # NVMe CCTEMP; ATA: SCT's temperature limit
    warning_temp_time_min: int | None = None   # NVMe: minutes at or above WCTEMP, lifetime
    critical_temp_time_min: int | None = None  # NVMe: minutes at or above CCTEMP, lifetime
    percentage_used_pct: float | None = None   # NVMe Percentage Used; ATA endurance used
    available_spare_pct: float | None = None
    available_spare_threshold_pct: float | None = None
    media_errors: int | None = None        # NVMe Media and Data Integrity Errors
    unsafe_shutdowns: int | None = None
    reallocated_sectors: int | None = None  # ATA 5 Reallocated_Sector_Ct (raw)
    pending_sectors: int | None = None      # ATA 197 Current_Pending_Sector (raw)
    offline_uncorrectable: int | None = None  # ATA 198 Offline_Uncorrectable (raw)
    error_log_entries: int | None = None    # NVMe Error Information Log Entries; ATA error log count
    power_on_hours: int | None = None
    # ATA attributes at or below their threshold now (smartctl's FAILING_NOW), and in the past
    failing_attributes: tuple[str, ...] = ()
    failed_attributes: tuple[str, ...] = ()
    thermal_throttle_s: int | None = None   # NVMe: time in thermal management (TMT1 + TMT2)
    read_cpu_s: float | None = None         # CPU the read cost (smartctl's and ours)


@dataclass(slots=True, frozen=True)
class HealthSnapshot:
    """The poller's latest readings, handed to every Sample as one shared reference (no
    I/O on the sampling thread).  Replaced whole at each poll, never mutated."""

    readings: dict[str, DiskHealth] = field(default_factory=dict)  # latest, by device
    first: dict[str, DiskHealth] = field(default_factory=dict)     # this run's first readable
    polled_wall_s: float | None = None      # when the latest poll finished
    polls: int = 0


def same_drive(a: DiskHealth, b: DiskHealth) -> bool:
    """THE rule for whether two readings of one kernel name are of one drive (a drive
    replaced in its slot is sdb again): not when both give a serial number and they
    differ, nor when one source gives two different models (sysfs's SCSI model of a
    SATA disk is shorter than smartctl's ATA one, so models are compared source to
    source).  The trend since start, and a report's trend, never compare two drives."""
    if a.serial and b.serial and a.serial != b.serial:
        return False
    return not (a.source == b.source and a.model and b.model and a.model != b.model)


def is_new(now, before) -> bool:
    """THE rule for whether slow data (a HealthSnapshot, a DiskHealth) is new: unless it
    is the same object or an equal one.  The poller replaces its snapshot whole at each
    poll and keeps a reading object while it stands (a disk asleep), so the usual case
    costs one identity test; equality catches copies (a recording hands out a new object
    per block).  The recorder's records and summaries and report's replay all ask this."""
    return now is not before and now != before


# ---------------------------------------------------------------------------- sample
@dataclass(slots=True)
class Sample:
    """Everything read at one moment.  mono_s orders samples and measures intervals;
    wall_s says when it was, in seconds since the epoch."""

    mono_s: float
    wall_s: float
    disks: dict[str, DiskCounters] = field(default_factory=dict)
    devices: dict[str, DeviceInfo] = field(default_factory=dict)
    gpu: GpuSnapshot = field(default_factory=GpuSnapshot)
    host: HostRaw = field(default_factory=HostRaw)
    procs: dict[int, ProcIoRaw] = field(default_factory=dict)
    mounts: dict[str, MountRaw] = field(default_factory=dict)  # by mountpoint (collect/mounts.py)
    warnings: list[str] = field(default_factory=list)  # what could not be read, one line each
    # the disks' health as the slow poller last read it (collect/health.py); None: not read
    health: HealthSnapshot | None = None
    # the interval the sampler was set to when it took this sample (the dashboard's +/-
    # change it); None: not said (a recording made before it was kept, a bare collector)
    interval_s: float | None = None
    # how old `procs` are (issue 41, collect/detail.py): None: read in this sample, every
    # sample reading them (a full cadence, or not said); 0.0: read in this sample, at the
    # slow cadence; > 0: not read in this sample, `procs` is the read this many seconds
    # before (the same dict, unchanged).  model/detail.py is the one rule for the rates.
    procs_age_s: float | None = None
    # each job's cgroup v2 totals (collect/cgjob.py CgJobRaw), by job id, read every sample
    # (between the processes' reads too); {}: none (cgroup v1, no job, not recorded)
    cgjobs: dict = field(default_factory=dict)
    # what this sample's process rates are taken against (model/detail.py ProcLink):
    # a link model/detail.py derives and keeps, not a reading (never recorded)
    procs_base: object | None = None
