"""The simulator: deterministic for a seed, and the rates the REAL model derives from its
raw counters (diskstats text through the parser, NVML through GpuCollector + FakeNvml)
are the ones the scenario's phases ask for."""

from __future__ import annotations

import math
import statistics
import time

import pytest

from gpudisk_top.collect.diskstats import MASK32, parse
from gpudisk_top.model.disk import RATE_FIELDS
from gpudisk_top.model.snapshot import Model
from gpudisk_top.sim import (BUILTIN_NAMES, LABELS, DiskSpec, JobSpec, Phase, Scenario,
                             ScenarioError, Simulator, builtin, loads_toml)

MB_KB = 1024.0


def run(sim: Simulator, n: int) -> list[Model]:
    """Models of samples 0..n-1 (model i is the interval ending at sample i)."""
    models, last = [], None
    for _ in range(n):
        sample = sim.sample()
        models.append(Model.new(sample, last))
        last = sample
    return models


def in_phase(sim: Simulator, models: list[Model], phase: str) -> list[Model]:
    """Models of whole intervals of `phase`, leaving out each stretch's first interval
    (whose rates may still carry the previous phase, e.g. GPU samples or Dirty)."""
    return [m for i, m in enumerate(models)
            if i >= 1 and sim.phase_at(i).name == phase and sim.phase_at(i - 1).name == phase]


def mean(values) -> float:
    return statistics.fmean(values)


# ---------------------------------------------------------------------------- determinism
def test_same_seed_gives_identical_text_samples_and_models():
    a, b = Simulator(builtin("demo"), seed=7), Simulator(builtin("demo"), seed=7)
    assert a.diskstats_text() == b.diskstats_text()
    last_a = last_b = None
    for _ in range(40):
        sa, sb = a.sample(), b.sample()
        assert a.diskstats_text() == b.diskstats_text()
        assert sa == sb
        ma, mb = Model.new(sa, last_a), Model.new(sb, last_b)
        assert ({k: v.as_dict() for k, v in ma.disks.items()}
                == {k: v.as_dict() for k, v in mb.disks.items()})
        assert [g.util_pct for g in ma.gpus] == [g.util_pct for g in mb.gpus]
        assert ma.host == mb.host and ma.gpu_proc_io == mb.gpu_proc_io
        last_a, last_b = sa, sb


def test_different_seed_gives_different_noise():
    a = Simulator(builtin("disk-starved-sata"), seed=1)
    b = Simulator(builtin("disk-starved-sata"), seed=2)
    ma, mb = run(a, 60), run(b, 60)
    assert a.diskstats_text() != b.diskstats_text()
    awaits_a = [m.disks["sda"].r_await_ms for m in ma[40:]]
    awaits_b = [m.disks["sda"].r_await_ms for m in mb[40:]]
    assert awaits_a != awaits_b
    # ...but the same phase: both near the phase's 8 ms
    assert abs(mean(awaits_a) - mean(awaits_b)) < 0.5


# ---------------------------------------------------------------------------- every built-in
@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_builtin_runs_120_samples_with_sane_rates(name):
    sim = Simulator(builtin(name), seed=3)
    models = run(sim, 120)
    for i, m in enumerate(models[1:], 1):
        assert m.interval_s == pytest.approx(1.0)
        assert set(m.disks) == set(m.devices)
        for dev, r in m.disks.items():
            for f in RATE_FIELDS:
                value = getattr(r, f)
                assert math.isfinite(value) and value >= 0, (name, i, dev, f, value)
            assert r.util_pct <= 100.0 + 1e-9
        for g in m.gpus:
            assert g.util_source == "samples" and 0 <= g.util_pct <= 100
            assert 0 < g.power_avg_w <= 700
        h = m.host
        total = h.cpu_user_pct + h.cpu_system_pct + h.cpu_iowait_pct + h.cpu_idle_pct
        assert total == pytest.approx(100.0, abs=0.5)
        for view in m.procs.values():
            assert view.rchar_kb_s is None or view.rchar_kb_s >= 0
        assert sim.label_at(i) in LABELS
    assert len(sim.labels()) == math.ceil(sim.scenario.duration_s)


