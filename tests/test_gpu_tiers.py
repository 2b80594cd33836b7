"""Issue 40: a GPU's busy figure from the best tier it gives (GPM SM activity, else
utilization.gpu), and NVML calls that cost what they must (PCIe throughput off the
sampling path), on the stand-in NVML's GPM API as nvidia-ml-py's."""

from __future__ import annotations

import math
import subprocess
import sys
import threading
import time

import pynvml
import pytest

from gpudisk_top.collect import gpu_pcie
from gpudisk_top.collect.gpu import GpuCollector
from gpudisk_top.collect.roots import Roots
from gpudisk_top.collect.sampler import Sampler
from gpudisk_top.model.gpu import BUSY_GPM, BUSY_UTILIZATION, gpu_as_json, gpu_views
from gpudisk_top.sim.fake_nvml import FakeGpu, FakeNvml
from gpudisk_top.verdict.step import Stepper
from slack import slack

T0_US = 1_767_225_600_000_000


class Clock:
    """The collector's monotonic clock, moved by the test with the fake's."""

    def __init__(self, nvml: FakeNvml) -> None:
        self.now_s = 1000.0
        self.nvml = nvml

    def __call__(self) -> float:
        return self.now_s

    def step(self, seconds: float) -> None:
        self.now_s += seconds
        self.nvml.advance(seconds)


def views(collector: GpuCollector, clock: Clock, seconds: float = 1.0, prev=None):
    clock.step(seconds)
    snap = collector.collect()
    return snap, gpu_views(snap, prev, None)


# ---------------------------------------------------------------------------- the stand-in
def test_the_stand_ins_gpm_api_is_nvidia_ml_pys():
    nvml = FakeNvml(gpus=[FakeGpu(gpm_supported=True, util_pct=100, sm_active_pct=3,
                                  tensor_active_pct=40, pcie_rx_kb_s=2048), FakeGpu()],
                    start_us=T0_US)
    nvml.nvmlInit()
    hopper, older = (nvml.nvmlDeviceGetHandleByIndex(i) for i in range(2))
    support = nvml.nvmlGpmQueryDeviceSupport(hopper)
    assert isinstance(support, pynvml.c_nvmlGpmSupport_t) and support.isSupportedDevice == 1
    assert nvml.nvmlGpmQueryDeviceSupport(older).isSupportedDevice == 0
    first, second = nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()
    assert isinstance(first, pynvml.c_nvmlGpmSample_t)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlGpmSampleGet(older, first)
    nvml.nvmlGpmSampleGet(hopper, first)
    nvml.advance(1.0)
    nvml.nvmlGpmSampleGet(hopper, second)
    request = pynvml.c_nvmlGpmMetricsGet_t()
    request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
    ids = (pynvml.NVML_GPM_METRIC_SM_UTIL, pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL,
           pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL, pynvml.NVML_GPM_METRIC_PCIE_RX_PER_SEC,
           pynvml.NVML_GPM_METRIC_NVLINK_L0_RX_PER_SEC)
    request.numMetrics = len(ids)
    request.sample1, request.sample2 = first, second
    for i, metric in enumerate(ids):
        request.metrics[i].metricId = metric
    assert nvml.nvmlGpmMetricsGet(request) is request
    got = [(request.metrics[i].nvmlReturn, round(request.metrics[i].value, 6)) for i in range(len(ids))]
    assert got[:4] == [(0, 3.0), (0, 100.0), (0, 40.0), (0, 2.0)]     # MiB/s
    assert got[4][0] == pynvml.NVML_ERROR_NOT_SUPPORTED
    request.version = 2
    with pytest.raises(pynvml.NVMLError_ArgumentVersionMismatch):
        nvml.nvmlGpmMetricsGet(request)
    nvml.nvmlGpmSampleFree(first)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlGpmSampleGet(hopper, first)   # freed


# ---------------------------------------------------------------------------- PCIe
def test_a_pcie_throughput_call_that_never_returns_does_not_hold_the_sampler():
    """nvmlDeviceGetPcieThroughput measures 20 ms inside the driver, two a GPU: the
    sampler no longer waits for it (the old collector called it inline, and hung here)."""
    nvml = FakeNvml.with_gpus(2)
    nvml.set_state(0, pcie_rx_kb_s=5000, pcie_tx_kb_s=7)
    nvml.hang("nvmlDeviceGetPcieThroughput")
    collector = GpuCollector(nvml)
    done = threading.Event()
    out = []
    threading.Thread(target=lambda: (out.append(collector.collect()), done.set()), daemon=True).start()
    try:
        assert done.wait(5 * slack()), "the sampler waited on nvmlDeviceGetPcieThroughput"
        g0 = out[0].gpus[0]
        assert (g0.pcie_rx_kb_s, g0.pcie_tx_kb_s, g0.pcie_age_s) == (None, None, None)
        assert g0.power_mw == 70_000   # the rest of the GPU is read
    finally:
        nvml.unhang()
    assert collector.wait_pcie(5 * slack())
    g0 = collector.collect().gpus[0]
    assert (g0.pcie_rx_kb_s, g0.pcie_tx_kb_s) == (5000, 7) and g0.pcie_age_s is not None
    collector.close()


