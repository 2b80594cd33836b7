"""The what-if's hand-made inputs that tests/test_whatif_model.py and bench/bench_whatif.py
share: latency-bound DataLoader workers on this machine's probed disk.  It imports only
the names every what-if has had (Pipeline, lat_ms), so bench_whatif.py --against an older
checkout builds the same inputs for it."""

from __future__ import annotations

from gpudisk_top.verdict.whatif import Pipeline, lat_ms

# this machine's virtio disk as `gpudisk-top probe` measured it (4 KiB random reads)
QD1, QD32 = 11316.0, 60255.0


def latency_bound(workers: int = 4, **kw) -> Pipeline:
    """DataLoader workers of 4 KiB O_DIRECT reads, blocked on them most of the time."""
    per_loader_reads = 0.55 / (lat_ms(Pipeline(0.3, qd1_iops=QD1, qd32_iops=QD32), workers * 0.55) / 1000)
    base = dict(gpu_util=0.3, loaders=workers, c=0.10, w=0.05, b=0.55, reads_s=per_loader_reads * workers,
                device="vda", qd1_iops=QD1, qd32_iops=QD32, trainer_c=0.02, trainer_w=0.0,
                cpus=2.0, job_cpu=0.5, direct=True)
    base.update(kw)
    p = Pipeline(**base)
    p.device_r_s = p.reads_s
    p.device_aqu = p.reads_s * p.b * p.loaders / p.reads_s
    return p