def test_every_shipped_scenario_file_loads_validates_and_is_a_builtin():
    from importlib import resources

    from gpudisk_top.sim import load_toml

    folder = resources.files("gpudisk_top.sim") / "scenarios"
    files = sorted(f.name for f in folder.iterdir() if f.name.endswith(".toml"))
    assert files == sorted(f"{name}.toml" for name in BUILTIN_NAMES)
    for name in BUILTIN_NAMES:
        with resources.as_file(folder / f"{name}.toml") as path:
            sc = load_toml(str(path))
        sc.validate()
        assert sc.name == name and sc.timeline()
        assert len(sc.description) > 40  # the text --list-scenarios prints
        assert sc == builtin(name)


def test_builtin_returns_fresh_copies_and_rejects_unknown_names():
    a, b = builtin("straggler"), builtin("straggler")
    assert a == b and a is not b
    a.timeline()[0].gpu_util_pct = 1.0
    assert b.timeline()[0].gpu_util_pct != 1.0
    with pytest.raises(KeyError, match="known: disk-starved-sata"):
        builtin("no-such-scenario")


# ---------------------------------------------------------------------------- disks
def test_saturated_disk_gives_the_phase_latency_queue_and_util():
    sim = Simulator(builtin("disk-starved-sata"), seed=11)
    phase = next(p for p in sim.scenario.timeline() if p.name == "disk-starved")
    starved = in_phase(sim, run(sim, 120), "disk-starved")
    assert len(starved) >= 80
    for m in starved:
        sda = m.disks["sda"]
        assert sda.r_await_ms == pytest.approx(phase.read_latency_ms, rel=0.15)
        assert sda.aqu_sz == pytest.approx(phase.queue_depth, rel=0.20)
        assert sda.util_pct >= 92.0  # 100 % set, with noise
        # the loaders want 900 MB/s; a SATA SSD serves 540 and no more
        assert sda.rkb_s / MB_KB == pytest.approx(540, rel=0.05)
        assert sda.rareq_kb == pytest.approx(phase.read_request_kb, rel=0.05)
    assert mean(m.disks["sda"].r_await_ms for m in starved) == pytest.approx(8.0, rel=0.02)
    assert mean(m.disks["sda"].util_pct for m in starved) == pytest.approx(100.0, abs=1.5)


def test_unsaturated_disk_latency_follows_its_load():
    sim = Simulator(builtin("disk-starved-sata"), seed=11)
    cached = in_phase(sim, run(sim, 30), "cached-shard")
    sda = sim.scenario.disk("sda")
    for m in cached:
        r = m.disks["sda"]
        # 8 % of 900 MB/s misses the cache: ~72 MB/s of a 540 MB/s disk, lightly loaded
        assert r.rkb_s / MB_KB == pytest.approx(72, rel=0.15)
        assert sda.read_latency_ms < r.r_await_ms < 2 * sda.read_latency_ms
        assert r.util_pct < 60
        # %rrqm is the disk's merge share: merges / (merges + ios)
        assert r.rrqm_pct == pytest.approx(sda.read_merge_pct, abs=0.5)


def test_nvme_at_util_100_keeps_low_latency():
    sim = Simulator(builtin("healthy-nvme-busy"), seed=5)
    models = in_phase(sim, run(sim, 60), "stream")
    for m in models:
        r = m.disks["nvme1n1"]
        assert r.util_pct >= 92
        assert r.r_await_ms == pytest.approx(0.35, rel=0.15)
        assert r.rkb_s / MB_KB == pytest.approx(3000, rel=0.15)
        # Little's law: queue = IOPS x latency
        assert r.aqu_sz == pytest.approx(r.r_s * r.r_await_ms / 1000, rel=0.05)