def test_pcie_throughput_is_asked_at_most_every_5_s_and_carries_its_age():
    nvml = FakeNvml.with_gpus(2)
    clock = Clock(nvml)
    collector = GpuCollector(nvml, clock=clock)
    ages = []
    for _ in range(12):
        clock.step(1.0)
        ages.append(collector.collect().gpus[1].pcie_age_s)
        assert collector.wait_pcie(5 * slack())
    collector.close()
    # asked at 1, 6 and 11 s: two calls (RX, TX) each time, per GPU
    assert nvml.call_count("nvmlDeviceGetPcieThroughput", 1) == 6 and gpu_pcie.REFRESH_S == 5.0
    assert ages == [None, 1.0, 2.0, 3.0, 4.0, 5.0, 1.0, 2.0, 3.0, 4.0, 5.0, 1.0]


# ---------------------------------------------------------------------------- tiers
def test_gpm_sm_activity_is_the_busy_figure_where_the_gpu_gives_it():
    """util 100%, SM activity 3% (a one-thread kernel) on a Hopper GPU; an older GPU beside
    it keeps utilization.gpu."""
    nvml = FakeNvml(gpus=[FakeGpu(gpm_supported=True, util_pct=100, sm_active_pct=3,
                                  sm_occupancy_pct=1, tensor_active_pct=0, dram_bw_pct=2,
                                  pcie_rx_kb_s=4096, pcie_tx_kb_s=1024),
                          FakeGpu(util_pct=100)], start_us=T0_US)
    clock = Clock(nvml)
    collector = GpuCollector(nvml, clock=clock)
    snap, _ = views(collector, clock)
    snap, (hopper, older) = views(collector, clock, prev=snap)
    assert (hopper.busy_source, hopper.util_pct, hopper.gpu_util_pct) == (BUSY_GPM, pytest.approx(3.0), 100.0)
    assert (hopper.sm_occupancy_pct, hopper.tensor_active_pct, hopper.dram_bw_pct) == \
        (pytest.approx(1.0), 0.0, pytest.approx(2.0))
    assert (hopper.pcie_rx_kb_s, hopper.pcie_tx_kb_s, hopper.pcie_age_s) == (4096, 1024, 0.0)
    assert (older.busy_source, older.util_pct, older.sm_active_pct) == (BUSY_UTILIZATION, 100.0, None)
    doc = gpu_as_json(hopper)
    assert (doc["busy_source"], doc["gpu_util_pct"], round(doc["util_pct"], 6)) == ("gpm-sm-active", 100.0, 3.0)
    assert gpu_as_json(older)["busy_source"] == "utilization"
    # the Hopper GPU's PCIe comes from GPM: after the first interval, no PcieThroughput
    before = nvml.call_count("nvmlDeviceGetPcieThroughput", 0)
    for _ in range(10):
        snap, _ = views(collector, clock, prev=snap)
    assert nvml.call_count("nvmlDeviceGetPcieThroughput", 0) == before
    collector.close()


def test_bad_gpm_answers_fall_back_on_that_gpu_alone_and_say_so():
    """NaN, negative, above 100, NotSupported and NoPermission mid-run, samples too close:
    that GPU's busy figure is utilization.gpu for it, with the reason; the others are
    unaffected."""
    sm = pynvml.NVML_GPM_METRIC_SM_UTIL
    nvml = FakeNvml(gpus=[FakeGpu(gpm_supported=True, util_pct=90, sm_active_pct=40) for _ in range(6)],
                    start_us=T0_US)
    nvml.set_state(0, gpm_values={sm: math.nan})
    nvml.set_state(1, gpm_values={sm: -5.0})
    nvml.set_state(2, gpm_values={sm: 150.0, pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 20.0})
    clock = Clock(nvml)
    collector = GpuCollector(nvml, clock=clock)
    snap, _ = views(collector, clock)
    snap, got = views(collector, clock, prev=snap)
    for g in got[:3]:
        assert (g.busy_source, g.util_pct, g.gpu_util_pct) == (BUSY_UTILIZATION, 90.0, 90.0), g.index
        assert g.busy_note and "GPM SM activity" in g.busy_note and "utilization.gpu" in g.busy_note
    assert "nan" in got[0].busy_note and "-5.0" in got[1].busy_note and "150.0" in got[2].busy_note
    assert got[2].tensor_active_pct == 20.0       # the other figures of the call stand
    for g in got[3:]:
        assert (g.busy_source, round(g.util_pct, 6), g.busy_note) == (BUSY_GPM, 40.0, None)

    nvml.set_state(3, errors={"nvmlGpmSampleGet": pynvml.NVMLError_NotSupported})
    nvml.set_state(4, errors={"nvmlGpmMetricsGet": pynvml.NVMLError_NoPermission})
    for _ in range(2):  # and it stays off
        snap, got = views(collector, clock, prev=snap)
        for g in got[3:5]:
            assert (g.busy_source, g.util_pct) == (BUSY_UTILIZATION, 90.0)
            assert "GPM stopped" in g.busy_note and not g.lost and g.error is None
        assert (got[5].busy_source, round(got[5].util_pct, 6)) == (BUSY_GPM, 40.0)

    snap, got = views(collector, clock, seconds=0.05, prev=snap)   # too soon
    assert got[5].busy_source == BUSY_UTILIZATION and "50 ms apart" in got[5].busy_note
    snap, got = views(collector, clock, prev=snap)
    assert got[5].busy_source == BUSY_GPM
    collector.close()


