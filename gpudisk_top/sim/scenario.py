"""Scenarios for the simulator: the node (GPUs, disks, host), its processes, and phases.

A Scenario describes a GPU training node and a script of phases.  Each phase sets knobs
(GPU utilization and power, how fast the job's DataLoader reads and from which disk, the
disk's latency and queue, checkpoint writes, CPU, page cache hits, pressure) and may carry
the `label` a detector is expected to give intervals of that phase.  The Simulator turns
it into raw counters; nothing here computes a counter.

Build one in Python, load one from TOML (`load_toml`, `loads_toml`; the format is in
gpudisk_top/sim/scenario_toml.py), or take a built-in (`builtin(name)`, `BUILTIN_NAMES`;
they are TOML files shipped in gpudisk_top/sim/scenarios/).
Every problem found is a ScenarioError whose message names the field and the phase.
"""

from __future__ import annotations

import bisect
import dataclasses
from dataclasses import dataclass, field

from gpudisk_top.collect.gpu_fields import THROTTLE_REASONS
from gpudisk_top.verdict.detect.states import STATES, UNAVAILABLE

# the detector's states a phase can be labelled with: all but "unavailable" (a simulated
# node's phases always have GPUs; FakeNvml's failures make the other case)
LABELS = tuple(s for s in STATES if s != UNAVAILABLE)
DISK_CLASSES = ("NVMe", "SSD", "HDD", "virtual")

# Per class: read and write latency of an unloaded disk for a typical request (ms), the
# most IOPS and MB/s it serves, and the share of reads the block layer merges (%rrqm).
# Data-sheet orders of magnitude: a PCIe 4 NVMe, a SATA SSD, a 7200 rpm disk, and a cloud
# block volume (gp3-like).
CLASS_DEFAULTS: dict[str, dict[str, float]] = {
    "NVMe": dict(read_latency_ms=0.2, write_latency_ms=0.6, max_iops=1_000_000,
                 max_read_mb_s=6800, max_write_mb_s=4000, read_merge_pct=0.0),
    "SSD": dict(read_latency_ms=0.6, write_latency_ms=1.5, max_iops=90_000,
                max_read_mb_s=540, max_write_mb_s=500, read_merge_pct=10.0),
    "HDD": dict(read_latency_ms=8.0, write_latency_ms=10.0, max_iops=180,
                max_read_mb_s=220, max_write_mb_s=200, read_merge_pct=25.0),
    "virtual": dict(read_latency_ms=1.0, write_latency_ms=2.0, max_iops=16_000,
                    max_read_mb_s=500, max_write_mb_s=500, read_merge_pct=5.0),
}


class ScenarioError(ValueError):
    """A scenario that cannot be simulated; the message says what and where."""


# ---------------------------------------------------------------------------- the node
@dataclass
class GpuSpec:
    count: int = 8
    model: str = "NVIDIA H100 80GB HBM3"
    memory_mib: int = 81559
    power_limit_w: float = 700.0
    idle_power_w: float = 70.0
    # GPM (Hopper and later: the busy figure is SM activity, model/gpu.py): on every GPU,
    # or on those listed (a node of mixed GPUs)
    gpm: bool = False
    gpm_gpus: list[int] = field(default_factory=list)

    def has_gpm(self, gpu: int) -> bool:
        return self.gpm or gpu in self.gpm_gpus


@dataclass
class HealthSpec:
    """A disk's simulated health (gpudisk_top/sim/health.py) where it is not its class's:
    each field left None is the class's (seeded per disk where drives differ).  Counters
    are the drive's lifetime counts at the start; *_per_h adds to one as simulated time
    passes, so a reading can gain what a dying drive gains."""

    unreadable_reason: str | None = None   # the disk's health cannot be read: why
    idle_temp_c: float | None = None       # its temperature with no I/O (its slot's airflow)
    busy_temp_rise_c: float | None = None  # added at 100 % util, reached over minutes
    warning_temp_c: float | None = None    # NVMe WCTEMP; ATA: SCT's highest recommended
    critical_temp_c: float | None = None   # NVMe CCTEMP; ATA: SCT's temperature limit
    percentage_used_pct: float | None = None
    available_spare_pct: float | None = None
    available_spare_threshold_pct: float | None = None
    media_errors: int | None = None
    unsafe_shutdowns: int | None = None
    error_log_entries: int | None = None
    reallocated_sectors: int | None = None
    pending_sectors: int | None = None
    offline_uncorrectable: int | None = None
    power_on_hours: int | None = None
    smart_passed: bool | None = None
    media_errors_per_h: float = 0.0
    reallocated_per_h: float = 0.0
    pending_per_h: float = 0.0