def test_page_cache_phase_reads_rchar_not_disk():
    sim = Simulator(builtin("healthy-cached"), seed=2)
    models = in_phase(sim, run(sim, 40), "train")
    for m in models:
        assert m.disks["nvme1n1"].r_s < 2.0
        tree = m.gpu_proc_io[sim.job_pids[0]]
        total_rchar = sum(m.gpu_proc_io[pid]["rchar_kb_s"] for pid in sim.job_pids)
        total_read = sum(m.gpu_proc_io[pid]["read_kb_s"] for pid in sim.job_pids)
        assert total_rchar / MB_KB == pytest.approx(800, rel=0.15)
        assert total_read == 0
        assert tree["devices"] == ("nvme1n1",)
        assert tree["nprocs"] == 1 + 6


def test_ticks_wrap_at_2_32_without_breaking_rates():
    sim = Simulator(builtin("disk-starved-sata"), seed=4, ticks_start=2**32 - 3000)
    before = parse(sim.diskstats_text())["sda"]
    assert before.rq_ticks == 2**32 - 3000
    models = run(sim, 60)
    after = parse(sim.diskstats_text())["sda"]
    assert after.rq_ticks < before.rq_ticks and after.tot_ticks < before.tot_ticks  # wrapped
    assert all(v <= MASK32 for v in (after.rd_ticks, after.rq_ticks, after.tot_ticks))
    for m in in_phase(sim, models, "disk-starved"):
        assert m.disks["sda"].r_await_ms == pytest.approx(8.0, rel=0.15)
        assert m.disks["sda"].util_pct >= 92


def test_diskstats_text_is_kernel_format_and_devices_describe_it():
    sim = Simulator(builtin("demo"), seed=0)
    sim.sample()
    lines = sim.diskstats_text().splitlines()
    assert len(lines) == 16 + 2  # 16 disks, and the partitions nvme0n1p1 and sdb1
    assert all(len(line.split()) == 20 for line in lines)
    sample = sim.sample()
    assert set(sample.disks) == set(sample.devices)
    assert all(c.nfields == 20 for c in sample.disks.values())
    classes = {d.dev_class for d in sample.devices.values()}
    assert classes == {"NVMe", "SSD", "HDD", "virtual"}
    sdb1, sdb, sde = sample.devices["sdb1"], sample.devices["sdb"], sample.devices["sde"]
    assert (sdb1.kind, sdb1.parent, sdb1.mountpoints) == ("partition", "sdb", ("/datasets",))
    assert (sdb.kind, sdb.rotational, sdb.mountpoints) == ("disk", False, ("/datasets",))
    assert (sde.dev_class, sde.rotational) == ("HDD", True)
    assert (sample.disks["sdb"].major, sample.disks["sdb"].minor) == (8, 16)
    assert (sample.disks["sdb1"].major, sample.disks["sdb1"].minor) == (8, 17)
    # the partition carries its disk's I/O
    assert sample.disks["sdb1"].values() == sample.disks["sdb"].values()


def test_other_interval_lengths_give_the_same_rates():
    sim = Simulator(builtin("disk-starved-sata"), seed=8, interval_s=0.5)
    models = run(sim, 240)
    starved = in_phase(sim, models, "disk-starved")
    assert all(m.interval_s == pytest.approx(0.5) for m in models[1:])
    assert mean(m.disks["sda"].r_await_ms for m in starved) == pytest.approx(8.0, rel=0.05)
    assert mean(m.disks["sda"].rkb_s for m in starved) / MB_KB == pytest.approx(540, rel=0.05)
    assert mean(m.gpus[0].util_pct for m in starved) == pytest.approx(55, abs=3)



