"""The detector through the simulator: hysteresis, evidence, and the states' rules."""

from __future__ import annotations

import pytest

from gpudisk_top.verdict.detect import Detector, Thresholds, one_interval
from gpudisk_top.verdict.detect.states import gpu_ranges
from gpudisk_top.model.snapshot import Model
from gpudisk_top.sim import Simulator, builtin, loads_toml

DIPS = """
name = "dips"
noise_pct = 1
loop = false
[gpus]
count = 4
[[disks]]
name = "sda"
class = "SSD"
mountpoint = "/data"
[job]
dataset_disk = "sda"
workers = 4
[[phases]]
name = "warm"
duration_s = 20
label = "healthy"
gpu_util_pct = 96
read_mb_s = 200
[[phases]]
name = "blip"
duration_s = 2
label = "healthy"
gpu_util_pct = 40
read_mb_s = 900
read_latency_ms = 9
queue_depth = 32
disk_util_pct = 100
io_psi_some_pct = 40
[[phases]]
name = "calm"
duration_s = 20
label = "healthy"
gpu_util_pct = 96
read_mb_s = 200
[[phases]]
name = "starved"
duration_s = 20
label = "disk-starved"
gpu_util_pct = 40
read_mb_s = 900
read_latency_ms = 9
queue_depth = 32
disk_util_pct = 100
io_psi_some_pct = 40
[[phases]]
name = "after"
duration_s = 20
label = "healthy"
gpu_util_pct = 96
read_mb_s = 200
"""


def run(scenario, n=None, thresholds=None, seed=0):
    sim = Simulator(scenario, seed=seed)
    det = Detector(thresholds)
    n = n or len(sim.labels())
    out, last = [], sim.sample()
    for i in range(1, n + 1):
        s = sim.sample()
        model = Model.new(s, last)
        out.append((sim.label_at(i), model, det.feed(model)))
        last = s
    return det, out


def test_gpu_ranges():
    assert gpu_ranges([0, 1, 2, 3]) == "GPU 0-3"
    assert gpu_ranges([5]) == "GPU 5"
    assert gpu_ranges([0, 1, 2, 3, 6, 7, 5]) == "GPU 0-3,5-7"
    assert gpu_ranges([2, 0]) == "GPU 0,2"


def test_a_two_interval_dip_raises_nothing_and_a_long_one_opens_one_backdated_episode():
    det, out = run(loads_toml(DIPS))
    assert len(det.episodes) == 1
    ep = det.episodes[0]
    assert ep.state == "disk-starved" and not ep.open
    onset = next(m.wall_s - m.interval_s for lab, m, v in out if lab == "disk-starved")
    end = next(m.wall_s - m.interval_s for lab, m, v in out[43:] if lab == "healthy")
    assert ep.start_wall_s == pytest.approx(onset, abs=1.01)
    assert ep.end_wall_s == pytest.approx(end, abs=1.01)
    # the blip's intervals were starved on their own but never reported as such
    blip = [v for lab, m, v in out[19:23]]
    assert any(v.raw_state == "disk-starved" for v in blip)
    assert all(v.state == "healthy" for v in blip)
    # detection latency: reported by the third starved interval
    starved = [v.state for lab, m, v in out if lab == "disk-starved"]
    assert starved[:2] == ["healthy", "healthy"] and set(starved[2:]) == {"disk-starved"}


def test_enter_and_leave_are_configurable():
    t = Thresholds(enter_intervals=1, leave_intervals=1)
    det, out = run(loads_toml(DIPS), thresholds=t)
    assert [e.state for e in det.episodes] == ["disk-starved", "disk-starved"]  # the blip too


