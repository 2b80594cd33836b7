"""What one screen shows agrees with itself and with what a user expects of a top-like
tool (issue 38, item 6): a paused screen shows one time, the timeline included; `p` shows
process rows at 80x24; Ctrl+C quits the dashboard, replay and the fleet screen; the first
screen of a node without a readable GPU says how to see the tool work; the timeline's
disk rows come in the disk table's order; a partition of the blamed disk is marked with it,
not as another saturated device.  Through Textual's Pilot, on the simulated node (the
fleet's on a real socket nobody answers)."""

from __future__ import annotations

import re
import socket
import time

import pytest

from gpudisk_top.collect.gpu import GpuCollector
from gpudisk_top.collect.roots import Roots
from gpudisk_top.collect.sampler import Sampler
from gpudisk_top.collect.source import live_source
from gpudisk_top.fleet.promapi import PromClient
from gpudisk_top.fleet.source import FleetSource
from gpudisk_top.record.header import make_header
from gpudisk_top.record.writer import Recorder
from gpudisk_top.sim import Simulator, builtin
from gpudisk_top.sim.fake_nvml import FakeNvml
from gpudisk_top.ui.fleet_app import FleetApp
from gpudisk_top.ui.format import clock
from gpudisk_top.ui.widgets.disks import DiskPanel
from gpudisk_top.ui.widgets.header import HeaderBar
from gpudisk_top.ui.widgets.timeline import Timeline
from apps import ORIGIN, dashboard_app, replay_screen_app
from screen_text import lines_of, screen_lines, screen_text, text_of
from slack import slack


def axis_end(app) -> str:
    """The newest time on the timeline's axis ('00:01:30')."""
    return lines_of(app.query_one(Timeline))[-1].rstrip().rsplit("|", 1)[-1]


def disk_rows(app) -> list[str]:
    """The names of the timeline's disk rows, top to bottom, every one (scrolled through)."""
    timeline = app.query_one(Timeline)
    names = {app.shown.model.devices[n].display_name for n in app.shown.model.disks}
    return [line.split()[0] for line in lines_of(timeline)[2:-1] if line.split()[0] in names]


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    path = tmp_path_factory.mktemp("rec") / "demo.gdtrec"
    sim = Simulator(builtin("demo"), seed=0)
    rec = Recorder(str(path), make_header(ORIGIN, 1.0))
    for _ in range(120):
        rec.append(sim.sample())
    rec.close("test")
    return str(path)


# ------------------------------------------------------------------ pause
async def test_pause_freezes_the_timeline_with_the_panels():
    app = dashboard_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.advance(30)
        await pilot.pause()
        await pilot.press("space")
        frozen = lines_of(app.query_one(Timeline))
        shown_at = clock(app.shown.model.wall_s)
        assert axis_end(app) == shown_at
        app.advance(12)                        # sampling goes on behind the paused screen
        await pilot.pause()
        # what redraws the timeline: its metric round (m five times comes back to
        # %util), scrolling back in time and forward again
        for key in ("m",) * 5 + ("left", "right"):
            await pilot.press(key)
        await pilot.pause()
        assert lines_of(app.query_one(Timeline)) == frozen
        assert axis_end(app) == shown_at and shown_at in text_of(app.query_one(HeaderBar))
        await pilot.press("space")            # resumed: the newest sample, on every panel
        await pilot.pause()
        now = clock(app.latest.model.wall_s)
        assert now != shown_at and axis_end(app) == now
        assert now in text_of(app.query_one(HeaderBar))


async def test_pause_stops_at_the_sample_shown_not_one_the_sampler_added_since():
    app = dashboard_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.advance(30)
        await pilot.pause()
        shown_at = clock(app.shown.model.wall_s)
        app.feed.step()     # the sampler's next sample, in the history, not yet on screen
        await pilot.press("space")
        await pilot.press("m", "m", "m", "m", "m")
        await pilot.pause()
        assert axis_end(app) == shown_at


async def test_replay_paused_stays_put(recording):
    app = replay_screen_app(recording, ORIGIN)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("3", "space")        # play at x60
        deadline = time.monotonic() + 10 * slack()
        while app.feed.index < 20 and time.monotonic() < deadline:
            await pilot.pause(0.1)
        await pilot.press("space")
        await pilot.pause()
        assert not app.playing and app.feed.index >= 20
        frozen, at = lines_of(app.query_one(Timeline)), axis_end(app)
        assert at == clock(app.shown.model.wall_s)
        await pilot.pause(0.5)
        await pilot.press("m", "m", "m", "m", "m")
        await pilot.pause()
        assert lines_of(app.query_one(Timeline)) == frozen


