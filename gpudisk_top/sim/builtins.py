"""The built-in scenarios: the situations gpudisk-top must tell apart, and a long demo.

Each is built fresh on every call (scenarios are mutable dataclasses).  Numbers are meant
to be realistic for an 8-GPU node: a SATA SSD serves ~540 MB/s, an H100 draws ~600 W
busy and ~70 W idle, and NCCL spinning at an allreduce shows as ~100 % utilization at
low power.  Each scenario's docstring says what it is and which labels it carries.
"""

from __future__ import annotations

from collections.abc import Callable

from gpudisk_top.sim.scenario import (DiskSpec, DiskState, HostSpec, JobSpec, OtherLoad,
                                      OtherProcess, Phase, PhaseGroup, Scenario)

_CMD = "python -u train.py --config configs/vit_l16.yaml --data /data/imagenet-21k"


def _root() -> DiskSpec:
    return DiskSpec("nvme0n1", "NVMe", mountpoint="/", partition="nvme0n1p1",
                    model="SAMSUNG MZ1L21T9HCLS-00A07", background_w_s=6.0)


def _train(name: str, duration_s: float, label: str | None = "healthy", **knobs) -> Phase:
    """A phase of a training job that keeps its GPUs busy, unless knobs say otherwise."""
    base = dict(gpu_util_pct=96.0, read_mb_s=800.0, cache_hit_pct=90.0, loader_cpu_pct=35.0,
                io_psi_some_pct=0.5, cpu_psi_some_pct=2.0)
    base.update(knobs)
    return Phase(name, duration_s, label=label, **base)


def disk_starved_sata() -> Scenario:
    """The dataset (4 TB) is larger than RAM and lives on one SATA SSD: once the cached
    shard is used up, the loaders ask 900 MB/s of a disk that gives 540, r_await climbs
    to 8 ms with 34 requests queued, and the GPUs wait.  Labels: healthy, disk-starved."""
    return Scenario(
        name="disk-starved-sata",
        description=disk_starved_sata.__doc__,
        host=HostSpec(ncpu=128, mem_total_gib=1024, cached_gib=700),
        disks=[_root(), DiskSpec("sda", "SSD", mountpoint="/data", model="ATA Samsung SSD 870")],
        job=JobSpec(dataset_disk="sda", workers=8, cmdline=_CMD),
        phases=[
            _train("cached-shard", 30, read_mb_s=900, cache_hit_pct=92),
            _train("disk-starved", 90, "disk-starved", gpu_util_pct=55, gpu_power_w=330,
                   read_mb_s=900, cache_hit_pct=5, read_latency_ms=8.0, queue_depth=34.0,
                   disk_util_pct=100.0, iowait_pct=6.0, loader_cpu_pct=12.0,
                   io_psi_some_pct=45.0, io_psi_full_pct=18.0),
        ])


def cpu_starved_cached() -> Scenario:
    """The dataset sits in the page cache (disk idle), but heavy augmentation keeps every
    DataLoader worker at 100 % of a CPU and the GPUs wait on the CPU.  Labels: healthy,
    cpu-starved."""
    return Scenario(
        name="cpu-starved-cached",
        description=cpu_starved_cached.__doc__,
        host=HostSpec(ncpu=48, mem_total_gib=1024, cached_gib=800),
        disks=[_root(), DiskSpec("nvme1n1", "NVMe", mountpoint="/data")],
        job=JobSpec(dataset_disk="nvme1n1", workers=4, cmdline=_CMD),
        phases=[
            _train("light-augment", 30, read_mb_s=700, cache_hit_pct=99.5, loader_cpu_pct=60),
            _train("heavy-augment", 90, "cpu-starved", gpu_util_pct=38, gpu_power_w=260,
                   read_mb_s=280, cache_hit_pct=99.5, loader_cpu_pct=99, job_cpu_pct=100,
                   cpu_psi_some_pct=40.0),
        ])


def healthy_cached() -> Scenario:
    """A job whose dataset fits in the page cache: the loaders read 800 MB/s, the disk
    stays idle, the GPUs are busy.  Label: healthy."""
    return Scenario(
        name="healthy-cached",
        description=healthy_cached.__doc__,
        disks=[_root(), DiskSpec("nvme1n1", "NVMe", mountpoint="/data")],
        job=JobSpec(dataset_disk="nvme1n1", workers=6, cmdline=_CMD),
        phases=[_train("train", 120, cache_hit_pct=100.0)])