def test_disk_starved_evidence_names_device_numbers_and_processes():
    det, out = run(builtin("disk-starved-sata"))
    v = [v for lab, m, v in out if v.state == "disk-starved"][-1]
    assert v.devices == ["sda"] and v.gpus == list(range(8)) and len(v.processes) == 8
    assert v.reason.startswith("GPU 0-7 at ") and " for " in v.reason
    for needle in ("sda r_await", "baseline", "aqu-sz", "io pressure", "of its reads from"):
        assert needle in v.reason, v.reason
    assert "page cache" in v.advice
    ep = det.episodes[0]
    assert ep.state == "disk-starved" and ep.devices == ["sda"]


def test_nvme_at_full_util_with_low_latency_is_healthy():
    det, out = run(builtin("healthy-nvme-busy"))
    assert det.episodes == []
    m = out[-1][1]
    assert max(r.util_pct for r in m.disks.values()) >= 99
    assert {v.state for lab, m, v in out} == {"healthy"}


def test_idle_gpus_are_never_flagged_whatever_the_disks_do():
    det, out = run(builtin("idle-other-disk-load"))
    assert det.episodes == [] and {v.raw_state for _, _, v in out} == {"idle"}
    assert any(s.saturated for _, _, v in out for s in v.saturation.values())


def test_unrelated_saturated_disk_does_not_blame_a_busy_job():
    det, out = run(builtin("busy-unrelated-disk-load"))
    assert det.episodes == []


def test_straggler_names_the_slow_gpu():
    det, out = run(builtin("straggler"))
    assert [e.state for e in det.episodes] == ["straggler"]
    ep = det.episodes[0]
    assert ep.gpus == [5] and "NCCL" in ep.reason


def test_checkpoint_and_cpu_states():
    det, _ = run(builtin("checkpoint-stalls"))
    assert [e.state for e in det.episodes] == ["checkpoint-stall"] * 4
    assert all("Dirty+Writeback" in e.reason and "/checkpoints" in e.reason for e in det.episodes)
    det, _ = run(builtin("cpu-starved-cached"))
    assert [e.state for e in det.episodes] == ["cpu-starved"]
    assert "DataLoader workers" in det.episodes[0].reason
    assert "num_workers" in det.episodes[0].advice


def test_one_interval_is_the_raw_state():
    sim = Simulator(builtin("disk-starved-sata"), seed=0)
    samples = [sim.sample() for _ in range(40)]
    v = one_interval(Model.new(samples[-1], samples[-2]))
    assert v.state == v.raw_state == "disk-starved" and v.devices == ["sda"]


def test_a_cpu_starved_job_whose_cgroup_runs_out_of_quota_is_told_to_raise_its_limit():
    """cpu.max throttling (cgroup v2) is its own cause of cpu-starved, with its evidence and
    advice; under THROTTLED_PCT of the periods it is not (a real quota'd job on a cgroup v2
    host: tests/test_container.py)."""
    sim = Simulator(builtin("cpu-starved-cached"), seed=0)
    samples = [sim.sample() for _ in range(120)]
    models = [Model.new(b, a) for a, b in zip(samples, samples[1:])]
    starved = [m for m in models if one_interval(m).state == "cpu-starved"]
    assert starved
    m = starved[len(starved) // 2]
    assert one_interval(m).kind in ("own", "others")
    h = m.host
    h.cgroup_path, h.cgroup_pid = "/kubepods/pod1/train", 4242
    h.cgroup_throttled_pct, h.cgroup_cpu_limit_cpus, h.cgroup_cpu_used_cpus = 41.0, 4.0, 3.9
    h.cgroup_cpu_some_pct = 37.0
    v = one_interval(m)
    assert v.state == "cpu-starved" and v.kind == "throttled"
    assert ("the job's cgroup /kubepods/pod1/train: CPU throttled 41% of periods "
            "(limit 4.0 CPUs, used 3.9), cpu pressure 37%") in v.reason
    assert "raise its CPU limit" in v.advice and "limits.cpu" in v.advice
    h.cgroup_throttled_pct = 10.0
    assert one_interval(m).kind in ("own", "others")