@dataclass
class DiskSpec:
    """One whole disk.  Numbers left None take CLASS_DEFAULTS of its class."""

    name: str                              # kernel name: "nvme0n1", "sda", "vdb"
    dev_class: str = "NVMe"                # NVMe | SSD | HDD | virtual
    mountpoint: str | None = None
    partition: str | None = None           # a partition ("nvme0n1p1") holding the mountpoint
    rotational: bool | None = None         # None: True for HDD only
    model: str | None = None
    read_latency_ms: float | None = None   # unloaded read latency (r_await)
    write_latency_ms: float | None = None
    max_iops: float | None = None
    max_read_mb_s: float | None = None
    max_write_mb_s: float | None = None
    read_merge_pct: float | None = None
    background_r_s: float = 0.2            # system noise (logs, metadata) on every disk
    background_w_s: float = 1.0
    health: HealthSpec | None = None       # None: its class's simulated health

    def __post_init__(self) -> None:
        if self.dev_class not in DISK_CLASSES:
            raise ScenarioError(f"disk {self.name!r}: class {self.dev_class!r} is not one of "
                                f"{', '.join(DISK_CLASSES)}")
        for key, value in CLASS_DEFAULTS[self.dev_class].items():
            if getattr(self, key) is None:
                setattr(self, key, value)
        if self.rotational is None:
            self.rotational = self.dev_class == "HDD"

    @property
    def mount_device(self) -> str:
        """The device a file under the mountpoint lives on (st_dev): the partition if any."""
        return self.partition or self.name


@dataclass
class HostSpec:
    ncpu: int = 96
    mem_total_gib: float = 2048.0
    anon_gib: float = 200.0                # memory the processes hold (not reclaimable)
    cached_gib: float = 300.0              # page cache when a phase does not say
    dirty_background_mb: float = 256.0     # Dirty above this is written back at full speed


@dataclass
class JobSpec:
    """The training job.  With one_process_per_gpu (torchrun/DDP) each GPU has its own
    rank process, pid + r * (workers + 1), followed by its DataLoader workers; without,
    one process (pid) uses every GPU of the job and owns all the workers.

    visible=False: the job runs in a PID namespace we cannot see into (we are in a
    container without the host's PID namespace).  NVML still reports its host PIDs, but
    they resolve to nothing and none of its processes is in /proc; the host's CPU, disks
    and GPUs still carry its load."""

    dataset_disk: str                      # the disk its dataset lives on
    pid: int = 4242
    name: str = "python"
    cmdline: str = "python train.py --data /data/imagenet"
    gpus: tuple[int, ...] | None = None    # None: every GPU
    workers: int = 8                       # DataLoader workers per rank
    checkpoint_disk: str | None = None     # None: the dataset disk
    gpu_mem_mib: int = 62_000
    one_process_per_gpu: bool = True
    launcher_pid: int = 4200               # ppid of the ranks (torchrun); not a GPU process
    visible: bool = True                   # False: its processes are not in our /proc


@dataclass
class OtherProcess:
    """An unrelated process that loads a disk (a backup, fio, another team's copy)."""

    pid: int
    name: str
    disk: str
    cmdline: str = ""
    read_mb_s: float = 0.0                 # default rates; a phase may override them
    write_mb_s: float = 0.0
    request_kb: float = 128.0
    cpu_pct: float = 10.0


# ---------------------------------------------------------------------------- phases
@dataclass
class OtherLoad:
    """A phase's rates for one OtherProcess; None keeps the process's default."""

    read_mb_s: float | None = None
    write_mb_s: float | None = None
    cpu_pct: float | None = None           # % of one CPU (a build or transcode: thousands)


@dataclass
class DiskState:
    """A phase's override of one disk's service: None derives it from the load."""

    read_latency_ms: float | None = None
    write_latency_ms: float | None = None
    queue_depth: float | None = None       # aqu-sz
    util_pct: float | None = None          # %util


