"""Issue 40: a GPU in MIG mode reads GPM per GPU instance (nvmlGpmMigSampleGet), its busy
figure their SM activity weighted by SMs; a layout that changes mid-run makes that GPU
fall back to the next tier for the interval and say so, no other GPU affected.  On the
stand-in NVML's MIG API as nvidia-ml-py's."""

from __future__ import annotations

import dataclasses
import json

import pynvml
import pytest

from gpudisk_top.model.gpu import BUSY_GPM, BUSY_UTILIZATION, gpu_as_json
from gpudisk_top.sim.fake_nvml import FakeGpu, FakeNvml
from gpudisk_top.sim.fake_nvml_mig import FakeMigHandle

from gpu_run import Run

T0_US = 1_767_225_600_000_000


def mig_gpu(**kw) -> FakeGpu:
    return FakeGpu(gpm_supported=True, util_pct=90, sm_active_pct=60, mig_gpu_instances={1, 2},
                   mig_sm_count={1: 16, 2: 48}, mig_sm_active_pct={1: 80.0, 2: 20.0}, **kw)


def test_the_stand_ins_mig_api_is_nvidia_ml_pys():
    nvml = FakeNvml(gpus=[mig_gpu(), FakeGpu()], start_us=T0_US)
    nvml.nvmlInit()
    h, plain = (nvml.nvmlDeviceGetHandleByIndex(i) for i in range(2))
    assert nvml.nvmlDeviceGetMigMode(h) == [pynvml.NVML_DEVICE_MIG_ENABLE] * 2
    assert nvml.nvmlDeviceGetMigMode(plain) == [pynvml.NVML_DEVICE_MIG_DISABLE] * 2
    assert nvml.nvmlDeviceGetMaxMigDeviceCount(h) == 7
    handles = [nvml.nvmlDeviceGetMigDeviceHandleByIndex(h, i) for i in range(2)]
    with pytest.raises(pynvml.NVMLError_NotFound):
        nvml.nvmlDeviceGetMigDeviceHandleByIndex(h, 2)
    assert [nvml.nvmlDeviceGetGpuInstanceId(m) for m in handles] == [1, 2]
    attrs = nvml.nvmlDeviceGetAttributes(handles[1])
    assert isinstance(attrs, pynvml.c_nvmlDeviceAttributes) and attrs.multiprocessorCount == 48
    # each instance's GPM is its own
    first, second = nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()
    nvml.nvmlGpmMigSampleGet(h, 1, first)
    nvml.advance(1.0)
    nvml.nvmlGpmMigSampleGet(h, 1, second)
    request = pynvml.c_nvmlGpmMetricsGet_t()
    request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
    request.numMetrics = 1
    request.sample1, request.sample2 = first, second
    request.metrics[0].metricId = pynvml.NVML_GPM_METRIC_SM_UTIL
    nvml.nvmlGpmMetricsGet(request)
    assert round(request.metrics[0].value, 6) == 80.0
    # an instance destroyed: its handle and its GPM are gone
    nvml.set_state(0, mig_gpu_instances={1})
    with pytest.raises(pynvml.NVMLError_NotFound):
        nvml.nvmlDeviceGetGpuInstanceId(FakeMigHandle(0, 2))
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlGpmMigSampleGet(h, 2, first)


def test_a_mig_gpus_busy_figure_is_its_instances_weighted_by_sms():
    nvml = FakeNvml(gpus=[mig_gpu(), FakeGpu(gpm_supported=True, util_pct=70, sm_active_pct=30)],
                    start_us=T0_US)
    run = Run(nvml)
    mig, plain = run.step()
    assert mig.busy_source == BUSY_GPM
    assert mig.util_pct == pytest.approx((16 * 80 + 48 * 20) / 64)        # 35%, not 60%
    assert mig.mig_instances == [{"gpu_instance_id": 1, "sm_count": 16, "sm_active_pct": pytest.approx(80.0)},
                                 {"gpu_instance_id": 2, "sm_count": 48, "sm_active_pct": pytest.approx(20.0)}]
    assert (plain.busy_source, round(plain.util_pct, 6), plain.mig_instances) == (BUSY_GPM, 30.0, None)
    # the mode is asked once a GPU, the layout every 5 s, the whole-GPU sample never on MIG
    for _ in range(5):
        mig, plain = run.step()
    assert nvml.call_count("nvmlDeviceGetMigMode", 0) == 1
    assert nvml.call_count("nvmlDeviceGetMaxMigDeviceCount", 0) == 2
    assert nvml.call_count("nvmlGpmSampleGet", 0) == 0 and nvml.call_count("nvmlGpmMigSampleGet", 0) == 14
    doc = gpu_as_json(mig)
    assert [m["sm_count"] for m in doc["mig_instances"]] == [16, 48]
    run.collector.close()


