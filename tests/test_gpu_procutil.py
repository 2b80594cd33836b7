"""Issue 40: per-process GPU use, NVML's per-process samples
(nvmlDeviceGetProcessesUtilizationInfo, else nvmlDeviceGetProcessUtilization) asked at
the process list's cadence with the newest timestamp seen, shown with their age, on the
stand-in NVML's API as nvidia-ml-py's."""

from __future__ import annotations

import dataclasses
import json

import pynvml
import pytest

from gpudisk_top.collect.gpu import GpuCollector
from gpudisk_top.model.gpu import gpu_as_json, gpu_views
from gpudisk_top.sim.fake_nvml import FakeGpu, FakeNvml

T0_US = 1_767_225_600_000_000


class Run:
    """A collector on the stand-in, both clocks moved together one interval at a time;
    views over the fake's own window, so that ages are the fake's."""

    def __init__(self, nvml: FakeNvml) -> None:
        self.nvml = nvml
        self.now_s = 1000.0
        self.collector = GpuCollector(nvml, clock=lambda: self.now_s, pcie_background=False)
        self.prev = self.collector.collect()
        self.prev_us = nvml.now_us

    def step(self, seconds: float = 1.0):
        self.now_s += seconds
        self.nvml.advance(seconds)
        snap = self.collector.collect()
        views = gpu_views(snap, self.prev, (self.prev_us, self.nvml.now_us))
        self.prev, self.prev_us = snap, self.nvml.now_us
        return views


def procs(view) -> dict:
    return {p.pid: (p.sm_util_pct, p.mem_util_pct, p.util_age_s) for p in view.processes}


def test_the_stand_ins_process_utilization_is_nvidia_ml_pys():
    nvml = FakeNvml(gpus=[FakeGpu(processes=[(4242, 2**30), (4343, 2**30)],
                                  process_util={4242: (70, 20), 4343: (0, 0)})], start_us=T0_US)
    nvml.nvmlInit()
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotFound):
        nvml.nvmlDeviceGetProcessesUtilizationInfo(h, 0)    # nothing sampled yet
    nvml.advance(1.0)
    [s] = nvml.nvmlDeviceGetProcessesUtilizationInfo(h, 0)   # an idle process has no sample
    assert isinstance(s, pynvml.c_nvmlProcessUtilizationInfo_v1_t)
    assert (s.pid, s.smUtil, s.memUtil, s.timeStamp) == (4242, 70, 20, T0_US + 1_000_000)
    with pytest.raises(pynvml.NVMLError_NotFound):
        nvml.nvmlDeviceGetProcessesUtilizationInfo(h, s.timeStamp)   # none newer
    [old] = nvml.nvmlDeviceGetProcessUtilization(h, 0)
    assert isinstance(old, pynvml.c_nvmlProcessUtilizationSample_t)
    assert (old.pid, old.smUtil, old.memUtil, old.timeStamp) == (4242, 70, 20, s.timeStamp)


def test_each_process_gets_its_sampled_use_with_its_age_at_the_process_lists_cadence():
    nvml = FakeNvml(gpus=[FakeGpu(util_pct=80, processes=[(4242, 2**30), (4343, 2**30)],
                                  process_util={4242: (70, 20)}),
                          FakeGpu(processes=[(5000, 2**30)], process_util={5000: (5, 1)})],
                    start_us=T0_US)
    run = Run(nvml)
    seen = []
    for _ in range(12):
        g0, g1 = run.step()
        seen.append(procs(g0)[4242])
    # asked with the process list (at the start, then every 5 s): none sampled at the
    # start; from the read at 5 s, 70% with its age, new again at 10 s
    assert seen[:4] == [(None, None, None)] * 4
    assert seen[4:] == [(70.0, 20.0, float(age)) for age in (0, 1, 2, 3, 4, 0, 1, 2)]
    assert procs(g0)[4343] == (None, None, None)           # never ran: n/a, not 0
    assert procs(g1)[5000][:2] == (5.0, 1.0)
    assert nvml.call_count("nvmlDeviceGetComputeRunningProcesses", 0) == 3
    assert nvml.call_count("nvmlDeviceGetProcessesUtilizationInfo", 0) == 3
    # a process that stops using the GPU keeps its last sample, which ages: at 15 s the
    # one stamped at 12 s (newer than the 10 s read's), at 20 s none newer
    nvml.set_state(0, process_util={})
    later = [procs(run.step()[0])[4242] for _ in range(9)]
    assert later == [(70.0, 20.0, float(age)) for age in (3, 4, 3, 4, 5, 6, 7, 8, 9)]
    doc = gpu_as_json(g0)["processes"][0]
    assert (doc["sm_util_pct"], doc["mem_util_pct"], doc["util_age_s"]) == (70.0, 20.0, 2.0)
    run.collector.close()