def healthy_nvme_busy() -> Scenario:
    """The loaders stream 3 GB/s from an NVMe that shows %util 100, yet r_await stays at
    0.35 ms: an NVMe serves many requests at once, so %util says nothing of saturation.
    Label: healthy."""
    return Scenario(
        name="healthy-nvme-busy",
        description=healthy_nvme_busy.__doc__,
        disks=[_root(), DiskSpec("nvme1n1", "NVMe", mountpoint="/data",
                                 model="KIOXIA KCM6XRUL3T84")],
        job=JobSpec(dataset_disk="nvme1n1", workers=8, cmdline=_CMD),
        phases=[_train("stream", 120, read_mb_s=3000, cache_hit_pct=0, read_latency_ms=0.35,
                       disk_util_pct=100.0, loader_cpu_pct=45)])


def checkpoint_stalls() -> Scenario:
    """Every minute rank 0 saves a 30 GB checkpoint: 10 s of 3 GB/s write()s, the GPUs
    idle meanwhile, Dirty surges to ~10 GB and is written back at the disk's 2 GB/s.
    Labels: healthy, checkpoint-stall."""
    return Scenario(
        name="checkpoint-stalls",
        description=checkpoint_stalls.__doc__,
        disks=[_root(), DiskSpec("nvme1n1", "NVMe", mountpoint="/data"),
               DiskSpec("nvme2n1", "NVMe", mountpoint="/checkpoints", max_write_mb_s=2000)],
        job=JobSpec(dataset_disk="nvme1n1", checkpoint_disk="nvme2n1", workers=6, cmdline=_CMD),
        phases=[PhaseGroup(name="train-and-save", repeat=4, phases=[
            _train("train", 50),
            Phase("checkpoint", 10, label="checkpoint-stall", gpu_util_pct=3, gpu_power_w=110,
                  write_mb_s=3000, write_request_kb=512, loader_cpu_pct=2, job_cpu_pct=100,
                  io_psi_some_pct=20.0, io_psi_full_pct=5.0),
        ])])


def straggler() -> Scenario:
    """GPU 5 falls behind (45 % busy); the other seven wait for it in NCCL allreduce,
    which reads as 97 % utilization at 260 W instead of 600 W.  Labels: healthy,
    straggler."""
    return Scenario(
        name="straggler",
        description=straggler.__doc__,
        disks=[_root(), DiskSpec("nvme1n1", "NVMe", mountpoint="/data")],
        job=JobSpec(dataset_disk="nvme1n1", workers=6, cmdline=_CMD),
        phases=[
            _train("in-step", 30, cache_hit_pct=95),
            _train("straggler", 90, "straggler", cache_hit_pct=95, read_mb_s=500,
                   gpu_util_pct=97, gpu_power_w=260,
                   gpu_util_by_gpu={5: 45.0}, gpu_power_by_gpu={5: 430.0}),
        ])


def idle_other_disk_load() -> Scenario:
    """No job: the GPUs idle while an unrelated backup reads a hard disk flat out (util
    100 %, r_await 45 ms).  The disk is saturated but nothing starves.  Label: idle."""
    return Scenario(
        name="idle-other-disk-load",
        description=idle_other_disk_load.__doc__,
        disks=[_root(), DiskSpec("sda", "HDD", mountpoint="/archive", model="ATA ST16000NM001G")],
        others=[OtherProcess(9100, "rsync", "sda", cmdline="rsync -a /archive/ backup:/archive/",
                             read_mb_s=200, request_kb=1024, cpu_pct=25)],
        phases=[
            Phase("quiet", 30, label="idle", others={"rsync": OtherLoad(read_mb_s=0)}),
            Phase("backup", 90, label="idle",
                  disks={"sda": DiskState(read_latency_ms=45.0, util_pct=100.0)}),
        ])