def test_changing_the_interval_keeps_the_scenario_clock_going():
    """The dashboard's + and - (Feed.step_interval sets the simulator's interval_s): the
    simulated clock goes on from where it was by the new interval, never jumps or runs
    back, and the scenario plays by that clock (disk-starved-sata starves from 30 s)."""
    from gpudisk_top.session.live import Feed

    sim = Simulator(builtin("disk-starved-sata"), seed=0)
    feed = Feed(sim, 1.0, on_update=lambda update: None)
    taken = []                                   # (model, the interval asked for it)

    def take(n):
        for _ in range(n):
            taken.append((feed.step().model, feed.interval_s))

    take(20)                                     # 20 s
    assert feed.step_interval(+1) == 2.0 and sim.interval_s == 2.0
    take(3)                                      # 26 s
    assert feed.step_interval(+1) == 3.0
    take(2)                                      # 32 s
    for _ in range(3):
        feed.step_interval(-1)
    assert sim.interval_s == 0.5
    take(8)                                      # 36 s
    feed.step_interval(+1)
    take(2)                                      # 38 s
    walls = [m.wall_s for m, _ in taken]
    assert [b - a for a, b in zip(walls, walls[1:])] == [dt for _, dt in taken[1:]]
    assert [m.interval_s for m, _ in taken[1:]] == pytest.approx([dt for _, dt in taken[1:]])
    assert sim.elapsed_s == 38.0 and walls[-1] == sim.start_wall_s + 38.0
    assert [c.wall_s for c in feed.history.columns] == walls       # the timeline's x-axis
    # the phase of each interval is the one playing at its midpoint, on the same clock
    for i, (m, dt) in enumerate(taken):
        mid_s = m.wall_s - dt / 2 - sim.start_wall_s
        assert sim.phase_at(i).name == ("cached-shard" if mid_s < 30 else "disk-starved"), i
    util = [statistics.fmean(g.util_pct for g in m.gpus) for m, _ in taken]
    assert all(u > 90 for u in util[1:23])       # up to 26 s: the cached shard
    assert all(u < 65 for u in util[-9:])        # 33.5 s on: starved


def test_an_interval_that_is_not_a_positive_number_is_refused_at_any_time():
    sim = Simulator(builtin("demo"))
    sim.sample()
    for bad in (0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="interval_s"):
            sim.interval_s = bad
    assert sim.interval_s == 1.0 and sim.sample().wall_s == sim.start_wall_s + 2.0


# ---------------------------------------------------------------------------- GPUs
def test_gpu_util_and_power_through_the_real_collector():
    sim = Simulator(builtin("disk-starved-sata"), seed=6)
    models = run(sim, 120)
    timeline = {p.name: p for p in sim.scenario.timeline()}
    for name in ("cached-shard", "disk-starved"):
        phase = timeline[name]
        ms = in_phase(sim, models, name)
        for m in ms:
            for g in m.gpus:
                assert g.util_pct == pytest.approx(phase.gpu_util_pct, abs=6)
        utils = [g.util_pct for m in ms for g in m.gpus]
        assert mean(utils) == pytest.approx(phase.gpu_util_pct, abs=1.5)
    starved = in_phase(sim, models, "disk-starved")
    assert mean(g.power_avg_w for m in starved for g in m.gpus) == pytest.approx(330, rel=0.03)


def test_gpu_processes_are_the_job_ranks_with_scenario_names():
    sim = Simulator(builtin("disk-starved-sata"), seed=0)
    m = run(sim, 3)[-1]
    job = sim.scenario.job
    assert sim.job_pids == [job.pid + r * (job.workers + 1) for r in range(8)]
    for g, pid in zip(m.gpus, sim.job_pids):
        (proc,) = g.processes
        assert (proc.pid, proc.local_pid, proc.mapped) == (pid, pid, True)
        assert (proc.name, proc.cmdline) == (job.name, job.cmdline)
        assert proc.gpu_mem_mib == job.gpu_mem_mib
        tree = m.gpu_proc_io[pid]
        assert tree["nprocs"] == job.workers + 1
    workers = [v for v in m.sample.procs.values() if v.ppid == sim.job_pids[0]]
    assert len(workers) == job.workers and all(w.root_pid == sim.job_pids[0] for w in workers)
    assert all(w.devices == ("sda",) for w in workers)


