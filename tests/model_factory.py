"""Crafted Models for exporter and alert tests: a node whose every number the test sets."""

from __future__ import annotations

import json
from pathlib import Path

from gpudisk_top.collect.diskstats import DiskCounters
from gpudisk_top.collect.sample import DeviceInfo, GpuSnapshot, Sample
from gpudisk_top.model.disk import RATE_FIELDS, DiskRates
from gpudisk_top.collect.health_smartctl import parse_smartctl
from gpudisk_top.collect.sample import DiskHealth
from gpudisk_top.model.gpu import GpuProcessView, GpuView
from gpudisk_top.model.health import HealthView, view_of
from gpudisk_top.model.host import HostView
from gpudisk_top.model.snapshot import Model

START_WALL_S = 1767225600.0
START_MONO_S = 1000.0

DEVICES = {
    "nvme0n1": DeviceInfo("nvme0n1", "nvme0n1", 259, 0, "disk", dev_class="NVMe",
                          rotational=False, mountpoints=("/checkpoints",)),
    "nvme0n1p1": DeviceInfo("nvme0n1p1", "nvme0n1p1", 259, 1, "partition", parent="nvme0n1",
                            dev_class="NVMe", rotational=False, mountpoints=("/checkpoints",)),
    "sda": DeviceInfo("sda", "sda", 8, 0, "disk", dev_class="SSD", rotational=False,
                      mountpoints=("/datasets",)),
    "dm-0": DeviceInfo("dm-0", "vg-data", 253, 0, "dm", slaves=("sda",), dev_class="SSD",
                       mountpoints=("/data",)),
}


def rates(**values) -> DiskRates:
    fields = {name: 0.0 for name in RATE_FIELDS}
    fields.update(values)
    return DiskRates(**fields)


def gpu(index: int, util_pct: float | None = 95.0, pids=(), **kw) -> GpuView:
    procs = [GpuProcessView(pid=p, local_pid=p, ns_pid=p, name="python", cmdline="python train.py",
                            gpu_mem_mib=1000.0, mapped=True) for p in pids]
    base = dict(index=index, name="NVIDIA H100 80GB HBM3", uuid=f"GPU-{index:08d}",
                pci_bus_id=f"00000000:{index + 0x18:02X}:00.0", lost=False, error=None,
                util_pct=util_pct, mem_util_pct=30.0, mem_used_mib=30000.0,
                mem_total_mib=81559.0, power_w=500.0, power_limit_w=700.0, temp_c=60,
                sm_clock_mhz=1980, pcie_rx_kb_s=1000, pcie_tx_kb_s=10, processes=procs)
    base.update(kw)
    return GpuView(**base)


def model(i: int, disk_util: dict[str, float] | None = None, gpus=None, interval_s: float = 1.0,
          host: HostView | None = None, proc_devices: dict[int, tuple[str, ...]] | None = None,
          **disk_values) -> Model:
    """The i-th interval (1-based) of a crafted node: every device in DEVICES (and every
    other one disk_util names, as an NVMe disk) did I/O, and disk_util sets %util per
    device (others 1 %)."""
    wall = START_WALL_S + i * interval_s
    mono = START_MONO_S + i * interval_s
    devices = dict(DEVICES)
    for n, name in enumerate(sorted(set(disk_util or ()) - set(DEVICES))):
        devices[name] = DeviceInfo(name, name, 259, 100 + n, "disk", dev_class="NVMe",
                                   rotational=False, mountpoints=(f"/{name}",))
    counters = {name: DiskCounters(info.major, info.minor, 20, 100 * i, 0, 800 * i, 10 * i,
                                   0, 0, 0, 0, 0, 10 * i, 10 * i)
                for name, info in devices.items()}
    sample = Sample(mono_s=mono, wall_s=wall, disks=counters, devices=dict(devices),
                    gpu=GpuSnapshot(status="ok"))
    disks = {name: rates(util_pct=(disk_util or {}).get(name, 1.0), r_s=100.0, rkb_s=51200.0,
                         r_await_ms=0.2, aqu_sz=0.5, **disk_values)
             for name in devices}
    m = Model(wall_s=wall, interval_s=interval_s, sample=sample, disks=disks,
              devices=devices, gpu_status="ok",
              gpus=gpus if gpus is not None else [gpu(0), gpu(1)],
              host=host or HostView(ncpu=8, cpu_user_pct=10.0, cpu_nice_pct=0.0,
                                    cpu_system_pct=5.0, cpu_iowait_pct=2.0, cpu_steal_pct=0.0,
                                    cpu_idle_pct=83.0, psi_io_some_pct=1.5,
                                    psi_io_full_pct=0.5, mem_total_kb=1024, dirty_kb=8))
    for g in m.gpus:
        for p in g.processes:
            m.gpu_proc_io[p.pid] = {"read_kb_s": 100.0, "rchar_kb_s": 200.0, "write_kb_s": 0.0,
                                    "wchar_kb_s": 0.0, "cpu_pct": 50.0,
                                    "devices": (proc_devices or {}).get(p.pid, ("sda",)),
                                    "nprocs": 1}
    return m


def verdict(state: str, wall_s: float = 0.0, processes=(), reason: str = ""):
    """A Verdict of one interval in `state`, as the engine and the exporter read it."""
    from gpudisk_top.verdict.detect import Verdict

    return Verdict(wall_s=wall_s, state=state, raw_state=state, processes=list(processes),
                   reason=reason, raw_reason=reason)


HEALTH_FIXTURES = Path(__file__).parent / "fixtures" / "health"


def health(start_wall_s: float = START_WALL_S) -> dict[str, HealthView]:
    """Model.health of a node: nvme0n1 the Samsung 970 EVO with 7 media errors (a real
    smartctl reading, tests/fixtures/health/nvme-7.0-media-errors.json), read 10 minutes
    after a first reading that had 4, and running at 78 °C above its 75 °C warning, 14
    minutes more of it since; sda the Samsung 860 EVO SATA SSD (sata-ssd-7.0-x-sct.json),
    fine; vdb a virtio disk, unreadable."""
    doc = json.loads((HEALTH_FIXTURES / "nvme-7.0-media-errors.json").read_text())
    log = doc["nvme_smart_health_information_log"]
    log.update(media_errors=4, warning_temp_time=100)
    first = parse_smartctl(doc, "nvme0n1", 0, read_wall_s=start_wall_s - 600.0)
    log.update(media_errors=7, warning_temp_time=114, temperature=78)
    doc["temperature"]["current"] = 78
    doc["nvme_composite_temperature_threshold"] = {"warning": 75, "critical": 85}
    nvme = parse_smartctl(doc, "nvme0n1", 0, read_wall_s=start_wall_s)
    sata = parse_smartctl((HEALTH_FIXTURES / "sata-ssd-7.0-x-sct.json").read_text(), "sda", 0,
                          read_wall_s=start_wall_s)
    virtio = DiskHealth("vdb", start_wall_s, unreadable_reason="virtio disk: no SMART")
    return {"nvme0n1": view_of(nvme, first), "sda": view_of(sata, sata),
            "vdb": view_of(virtio)}