def busy_unrelated_disk_load() -> Scenario:
    """A healthy job on NVMe while an unrelated tar saturates another disk (a hard disk,
    r_await 60 ms, util 100 %): the saturated disk is not the one the job reads.
    Label: healthy."""
    return Scenario(
        name="busy-unrelated-disk-load",
        description=busy_unrelated_disk_load.__doc__,
        disks=[_root(), DiskSpec("nvme1n1", "NVMe", mountpoint="/data"),
               DiskSpec("sda", "HDD", mountpoint="/backup")],
        job=JobSpec(dataset_disk="nvme1n1", workers=6, cmdline=_CMD),
        others=[OtherProcess(9200, "tar", "sda", cmdline="tar czf /backup/home.tgz /home",
                             read_mb_s=180, request_kb=1024, cpu_pct=95)],
        phases=[
            _train("train", 30, cache_hit_pct=50, others={"tar": OtherLoad(read_mb_s=0)}),
            _train("train-with-backup", 90, cache_hit_pct=50,
                   disks={"sda": DiskState(read_latency_ms=60.0, util_pct=100.0)}),
        ])


def demo() -> Scenario:
    """8 GPUs and 16 disks of every class, cycling forever: healthy -> disk-starved ->
    healthy -> checkpoint stall -> cpu-starved -> idle (the job exits, then starts again).
    Noise 5 %; a backup trickles onto a hard disk throughout."""
    disks = [_root()]
    disks += [DiskSpec(f"nvme{i}n1", "NVMe", mountpoint=f"/scratch{i}") for i in range(1, 8)]
    disks[2].mountpoint = "/checkpoints"
    disks += [DiskSpec(f"sd{c}", "SSD", mountpoint=f"/ssd-{c}") for c in "abcd"]
    disks[9].mountpoint = "/datasets"                       # sdb
    disks[9].partition = "sdb1"
    disks += [DiskSpec(f"sd{c}", "HDD", mountpoint=f"/archive-{c}") for c in "ef"]
    disks += [DiskSpec(f"vd{c}", "virtual", mountpoint=f"/mnt/vol-{c}") for c in "ab"]
    return Scenario(
        name="demo",
        description=demo.__doc__,
        noise_pct=5.0,
        host=HostSpec(ncpu=128, mem_total_gib=2048, cached_gib=900),
        disks=disks,
        job=JobSpec(dataset_disk="sdb", checkpoint_disk="nvme2n1", workers=6, cmdline=_CMD),
        others=[OtherProcess(9300, "restic", "sde", cmdline="restic backup /archive-e",
                             read_mb_s=10, request_kb=256, cpu_pct=30)],
        phases=[
            _train("healthy", 60, read_mb_s=800, cache_hit_pct=85),
            _train("disk-starved", 60, "disk-starved", gpu_util_pct=52, gpu_power_w=320,
                   read_mb_s=900, cache_hit_pct=8, read_latency_ms=9.0, queue_depth=36.0,
                   disk_util_pct=100.0, iowait_pct=7.0, loader_cpu_pct=12,
                   io_psi_some_pct=48.0, io_psi_full_pct=20.0),
            _train("healthy-again", 45, read_mb_s=800, cache_hit_pct=88),
            Phase("checkpoint", 15, label="checkpoint-stall", gpu_util_pct=3, gpu_power_w=110,
                  write_mb_s=3000, loader_cpu_pct=2, io_psi_some_pct=20.0, io_psi_full_pct=5.0),
            _train("cpu-starved", 60, "cpu-starved", gpu_util_pct=40, gpu_power_w=270,
                   read_mb_s=300, cache_hit_pct=99, loader_cpu_pct=99, cpu_psi_some_pct=35.0),
            Phase("idle", 30, label="idle", job_running=False),
        ])


_BUILDERS: dict[str, Callable[[], Scenario]] = {
    "disk-starved-sata": disk_starved_sata,
    "cpu-starved-cached": cpu_starved_cached,
    "healthy-cached": healthy_cached,
    "healthy-nvme-busy": healthy_nvme_busy,
    "checkpoint-stalls": checkpoint_stalls,
    "straggler": straggler,
    "idle-other-disk-load": idle_other_disk_load,
    "busy-unrelated-disk-load": busy_unrelated_disk_load,
    "demo": demo,
}


def build(name: str) -> Scenario:
    """A fresh built-in scenario.  Raises KeyError naming the known ones."""
    try:
        builder = _BUILDERS[name]
    except KeyError:
        raise KeyError(f"no built-in scenario {name!r}; known: {', '.join(_BUILDERS)}") from None
    return builder()
