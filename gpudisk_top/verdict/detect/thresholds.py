"""The detector's thresholds, with defaults an experienced iostat/nvitop user would pick.

Every field can be set in the config file's [detector] table or on the command line.
Per-class tables (baseline_ms, latency_floor_ms, queue_size) are keyed by device class:
NVMe, SSD, HDD, virtual, unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

DEVICE_CLASSES = ("NVMe", "SSD", "HDD", "virtual", "unknown")


def _per_class(**values: float) -> dict[str, float]:
    return dict(values)


@dataclass
class Thresholds:
    # --- GPUs
    gpu_low_util_pct: float = 70.0      # a job's GPU below this is not being fed
    spin_power_pct: float = 55.0        # busy GPU under this % of its power limit: NCCL spinning
    # --- episodes (hysteresis)
    enter_intervals: int = 3            # consecutive starved intervals to open an episode
    leave_intervals: int = 3            # consecutive clear intervals to close it
    # --- storage saturation (never %util alone)
    latency_factor: float = 3.0         # await this many times the device's baseline
    # a device's latency while lightly loaded, until it has been learned
    baseline_ms: dict[str, float] = field(default_factory=lambda: _per_class(
        NVMe=0.1, SSD=0.5, HDD=6.0, virtual=0.5, unknown=1.0))
    # latency below this never counts as saturated, whatever the ratio
    latency_floor_ms: dict[str, float] = field(default_factory=lambda: _per_class(
        NVMe=0.5, SSD=2.0, HDD=20.0, virtual=1.0, unknown=2.0))
    # requests queued (aqu-sz) that mean a queue is building on this class of device
    queue_size: dict[str, float] = field(default_factory=lambda: _per_class(
        NVMe=16.0, SSD=8.0, HDD=4.0, virtual=8.0, unknown=8.0))
    peak_fraction: float = 0.85         # throughput at this share of the highest seen
    io_pressure_pct: float = 20.0       # PSI io "some" (host or container)
    hdd_util_pct: float = 95.0          # %util means saturation only on a rotating disk
    # --- the job's loaders (DataLoader workers, else the GPU processes)
    loader_io_wait_pct: float = 40.0    # loaders blocked on reads this share of the time: storage-bound
    # --- CPU
    loader_cpu_pct: float = 90.0        # a DataLoader worker on a CPU (or waiting for one) this % of the time is CPU-bound
    loader_cpu_wait_pct: float = 20.0   # loaders waiting this % for a CPU: the CPUs are taken by others
    host_idle_pct: float = 10.0         # host CPU idle below this: the CPU is saturated
    cpu_pressure_pct: float = 40.0      # PSI cpu "some" at or above this: the CPU is saturated
    # --- checkpoints
    checkpoint_write_mb_s: float = 100.0  # a write burst from the job at least this fast
    dirty_surge_mb: float = 1024.0      # Dirty + Writeback above this, or 4x its usual level

    def validate(self) -> list[str]:
        """Problems, one line each (empty when the thresholds make sense)."""
        problems = []
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, dict):
                for cls, v in value.items():
                    if cls not in DEVICE_CLASSES:
                        problems.append(f"{f.name}.{cls}: not a device class "
                                        f"({', '.join(DEVICE_CLASSES)})")
                    elif not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0:
                        problems.append(f"{f.name}.{cls}: must be a positive number")
            elif isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                problems.append(f"{f.name}: must be a non-negative number")
        for name in ("enter_intervals", "leave_intervals"):
            if getattr(self, name) < 1:
                problems.append(f"{name}: must be at least 1")
        if not 0 < self.gpu_low_util_pct <= 100:
            problems.append("gpu_low_util_pct: must be between 0 and 100")
        return problems

    def for_class(self, table: str, dev_class: str) -> float:
        values = getattr(self, table)
        return values.get(dev_class, values.get("unknown", 1.0))


FIELD_NAMES = tuple(f.name for f in fields(Thresholds))
PER_CLASS_FIELDS = ("baseline_ms", "latency_floor_ms", "queue_size")