def test_straggler_one_gpu_low_others_busy_at_low_power():
    sim = Simulator(builtin("straggler"), seed=9)
    models = run(sim, 120)
    healthy, straggling = in_phase(sim, models, "in-step"), in_phase(sim, models, "straggler")
    for m in straggling:
        slow = m.gpus[5]
        assert slow.util_pct == pytest.approx(45, abs=6)
        for g in m.gpus[:5] + m.gpus[6:]:
            assert g.util_pct >= 90
            assert g.power_avg_w < 0.5 * g.power_limit_w  # NCCL spin: busy yet cool
        assert slow.power_avg_w > max(g.power_avg_w for g in m.gpus if g.index != 5)
    busy_power = mean(g.power_avg_w for m in healthy for g in m.gpus)
    spin_power = mean(g.power_avg_w for m in straggling for g in m.gpus if g.index != 5)
    assert busy_power > 2 * spin_power


def test_job_not_visible_from_our_pid_namespace():
    """A container without the host PID namespace: NVML still names the job's host PIDs,
    but they resolve to nothing and /proc has none of its processes; the others stay."""
    hidden = builtin("busy-unrelated-disk-load")
    hidden.job.visible = False
    sim, seen = Simulator(hidden, seed=2), Simulator(builtin("busy-unrelated-disk-load"), seed=2)
    assert seen.scenario.job.visible
    resolved = sim.gpu_collector._resolve_pid
    for pid in sim.job_pids + [sim.job_pids[0] + 1]:  # a rank and a worker
        assert resolved(pid) == (None, None, None, None, False)
    hidden_models, seen_models = run(sim, 40), run(seen, 40)
    for m, ref in zip(hidden_models[1:], seen_models[1:]):
        assert set(m.sample.procs) == {9200}
        assert len(ref.sample.procs) == 8 * (1 + 6) + 1
        for g, pid in zip(m.gpus, sim.job_pids):
            (proc,) = g.processes
            assert (proc.pid, proc.mapped) == (pid, False)
            assert (proc.local_pid, proc.ns_pid, proc.name, proc.cmdline) == (None,) * 4
            assert proc.gpu_mem_mib == hidden.job.gpu_mem_mib
            assert m.gpu_proc_io[pid]["nprocs"] == 0
        # the job still loads the node: same counters as the visible run, same seed
        assert m.sample.disks == ref.sample.disks and m.host == ref.host
        assert [g.util_pct for g in m.gpus] == [g.util_pct for g in ref.gpus]
        assert m.procs[9200] == ref.procs[9200]
    assert sim.diskstats_text() == seen.diskstats_text()


# ---------------------------------------------------------------------------- host, processes
def test_checkpoint_writes_and_dirty_surge():
    sim = Simulator(builtin("checkpoint-stalls"), seed=1)
    models = run(sim, 120)
    rank0 = sim.job_pids[0]
    ckpt = in_phase(sim, models, "checkpoint")
    assert len(ckpt) >= 16
    for m in ckpt:
        disk = m.disks["nvme2n1"]
        # write()s of 3 GB/s into the cache; the disk writes back at its 2 GB/s
        assert disk.wkb_s / MB_KB == pytest.approx(2000, rel=0.05)
        assert disk.wareq_kb == pytest.approx(512, rel=0.05)
        assert m.procs[rank0].wchar_kb_s / MB_KB == pytest.approx(3000, rel=0.15)
        assert m.gpus[0].util_pct < 10
    dirty_end = models[59].host.dirty_kb / MB_KB   # last interval of the first checkpoint
    dirty_before = models[49].host.dirty_kb / MB_KB
    assert dirty_before < 300 and dirty_end > 8000
    assert models[59].host.writeback_kb > 100 * MB_KB
    # after the checkpoint, training resumes while Dirty drains
    assert models[61].gpus[0].util_pct > 90 and models[61].disks["nvme2n1"].wkb_s > 1000 * MB_KB
    assert models[75].host.dirty_kb < 300 * MB_KB


