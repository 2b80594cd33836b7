"""The fleet's node table: one row per node, in the order the fleet model gives (starved
nodes first).  A row: the state badge (glyph and word, so NO_COLOR still reads it), GPUs
starved of the total, mean GPU utilization, since when (relative and clock), a last-hour
sparkline of GPU utilization, the GPU-hours lost to a cause in the last 24 hours (the
stall ledger's counters, fleet.text.lost_cell) and the blamed device with its evidence.  A node that stopped
reporting is dimmed and says STALE and for how long.  ↑/↓ (j/k) move a row cursor; the
app opens the cursor's node on Enter.  ▲ marks a node starved by its own cause (or, in a
job's view, the straggler), ◇ one whose GPUs wait on peers; marks() counts the badges
for the headers, so their counts are what the rows show.

The lines are rebuilt from each FleetView (every few seconds); LinesPanel repaints only
the rows that changed."""

from __future__ import annotations

from collections import Counter

from gpudisk_top.fleet.text import device_text, groups_of, job_cell, lost_cell, state_text
from gpudisk_top.fleet.view import BUSY_MARK, busy_head
from gpudisk_top.textsafe import printable
from gpudisk_top.verdict.detect import STATE_WORD as DETECTOR_STATE_WORD, UNAVAILABLE
from gpudisk_top.model.present import pct
from gpudisk_top.model.timefmt import age, clock
from gpudisk_top.ui import glyphs, theme
from gpudisk_top.ui.widgets.base import CursorPanel, Line

SPARK = glyphs.SPARK    # 0 % is the lowest bar, not a blank: a blank would read as no data
SPARK_UNKNOWN = glyphs.DOT  # no sample in that minute (not reporting, or no GPU)
STATE_W = 15
LOST_W = 6             # "lost" column: GPU-hours, "123.45"
STARVED_GLYPH = glyphs.BLAMED  # starved by its own cause; in a job's view, its straggler
WAIT_GLYPH = glyphs.WAIT  # its GPUs wait on peers (or stall with nothing saturated)
STALE_GLYPH = glyphs.STALE
NOGPU_GLYPH = glyphs.NO_GPU  # no GPU can be read there (state unavailable): a problem, not idle
# the table's short words for fleet.text.state_text's: the detector's states' (states.py
# STATE_WORD; theme.STATE_BADGE's are the banner's, wider) and a job view's "waiting"; the
# glyph is the mark marks() counts
STATE_WORD = {**DETECTOR_STATE_WORD, "waiting": f"{WAIT_GLYPH} WAITING"}
MARK = " " + glyphs.POINT_LEFT  # after the name of the node a view calls out (the job's straggler)


def sparkline(values, width: int) -> str:
    """The newest `width` values (0-100 %) as bars, SPARK_UNKNOWN where unknown, padded on
    the left where fewer are known (the right edge is now)."""
    out = []
    for v in list(values)[-width:] if width > 0 else ():
        if v is None:
            out.append(SPARK_UNKNOWN)
        else:
            out.append(SPARK[int(round(min(max(v, 0.0), 100.0) / 100 * (len(SPARK) - 1)))])
    return "".join(out).rjust(max(0, width))


def state_cell(row, wall_s: float, group=None) -> tuple[str, object]:
    """The badge and its style: STALE and since when for a node that stopped reporting;
    group: the row's job in a job's view (its straggler, those waiting on it)."""
    if row.stale:
        if row.last_seen_s is None:       # its target fails scrapes, not seen in the hour
            return f"{STALE_GLYPH} DOWN", theme.WARN
        return f"{STALE_GLYPH} STALE {age(wall_s - row.last_seen_s)}", theme.WARN
    state = state_text(row, group)
    word = STATE_WORD.get(state, "? " + str(state).upper())
    if word.startswith(STARVED_GLYPH):
        return word, theme.STARVED_BG
    if state == UNAVAILABLE:       # a problem (a broken driver), not an idle node
        return word, theme.WARN
    return word, theme.GOOD if state == "healthy" else theme.PLAIN


