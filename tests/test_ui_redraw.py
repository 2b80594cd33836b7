"""The screen draws what changed (issue 27): a panel whose content did not change is not
drawn again, one whose content changed is, the timeline's rows below its last are never
drawn again, and panels out of sight do no work.

Through Textual's Pilot on the simulated node: the rows a panel draws are counted where
Textual asks for them (the panel's own render_line, which still draws every row)."""

from __future__ import annotations

from gpudisk_top.model.select import DeviceFilter
from gpudisk_top.ui.screens.device import DeviceScreen
from gpudisk_top.ui.widgets.disks import DiskPanel
from gpudisk_top.ui.widgets.gpus import GpuPanel
from gpudisk_top.ui.widgets.header import HeaderBar
from gpudisk_top.ui.widgets.hostline import HostLine
from gpudisk_top.ui.widgets.timeline import Timeline
from gpudisk_top.ui.widgets.verdict import VerdictBanner
from gpudisk_top.model.timefmt import clock
from apps import dashboard_app
from screen_text import text_of

SIZE = (120, 40)


def drawn_rows(widget) -> list[int]:
    """The rows Textual asks `widget` to draw from now on, in order (the widget's own
    render_line still draws each)."""
    rows: list[int] = []
    draw = widget.render_line

    def render_line(y: int):
        rows.append(y)
        return draw(y)

    widget.render_line = render_line
    return rows


async def test_a_panel_is_drawn_again_only_when_its_content_changed():
    app = dashboard_app()
    async with app.run_test(size=SIZE) as pilot:
        app.advance(30)
        await pilot.pause()
        panels = {cls: app.query_one(cls) for cls in
                  (HeaderBar, VerdictBanner, GpuPanel, DiskPanel, HostLine, Timeline)}
        rows = {cls: drawn_rows(panel) for cls, panel in panels.items()}
        before = {cls: text_of(panel) for cls, panel in panels.items()}
        # `s`: every panel is shown the same sample again, and only the disk table's
        # content changes (its sort mark moves)
        await pilot.press("s")
        await pilot.pause()
        after = {cls: text_of(panel) for cls, panel in panels.items()}
        assert after[DiskPanel] != before[DiskPanel]
        assert rows[DiskPanel], "the disk table changed and was not drawn again"
        for cls in (HeaderBar, VerdictBanner, GpuPanel, HostLine):
            assert after[cls] == before[cls]
            assert rows[cls] == [], f"{cls.__name__} did not change but was drawn again"
        # the disk table draws the rows that changed, not every row it has
        assert len(rows[DiskPanel]) < panels[DiskPanel].size.height + 1
        # a new sample: the header's clock moves, and the header is drawn again
        for r in rows.values():
            r.clear()
        app.advance(1)
        await pilot.pause()
        assert clock(app.shown.model.wall_s) in text_of(panels[HeaderBar])
        assert rows[HeaderBar] == [0]
        assert rows[Timeline], "a new column and the timeline not drawn again"


async def test_the_timelines_rows_below_its_last_are_not_drawn_again():
    app = dashboard_app(dev_filter=DeviceFilter.from_option(False, "sdb"))     # a few disk rows
    async with app.run_test(size=SIZE) as pilot:
        app.advance(30)
        await pilot.pause()
        timeline = app.query_one(Timeline)
        assert len(timeline._lines) < timeline.size.height      # blank rows below
        rows = drawn_rows(timeline)
        for _ in range(3):
            app.advance(1)
            await pilot.pause()
        assert rows, "three new columns and the timeline not drawn again"
        assert max(rows) < len(timeline._lines), rows


async def test_the_dashboard_under_a_devices_detail_does_no_work_and_catches_up():
    app = dashboard_app()
    async with app.run_test(size=SIZE) as pilot:
        app.advance(100)
        await pilot.pause()
        await pilot.press("tab", "enter")           # the disks' cursor: its detail
        await pilot.pause()
        assert isinstance(app.screen, DeviceScreen)
        hidden = [app.query_one(cls) for cls in (GpuPanel, DiskPanel, HostLine, Timeline,
                                                 VerdictBanner)]
        kept = [panel._lines for panel in hidden]
        rows = [drawn_rows(panel) for panel in hidden]
        app.advance(3)
        await pilot.pause()
        # the detail is live, the panels under it did nothing
        assert clock(app.shown.model.wall_s) in text_of(app.screen.query_one(HeaderBar))
        assert [panel._lines for panel in hidden] == kept
        assert all(r == [] for r in rows)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, DeviceScreen)
        # back on the dashboard, every panel shows the newest sample, as one drawn from it
        # alone would
        shown = {type(panel): text_of(panel) for panel in hidden}
        shown[HeaderBar] = text_of(app.query_one(HeaderBar))
        assert clock(app.shown.model.wall_s) in shown[HeaderBar]
        fresh = dashboard_app()
        async with fresh.run_test(size=SIZE) as fresh_pilot:
            fresh.advance(103)
            await fresh_pilot.press("tab")           # the same focus
            await fresh_pilot.pause()
            for cls, text in shown.items():
                assert text_of(fresh.query_one(cls)) == text, cls.__name__