def test_cpu_starved_workers_at_full_cpu_disk_idle():
    sim = Simulator(builtin("cpu-starved-cached"), seed=3)
    models = in_phase(sim, run(sim, 120), "heavy-augment")
    job = sim.scenario.job
    for m in models:
        workers = [v for v in m.procs.values() if v.pid not in sim.job_pids and v.root_pid]
        assert len(workers) == 8 * job.workers
        assert mean(w.cpu_pct for w in workers) == pytest.approx(99, abs=3)
        rchar_kb_s = sum(m.gpu_proc_io[pid]["rchar_kb_s"] for pid in sim.job_pids)
        assert m.disks["nvme1n1"].rkb_s < 0.02 * rchar_kb_s  # 99.5 % page cache hits
        assert m.disks["nvme1n1"].util_pct < 5
        assert m.host.psi_cpu_some_pct == pytest.approx(40, rel=0.15)
        assert mean(g.util_pct for g in m.gpus) == pytest.approx(38, abs=3)
    # host busy %: the processes' CPU over 48 CPUs, plus 2 % background
    busy = [100 - m.host.cpu_idle_pct - m.host.cpu_iowait_pct for m in models]
    assert mean(busy) == pytest.approx((8 * 100 + 8 * job.workers * 99) / 48 + 2, abs=1.5)


def test_unrelated_process_is_collected_and_saturates_its_disk():
    sim = Simulator(builtin("busy-unrelated-disk-load"), seed=4)
    models = run(sim, 120)
    quiet, backup = in_phase(sim, models, "train"), in_phase(sim, models, "train-with-backup")
    for m in backup:
        tar = m.procs[9200]
        assert (tar.root_pid, tar.name, tar.devices) == (None, "tar", ("sda",))
        assert tar.read_kb_s == pytest.approx(m.disks["sda"].rkb_s, rel=0.05)
        assert m.disks["sda"].r_await_ms == pytest.approx(60, rel=0.15)
        assert m.disks["sda"].util_pct >= 92
        assert all(g.util_pct > 90 for g in m.gpus)
        assert 9200 not in m.gpu_proc_io
    assert mean(m.disks["sda"].util_pct for m in backup) == pytest.approx(100, abs=1.5)
    assert all(m.procs[9200].read_kb_s == 0 for m in quiet)


def test_idle_scenario_has_no_gpu_processes():
    sim = Simulator(builtin("idle-other-disk-load"), seed=4)
    models = run(sim, 60)
    for m in models[1:]:
        assert all(g.util_pct == 0 and not g.processes for g in m.gpus)
        assert all(g.power_avg_w == pytest.approx(70, rel=0.1) for g in m.gpus)
        assert set(m.procs) == {9100}
    assert sim.labels() == ["idle"] * 120


def test_job_that_exits_and_restarts_in_the_demo():
    sim = Simulator(builtin("demo"), seed=0)
    models = run(sim, 280)
    idle = in_phase(sim, models, "idle")
    assert len(idle) >= 28
    for m in idle:
        assert not m.procs.keys() & set(sim.job_pids)
        assert all(not g.processes and g.util_pct == 0 for g in m.gpus)
    # the new job's counters start from zero: no rate for its first interval, then rates
    assert sim.phase_at(270).name == "healthy"
    first = models[270].procs[sim.job_pids[0]]
    assert first.cpu_pct is None
    assert models[270].sample.procs[sim.job_pids[0]].cpu_ticks < 300
    assert models[272].procs[sim.job_pids[0]].cpu_pct == pytest.approx(100, rel=0.2)


# ---------------------------------------------------------------------------- labels
def test_labels_follow_phases_and_loop():
    sim = Simulator(builtin("checkpoint-stalls"), seed=0)
    labels = sim.labels()
    assert len(labels) == 240
    assert labels.count("checkpoint-stall") == 40 and labels.count("healthy") == 200
    assert labels[49:51] == ["healthy", "checkpoint-stall"]
    assert sim.label_at(55) == sim.label_at(55 + 240) == "checkpoint-stall"
    assert Simulator(builtin("checkpoint-stalls"), interval_s=2.0).labels()[25] == "checkpoint-stall"


