"""The one app base (ui/appkit.py ToolApp) under the dashboard and the fleet screen:
each, run through Pilot, says its own command in the too-small note, offers only its own
palette commands, shows its footer, and takes NO_COLOR's styles from the start."""

from __future__ import annotations

import os
import sys

import pytest

from apps import dashboard_app
from gpudisk_top.ui import theme
from gpudisk_top.ui.app import GpuDiskApp
from gpudisk_top.ui.appkit import ToolApp
from gpudisk_top.ui.fleet_app import FleetApp
from screen_text import screen_text

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "screenshots"))

import fleet_shots  # noqa: E402

STOCK = ("Maximize", "Keys", "Theme", "Screenshot", "Change theme")


def dashboard() -> tuple[GpuDiskApp, str, object]:
    app = dashboard_app()
    return app, "gpudisk-top", lambda: app.advance(3)


def fleet() -> tuple[FleetApp, str, object]:
    source = fleet_shots.CannedSource()
    app = FleetApp(source, autostart=False)
    return app, "gpudisk-top fleet", lambda: app.apply(source.refresh())


@pytest.mark.parametrize("make", [dashboard, fleet], ids=["dashboard", "fleet"])
async def test_each_app_is_a_tool_app_with_its_own_note_palette_and_footer(make):
    app, command, feed = make()
    assert isinstance(app, ToolApp)
    async with app.run_test(size=(70, 20)) as pilot:
        feed()
        await pilot.pause()
        shown = [line.strip() for line in screen_text(app).splitlines() if line.strip()]
        assert shown == ["terminal too small: 70x20", f"{command} needs 80x24; q quits"]
        await pilot.resize_terminal(100, 30)
        await pilot.pause()
        text = screen_text(app)
        assert "too small" not in text and "q Quit" in text.splitlines()[-1]
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert titles == [title for title, _, _ in app.commands()] and "Quit" in titles
        assert not set(STOCK) & set(titles)


@pytest.mark.parametrize("make", [dashboard, fleet], ids=["dashboard", "fleet"])
async def test_no_color_styles_from_the_start(make):
    os.environ["NO_COLOR"] = "1"
    try:
        app, _, _ = make()       # Textual reads NO_COLOR as the app is made
    finally:
        del os.environ["NO_COLOR"]
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            assert theme.GOOD.color is None and theme.GOOD == theme._NO_COLOR["GOOD"]
        app, _, _ = make()
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            assert theme.GOOD == theme._COLOR["GOOD"] and theme.GOOD.color is not None
    finally:
        theme.use_no_color(False)
