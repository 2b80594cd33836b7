"""The timeline: one column per sample and the same x-axis for every row.

Rows: the detector's state (a letter per starved column: D disk, C cpu, K checkpoint,
S straggler, ? undiagnosed; lower case while it builds up; × no GPU can be read),
one row per GPU's utilization,
one row per selected disk in the switchable metric (m), and a time axis.  Starved columns
are shaded on every row and carry their letter on the state row, so the meaning survives
NO_COLOR.  When focused: up/down scroll rows, left/right scroll back in time.  While the
dashboard is paused the timeline is frozen at the column of the sample on screen (freeze()),
as every other panel is: sampling goes on behind it, and no two times share the screen.

Each row keeps its glyphs as columns arrive (a column never changes once sampled), so a
new sample costs one glyph per row, not a redraw of the whole history.  Scales are fixed
(0-100 % for utilization, logarithmic for the others) for the same reason.
"""

from __future__ import annotations

import math
from collections import deque

from rich.style import Style

from gpudisk_top.verdict.detect import STARVED_STATES
from gpudisk_top.model.history import Column, History
from gpudisk_top.model.present import pct
from gpudisk_top.model.vocab import TIMELINE
from gpudisk_top.ui import theme
from gpudisk_top.ui.format import clock, legend
from gpudisk_top.ui.widgets.base import LinesPanel, fit

LABEL_W = 13       # the labels' column: at least this wide ...
LABEL_MAX = 30     # ... and as wide as the longest device name needs, up to this
LEGEND = "  · D disk C cpu K checkpoint S straggler ? undiagnosed × no GPU"
LEGEND_SHORT = "  · D C K S ? × (h: help)"
RANK_COLUMNS = 30  # the disk rows' order: their mean %util over this many columns
# logarithmic ranges (low, high) of the metrics that are not percentages
LOG_RANGES = {"r_await_ms": (0.01, 1000.0), "iops": (1.0, 1e6), "mb_s": (0.01, 1e4),
              "aqu_sz": (0.01, 1000.0)}


def _mean(values) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def glyph(value: float | None, metric: str) -> str:
    if value is None:
        return " "
    if metric == "util_pct":
        return theme.bar(value, 100.0)
    low, high = LOG_RANGES[metric]
    if value <= low:
        return theme.BARS[1] if value > 0 else " "
    return theme.bar(math.log10(value / low), math.log10(high / low))


class _Row:
    """The glyphs of one row, one per history column, kept as columns arrive."""

    def __init__(self, capacity: int, value_of, metric: str) -> None:
        self.glyphs: deque[str] = deque(maxlen=capacity)
        self.upto = 0          # absolute index of the next column to add
        self.value_of, self.metric = value_of, metric
        self.source: History | None = None   # the History the glyphs are of

    def sync(self, history: History) -> None:
        if history is not self.source:
            # another History (a replay's seek makes a new one, its indices from 0 again):
            # nothing kept is of it (issue 38: a seek back showed the window it came from)
            self.glyphs.clear()
            self.upto, self.source = history.first, history
        start = max(self.upto, history.first)
        if start > self.upto:
            self.glyphs.clear()
        cols = history.columns
        for i in range(start - history.first, len(cols)):
            self.glyphs.append(glyph(self.value_of(cols[i]), self.metric))
        self.upto = history.total

    def text(self, end: int, n: int) -> str:
        """n glyphs ending `end` columns from the newest one."""
        g = self.glyphs
        stop = len(g) - end
        return "".join(g[i] for i in range(max(0, stop - n), max(0, stop)))