@dataclass
class Phase:
    """One stretch of the scenario.  Knobs say what the node does; see the field comments.
    gpu_util_pct applies to the job's GPUs (to every GPU when no job runs);
    read_latency_ms / queue_depth / disk_util_pct are shorthand for disks[read disk]."""

    name: str
    duration_s: float
    label: str | None = None               # the expected detector state, one of LABELS
    repeat: int = 1
    job_running: bool = True               # False: the job has exited (no GPU processes)
    # GPUs
    gpu_util_pct: float = 0.0
    gpu_util_by_gpu: dict[int, float] = field(default_factory=dict)
    gpu_power_w: float | None = None       # None: idle power + util share of the limit
    gpu_power_by_gpu: dict[int, float] = field(default_factory=dict)
    gpu_mem_util_pct: float | None = None  # None: 40 % of util
    # GPM SM activity of the GPUs with GPM; None: it follows utilization (a dense job).
    # Low beside a high utilization: small kernels keep utilization.gpu up, the SMs idle
    gpu_sm_active_pct: float | None = None
    gpu_sm_active_by_gpu: dict[int, float] = field(default_factory=dict)
    # the share of the time each throttle reason holds the clocks down, by reason
    # (collect/gpu_fields.py THROTTLE_REASONS: sw_power_cap, hw_power_brake, sw_thermal,
    # hw_thermal, sync_boost): the job's GPUs' (every GPU's when no job runs), or a GPU's
    gpu_throttle_pct: dict[str, float] = field(default_factory=dict)
    gpu_throttle_by_gpu: dict[int, dict[str, float]] = field(default_factory=dict)
    # the job's reads
    read_mb_s: float = 0.0                 # what the loaders read() (rchar), all ranks
    read_request_kb: float = 128.0
    cache_hit_pct: float = 0.0             # share of read_mb_s served by the page cache
    read_disk: str | None = None           # None: the job's dataset disk
    read_latency_ms: float | None = None
    queue_depth: float | None = None
    disk_util_pct: float | None = None
    # the job's writes (checkpoints go to the page cache, then Dirty is written back)
    write_mb_s: float = 0.0                # what rank 0 write()s (wchar)
    write_request_kb: float = 512.0
    write_disk: str | None = None          # None: the job's checkpoint disk
    write_latency_ms: float | None = None
    dirty_mb: float | None = None          # None: Dirty follows writes and writeback
    cached_gib: float | None = None
    # CPU
    host_cpu_pct: float | None = None      # None: the processes' CPU plus 2 % background
    iowait_pct: float = 0.0
    loader_cpu_pct: float = 30.0           # per DataLoader worker, % of one CPU
    job_cpu_pct: float = 100.0             # per rank process
    # pressure stall information, % of the interval
    io_psi_some_pct: float = 0.0
    io_psi_full_pct: float = 0.0
    cpu_psi_some_pct: float = 0.0
    memory_psi_some_pct: float = 0.0
    # everything else
    others: dict[str, OtherLoad] = field(default_factory=dict)  # OtherProcess name -> rates
    disks: dict[str, DiskState] = field(default_factory=dict)   # disk name -> service


@dataclass
class PhaseGroup:
    """Phases played in order, `repeat` times (e.g. train, checkpoint, train, ...)."""

    phases: list[Phase | PhaseGroup]
    repeat: int = 1
    name: str = "group"


# ---------------------------------------------------------------------------- scenario
@dataclass
class Scenario:
    name: str
    disks: list[DiskSpec]
    phases: list[Phase | PhaseGroup]
    gpus: GpuSpec = field(default_factory=GpuSpec)
    host: HostSpec = field(default_factory=HostSpec)
    job: JobSpec | None = None
    others: list[OtherProcess] = field(default_factory=list)
    description: str = ""
    noise_pct: float = 3.0                 # relative noise on rates and latencies
    loop: bool = True                      # after the last phase, start again

    def __post_init__(self) -> None:
        self._timeline: list[Phase] | None = None
        self._starts: list[float] = []

    def timeline(self) -> list[Phase]:
        """Every phase in play order, repeats and groups unrolled.  Raises ScenarioError."""
        if self._timeline is None:
            self.validate()
            self._timeline = _unroll(self.phases)
            self._starts, t = [], 0.0
            for phase in self._timeline:
                self._starts.append(t)
                t += phase.duration_s
        return self._timeline

    @property
    def duration_s(self) -> float:
        return sum(p.duration_s for p in self.timeline())

    def phase_at_time(self, t_s: float) -> Phase:
        """The phase playing t_s seconds after the start (looping, or holding the last)."""
        timeline = self.timeline()
        total = self.duration_s
        if self.loop:
            t_s %= total
        elif t_s >= total:
            return timeline[-1]
        return timeline[max(0, bisect.bisect_right(self._starts, t_s) - 1)]

    def disk(self, name: str) -> DiskSpec:
        for d in self.disks:
            if d.name == name:
                return d
        raise KeyError(name)

    def validate(self) -> None:
        """Raise ScenarioError naming the first problem found."""
        _validate(self)