def test_a_layout_that_changes_falls_back_for_the_interval_on_that_gpu_alone():
    nvml = FakeNvml(gpus=[mig_gpu(), FakeGpu(gpm_supported=True, util_pct=70, sm_active_pct=30)],
                    start_us=T0_US)
    run = Run(nvml)
    run.step()
    # GPU instance 2 destroyed mid-run: its sample fails this interval
    nvml.set_state(0, mig_gpu_instances={1})
    mig, plain = run.step()
    assert (mig.busy_source, mig.util_pct) == (BUSY_UTILIZATION, 90.0)
    assert mig.busy_note == "MIG layout changed (GPU instance 2 not answering): utilization.gpu this interval"
    assert (plain.busy_source, round(plain.util_pct, 6)) == (BUSY_GPM, 30.0)   # unaffected
    # the layout is read again at once: one instance now, its pair starts again
    mig, _ = run.step()
    assert mig.busy_note.startswith("MIG layout changed (GPU instances 1,2 -> 1)")
    assert [m["gpu_instance_id"] for m in mig.mig_instances] == [1]
    mig, _ = run.step()
    assert mig.busy_note.startswith("GPM: first sample")
    mig, _ = run.step()
    assert (mig.busy_source, round(mig.util_pct, 6), mig.busy_note) == (BUSY_GPM, 80.0, None)
    # an instance created: seen at the next layout read (every 5 s), that interval falls back
    nvml.set_state(0, mig_gpu_instances={1, 3}, mig_sm_active_pct={1: 80.0, 3: 50.0})
    notes = []
    for _ in range(6):
        mig, plain = run.step()
        notes.append(mig.busy_note)
        assert plain.busy_source == BUSY_GPM
    assert "MIG layout changed (GPU instances 1 -> 1,3): utilization.gpu this interval" in notes
    assert (mig.busy_source, round(mig.util_pct, 6)) == (BUSY_GPM, round((16 * 80 + 16 * 50) / 32, 6))
    run.collector.close()


def test_once_and_a_recording_show_each_gpu_instance(tmp_path):
    from model_factory import gpu, model
    from recording_helpers import sim_samples, write_recording

    from gpudisk_top.model.select import DeviceFilter
    from gpudisk_top.output.once import render_json, render_text
    from gpudisk_top.record import Recording
    from gpudisk_top.session.replay import Replay

    inst = [{"gpu_instance_id": 1, "sm_count": 16, "sm_active_pct": 80.0},
            {"gpu_instance_id": 2, "sm_count": 48, "sm_active_pct": None}]
    m = model(1, gpus=[gpu(0, busy_source=BUSY_GPM, util_pct=35.0, mig_instances=inst)])
    lines = render_text(m, DeviceFilter()).splitlines()
    assert "  GPU 0: MIG, SM activity per GPU instance: 1 (16 SMs) 80.0%, 2 (48 SMs) n/a%" in lines
    assert json.loads(render_json(m, DeviceFilter()))["gpus"][0]["mig_instances"] == inst
    samples = []
    for i, s in enumerate(sim_samples("demo", 6)):
        g0, *rest = s.gpu.gpus
        g0 = dataclasses.replace(g0, gpm_sm_active_pct=35.0, gpm_mig=[[1, 16, 80.0 - i], [2, 48, 20.0], "junk"])
        samples.append(dataclasses.replace(s, gpu=dataclasses.replace(s.gpu, gpus=[g0, *rest])))
    for segment in (600, 4):
        path = write_recording(tmp_path / f"m{segment}.gdtrec", samples, segment_samples=segment)
        with Recording.open(path) as rec:
            got = [m for m, _ in Replay(rec, warmup_s=None).models()]
        for i, m in enumerate(got):
            assert m.gpus[0].mig_instances == [
                {"gpu_instance_id": 1, "sm_count": 16, "sm_active_pct": 80.0 - i},
                {"gpu_instance_id": 2, "sm_count": 48, "sm_active_pct": 20.0}]
            assert m.gpus[1].mig_instances is None