class Timeline(LinesPanel):
    DEFAULT_CSS = "Timeline { height: 1fr; min-height: 4; }"
    can_focus = True

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.metric = "util_pct"
        self.back = 0          # columns scrolled back from the newest
        self.rows_from = 0     # the first GPU/disk row shown when they do not all fit
        self._rows: dict[tuple, _Row] = {}
        self._ncols = 0
        # frozen (a paused screen): the absolute index (History.total) after the newest
        # column drawn; None: the newest column of the history
        self.upto: int | None = None

    def freeze(self, history: History, wall_s: float | None) -> None:
        """Draw no column newer than the one of the sample at wall_s (the paused screen's,
        whose newer columns the sampler may have added already); None: the newest now."""
        cols, kept = history.columns, len(history.columns)
        # from the newest back: only the columns added since the sample shown are passed
        while wall_s is not None and kept and cols[kept - 1].wall_s > wall_s:
            kept -= 1
        self.upto = history.first + kept
        self.redraw()

    def thaw(self) -> None:
        """Follow the newest column again."""
        self.upto = None
        self.redraw()

    def _newer(self, history: History) -> int:
        """How many of the history's newest columns a freeze leaves out."""
        return 0 if self.upto is None else max(0, history.total - self.upto)

    def _row(self, history: History, key: tuple, value_of, metric: str) -> _Row:
        row = self._rows.get(key)
        if row is None:
            row = self._rows[key] = _Row(history.capacity, value_of, metric)
        row.sync(history)
        return row

    def show(self, history: History, gpus: list[int], disks: list[tuple[str, str]],
             episodes=(), named=(), job: tuple[str, str] | None = None,
             ordered: bool = False) -> None:
        """disks: (kernel name, display name) of the selected devices; named: those the
        verdict names; episodes: the detector's, so that a device an episode on screen
        names keeps its row after the episode ends; job: (id, "job 3") of the job
        followed: the state row is that job's (Column.of_job), said in the title.
        ordered: the disks come in the order to draw them (the dashboard's: its disk
        table's, so that the two agree; the devices an episode on screen names still
        come first); else the timeline ranks them itself (a fleet node's screen, which
        has no table).  Both: _disk_order."""
        self._input = (history, gpus, disks, episodes, named, job, ordered)
        # a column never changes once sampled: the count and the newest column (a replay
        # that seeks makes new ones) say what the history holds; the episodes change with
        # a column too
        newest = history.columns[-1] if history.columns else None
        if self.unchanged(history.total, len(history), newest, tuple(gpus), tuple(disks),
                          tuple(episodes), tuple(named), self.metric, self.back,
                          self.rows_from, job, ordered, self.upto):
            return
        width = max(LABEL_W + 10, self.size.width or 80)
        height = self.size.height or 24
        names = dict(disks)
        label_w = min(LABEL_MAX, max([LABEL_W] + [len(d) + 6 for d in names.values()]))
        ncols = self._ncols = width - label_w
        cols_all = history.columns
        newer = self._newer(history)
        end_i = max(0, len(cols_all) - newer - self.back)
        first_i = max(0, end_i - ncols)
        cols = [cols_all[i] for i in range(first_i, end_i)]
        if job is not None:
            cols = [c.of_job(job[0]) for c in cols]
        mark = (">", theme.FOCUS_MARK) if self.has_focus else (" ", theme.PLAIN)
        scale = "" if self.metric == "util_pct" else " log scale"
        # the title's parts, each from its whole form to its shortest ("" drops it), cut
        # in base.CUT_FIRST["timeline"]'s order
        parts = {"name": ["Timeline" + (f" of {job[1]}" if job is not None else "")],
                 "rows-word": ["  disk rows: ", "  "],
                 "metric": [f"{TIMELINE[self.metric].label}{scale} (m)"]}
        if self.back and cols:
            parts["back"] = [f" · {clock(cols[-1].wall_s)}, {self.back} back"]
            parts["keys"] = [" (← → End)", " (End)", ""]
        # the legend's words, then its letters (the shorter form is the longer's stand-in)
        parts["legend"] = [LEGEND, LEGEND_SHORT]
        parts["letters"] = ["", ""]
        title = self._title(mark, parts, width)
        if not cols:
            self.fixed = 0
            self.set_lines([title, [(" " * label_w + "collecting…", theme.DIM)]])
            return
        spans = self.shade_spans(cols)
        room = height - 3            # title, state row, axis
        if len(gpus) > 2 and room < len(gpus) + min(3, len(disks)):
            # too short for one row per GPU and a few disks: the GPUs share two rows,
            # their mean and the lowest one (where a straggler shows)
            gpu_rows = [("GPU avg", ("gpu-avg",), lambda c: _mean(c.gpu_util.values())),
                        ("GPU min", ("gpu-min",),
                         lambda c: min((v for v in c.gpu_util.values() if v is not None), default=None))]
        else:
            gpu_rows = [(f"GPU{i}", ("gpu", i), lambda c, i=i: c.gpu_util.get(i)) for i in gpus]
        last = cols[-1]
        # every row's label and order, but the glyphs of those shown only: a node of a
        # hundred disks draws the dozen that fit
        rows = [(f"{name} {pct(value_of(last))}",
                 key, value_of, "util_pct") for name, key, value_of in gpu_rows]
        for name in self._disk_order(cols, [n for n, _ in disks], episodes, named, ordered):
            rows.append((f"{names[name]} {legend(self.metric, last.metric(name, self.metric))}",
                         ("disk", name, self.metric),
                         lambda c, n=name, m=self.metric: c.metric(n, m), self.metric))
        # the state row and the time axis always show; the rows between scroll (↑/↓ when
        # focused) and say how many are hidden
        self.rows_from = min(self.rows_from, max(0, len(rows) - max(1, room)))
        shown = [self.row_line(label, self._row(history, key, value_of, metric)
                               .text(newer + self.back, len(cols)), spans, label_w)
                 for label, key, value_of, metric in
                 rows[self.rows_from:self.rows_from + max(1, room)]]
        hidden = len(rows) - len(shown)
        if hidden:
            first, last = self.rows_from + 1, self.rows_from + len(shown)
            parts["rows"] = [f"  rows {first}-{last} of {len(rows)}"]
            parts["rows-detail"] = [" (tab here, ↑↓)", ""]
            title = self._title(mark, parts, width)
        self.fixed = 0
        self.set_lines([title, self.state_line(cols, spans, label_w)] + shown
                       + [self.axis(cols, label_w)])

    @staticmethod
    def _title(mark, parts: dict[str, list[str]], width: int) -> list:
        """The title line: each part in the longest form that lets the line fit; the
        legend's short form goes last of the legend ("letters")."""
        widths = {k: [len(f) for f in forms] for k, forms in parts.items()}
        widths["letters"] = [len(LEGEND_SHORT), 0]
        widths["legend"] = [len(LEGEND) - len(LEGEND_SHORT), 0]
        pick = fit("timeline", widths, width - 1)
        texts = {k: forms[pick[k]] for k, forms in parts.items()}
        if pick["letters"]:
            texts["legend"] = ""
        return [mark, (texts.pop("name"), theme.LABEL), ("".join(texts.values()), theme.DIM)]

    @staticmethod
    def _disk_order(cols, disks: list[str], episodes, named=(), ordered: bool = False
                    ) -> list[str]:
        """The verdict's devices first, then those an episode on screen names (its row
        stays in sight after the episode ends), then the others: in the order given
        where `ordered` (the disk table's), else the busiest over the newest
        RANK_COLUMNS columns on screen (a row does not move or vanish with each second's
        ranking)."""
        on_screen = {c.episode for c in cols if c.episode is not None}
        pinned = [d for ep in episodes if ep.id in on_screen for d in ep.devices]
        known = set(disks)
        first = list(dict.fromkeys(d for d in list(named) + pinned if d in known))

        if ordered:
            return first + [d for d in disks if d not in first]
        recent = cols[-RANK_COLUMNS:]

        def busy(name: str) -> float:
            values = [v for c in recent if (v := c.metric(name, "util_pct")) is not None]
            return sum(values) / len(values) if values else 0.0
        rest = sorted((d for d in disks if d not in first), key=lambda d: -busy(d))
        return first + rest

    def scroll_lines(self, delta: int) -> None:
        self.rows_from = max(0, self.rows_from + delta)
        self.redraw()

    def scroll_time_to(self, back: int) -> None:
        """Show the columns ending `back` columns before the newest (0: now)."""
        if self._input is None:
            return
        history = self._input[0]
        self.back = min(max(0, back), max(0, len(history) - self._newer(history) - 1))
        self.redraw()

    def scroll_time_home(self) -> None:
        """The oldest columns kept."""
        if self._input is not None:
            history = self._input[0]
            self.scroll_time_to(len(history) - self._newer(history) - self._ncols)

    def show_wall(self, wall_s: float) -> None:
        """Scroll so that the column at wall_s is a quarter in from the left."""
        if self._input is None:
            return
        history = self._input[0]
        cols = history.columns
        shown = len(cols) - self._newer(history)      # those a freeze leaves in
        at = next((i for i, c in enumerate(cols) if c.wall_s >= wall_s), len(cols) - 1)
        self.scroll_time_to(shown - (at + self._ncols * 3 // 4))

    @staticmethod
    def shade_spans(cols: list[Column]) -> list[tuple[int, int, Style]]:
        """(start, end, shade) runs over the visible columns: starved, building, plain."""
        spans: list[tuple[int, int, Style]] = []
        for i, c in enumerate(cols):
            if c.state in STARVED_STATES:
                shade = theme.STARVED_SHADE
            elif c.raw_state in STARVED_STATES:
                shade = theme.PENDING_SHADE
            else:
                shade = theme.PLAIN
            if spans and spans[-1][2] is shade:
                spans[-1] = (spans[-1][0], i + 1, shade)
            else:
                spans.append((i, i + 1, shade))
        return spans

    @staticmethod
    def row_line(label: str, text: str, spans, label_w: int = LABEL_W) -> list:
        pad = len(text) - spans[-1][1] if spans else 0  # a row shorter than the window
        out = [(f"{label[:label_w - 1]:<{label_w - 1}} ", theme.LABEL)]
        for a, b, shade in spans:
            out.append((text[a + pad:b + pad] if pad >= 0 else text[a:b], shade))
        return out

    @staticmethod
    def state_line(cols: list[Column], spans, label_w: int = LABEL_W) -> list:
        chars = []
        for c in cols:
            if c.state in STARVED_STATES:
                chars.append(theme.STATE_GLYPH.get(c.state, "?"))
            elif c.raw_state in STARVED_STATES:
                chars.append(theme.STATE_GLYPH.get(c.raw_state, "?").lower())
            else:
                chars.append(theme.STATE_GLYPH.get(c.state, " "))
        text = "".join(chars)
        out = [(f"{'state':<{label_w - 1}} ", theme.LABEL)]
        for a, b, shade in spans:
            style = theme.STARVED_BG if shade is theme.STARVED_SHADE else (
                theme.PENDING_BG if shade is theme.PENDING_SHADE else theme.DIM)
            out.append((text[a:b], style))
        return out


    @staticmethod
    def axis(cols, label_w: int = LABEL_W) -> list:
        cells = [" "] * len(cols)
        step = 20
        i = len(cols) - 1
        while i >= 0:
            label = "|" + clock(cols[i].wall_s)
            start = i - len(label) + 1
            if start < 0:
                break
            cells[start:i + 1] = list(label)
            i -= step
        return [(" " * label_w, theme.PLAIN), ("".join(cells), theme.DIM)]

    def cycle_metric(self) -> str:
        fields = TIMELINE.fields
        self.metric = fields[(fields.index(self.metric) + 1) % len(fields)]
        self.redraw()
        return self.metric

    def scroll_time(self, delta: int) -> None:
        self.scroll_time_to(self.back + delta)


class TimelineKeys:
    """The timeline's actions, for the app or screen that shows one (the dashboard, a
    fleet node's screen; each binds its own keys to them): ← → scroll 5 columns, Home to
    the oldest, End to now, m the disk rows' metric."""

    def action_time(self, delta: int) -> None:
        self.query_one(Timeline).scroll_time(delta)

    def action_time_home(self) -> None:
        self.query_one(Timeline).scroll_time_home()

    def action_time_now(self) -> None:
        self.query_one(Timeline).scroll_time_to(0)

    def action_metric(self) -> None:
        metric = self.query_one(Timeline).cycle_metric()
        self.notify(f"timeline disk rows: {TIMELINE[metric].label}", timeout=2)