def _unroll(items: list[Phase | PhaseGroup]) -> list[Phase]:
    out: list[Phase] = []
    for item in items:
        if isinstance(item, PhaseGroup):
            out.extend(_unroll(item.phases) * item.repeat)
        else:
            out.extend([item] * item.repeat)
    return out


def _validate(sc: Scenario) -> None:
    where = f"scenario {sc.name!r}"

    def fail(msg: str) -> None:
        raise ScenarioError(f"{where}: {msg}")

    if sc.gpus.count < 0:
        fail(f"gpus.count must be >= 0, not {sc.gpus.count}")
    for g in sc.gpus.gpm_gpus:
        if not 0 <= g < sc.gpus.count:
            fail(f"gpus.gpm_gpus: GPU {g} does not exist (the scenario has {sc.gpus.count})")
    if sc.host.ncpu < 1:
        fail(f"host.ncpu must be >= 1, not {sc.host.ncpu}")
    if sc.noise_pct < 0:
        fail(f"noise_pct must be >= 0, not {sc.noise_pct}")
    if not sc.disks:
        fail("no disks: a scenario needs at least one")
    names = [d.name for d in sc.disks] + [d.partition for d in sc.disks if d.partition]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        fail(f"device name(s) {', '.join(dupes)} used twice")
    disks = {d.name for d in sc.disks}
    disk_list = ", ".join(sorted(disks))

    def check_disk(what: str, name: str | None) -> None:
        if name is not None and name not in disks:
            fail(f"{what}: {name!r} is not a disk of the scenario (disks: {disk_list})")

    for d in sc.disks:
        for key in ("read_latency_ms", "write_latency_ms", "max_iops", "max_read_mb_s",
                    "max_write_mb_s"):
            if not getattr(d, key) > 0:
                fail(f"disk {d.name!r}: {key} must be > 0, not {getattr(d, key)}")
        if d.health is not None:
            _validate_health(d, fail)
    pids: list[int] = []
    if sc.job is not None:
        job = sc.job
        check_disk("job.dataset_disk", job.dataset_disk)
        check_disk("job.checkpoint_disk", job.checkpoint_disk)
        if job.workers < 0:
            fail(f"job.workers must be >= 0, not {job.workers}")
        for g in job.gpus or ():
            if not 0 <= g < sc.gpus.count:
                fail(f"job.gpus: GPU {g} does not exist (the scenario has {sc.gpus.count})")
        if sc.gpus.count == 0:
            fail("a job needs GPUs: gpus.count is 0")
        nranks = len(job.gpus if job.gpus is not None else range(sc.gpus.count))
        nranks = nranks if job.one_process_per_gpu else 1
        pids = [job.launcher_pid] + list(range(job.pid, job.pid + nranks * (job.workers + 1)))
    other_names = set()
    for o in sc.others:
        check_disk(f"others {o.name!r}: disk", o.disk)
        if o.name in other_names:
            fail(f"two other processes are named {o.name!r}")
        other_names.add(o.name)
        pids.append(o.pid)
    clash = sorted({p for p in pids if pids.count(p) > 1})
    if clash:
        fail(f"pid(s) {clash} used twice (the job uses pid .. pid + ranks * (workers + 1) - 1)")
    if not sc.phases:
        fail("no phases")
    for pw, phase in _walk(sc.phases, "phases", fail):
        if not phase.duration_s > 0:
            fail(f"{pw}: duration_s must be > 0, not {phase.duration_s}")
        if phase.label is not None and phase.label not in LABELS:
            fail(f"{pw}: label {phase.label!r} is not one of {', '.join(LABELS)}")
        check_disk(f"{pw}: read_disk", phase.read_disk)
        check_disk(f"{pw}: write_disk", phase.write_disk)
        for name in phase.disks:
            check_disk(f"{pw}: disks", name)
        for name, override in phase.others.items():
            if name not in other_names:
                fail(f"{pw}: others: no other process is named {name!r}")
            for key in ("read_mb_s", "write_mb_s", "cpu_pct"):
                value = getattr(override, key)
                if value is not None and value < 0:
                    fail(f"{pw}: others.{name}: {key} must be >= 0, not {value}")
        for key in ("gpu_util_pct", "cache_hit_pct", "iowait_pct", "io_psi_some_pct",
                    "io_psi_full_pct", "cpu_psi_some_pct", "memory_psi_some_pct", "disk_util_pct",
                    "host_cpu_pct", "gpu_mem_util_pct", "gpu_sm_active_pct"):
            value = getattr(phase, key)
            if value is not None and not 0 <= value <= 100:
                fail(f"{pw}: {key} must be within 0..100, not {value}")
        for g, value in phase.gpu_util_by_gpu.items():
            if not 0 <= g < sc.gpus.count:
                fail(f"{pw}: gpu_util_by_gpu: GPU {g} does not exist")
            if not 0 <= value <= 100:
                fail(f"{pw}: gpu_util_by_gpu[{g}] must be within 0..100, not {value}")
        for g, value in phase.gpu_sm_active_by_gpu.items():
            if not 0 <= g < sc.gpus.count:
                fail(f"{pw}: gpu_sm_active_by_gpu: GPU {g} does not exist")
            if not 0 <= value <= 100:
                fail(f"{pw}: gpu_sm_active_by_gpu[{g}] must be within 0..100, not {value}")
        for g, shares in [(None, phase.gpu_throttle_pct), *phase.gpu_throttle_by_gpu.items()]:
            where = "gpu_throttle_pct" if g is None else f"gpu_throttle_by_gpu[{g}]"
            if g is not None and not 0 <= g < sc.gpus.count:
                fail(f"{pw}: gpu_throttle_by_gpu: GPU {g} does not exist")
            for reason, value in shares.items():
                if reason not in THROTTLE_REASONS:
                    fail(f"{pw}: {where}: unknown reason {reason!r} (known: "
                         f"{', '.join(THROTTLE_REASONS)})")
                if not 0 <= value <= 100:
                    fail(f"{pw}: {where}.{reason} must be within 0..100, not {value}")
        for g in phase.gpu_power_by_gpu:
            if not 0 <= g < sc.gpus.count:
                fail(f"{pw}: gpu_power_by_gpu: GPU {g} does not exist")
        for key in ("read_mb_s", "write_mb_s", "loader_cpu_pct", "job_cpu_pct"):
            if getattr(phase, key) < 0:
                fail(f"{pw}: {key} must be >= 0, not {getattr(phase, key)}")
        for key in ("read_request_kb", "write_request_kb"):
            if not getattr(phase, key) > 0:
                fail(f"{pw}: {key} must be > 0, not {getattr(phase, key)}")
        if (phase.read_mb_s or phase.write_mb_s) and sc.job is None:
            fail(f"{pw}: read_mb_s/write_mb_s are the job's rates, and the scenario has no job")