# ------------------------------------------------------------------ p at 80x24
PROCESS_ROW = re.compile(r"^\s+\d+\s+\d+ python\s")


async def test_p_shows_process_rows_at_80x24():
    app = dashboard_app()
    async with app.run_test(size=(80, 24)) as pilot:
        app.advance(20)
        await pilot.pause()
        await pilot.press("p")
        await pilot.pause()
        lines = screen_lines(app)
        rows = [line for line in lines if PROCESS_ROW.match(line)]
        assert len(rows) >= 3, "\n".join(lines)
        assert rows[0].split()[:2] == ["0", "4242"]
        # each row whole: where its loaders' time goes and the devices it reads
        assert all(line.rstrip().endswith(("sdb1", "nvme2n1")) for line in rows), rows
        # the GPUs in one line above them: their mean and the lowest
        assert any("GPU 0-7: mean" in line and "lowest" in line for line in lines)
        assert "Device" in screen_text(app) and "Timeline" in screen_text(app)
        await pilot.press("p")                 # and back: the cells
        await pilot.pause()
        assert not any(PROCESS_ROW.match(line) for line in screen_lines(app))
        assert "GPU 0-7: mean" not in screen_text(app)


# ------------------------------------------------------------------ Ctrl+C
async def test_ctrl_c_quits_the_dashboard_even_from_a_prompt():
    app = dashboard_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.advance(3)
        await pilot.press("slash")            # the filter prompt: its input has the focus
        await pilot.pause()
        await pilot.press("ctrl+c")
        await pilot.pause()
    assert app.return_code == 0 and not app.is_running


async def test_ctrl_c_quits_replay(recording):
    app = replay_screen_app(recording, ORIGIN)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+c")
        await pilot.pause()
    assert app.return_code == 0 and not app.is_running


async def test_ctrl_c_quits_the_fleet_screen():
    with socket.socket() as s:                # a port nobody answers on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = FleetApp(FleetSource(PromClient(f"http://127.0.0.1:{port}", timeout_s=0.5)),
                   interval_s=1.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")     # from its help screen too
        await pilot.pause()
        await pilot.press("ctrl+c")
        await pilot.pause()
    assert app.return_code == 0 and not app.is_running


# ------------------------------------------------------------------ no GPU
async def test_no_gpu_first_screen_says_how_to_see_it_work():
    # this machine, live, with no NVIDIA driver library: the first screen a new user sees
    sampler = Sampler(Roots(), gpu=GpuCollector(nvml=FakeNvml.missing_library()))
    app = dashboard_app(sampler, origin=live_source())
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            app.advance(2)
            await pilot.pause()
            text = screen_text(app)
            assert "NO GPUS" in text and "gpudisk-top --demo" in text, text
    finally:
        app.close_feed()


async def test_no_gpu_in_the_demo_does_not_point_to_the_demo():
    sim = Simulator(builtin("idle-other-disk-load"), seed=0)
    sim.gpu_collector = GpuCollector(nvml=FakeNvml.missing_library())
    app = dashboard_app(sim)
    async with app.run_test(size=(80, 24)) as pilot:
        app.advance(5)
        await pilot.pause()
        assert "NO GPUS" in screen_text(app) and "--demo" not in screen_text(app)


# ------------------------------------------------------------------ one disk order
async def test_the_timeline_draws_its_disks_in_the_tables_order():
    app = dashboard_app()
    async with app.run_test(size=(160, 70)) as pilot:
        app.advance(90)                        # sdb blamed: first in both
        await pilot.pause()
        table = app.query_one(DiskPanel)
        for sort in ("util", "r_await", "iops", "throughput", "name"):
            if sort != "util":
                await pilot.press("s")
            await pilot.pause()
            assert table.sort == sort
            order = [line[1:].split()[0] for line in lines_of(table)[1:]]
            rows = disk_rows(app)
            assert order[0] == "sdb" and len(rows) >= 8
            assert rows == order[:len(rows)], (sort, rows, order)


# ------------------------------------------------------------------ marks
async def test_a_partition_of_the_blamed_disk_is_marked_with_it():
    app = dashboard_app()
    async with app.run_test(size=(160, 60)) as pilot:
        app.advance(90)
        await pilot.pause()
        assert app.shown.verdict.devices == ["sdb"]
        assert app.shown.verdict.saturation["sdb1"].saturated     # the old `!`
        await pilot.press("a")                 # partitions too
        await pilot.pause()
        marks = {line[1:].split()[0]: line[0] for line in lines_of(app.query_one(DiskPanel))[1:]}
        assert marks["sdb"] == "▲" and marks["sdb1"] == "△", marks
        assert marks["nvme0n1p1"] == " "       # another disk's partition: no mark
