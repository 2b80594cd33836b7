"""Every key of the dashboard, through Textual's Pilot, on the simulated node."""

from __future__ import annotations

import pytest

from gpudisk_top.ui.screens.episodes import EpisodesScreen
from gpudisk_top.ui.screens.filter import FilterScreen
from gpudisk_top.ui.screens.help import HelpScreen
from gpudisk_top.ui.widgets.disks import DiskPanel
from gpudisk_top.ui.widgets.gpus import GpuPanel
from gpudisk_top.ui.widgets.header import HeaderBar
from gpudisk_top.ui.widgets.timeline import Timeline
from apps import dashboard_app
from screen_text import text_of


async def started(app, pilot, samples=100):
    app.advance(samples)
    await pilot.pause()


async def test_quit():
    app = dashboard_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot, 3)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0 and not app.is_running


async def test_space_pauses_the_screen_not_the_sampling():
    app = dashboard_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot, 5)
        await pilot.press("space")
        assert app.paused and "PAUSED" in text_of(app.query_one(HeaderBar))
        shown = app.shown
        app.advance(3)
        await pilot.pause()
        assert app.shown is shown and app.latest is not shown   # frozen screen, live data
        assert len(app.feed.history) == 8       # every sample, the first one too (model.step)
        await pilot.press("space")
        assert not app.paused and app.shown is app.latest
        assert "PAUSED" not in text_of(app.query_one(HeaderBar))


async def test_help_opens_and_closes():
    app = dashboard_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot, 3)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_tab_moves_between_panels():
    app = dashboard_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot, 3)
        seen = []
        for _ in range(3):
            await pilot.press("tab")
            seen.append(type(app.focused))
        await pilot.pause()
        assert set(seen) == {GpuPanel, DiskPanel, Timeline}
        assert text_of(app.focused).startswith(">")   # the focus mark


async def test_s_cycles_the_disk_sort():
    app = dashboard_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot, 20)
        panel = app.query_one(DiskPanel)
        orders = []
        for _ in range(5):
            await pilot.press("s")
            orders.append(panel.sort)
        assert orders == ["r_await", "iops", "throughput", "name", "util"]
        # util, the default: the busiest device first (after any the verdict names),
        # and its column marked in the header
        lines = text_of(panel).splitlines()
        assert "▼%util" in lines[0]
        assert lines[1][1:].split()[0] in ("sdb", "sde")


async def test_a_shows_all_devices_and_back():
    app = dashboard_app()
    async with app.run_test(size=(160, 60)) as pilot:
        await started(app, pilot, 20)
        panel = app.query_one(DiskPanel)
        before = text_of(panel)
        await pilot.press("a")
        after = text_of(panel)
        assert "nvme0n1p1" in after and "nvme0n1p1" not in before   # a partition
        await pilot.press("a")
        assert text_of(panel) == before or "nvme0n1p1" not in text_of(panel)


async def test_slash_filters_devices():
    app = dashboard_app()
    async with app.run_test(size=(160, 60)) as pilot:
        await started(app, pilot, 20)
        await pilot.press("slash")
        assert isinstance(app.screen, FilterScreen)
        for ch in "sd[ab]":
            await pilot.press(ch if ch not in "[]" else {"[": "left_square_bracket", "]": "right_square_bracket"}[ch])
        await pilot.press("enter")
        await pilot.pause()
        rows = [l[1:].split()[0] for l in text_of(app.query_one(DiskPanel)).splitlines()[1:]]
        assert sorted(rows) == ["sda", "sdb"]
        await pilot.press("slash")
        await pilot.press("ctrl+u")  # clear the input
        for _ in range(8):
            await pilot.press("backspace")
        await pilot.press("enter")
        await pilot.pause()
        assert "nvme0n1" in text_of(app.query_one(DiskPanel))


async def test_m_cycles_the_timeline_metric():
    app = dashboard_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot, 20)
        tl = app.query_one(Timeline)
        seen = []
        for _ in range(5):
            await pilot.press("m")
            seen.append(tl.metric)
            assert "disk rows: " in text_of(tl)
        assert seen == ["r_await_ms", "iops", "mb_s", "aqu_sz", "util_pct"]


async def test_e_lists_episodes_with_evidence():
    app = dashboard_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot, 130)  # one disk-starved episode has opened and closed
        await pilot.press("e")
        assert isinstance(app.screen, EpisodesScreen)
        evidence = str(app.screen.query_one("#evidence").render())
        assert "disk-starved" in evidence and "sdb r_await" in evidence
        await pilot.press("escape")
        assert not isinstance(app.screen, EpisodesScreen)


async def test_p_expands_the_process_list_with_read_rates():
    app = dashboard_app()
    async with app.run_test(size=(160, 60)) as pilot:
        await started(app, pilot, 20)
        await pilot.press("p")
        text = text_of(app.query_one(GpuPanel))
        assert "read/s" in text and "4242 python" in text
        await pilot.press("p")
        assert "read/s" not in text_of(app.query_one(GpuPanel))


async def test_plus_and_minus_change_the_interval():
    app = dashboard_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot, 3)
        await pilot.press("plus")
        assert app.feed.interval_s == 2.0 and app.feed.source.interval_s == 2.0
        app.advance(2)
        await pilot.press("minus")
        await pilot.press("minus")
        assert app.feed.interval_s == 0.5
        app.advance(2)
        await pilot.pause()
        header = text_of(app.query_one(HeaderBar))
        assert "every 0.5s" in header
        # the demo's clock goes on by each new interval: 3 x 1 s, 2 x 2 s, 2 x 0.5 s
        walls = [c.wall_s for c in app.feed.history.columns]
        assert [b - a for a, b in zip(walls, walls[1:])] == [1.0, 1.0, 2.0, 2.0, 0.5, 0.5]
        assert "00:00:08" in header


async def test_arrows_scroll_the_timeline_back_in_time():
    app = dashboard_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot, 150)
        tl = app.query_one(Timeline)
        await pilot.press("left")
        assert tl.back == 5 and "5 back" in text_of(tl)
        await pilot.press("right")
        assert tl.back == 0


async def test_command_palette_runs_an_action():
    app = dashboard_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot, 3)
        await pilot.press("ctrl+p")
        await pilot.pause()
        for ch in "Sort disks":
            await pilot.press(ch if ch != " " else "space")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause()
        assert app.query_one(DiskPanel).sort == "r_await"


@pytest.mark.parametrize("size", [(80, 24), (250, 70), (80, 24)])
async def test_resize_keeps_everything_on_screen(size):
    app = dashboard_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot, 100)
        await pilot.resize_terminal(*size)
        await pilot.pause()
        screen = app.screen._compositor.render_strips()
        text = "\n".join("".join(s.text for s in strip) for strip in screen)
        assert len(screen) == size[1]
        assert "DISK-STARVED" in text and "Timeline" in text and "Quit" in text
        assert "sdb" in text
