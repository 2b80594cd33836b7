"""Replay's position bar: play state, speed, where in the recording, and the episodes."""

from __future__ import annotations

from gpudisk_top.model.timefmt import date_clock as _stamp
from gpudisk_top.ui import glyphs, theme
from gpudisk_top.ui.format import duration
from gpudisk_top.ui.widgets.base import LinesPanel


class PositionBar(LinesPanel):
    DEFAULT_CSS = "PositionBar { height: 1; background: $panel; }"

    def show(self, playing: bool, speed: int, index: int, total: int, wall_s: float,
             start_s: float, end_s: float, episode_starts: list[float]) -> None:
        width = max(40, self.size.width or 80)
        state = (glyphs.POINTER + " " if playing else glyphs.PAUSED) + f" x{speed}"
        where = f" {_stamp(wall_s)}  {index + 1}/{total}  {duration(wall_s - start_s)} in "
        bar_w = max(10, width - len(state) - len(where) - 3)
        cells = [glyphs.RAIL] * bar_w
        span = max(end_s - start_s, 1e-9)
        for s in episode_starts:  # the recording's episodes (ReplayFeed.known), else those passed
            cells[min(bar_w - 1, int((s - start_s) / span * bar_w))] = glyphs.BLAMED
        pos = min(bar_w - 1, int((wall_s - start_s) / span * bar_w))
        line = [(state, theme.HEAD), (where, theme.PLAIN), ("".join(cells[:pos]), theme.DIM),
                (glyphs.FULL, theme.BOLD), ("".join(cells[pos + 1:]), theme.DIM)]
        self.set_lines([line])