def _validate_health(d: DiskSpec, fail) -> None:
    h = d.health
    for f in dataclasses.fields(h):
        value = getattr(h, f.name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if value < 0:
            fail(f"disk {d.name!r}: health.{f.name} must be >= 0, not {value}")
        if f.name in ("available_spare_pct", "available_spare_threshold_pct") and value > 100:
            fail(f"disk {d.name!r}: health.{f.name} must be within 0..100, not {value}")
    if (h.warning_temp_c is not None and h.critical_temp_c is not None
            and h.critical_temp_c < h.warning_temp_c):
        fail(f"disk {d.name!r}: health.critical_temp_c ({h.critical_temp_c:g}) is below "
             f"warning_temp_c ({h.warning_temp_c:g})")


def _walk(items, prefix: str, fail):
    """(where, phase) of every phase as written (not unrolled): where is its place in
    the file, "phases[2].phases[1] 'ckpt'", so an error points at the text to fix."""
    for i, item in enumerate(items, 1):
        where = f"{prefix}[{i}] {item.name!r}"
        if item.repeat < 1:
            fail(f"{where}: repeat must be >= 1, not {item.repeat}")
        if isinstance(item, PhaseGroup):
            if not item.phases:
                fail(f"{where}: a group with no phases")
            yield from _walk(item.phases, f"{prefix}[{i}].phases", fail)
        else:
            yield where, item


# the built-ins' names, in the order the docs list them; each is sim/scenarios/<name>.toml
BUILTIN_NAMES = (
    "disk-starved-sata", "cpu-starved-cached", "healthy-cached", "healthy-nvme-busy",
    "checkpoint-stalls", "straggler", "idle-other-disk-load", "busy-unrelated-disk-load",
    "small-kernels-gpm", "demo",
)
