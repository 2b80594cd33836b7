"""The dashboard's second round (issue 13), driven as a user would through Textual's pilot:
the I/O by process view, the disk table's cursor and a device's detail, the timeline's
stable rows and Home/End/Enter, every size, no GPU, NO_COLOR and the palette.  The node is
the simulator at a fixed seed, except where the real sampler is the point."""

from __future__ import annotations

from gpudisk_top.collect.gpu import GpuCollector
from gpudisk_top.collect.roots import Roots
from gpudisk_top.collect.sampler import Sampler
from gpudisk_top.sim import Simulator, builtin
from gpudisk_top.sim.fake_nvml import FakeNvml
from gpudisk_top.ui import theme
from gpudisk_top.ui.screens.device import DeviceDetail, DeviceScreen
from gpudisk_top.ui.widgets.disks import DiskPanel
from gpudisk_top.ui.widgets.ioprocs import IoProcPanel
from gpudisk_top.ui.widgets.timeline import Timeline
from gpudisk_top.ui.widgets.verdict import VerdictBanner
from apps import dashboard_app
from screen_text import screen_text, text_of
from ui_helpers import made_with_no_color


async def test_i_shows_who_loads_the_disks_in_the_timelines_place():
    app = dashboard_app(scenario="busy-unrelated-disk-load")
    async with app.run_test(size=(120, 40)) as pilot:
        app.advance(60)
        await pilot.press("i")
        await pilot.pause()
        panel = app.query_one(IoProcPanel)
        assert panel.display and not app.query_one(Timeline).display
        rows = text_of(panel).splitlines()
        head = next(i for i, line in enumerate(rows) if line.lstrip().startswith("PID"))
        # the unrelated tar reads the backup disk flat out: first, with all of its reads;
        # the job's workers follow, marked J
        first = rows[head + 1]
        assert "tar czf" in first and " sda " in first and " 100 " in first, first
        assert any(" J " in line and "train.py" in line for line in rows[head + 2:])
        await pilot.press("i")
        await pilot.pause()
        assert not panel.display and app.query_one(Timeline).display


async def test_the_io_view_makes_the_sampler_scan_more_often():
    sampler = Sampler(Roots(), gpu=GpuCollector(nvml=FakeNvml()))
    app = dashboard_app(sampler)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            app.advance(2)
            assert sampler.io_view is False
            await pilot.press("i")
            assert sampler.io_view is True
            await pilot.press("i")
            assert sampler.io_view is False
            await pilot.resize_terminal(200, 60)     # tall: the view shows under the timeline
            await pilot.pause()
            assert sampler.io_view is True and app.query_one(IoProcPanel).display
    finally:
        sampler.close()


async def test_the_disk_cursor_and_enter_open_a_devices_detail():
    app = dashboard_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.advance(100)           # a disk-starved episode on sdb
        await pilot.pause()
        await pilot.press("tab")   # the GPUs have the focus first; then the disks
        panel = app.query_one(DiskPanel)
        assert app.focused is panel and panel.cursor == "sdb"
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DeviceScreen) and app.screen.device == "sdb"
        detail = text_of(app.screen.query_one(DeviceDetail))
        assert "mounted at /datasets" in detail and "under it: sdb1" in detail
        for label in ("state", "%util", "r_await", "IOPS", "MB/s", "aqu-sz"):
            assert f"\n{label}" in detail, label
        assert "train.py" in detail           # the job's workers read its partition
        app.advance(1)                        # it stays live
        await pilot.pause()
        assert "train.py" in text_of(app.screen.query_one(DeviceDetail))
        await pilot.press("escape")
        await pilot.press("down")             # the cursor moves to the next disk
        await pilot.pause()
        assert panel.cursor != "sdb"
        assert panel.cursor == panel._order[1]


async def test_the_disk_header_stays_and_hidden_rows_are_counted():
    app = dashboard_app()
    async with app.run_test(size=(80, 24)) as pilot:
        app.advance(100)
        await pilot.press("tab")
        panel = app.query_one(DiskPanel)
        for _ in range(12):
            await pilot.press("down")
        await pilot.pause()
        shown = screen_text(app).splitlines()
        at = next(i for i, line in enumerate(shown) if line.lstrip(" >").startswith("Device"))
        assert "▼%util" in shown[at]          # the header, its sort column marked
        cursor_row = next(line for line in shown[at:] if line[1:].startswith(
            app.query_one(DiskPanel).cursor))
        assert cursor_row                      # scrolled to the cursor, header kept
        assert panel._scroll > 0


async def test_mountpoints_are_not_cut_to_a_slash_at_80_columns():
    # without a health column: where health is read, its status takes the room and the
    # mountpoint is cut to what is left, never dropped (test_health_ui)
    app = dashboard_app(Simulator(builtin("demo"), seed=0, health_interval_s=0))
    async with app.run_test(size=(80, 24)) as pilot:
        app.advance(100)
        await pilot.pause()
        model = app.shown.model
        rows = text_of(app.query_one(DiskPanel)).splitlines()[1:]
        checked = 0
        for row in rows:
            name = row[1:].split()[0]
            if name in model.devices:
                mounts = ",".join(model.devices[name].mountpoints)
                if len(mounts) <= 10:
                    assert row.rstrip().endswith(mounts), row
                    checked += 1
        assert checked >= 4