def test_a_gpu_without_gpm_or_an_older_nvidia_ml_py_reads_utilization():
    nvml = FakeNvml(gpus=[FakeGpu(gpm_supported=True, util_pct=50), FakeGpu(util_pct=50)],
                    missing={"nvmlGpmQueryDeviceSupport"}, start_us=T0_US)
    nvml.gpus[1].unsupported = {"nvmlGpmQueryDeviceSupport"}
    clock = Clock(nvml)
    collector = GpuCollector(nvml, clock=clock)
    snap, _ = views(collector, clock)
    _, got = views(collector, clock, prev=snap)
    assert [(g.busy_source, g.util_pct, g.busy_note) for g in got] == [(BUSY_UTILIZATION, 50.0, None)] * 2
    assert nvml.call_count("nvmlGpmSampleGet") == 0
    collector.close()


def test_high_utilization_with_idle_sms_is_not_healthy():
    """The verdict judges the figure shown: a job whose utilization.gpu reads 100% while
    GPM says 3% of the SMs work is not healthy (it was, judged on utilization.gpu)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        seen = {}
        for sm in (None, 3.0):    # None: SM activity follows utilization, 100%
            nvml = FakeNvml(gpus=[FakeGpu(gpm_supported=True, util_pct=100, sm_active_pct=sm,
                                          processes=[(proc.pid, 2**30)], mem_used_bytes=2**30)
                                  for _ in range(2)])
            sampler = Sampler(Roots(), gpu=GpuCollector(nvml=nvml))
            stepper = Stepper()
            states = seen[sm] = []
            try:
                # an episode opens after the detector's enter_intervals low intervals: up
                # to 12 samples, however slowly a loaded machine takes them
                for _ in range(12):
                    nvml.advance_to(time.time())
                    model, verdict = stepper.step(sampler.sample())[:2]
                    states += [j.state for j in verdict.jobs]
                    if states[-1] != "healthy":
                        break
                    time.sleep(0.15)   # GPM samples >= 100 ms apart
            finally:
                sampler.close()
            assert [g.busy_source for g in model.gpus] == [BUSY_GPM] * 2
            assert [g.gpu_util_pct for g in model.gpus] == [100.0] * 2
        assert seen[None] == ["healthy"] * 12
        assert seen[3.0][-1] != "healthy", seen[3.0]
    finally:
        proc.kill()
        proc.wait()


# ---------------------------------------------------------------------------- recordings
def test_a_recording_keeps_each_gpus_tier_in_rows_and_blocks(tmp_path):
    """A replay says what live mode said: the GPM figures, the fallback's reason and the
    PCIe figure's age come back from rows and from blocks alike."""
    import dataclasses

    from recording_helpers import sim_samples, write_recording

    from gpudisk_top.record import Recording
    from gpudisk_top.session.replay import Replay

    samples = []
    for i, s in enumerate(sim_samples("demo", 12)):
        g0, g1, *rest = s.gpu.gpus
        g0 = dataclasses.replace(g0, gpm_sm_active_pct=10.0 + i, gpm_sm_occupancy_pct=5.0,
                                 gpm_tensor_active_pct=0.5, gpm_dram_bw_pct=7.25, pcie_age_s=2.0)
        g1 = dataclasses.replace(g1, gpm_note="GPM samples 50 ms apart (< 100 ms): utilization.gpu this interval")
        samples.append(dataclasses.replace(s, gpu=dataclasses.replace(s.gpu, gpus=[g0, g1, *rest])))
    live = Stepper()
    want = [live.step(s)[0] for s in samples]
    for segment in (600, 4):        # rows only; blocks of 4 samples and rows after them
        path = write_recording(tmp_path / f"g{segment}.gdtrec", samples, segment_samples=segment)
        with Recording.open(path) as rec:
            got = [m for m, _ in Replay(rec, warmup_s=None).models()]
        assert len(got) == len(want)
        for m_got, m_want in zip(got[1:], want[1:]):
            g0, g1 = m_got.gpus[:2]
            assert (g0.busy_source, g0.util_pct, g0.sm_occupancy_pct, g0.dram_bw_pct, g0.pcie_age_s) == \
                (BUSY_GPM, m_want.gpus[0].util_pct, 5.0, 7.25, 2.0)
            assert g0.gpu_util_pct == m_want.gpus[0].gpu_util_pct
            assert (g1.busy_source, g1.busy_note) == (BUSY_UTILIZATION, m_want.gpus[1].busy_note)
            assert g1.busy_note.startswith("GPM samples 50 ms apart")