# ---------------------------------------------------------------------------- TOML
TOML = """
name = "toml-node"
noise_pct = 2
loop = false
[gpus]
count = 4
model = "NVIDIA A100-SXM4-80GB"
memory_mib = 81920
power_limit_w = 400
[host]
ncpu = 64
[[disks]]
name = "nvme0n1"
class = "NVMe"
mountpoint = "/"
[[disks]]
name = "sdb"
class = "HDD"
mountpoint = "/data"
[job]
dataset_disk = "sdb"
workers = 2
pid = 5000
[[others]]
pid = 9000
name = "fio"
disk = "nvme0n1"
read_mb_s = 100
[[phases]]
name = "warm"
duration_s = 5
label = "healthy"
gpu_util_pct = 90
read_mb_s = 100
cache_hit_pct = 100
[[phases]]
repeat = 2
[[phases.phases]]
name = "slow"
duration_s = 3
label = "disk-starved"
gpu_util_pct = 30
gpu_util_by_gpu = { 2 = 10 }
read_mb_s = 150
read_latency_ms = 40
disks.nvme0n1 = { util_pct = 100 }
others.fio = { read_mb_s = 0 }
[[phases.phases]]
name = "ckpt"
duration_s = 2
label = "checkpoint-stall"
write_mb_s = 500
"""


def test_toml_scenario_loads_and_runs():
    sc = loads_toml(TOML)
    assert [p.name for p in sc.timeline()] == ["warm", "slow", "ckpt", "slow", "ckpt"]
    assert sc.disk("sdb").dev_class == "HDD" and sc.disk("sdb").rotational
    sim = Simulator(sc, seed=1)
    assert sim.labels() == ["healthy"] * 5 + (["disk-starved"] * 3 + ["checkpoint-stall"] * 2) * 2
    models = run(sim, 20)
    slow = models[6]
    assert sim.phase_at(6).name == "slow" and len(slow.gpus) == 4
    assert slow.gpus[2].util_pct == pytest.approx(10, abs=4)
    assert slow.gpus[0].util_pct == pytest.approx(30, abs=6)
    assert slow.disks["sdb"].r_await_ms == pytest.approx(40, rel=0.1)
    assert slow.procs[9000].read_kb_s == 0
    assert models[2].procs[9000].read_kb_s / MB_KB == pytest.approx(100, rel=0.1)
    assert sim.phase_at(100).name == "ckpt"  # no loop: the last phase holds


@pytest.mark.parametrize("edit, message", [
    (("label = \"healthy\"", "label = \"fine\""), r"phases\[1\] 'warm': label 'fine' is not one of"),
    (("cache_hit_pct = 100", "cache_hit_pct = 100\nwirte_mb_s = 3"), r"phase.*unknown key 'wirte_mb_s'"),
    (("read_latency_ms = 40", "read_latency_ms = 40\nread_disk = \"sdz\""),
     r"read_disk: 'sdz' is not a disk of the scenario \(disks: nvme0n1, sdb\)"),
    (("workers = 2", "workers = \"two\""), r"job: workers: must be an integer"),
    (("class = \"HDD\"", "class = \"tape\""), r"class 'tape' is not one of NVMe, SSD, HDD, virtual"),
    (("gpu_util_by_gpu = { 2 = 10 }", "gpu_util_by_gpu = { 7 = 10 }"), r"gpu_util_by_gpu: GPU 7 does not exist"),
    (("repeat = 2", "repeat = 0"), r"phases\[2\] 'group': repeat must be >= 1"),
    (("name = \"ckpt\"\nduration_s = 2", "name = \"ckpt\"\nduration_s = -2"),
     r"phases\[2\].phases\[2\] 'ckpt': duration_s must be > 0"),
    (("others.fio = { read_mb_s = 0 }", "others.dd = { read_mb_s = 0 }"), r"no other process is named 'dd'"),
    (("dataset_disk = \"sdb\"\n", ""), r"job: missing key\(s\) dataset_disk"),
    (("[host]", "[host"), r"not valid TOML"),
])
def test_toml_errors_name_the_problem(edit, message):
    old, new = edit
    assert old in TOML
    with pytest.raises(ScenarioError, match=message) as info:
        loads_toml(TOML.replace(old, new, 1), source="node.toml")
    assert str(info.value).startswith("node.toml: ")


