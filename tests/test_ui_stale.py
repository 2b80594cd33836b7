"""The screen never waits on a slow NVML call: sampling runs on its own thread, keys are
still answered, NVML has a deadline so the disks go on being sampled, and the header says
NVML HUNG while a call hangs."""

from __future__ import annotations

import threading
import time

from gpudisk_top.collect.roots import Roots
from gpudisk_top.collect.sampler import Sampler
from gpudisk_top.sim.fake_nvml import FakeNvml
from gpudisk_top.ui.app import GpuDiskApp
from gpudisk_top.ui.widgets.disks import DiskPanel
from gpudisk_top.ui.widgets.header import HeaderBar
from gpudisk_top.collect.source import LIVE, Source
from screen_text import lines_of


class HangingNvml(FakeNvml):
    """The NVML fake, whose power reading can be made to hang like a wedged driver."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.release = threading.Event()
        self.release.set()

    def nvmlDeviceGetPowerUsage(self, handle):
        self.release.wait(30)
        return super().nvmlDeviceGetPowerUsage(handle)


def header_text(app) -> str:
    return lines_of(app.query_one(HeaderBar))[0]


async def test_a_hung_nvml_call_is_flagged_while_disks_and_keys_go_on():
    nvml = HangingNvml.with_gpus(2)
    nvml.set_state(0, util_pct=90, processes=[(1, 2**30)])
    app = GpuDiskApp(Sampler(Roots(), nvml=nvml), 0.5,
                     Source(LIVE, "test", LIVE, kernel="test"))
    async with app.run_test(size=(120, 40)) as pilot:
        deadline = time.monotonic() + 10
        while app.latest is None or app.latest.verdict is None:
            await pilot.pause(0.1)
            assert time.monotonic() < deadline
        nvml.release.clear()          # the next sample hangs inside NVML
        await pilot.pause(2.5)
        t0 = time.monotonic()
        await pilot.press("s")        # the screen still answers at once
        assert app.query_one(DiskPanel).sort == "r_await"
        assert time.monotonic() - t0 < 1.0
        await pilot.pause(1.2)        # the once-a-second staleness check has run
        assert "NVML HUNG" in header_text(app)
        assert "STALE" not in header_text(app)   # the disks are sampled on time all the same
        seq = app.latest.seq
        await pilot.pause(1.1)
        assert app.latest.seq >= seq + 1
        assert app.latest.model.gpu_status.startswith("unavailable: NVML has not answered")
        assert "nvmlDeviceGetPowerUsage on GPU" in app.latest.model.gpu_status
        nvml.release.set()
        await pilot.pause(1.5)
        assert "NVML HUNG" not in header_text(app)
        await pilot.press("q")