def marks(rows, group=None) -> Counter:
    """How many of the rows carry each glyph (STARVED_GLYPH, WAIT_GLYPH, STALE_GLYPH,
    NOGPU_GLYPH) in their badge, as state_cell draws them: the headers' counts."""
    return Counter(state_cell(r, 0.0, group)[0][:1] for r in rows)


def job_text(row, width: int) -> str:
    """The job cell: its name (escaped) where it fits, else its id where that does (ids
    are short: slurm:1001), else the name cut."""
    name = printable(job_cell(row, 200))
    if len(name) > width and len(row.job_id) <= width:
        return row.job_id
    return _cut(name, width)


def _cut(text: str, width: int) -> str:
    if width <= 0:
        return ""
    return text if len(text) <= width else text[:max(0, width - 1)] + glyphs.ELLIPSIS


def layout(width: int, node_w: int, job_w: int = 0) -> dict[str, int]:
    """The columns' widths for `width` cells: the clock and a wider sparkline where they
    fit, the evidence the rest; the node's name (cut only beyond 24) gives way first,
    then, where there is a job column (job_w: 0 where no row has a job; cut only beyond
    20), the sparkline (to 4 minutes), then the job's."""
    node_w = min(24, max(8, node_w))
    job_w = min(20, max(10, job_w)) if job_w else 0
    clock_w = 9 if width >= 110 else 0
    spark_w = 12 if width < 100 else min(60, 12 + (width - 100) // 2)

    def rest() -> int:
        return width - (1 + STATE_W + node_w + 1 + (job_w + 1 if job_w else 0) + 6 + 5 + 6
                        + clock_w + spark_w + 1 + LOST_W + 1)
    if rest() < 16:
        node_w = max(8, node_w - (16 - rest()))
    if job_w and rest() < 16:
        spark_w = max(4, spark_w - (16 - rest()))
    if job_w and rest() < 16:
        job_w = max(10, job_w - (16 - rest()))
    return {"node": node_w, "job": job_w, "clock": clock_w, "spark": spark_w,
            "evidence": max(8, rest())}


class FleetTable(CursorPanel):
    DEFAULT_CSS = "FleetTable { height: 1fr; }"
    can_focus = True
    _mixed = False      # the rows' GPU figures are of different tiers: each is marked

    @property
    def order(self) -> list[str]:
        return list(self._order)

    def show(self, rows, wall_s: float, old: bool = False, note: str = "",
             marked: str | None = None, empty: str = "", jobs=(), job=None,
             lost: str = "") -> None:
        """rows: fleet.view.NodeRows in the order to draw; wall_s: now (the ages are
        counted to it); old: the rows are the last good table while Prometheus fails
        (every row dimmed); note: said in the column header (the sort); marked: a node
        called out with MARK (the job view's straggler); empty: what to say when there
        is no row; jobs: the view's JobGroups (a row's evidence says which node it waits
        on); job: the JobGroup whose view this is (its rows labelled by their part); lost:
        the GPU time lost in the last 24 hours, a line under the column header."""
        self._input = (rows, wall_s, old, note, marked, empty, jobs, job, lost)
        groups = groups_of(jobs)
        width = max(60, self.size.width or 80)
        names = [len(r.node) + (len(MARK) if r.node == marked else 0) for r in rows]
        jobs_w = max([len(job_cell(r)) for r in rows if r.job_id], default=0)
        cols = layout(width, max([4] + names), jobs_w)
        # the GPU column names its tier (SM activity, utilization.gpu); where the rows'
        # differ, each row's figure is marked (a column more, taken from the evidence)
        tier = busy_head(rows)
        self._mixed = tier is None or len(tier) > 4     # "SM+util" on every row: marked
        if self._mixed:
            cols["evidence"] = max(0, cols["evidence"] - 1)
        busy_w = 5 if self._mixed else 4
        node_w, spark_w = cols["node"], cols["spark"]
        head = (" " + f"{'state':<{STATE_W}}" + f"{'node':<{node_w}} "
                + (f"{'job':<{cols['job']}} " if cols["job"] else "") + " GPUs "
                + f"{'busy' if self._mixed else tier:<{busy_w}} "
                + "since " + ("clock    " if cols["clock"] else "")
                + f"{'GPU util, last hour' if spark_w >= 19 else 'last hour':<{spark_w}} "
                + f"{'lost':>{LOST_W}} " + f"device {glyphs.DOT} evidence")
        lines: list[Line] = [[(head[:width], theme.HEAD)]]
        if note and len(head) + len(note) + 2 <= width:
            lines[0] = [(head, theme.HEAD), ("  " + note, theme.DIM)]
        if lost:
            lines.append([(" " + _cut(lost, width - 1), theme.DIM if old else theme.PLAIN)])
        self._set_order([r.key for r in rows])
        if not rows:
            lines.append([(" " + (empty or "no node reports gpudisk-top metrics"), theme.DIM)])
        for r in rows:
            lines.append(self._row(r, wall_s, cols, old, r.node == marked,
                                   groups.get(r.key), job))
        self.fixed = 2 if lost else 1
        self.set_lines(lines)
        self._show_cursor()

    def _show_cursor(self) -> None:
        """After set_lines: scroll the cursor's row into sight while focused (below the
        fixed lines: the header, and the lost line when shown)."""
        if self.has_focus and self.cursor in self._order:
            self.scroll_to_show(self.fixed + self._order.index(self.cursor))

    def _row(self, r, wall_s: float, cols: dict, old: bool, marked: bool, group,
             job) -> Line:
        badge, badge_style = state_cell(r, wall_s, job)
        dim = r.stale or old
        base = theme.DIM if dim else theme.PLAIN
        if dim:
            badge_style = theme.DIM + theme.BOLD if r.stale else theme.DIM
        gpus = ("-" if not r.gpus_total else f"{r.gpus_starved}/{r.gpus_total}")
        util = pct(r.gpu_util_pct)
        # since when in its state; a node that stopped reporting: since its last sample
        since = r.last_seen_s if r.stale else r.since_s
        since_s = None if since is None else wall_s - since
        selected = self.has_focus and r.key == self.cursor
        mark = (glyphs.POINTER if selected else " ", theme.FOCUS_MARK if selected else theme.PLAIN)
        node_style = (theme.SELECTED + theme.BOLD) if selected else (
            theme.BOLD if not dim else base)
        starved = r.gpus_starved and not dim
        name = _cut(r.node, cols["node"] - (len(MARK) if marked else 0))
        out = [mark, (f"{badge:<{STATE_W - 1}} ", badge_style), (name, node_style)]
        if marked:
            out.append((MARK, theme.CULPRIT))
        out.append((" " * (cols["node"] + 1 - len(name) - (len(MARK) if marked else 0)), base))
        if cols["job"]:
            # the job's name as the node's exporter gave it: escaped, cut to its column
            out.append((f"{job_text(r, cols['job']):<{cols['job']}} ", base))
        out += [(f"{gpus:>5} ", theme.BAD if starved else base),
               (f"{util:>4}" + (BUSY_MARK[r.busy_tag] if self._mixed else "") + " ",
                theme.level_style(r.gpu_util_pct) if not dim else base),
               (f"{age(since_s) if since_s is not None else '-':>5} ", base)]
        if cols["clock"]:
            out.append((f"{clock(since) if since else '':<8} ", theme.DIM))
        out.append((sparkline(r.spark_pct, cols["spark"]) + " ", base))
        out.append((f"{lost_cell(r):>{LOST_W}} ", base))
        text = _cut(device_text(r, group), cols["evidence"])
        blamed = badge.startswith(STARVED_GLYPH) and not dim and r.evidence
        if blamed and text.startswith(r.evidence[0].device):
            dev = r.evidence[0].device
            out += [(dev, theme.CULPRIT), (text[len(dev):], base)]
        else:
            out.append((text, base))
        return out

    def move(self, delta: int) -> None:
        """↑/↓ (j/k), a page, the ends: the row cursor (the rows scroll to keep it in
        sight)."""
        self.scroll_lines(delta)