@pytest.mark.parametrize("older", [
    dict(missing={"nvmlDeviceGetProcessesUtilizationInfo"}),      # an older nvidia-ml-py
    dict(unsupported={"nvmlDeviceGetProcessesUtilizationInfo"}),  # a driver before 550
])
def test_the_older_call_where_the_newer_is_missing_and_na_where_neither_is(older):
    gpu = FakeGpu(processes=[(4242, 2**30)], process_util={4242: (33, 3)},
                  unsupported=older.get("unsupported", set()))
    nvml = FakeNvml(gpus=[gpu], start_us=T0_US, missing=older.get("missing", set()))
    run = Run(nvml)
    for _ in range(6):
        [g] = run.step()
    assert procs(g)[4242][:2] == (33.0, 3.0)
    assert nvml.call_count("nvmlDeviceGetProcessUtilization") >= 1
    assert nvml.call_count("nvmlDeviceGetProcessesUtilizationInfo") <= 1
    run.collector.close()
    # neither: n/a, and not asked again
    nvml = FakeNvml(gpus=[FakeGpu(processes=[(4242, 2**30)], process_util={4242: (33, 3)},
                                  unsupported={"nvmlDeviceGetProcessesUtilizationInfo",
                                               "nvmlDeviceGetProcessUtilization"})], start_us=T0_US)
    run = Run(nvml)
    for _ in range(12):
        [g] = run.step()
    assert procs(g)[4242] == (None, None, None)
    assert nvml.call_count("nvmlDeviceGetProcessUtilization") == 1
    run.collector.close()


def test_a_lost_gpu_or_a_bad_sample_never_takes_the_process_list_with_it():
    nvml = FakeNvml(gpus=[FakeGpu(processes=[(4242, 2**30)], process_util={4242: (150, 20)}),
                          FakeGpu(processes=[(5000, 2**30)],
                                  errors={"nvmlDeviceGetProcessesUtilizationInfo": pynvml.NVMLError_Timeout})],
                    start_us=T0_US)
    run = Run(nvml)
    for _ in range(6):
        g0, g1 = run.step()
    assert procs(g0)[4242][:2] == (None, 20.0)          # 150% is not a share: n/a
    assert procs(g1)[5000] == (None, None, None) and g1.processes[0].gpu_mem_mib == 1024.0
    run.collector.close()


def test_once_shows_each_processs_sampled_use_with_its_age():
    from model_factory import gpu, model

    from gpudisk_top.model.gpu import GpuProcessView
    from gpudisk_top.model.select import DeviceFilter
    from gpudisk_top.output.once import render_json, render_text

    def proc(pid, sm, age):
        return GpuProcessView(pid=pid, local_pid=pid, ns_pid=pid, name="python", cmdline="python t.py",
                              gpu_mem_mib=1000.0, mapped=True, sm_util_pct=sm, mem_util_pct=sm and 10.0,
                              util_age_s=age)

    m = model(1, gpus=[gpu(0, processes=[proc(4242, 71.0, 2.4), proc(4343, None, None)])])
    lines = render_text(m, DeviceFilter()).splitlines()
    row = next(line for line in lines if " 4242 " in line)
    assert " 71@2s " in row
    assert " n/a " in next(line for line in lines if " 4343 " in line)
    assert any(line.startswith("  sm%: NVML's last sample of the process") for line in lines)
    doc = json.loads(render_json(m, DeviceFilter()))
    p0, p1 = doc["gpus"][0]["processes"]
    assert (p0["sm_util_pct"], p0["mem_util_pct"], p0["util_age_s"]) == (71.0, 10.0, 2.4)
    assert (p1["sm_util_pct"], p1["util_age_s"]) == (None, None)
    # no process with a sample: no column (a GPU that gives none would fill it with n/a)
    m = model(1, gpus=[gpu(0, processes=[proc(4343, None, None)])])
    lines = render_text(m, DeviceFilter()).splitlines()
    assert not any(" sm% " in line or line.startswith("  sm%:") for line in lines)


def test_a_recording_keeps_each_processs_sample_and_old_ones_read_na(tmp_path):
    from recording_helpers import ROOT, sim_samples, write_recording

    from gpudisk_top.record import Recording
    from gpudisk_top.session.replay import Replay

    samples = []
    for i, s in enumerate(sim_samples("demo", 8)):
        g0, *rest = s.gpu.gpus
        ps = [dataclasses.replace(p, sm_util_pct=40 + i, mem_util_pct=7,
                                  util_at_us=int(s.wall_s * 1e6) - 1_500_000) for p in g0.processes]
        g0 = dataclasses.replace(g0, processes=ps)
        samples.append(dataclasses.replace(s, gpu=dataclasses.replace(s.gpu, gpus=[g0, *rest])))
    assert samples[0].gpu.gpus[0].processes
    for segment in (600, 4):
        path = write_recording(tmp_path / f"p{segment}.gdtrec", samples, segment_samples=segment)
        with Recording.open(path) as rec:
            got = [m for m, _ in Replay(rec, warmup_s=None).models()]
        for i, m in enumerate(got[1:], 1):
            p = m.gpus[0].processes[0]
            assert (p.sm_util_pct, p.mem_util_pct, p.util_age_s) == (40.0 + i, 7.0, pytest.approx(1.5))
    with Recording.open(f"{ROOT}/tests/fixtures/recordings/v2-demo-simulated.gdtrec") as rec:
        models = [m for m, _ in Replay(rec, warmup_s=None).models()][:3]
    ps = [p for m in models for g in m.gpus for p in g.processes]
    assert ps and all((p.sm_util_pct, p.util_age_s) == (None, None) for p in ps)
