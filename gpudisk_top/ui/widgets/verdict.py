"""The verdict banner: the state in words and glyph, since when, and its evidence."""

from __future__ import annotations

import textwrap

from gpudisk_top.model.detect import STARVED_STATES
from gpudisk_top.ui import theme
from gpudisk_top.ui.format import clock, duration
from gpudisk_top.ui.widgets.base import LinesPanel

MAX_LINES = 3


class VerdictBanner(LinesPanel):
    DEFAULT_CSS = "VerdictBanner { height: auto; max-height: 4; }"

    def show(self, update, enter_intervals: int, alert: str | None = None) -> None:
        width = max(20, self.size.width or 80)
        v = update.verdict if update is not None else None
        if v is None:
            self.set_lines([[(" … ", theme.HEAD), (" collecting the first interval", theme.DIM)]])
            return
        badge = theme.STATE_BADGE.get(v.state, v.state.upper())
        style = theme.BANNER_STARVED if v.state in STARVED_STATES else theme.BANNER.get(v.state, theme.HEAD)
        head = [(f" {badge} ", style)]
        text = ""
        if v.episode is not None:
            text = (f" since {clock(v.episode.start_wall_s)} "
                    f"({duration(v.wall_s - v.episode.start_wall_s)}): {v.reason}")
        elif v.raw_state in STARVED_STATES:
            run = update.pending_intervals
            text = (f" watching: {v.raw_state} {run}/{enter_intervals} intervals: "
                    f"{v.raw_reason}")
        elif v.state == "healthy":
            utils = [g.util_pct for g in update.model.gpus if g.processes and g.util_pct is not None]
            text = f" GPUs with a job are busy (mean {sum(utils) / len(utils):.0f}%)" if utils else ""
        elif v.state == "idle":
            text = " no compute process on the GPUs"
        wrapped = textwrap.wrap(text, width - len(badge) - 3) or [""]
        lines = [head + [(wrapped[0], theme.PLAIN)]]
        indent = " " * (len(badge) + 2)
        for more in wrapped[1:MAX_LINES]:
            lines.append([(indent + more, theme.PLAIN)])
        advice = v.advice if v.state in STARVED_STATES else None
        if advice and len(lines) < MAX_LINES + 1:
            lines.append([(indent + "advice: " + advice, theme.DIM)])
        if alert:
            lines.insert(0, [(" ALERT ", theme.BAD), (" " + alert, theme.BOLD)])
        self.set_lines(lines)