def test_python_scenarios_are_validated():
    disks = [DiskSpec("sda", "SSD")]
    with pytest.raises(ScenarioError, match=r"job.gpus: GPU 9 does not exist"):
        Simulator(Scenario("x", disks, [Phase("p", 1)], job=JobSpec("sda", gpus=(9,))))
    with pytest.raises(ScenarioError, match=r"phases\[1\] 'p': duration_s must be > 0"):
        Scenario("x", disks, [Phase("p", 0)]).validate()
    with pytest.raises(ScenarioError, match=r"the scenario has no job"):
        Scenario("x", disks, [Phase("p", 1, read_mb_s=10)]).validate()
    with pytest.raises(ValueError, match="interval_s"):
        Simulator(Scenario("x", disks, [Phase("p", 1)]), interval_s=0)


# ---------------------------------------------------------------------------- cost
def test_demo_sample_cost(capsys):
    sim = Simulator(builtin("demo"), seed=0)
    sample = sim.sample()
    assert len(sample.gpu.gpus) == 8 and len(sample.devices) == 18
    n = 200
    t0 = time.perf_counter()
    for _ in range(n):
        sim.sample()
    per_sample_ms = (time.perf_counter() - t0) / n * 1000
    t0 = time.perf_counter()
    for _ in range(n):
        parse(sim.diskstats_text())
    parse_ms = (time.perf_counter() - t0) / n * 1000
    with capsys.disabled():
        print(f"\n  demo (8 GPUs x 16 disks): sample() {per_sample_ms:.2f} ms, "
              f"parse(diskstats_text()) {parse_ms:.3f} ms")


def test_load_toml_reads_a_file(tmp_path):
    from gpudisk_top.sim import load_toml

    path = tmp_path / "node.toml"
    path.write_text(TOML)
    assert load_toml(str(path)).name == "toml-node"
    path.write_text(TOML.replace("duration_s = 5", "duration_s = \"five\""))
    with pytest.raises(ScenarioError, match=r"node.toml: phases\[1\] 'warm': duration_s: must be a number"):
        load_toml(str(path))


def test_job_visible_false_from_toml():
    sc = loads_toml(TOML.replace("pid = 5000", "pid = 5000\nvisible = false", 1))
    assert sc.job.visible is False
    m = run(Simulator(sc, seed=1), 3)[-1]
    assert set(m.sample.procs) == {9000}
    assert all(not p.mapped for g in m.gpus for p in g.processes)
    with pytest.raises(ScenarioError, match=r"job: visible: must be true or false"):
        loads_toml(TOML.replace("pid = 5000", "pid = 5000\nvisible = \"no\"", 1))


def test_other_process_cpu_follows_the_phase():
    sc = loads_toml(TOML.replace("others.fio = { read_mb_s = 0 }",
                                 "others.fio = { read_mb_s = 0, cpu_pct = 3200 }", 1))
    sim = Simulator(sc, seed=1)
    models = run(sim, 10)
    assert sim.phase_at(7).name == "slow" and sim.phase_at(3).name == "warm"
    assert models[7].procs[9000].cpu_pct == pytest.approx(3200, rel=0.1)
    assert models[3].procs[9000].cpu_pct == pytest.approx(10, abs=3)  # its default
    busy = 100 - models[7].host.cpu_idle_pct - models[7].host.cpu_iowait_pct
    job = 4 * 100 + 4 * 2 * 30   # 4 ranks at 100 %, 2 workers each at 30 %
    assert busy == pytest.approx((3200 + job) / 64 + 2, abs=3)
    with pytest.raises(ScenarioError, match=r"'slow': others.fio: cpu_pct must be >= 0"):
        loads_toml(TOML.replace("others.fio = { read_mb_s = 0 }",
                                "others.fio = { cpu_pct = -5 }", 1))
