"""A GPU collector on the stand-in NVML, both clocks moved together one interval at a time
(the throttle-share and MIG tests): each step is one sample and its GpuViews."""

from __future__ import annotations

from gpudisk_top.collect.gpu import GpuCollector
from gpudisk_top.model.gpu import gpu_views
from gpudisk_top.sim.fake_nvml import FakeNvml


class Run:
    """run.step(seconds) -> the GpuViews of the interval that ends `seconds` later."""

    def __init__(self, nvml: FakeNvml) -> None:
        self.nvml = nvml
        self.now_s = 1000.0
        self.collector = GpuCollector(nvml, clock=lambda: self.now_s, pcie_background=False)
        self.prev = self.collector.collect()

    def step(self, seconds: float = 1.0):
        self.now_s += seconds
        self.nvml.advance(seconds)
        snap = self.collector.collect()
        views = gpu_views(snap, self.prev, None)
        self.prev = snap
        return views