def test_once_says_each_gpus_busy_source_in_text_and_json():
    import json

    from model_factory import gpu, model

    from gpudisk_top.model.select import DeviceFilter
    from gpudisk_top.output.once import render_json, render_text

    m = model(1, gpus=[gpu(0, util_pct=3.0, busy_source=BUSY_GPM, sm_active_pct=3.0, gpu_util_pct=100.0),
                       gpu(1, util_pct=88.0, gpu_util_pct=88.0,
                           busy_note="GPM stopped (NoPermission): utilization.gpu from now on"),
                       gpu(2, util_pct=77.0, gpu_util_pct=77.0)])
    text = render_text(m, DeviceFilter())
    rows = {line.split()[0]: line for line in text.splitlines() if line[:3].strip().isdigit()}
    assert rows["0"].endswith(" gpm-sm-active") and rows["1"].endswith(" utilization")
    assert "  GPU 0: SM activity 3.0%, utilization.gpu 100.0%" in text.splitlines()
    assert "  GPU 1: GPM stopped (NoPermission): utilization.gpu from now on" in text.splitlines()
    assert not any(line.startswith("  GPU 2:") for line in text.splitlines())
    doc = json.loads(render_json(m, DeviceFilter()))
    assert [(g["busy_source"], g["util_pct"], g["gpu_util_pct"]) for g in doc["gpus"]] == \
        [("gpm-sm-active", 3.0, 100.0), ("utilization", 88.0, 88.0), ("utilization", 77.0, 77.0)]
    assert doc["gpus"][1]["busy_note"].startswith("GPM stopped")


def test_a_transient_error_to_the_gpm_query_is_asked_again():
    nvml = FakeNvml(gpus=[FakeGpu(gpm_supported=True, util_pct=90, sm_active_pct=30)], start_us=T0_US)
    nvml.set_state(0, errors={"nvmlGpmQueryDeviceSupport": pynvml.NVMLError_Timeout})
    clock = Clock(nvml)
    collector = GpuCollector(nvml, clock=clock)
    snap, [g] = views(collector, clock)
    assert (g.busy_source, g.util_pct) == (BUSY_UTILIZATION, 90.0)
    nvml.set_state(0, errors={})
    for _ in range(2):
        snap, [g] = views(collector, clock, prev=snap)
    assert (g.busy_source, round(g.util_pct, 6)) == (BUSY_GPM, 30.0)
    assert nvml.call_count("nvmlGpmQueryDeviceSupport") == 2
    collector.close()


@pytest.mark.parametrize("raw", [
    dict(util_samples=[(1_000_000, 40.0), (1_500_000, 60.0), (2_500_000, 99.0)]),  # in, out
    dict(util_samples=None, util_now_pct=37.0),                # no sampling: the rate now
    dict(util_samples=[(1_500_000, 97.0)], gpm_sm_active_pct=9.0),          # GPM's tier
    dict(util_samples=[(1_500_000, 97.0)], gpm_sm_active_pct=math.nan,      # GPM unusable
         gpm_note="first sample"),
    dict(util_samples=[(1_500_000, 97.0)], gpm_sm_active_pct=140.0),        # out of range
    dict(),                                                    # nothing readable
], ids=["samples", "rate-now", "gpm", "gpm-nan", "gpm-beyond", "none"])
def test_the_cadences_busy_figure_is_the_views(raw):
    """verdict/detail.py asks model/gpu.py gpu_busy_pct before the processes are read:
    it is gpu_view's util_pct (the figure every verdict reads) on every tier's path."""
    from gpudisk_top.collect.sample import GpuRaw
    from gpudisk_top.model.gpu import gpu_busy_pct, gpu_view

    g = GpuRaw(index=0, **raw)
    window_us = (1_000_000, 2_000_000)
    view = gpu_view(g, None, window_us).util_pct
    busy = gpu_busy_pct(g, window_us)
    assert busy == view or (busy is None and view is None) or (math.isnan(busy) and math.isnan(view))
