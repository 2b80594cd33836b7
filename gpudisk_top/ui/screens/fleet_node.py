"""Enter on a node of the fleet table: its timeline, from Prometheus range queries.

The local dashboard's own Timeline widget draws it (the state row, a row per GPU, the
disks in the metric `m` picks, the verdict's devices first, starved columns shaded and
lettered, one column per second, the same time axis), fed by the fleet model's
NodeTimeline, whose History holds the same Columns.  Range queries run only while this
screen is open: one for the last LOAD_S seconds when it opens, then one a refresh for the
seconds since the newest column (and a few before, which a late scrape may have filled),
merged into the screen's own History, so ← → scroll back through all of it."""

from __future__ import annotations

import time

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer

from gpudisk_top.fleet.text import device_text, job_cell
from gpudisk_top.model.history import History
from gpudisk_top.model.present import pct
from gpudisk_top.model.timefmt import age, clock
from gpudisk_top.textsafe import printable
from gpudisk_top.ui import glyphs, theme
from gpudisk_top.ui.source_call import call_source
from gpudisk_top.ui.widgets.base import LinesPanel
from gpudisk_top.ui.widgets.fleet_table import state_cell
from gpudisk_top.ui.widgets.timeline import Timeline, TimelineKeys

LOAD_S = 900          # the window fetched when the screen opens: 15 minutes ...
KEEP_COLUMNS = 3600   # ... and the columns kept as it stays open (an hour, as the local one)
REFETCH_S = 10        # each refresh asks again for these seconds before the newest column


class TimelineReady(Message):
    def __init__(self, timeline) -> None:
        super().__init__()
        self.timeline = timeline


def merge(history: History, columns) -> bool:
    """Put the columns (one a step, oldest first) into `history`: the newer ones appended,
    a gap before them filled with blank columns, those it already holds replaced where
    they differ.  True when a held column changed (drawn glyphs are then out of date)."""
    changed = False
    held = history.columns
    for col in columns:
        if held:
            last = held[-1]
            step = last.interval_s or col.interval_s or 1.0
            back = round((last.wall_s - col.wall_s) / step)
            if back >= 0:
                if back < len(held) and held[-1 - back] != col:
                    held[-1 - back] = col
                    changed = True
                continue
            for k in range(1, min(-back, history.capacity + 1)):   # a gap: blank columns
                history.add(type(col)(wall_s=last.wall_s + k * step, interval_s=step,
                                      state="", raw_state="", episode=None))
        history.add(col)
    return changed


class NodeHead(LinesPanel):
    """The node's state, since when, its GPUs, the evidence, its labels; the range query's
    error and cost."""

    DEFAULT_CSS = "NodeHead { height: auto; }"

    def show(self, node: str, row, wall_s: float, timeline, fetched_wall_s) -> None:
        width = max(40, self.size.width or 80)
        if row is None:
            lines = [[(f" {node} ", theme.HEAD), ("  no longer in the table", theme.DIM)]]
        else:
            badge, style = state_cell(row, wall_s)
            head = [(f" {badge} ", style), (f" {node} ", theme.HEAD)]
            if row.since_s is not None:
                head.append((f"  since {clock(row.since_s)} ({age(wall_s - row.since_s)})",
                             theme.PLAIN))
            if row.gpus_total:
                head.append((f"  GPUs starved {row.gpus_starved}/{row.gpus_total}, "
                             f"util {pct(row.gpu_util_pct)}",
                             theme.PLAIN))
            lines = [head]
            if row.job_id:
                # the row is one job's; the timeline below is its node's, every job's GPUs
                lines.append([("  job " + printable(job_cell(row, 200)) + " ["
                               + printable(row.job_id) + "], GPU "
                               + (",".join(map(str, sorted(row.gpu_util_by_gpu))) or "?")
                               + "; the timeline: the whole node's", theme.PLAIN)])
            lines.append([("  " + (device_text(row) or "no device blamed"),
                           theme.CULPRIT if row.evidence and not row.stale else theme.PLAIN)])
            labels = " ".join(f"{k}={v}" for k, v in sorted(row.labels.items()))
            lines.append([("  " + labels[:width - 2], theme.DIM)])
        if timeline is None:
            lines.append([("  asking Prometheus for the node's last "
                           f"{LOAD_S // 60} minutes{glyphs.ELLIPSIS}", theme.DIM)])
        elif timeline.error:
            old = f"; the timeline is from {clock(fetched_wall_s)}" if fetched_wall_s else ""
            lines.append([(f" {glyphs.ERROR} ERROR ", theme.BAD), (" " + timeline.error + old, theme.BOLD)])
        else:
            lines.append([(f"  range query: {timeline.cost.text()}, one column per "
                           f"{timeline.step_s:g} s", theme.DIM)])
        self.set_lines(lines)