async def test_the_verdict_keeps_whole_clauses_and_its_advice_at_80x24():
    app = dashboard_app()
    async with app.run_test(size=(80, 24)) as pilot:
        app.advance(100)
        await pilot.pause()
        text = text_of(app.query_one(VerdictBanner))
        assert "… (e)" in text and "advice:" in text
        assert "sdb r_await" in text           # the evidence that matters is kept


async def test_timeline_rows_of_an_ended_episode_stay_and_home_end_enter_move_in_time():
    app = dashboard_app()
    async with app.run_test(size=(80, 24)) as pilot:
        app.advance(230)           # the disk-starved episode on sdb is over
        await pilot.pause()
        timeline = app.query_one(Timeline)
        assert "sdb" not in (app.shown.verdict.devices or [])
        for _ in range(12):        # 60 s back: its columns on screen again
            await pilot.press("left")
        await pilot.pause()
        rows = text_of(timeline).splitlines()
        disk_rows = [r for r in rows[2:-1] if not r.startswith("GPU")]
        assert disk_rows[0].startswith("sdb "), rows        # its row is first, not gone
        assert "back (← → End)" in rows[0]
        await pilot.press("end")
        assert timeline.back == 0
        await pilot.press("home")
        assert timeline.back == len(app.feed.history) - timeline._ncols
        await pilot.press("end")
        # Enter on an episode in the list: the timeline scrolls to its start
        await pilot.press("e")
        await pilot.pause()
        disk = next(ep for ep in app.feed.episodes if ep.state == "disk-starved")
        while app.screen.query_one("OptionList").highlighted_option.id != str(disk.id):
            await pilot.press("down")
        await pilot.press("enter")
        await pilot.pause()
        cols = list(app.feed.history.columns)
        end = len(cols) - timeline.back
        shown = cols[max(0, end - timeline._ncols):end]
        assert shown[0].wall_s <= disk.start_wall_s <= shown[-1].wall_s


async def test_below_80x24_the_screen_says_so():
    app = dashboard_app()
    async with app.run_test(size=(70, 20)) as pilot:
        app.advance(10)
        await pilot.pause()
        text = screen_text(app)
        assert "terminal too small: 70x20" in text and "80x24" in text
        assert "palettee" not in text and "Quit" not in text
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        text = screen_text(app)
        assert "too small" not in text and "q Quit" in text
        await pilot.press("i")                     # the I/O view too
        await pilot.resize_terminal(79, 24)
        await pilot.pause()
        text = screen_text(app)
        assert "terminal too small: 79x24" in text and "I/O by process" not in text


async def test_no_gpu_says_so_and_the_disks_come_first():
    sim = Simulator(builtin("idle-other-disk-load"), seed=0)
    sim.gpu_collector = GpuCollector(nvml=FakeNvml.missing_library())
    app = dashboard_app(sim)
    async with app.run_test(size=(120, 40)) as pilot:
        app.advance(20)
        await pilot.pause()
        banner = text_of(app.query_one(VerdictBanner))
        assert "NO GPUS" in banner and "libnvidia-ml.so.1" in banner
        assert "IDLE" not in banner and "no compute process" not in banner
        assert app.screen.has_class("no-gpu")
        # the reason once (in the banner), not again in the GPU panel (issue 23, item 11)
        assert screen_text(app).count("libnvidia-ml.so.1") == 1
        assert "GPUs: none readable" in screen_text(app)
        assert "live" not in screen_text(app)      # nothing claims the rest is "live"


async def test_no_color_emphasis_is_bold_and_reverse_and_goes_back():
    app = made_with_no_color(dashboard_app)
    async with app.run_test(size=(120, 40)) as pilot:
        app.advance(100)
        await pilot.pause()
        row = app.query_one(DiskPanel)._lines[1]   # sdb, the device the verdict names
        assert row[1][0].startswith("sdb")
        style = row[1][1]
        assert style.bold and style.reverse and style.color is None and style.bgcolor is None
        assert theme.STARVED_SHADE.color is None and theme.STARVED_SHADE.bgcolor is None
    colour = dashboard_app()
    async with colour.run_test(size=(120, 40)) as pilot:
        colour.advance(100)
        await pilot.pause()
        style = colour.query_one(DiskPanel)._lines[1][1][1]
        assert style.color is not None and style.color.name == "red"


async def test_the_palette_holds_only_this_tools_commands():
    app = dashboard_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.advance(3)
        await pilot.pause()
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "I/O by process" in titles and "Quit" in titles
        for stock in ("Maximize", "Keys", "Theme", "Screenshot", "Change theme"):
            assert stock not in titles
