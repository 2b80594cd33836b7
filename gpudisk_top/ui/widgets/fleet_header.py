"""The fleet screen's header: where the data comes from (the Prometheus URL, the label the
rows group by, the refresh interval, the time of the refresh), what the table holds
(nodes, starved, waiting, stale, no GPUs), what the last refresh cost (queries, series, milliseconds), and,
when Prometheus failed or timed out, an error line: the table below is then the last good
one, and the line says how old."""

from __future__ import annotations

from gpudisk_top.model.timefmt import age, clock
from gpudisk_top.ui import glyphs, theme
from gpudisk_top.ui.widgets.base import LinesPanel
from gpudisk_top.ui.widgets.verdict import fit_clauses


class FleetHeader(LinesPanel):
    DEFAULT_CSS = "FleetHeader { height: auto; background: $panel; }"

    def show(self, view, url: str, group_by: str, interval_s: float,
             counts: tuple[int, int, int, int, int], flags: list[str], filters: str = "") -> None:
        """view: the latest fleet.view.FleetView (None before the first answer); counts:
        (nodes, starved, waiting, stale, no GPUs) of the rows shown, as their badges mark them
        (fleet_table.marks); flags: PAUSED and the like; filters: the label filter in
        force, as typed."""
        width = max(40, self.size.width or 80)
        left = [("gpudisk-top fleet ", theme.BOLD), (url + " ", theme.PLAIN),
                (f"by {group_by} ", theme.PLAIN), (f"every {interval_s:g}s ", theme.DIM)]
        if view is not None:
            left.append((clock(view.wall_s) + " ", theme.BOLD))
        right = []
        for flag in flags:
            right += [(f" {flag} ", theme.HEAD), (" ", theme.PLAIN)]
        used = sum(len(t) for t, _ in left + right)
        first = left + [(" " * max(1, width - used), theme.PLAIN)] + right
        nodes, starved, waiting, stale, no_gpus = counts
        second = [(f" nodes {nodes}", theme.PLAIN), ("  ", theme.PLAIN),
                  (f"{glyphs.BLAMED} starved {starved}", theme.BAD if starved else theme.PLAIN),
                  ("  ", theme.PLAIN), (f"{glyphs.WAIT} waiting {waiting}", theme.PLAIN),
                  ("  ", theme.PLAIN), (f"{glyphs.STALE} stale {stale}", theme.WARN if stale else theme.PLAIN)]
        if no_gpus:          # a broken driver is a problem to count, never folded into idle
            second += [("  ", theme.PLAIN), (f"{glyphs.NO_GPU} no GPUs {no_gpus}", theme.WARN)]
        if view is not None and view.cost is not None:
            second.append((f"  {glyphs.DOT} " + view.cost.text(), theme.DIM))
        if filters:
            second.append((f"  {glyphs.DOT} filter " + filters, theme.BOLD))
        lines = [first, second]
        if view is not None and view.error:
            if view.rows and view.data_wall_s is not None:
                old = (f"; the table is from {clock(view.data_wall_s)}, "
                       f"{age(view.wall_s - view.data_wall_s)} old")
            else:
                old = "; no table yet"
            badge = f" {glyphs.ERROR} ERROR "
            text = fit_clauses(view.error + old, max(20, width - len(badge) - 1), 2, more=" " + glyphs.ELLIPSIS)
            lines.append([(badge, theme.BAD), (" " + text[0], theme.BOLD)])
            lines += [[(" " * (len(badge) + 1) + more, theme.BOLD)] for more in text[1:]]
        self.set_lines(lines)