class FleetTimeline(Timeline):
    """The local Timeline, told when columns it has drawn were replaced."""

    def forget(self) -> None:
        self._rows.clear()       # the per-row glyphs, rebuilt from the history at the next show


class NodeScreen(TimelineKeys, Screen):
    BINDINGS = [
        Binding("escape,q", "app.pop_screen", "Back"),
        Binding("left", "time(5)", "Back in time", key_display=glyphs.LEFT),
        Binding("right", "time(-5)", "Fwd", key_display=glyphs.RIGHT),
        Binding("home", "time_home", "Oldest"),
        Binding("end", "time_now", "Now"),
        Binding("m", "metric", "Metric"),
        Binding("r", "fetch_now", "Refresh"),
        Binding("up", "rows(-1)", show=False),
        Binding("down", "rows(1)", show=False),
    ]
    DEFAULT_CSS = """
    NodeScreen { layout: vertical; overflow: hidden; }
    NodeScreen FleetTimeline { height: 1fr; }
    """

    def __init__(self, source, node: str, row, wall_s: float, interval_s: float, lock,
                 key: str | None = None) -> None:
        """source: the FleetSource; row: the node's NodeRow in the app's last view (None
        if gone) and wall_s that view's time; lock: held around every call of the source
        (one caller at a time); key: the row's (NodeRow.key: a job's row, whose node's
        timeline this is), default the node."""
        super().__init__()
        self.source = source
        self.node = node
        self.key = key or node
        self.row = row
        self.wall_s = wall_s
        self.interval_s = interval_s
        self.lock = lock
        self.history = History(capacity=KEEP_COLUMNS)
        self.timeline = None            # the latest NodeTimeline
        self.fetched_wall_s: float | None = None
        self._asked = False

    def compose(self) -> ComposeResult:
        yield NodeHead()
        yield FleetTimeline()
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one(FleetTimeline).focus()
        self._draw_head()
        self.action_fetch_now()
        self.set_interval(self.interval_s, self._tick)

    def _tick(self) -> None:
        self.action_fetch_now()

    def action_fetch_now(self) -> None:
        """`r`, and every interval: one range query, never a second while one is in flight
        (it ends by the client's deadline; another thread would only queue behind it on
        the source's lock)."""
        if self._asked:
            return
        if self.history.columns:
            newest = self.history.columns[-1].wall_s
            window = min(LOAD_S, max(REFETCH_S, time.time() - newest + REFETCH_S))
        else:
            window = LOAD_S
        self._asked = True
        self._fetch(window)

    @work(thread=True, exclusive=True, group="fleet-node", exit_on_error=False)
    def _fetch(self, window_s: float) -> None:
        # width = window: one column a second, the local timeline's
        tl = call_source(self.lock, lambda: self.source.node_timeline(
            self.node, window_s, int(window_s)), _Failed)
        if tl is not None:
            self.post_message(TimelineReady(tl))

    def on_timeline_ready(self, message: TimelineReady) -> None:
        self._asked = False
        tl = message.timeline
        self.timeline = tl
        widget = self.query_one(FleetTimeline)
        if not tl.error:
            self.fetched_wall_s = time.time()
            if merge(self.history, tl.history.columns):
                widget.forget()
            widget.show(self.history, tl.gpus, tl.disks, (), tl.named)
        self._draw_head()

    def update_row(self, row, wall_s: float) -> None:
        """The app's latest view of this node (every table refresh)."""
        self.row, self.wall_s = row, wall_s
        self._draw_head()

    def _draw_head(self) -> None:
        self.query_one(NodeHead).show(self.node, self.row, self.wall_s, self.timeline,
                                      self.fetched_wall_s)

    def action_rows(self, delta: int) -> None:
        self.query_one(FleetTimeline).scroll_lines(delta)


class _Failed:
    """A range query that raised (a bug): shown like Prometheus's errors."""

    cost = None
    step_s = 1.0

    def __init__(self, error: str) -> None:
        self.error = error
