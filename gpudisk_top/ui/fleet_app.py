"""`gpudisk-top fleet --prometheus URL`: every node's verdict from Prometheus, one row a
node, starved nodes first (gpudisk_top.fleet.source.FleetSource builds the rows).

The app only reads FleetViews.  Every query runs on a thread worker (FleetSource.refresh
blocks on HTTP), so a slow or dead Prometheus shows as an error line in the header while
the keys go on answering; the table stays the last good one, dimmed, marked as old.  One
refresh every interval (5 s): the table is rebuilt from the new view in place, and only
the rows that changed are repainted.  At most one refresh is in flight: one asked for
meanwhile (`r`, a new filter or grouping) runs when it ends, which the client's deadline
bounds, so a hung Prometheus never piles up threads.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message

from gpudisk_top.fleet.labels import format_filters, parse_filter_text
from gpudisk_top.fleet.view import FleetView
from gpudisk_top.model.present import natural_key
from gpudisk_top.fleet.source import not_one_node
from gpudisk_top.fleet.text import lost_line
from gpudisk_top.session.ticker import stepped_interval
from gpudisk_top.textsafe import printable
from gpudisk_top.ui import glyphs
from gpudisk_top.ui.appkit import ToolApp
from gpudisk_top.ui.screens.fleet_filter import LabelFilterScreen
from gpudisk_top.ui.screens.fleet_help import FleetHelpScreen
from gpudisk_top.ui.screens.fleet_job import JobPicker, JobScreen
from gpudisk_top.ui.screens.fleet_node import NodeScreen
from gpudisk_top.ui.source_call import call_source
from gpudisk_top.ui.widgets.fleet_header import FleetHeader
from gpudisk_top.ui.widgets.fleet_table import (NOGPU_GLYPH, STALE_GLYPH, STARVED_GLYPH, WAIT_GLYPH,
                                                 FleetTable, marks)

INTERVALS_S = (1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0)
SORTS = ("starved", "node", "util", "since")
SORT_NOTE = {"starved": "starved first", "node": "by node", "util": "lowest GPU util first",
             "since": "longest in its state first"}


class ViewReady(Message):
    """A refresh finished (on the worker's thread): its FleetView."""

    def __init__(self, view, asked_mono: float, generation: int) -> None:
        super().__init__()
        self.view = view
        self.asked_mono = asked_mono
        self.generation = generation


def sort_rows(rows, sort: str):
    """The rows in the order of `sort`; "starved": the model's order, as given."""
    if sort == "node":
        return sorted(rows, key=lambda r: natural_key(r.node))
    if sort == "util":
        return sorted(rows, key=lambda r: (r.stale, r.gpu_util_pct is None,
                                           r.gpu_util_pct or 0.0, natural_key(r.node)))
    if sort == "since":
        return sorted(rows, key=lambda r: (r.stale, r.since_s is None, r.since_s or 0.0,
                                           natural_key(r.node)))
    return list(rows)


# the table's keys: not while the node or job screen is on top (they have their own)
TABLE_ACTIONS = {"open_node", "filter", "clear_filter", "group", "sort", "move", "page", "ends"}


class FleetApp(ToolApp):
    TITLE = "gpudisk-top fleet"
    COMMAND = "gpudisk-top fleet"
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("enter", "open_node", "Node"),
        Binding("J", "jobs", "Jobs", key_display="J"),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("g", "group", "Group"),
        Binding("s", "sort", "Sort"),
        Binding("r", "refresh", "Refresh"),
        Binding("space", "pause", "Pause"),
        Binding("escape", "clear_filter", show=False),
        Binding("up,k", "move(-1)", show=False),
        Binding("down,j", "move(1)", show=False),
        Binding("pageup", "page(-1)", show=False),
        Binding("pagedown", "page(1)", show=False),
        Binding("home", "ends(-1)", show=False),
        Binding("end", "ends(1)", show=False),
        Binding("plus,equals_sign", "slower", show=False),
        Binding("minus", "faster", show=False),
    ]

    def _fatal_error(self) -> None:
        """A bug that reaches Textual ends the screen with one line (cli.py's form) and
        exit status 1 (_handle_exception sets it), never a traceback on the terminal;
        GPUDISK_TOP_DEBUG=1 keeps Textual's traceback."""
        if os.environ.get("GPUDISK_TOP_DEBUG"):
            super()._fatal_error()
            return
        err = self._exception or sys.exc_info()[1]
        if any(isinstance(r, Text) for r in self._exit_renderables):
            self._close_messages_no_wait()      # the first bug's line is the one said
            return
        self._exit_renderables.append(Text(   # Text: no markup read in the message
            f"gpudisk-top: internal error: {type(err).__name__}: {printable(str(err))} "
            "(run with GPUDISK_TOP_DEBUG=1 for details)"))
        self._close_messages_no_wait()

    def __init__(self, source, interval_s: float = 5.0, job: str | None = None,
                 autostart: bool = True) -> None:
        """source: a FleetSource (or anything with its refresh/node_timeline and its
        url, job_label, group_by, filters); job: open that training job's view at once
        (--job); autostart: refresh every interval (tests and screenshots apply views
        themselves)."""
        super().__init__()
        self.source = source
        self.interval_s = interval_s
        self.job = job
        self.autostart = autostart
        self.paused = False
        self.sort = SORTS[0]
        self.view = None            # the latest FleetView (the last good rows when it failed)
        self.source_lock = threading.Lock()     # FleetSource: one caller at a time
        # a regrouping or filter asked for, for the worker to give the source (the UI
        # thread never waits on the source's lock: a refresh may hold it for a timeout)
        self._pending: dict = {}
        self._pending_lock = threading.Lock()
        self._asked_mono: float | None = None   # a refresh is in flight since then
        self._again = False                     # another asked for while it was
        self._generation = 0                    # +1 a retarget: older answers are dropped
        self._timer = None
        self._job_opened = False
        self._labels: set[str] = set()     # labels_seen()

    # ------------------------------------------------------------------ layout
    def panels(self) -> ComposeResult:
        yield FleetHeader(id="fleet-header")
        yield FleetTable(id="fleet-table")

    def on_mount(self) -> None:
        self.query_one(FleetTable).focus()
        self.render_view()
        if self.autostart:
            self.action_refresh()
            self._timer = self.set_interval(self.interval_s, self._tick)

    def on_resize(self, event) -> None:
        self.fit_too_small(self.default_screen, event.size)  # the table's, whichever is on top
        self.render_view()

    # ------------------------------------------------------------------ refresh
    def _tick(self) -> None:
        if not self.is_running or self.leave_if_terminal_gone():
            return          # closing: no new question whose answer would be dropped
        if self.paused or self._asked_mono is not None:
            return          # the last one has not answered yet (the client's deadline will)
        self.action_refresh()

    def action_refresh(self) -> None:
        """`r`: query now, or, while a refresh is in flight, as soon as it ends (never a
        second worker: it would only wait behind the first on the source's lock)."""
        if self._asked_mono is not None:
            self._again = True
            return
        self._again = False
        self._asked_mono = time.monotonic()
        self._refresh(self._asked_mono, self._generation)

    @work(thread=True, group="fleet-table", exit_on_error=False)
    def _refresh(self, asked_mono: float, generation: int) -> None:
        view = call_source(self.source_lock, self._ask_source, _Failed)
        if view is not None:
            self.post_message(ViewReady(view, asked_mono, generation))

    def _ask_source(self) -> FleetView:
        """On the worker, holding the source's lock: the regrouping or filter asked for
        meanwhile, then the refresh."""
        with self._pending_lock:
            pending, self._pending = self._pending, {}
        if pending:
            self.source.retarget(**pending)
        return self.source.refresh()

    def on_view_ready(self, message: ViewReady) -> None:
        if not self.is_running:
            # the app is closing (or closed): its screens' widgets are being taken down,
            # and an answer drawn into them died with NoMatches (a slow Prometheus
            # answered `fleet --job` as it was left)
            return
        if message.asked_mono != self._asked_mono:
            return
        self._asked_mono = None
        if message.generation == self._generation:
            self.apply(message.view)
        # else: the answer to the question before a retarget; the new one is asked now
        if self._again or message.generation != self._generation:
            self.action_refresh()

    def apply(self, view) -> None:
        """Show a FleetView (the worker's, or a test's): the table, and the node or job
        screen on top."""
        last = self.view
        if view.error and not view.rows and last is not None and last.rows:
            # keep the last good table, marked as old (the source does so itself too)
            view.rows, view.jobs, view.data_wall_s = last.rows, last.jobs, last.data_wall_s
            view.lost_by_cause = last.lost_by_cause
        self.view = view
        self.render_view()
        for screen in self.screen_stack:
            if isinstance(screen, JobScreen):
                screen.show(view)
            elif isinstance(screen, NodeScreen):
                screen.update_row(self.row_of(screen.key), view.wall_s)
        if self.job and not self._job_opened and view.rows:
            self._job_opened = True
            self.open_job(self.job)

    # ------------------------------------------------------------------ drawing
    def rows(self):
        return sort_rows(self.view.rows, self.sort) if self.view is not None else []

    def row_of(self, key: str):
        """The row of that key (NodeRow.key: a node, or a node and its job)."""
        return next((r for r in self.rows() if r.key == key), None)

    def flags(self) -> list[str]:
        out = []
        if self.paused:
            out.append("PAUSED")
        if self.view is not None and self.view.error and self.view.rows:
            out.append("OLD")
        return out

    def render_view(self) -> None:
        rows = self.rows()
        marked = marks(rows)      # what the rows' badges show, counted
        counts = (len(rows), marked[STARVED_GLYPH], marked[WAIT_GLYPH], marked[STALE_GLYPH],
                  marked[NOGPU_GLYPH])
        filters = self.target("filters")
        self.query_one(FleetHeader).show(
            self.view, self.source.url, self.target("group_by"),
            self.interval_s, counts, self.flags(), format_filters(filters))
        view = self.view
        empty = (f"asking Prometheus{glyphs.ELLIPSIS}" if view is None else
                 "no node to show: Prometheus did not answer" if view.error else
                 "no node reports gpudisk-top metrics" + (" with this filter (escape clears it)"
                                                          if filters else ""))
        self.query_one(FleetTable).show(
            rows, view.wall_s if view is not None else time.time(),
            old=bool(view is not None and view.error), empty=empty,
            note=f"sort: {SORT_NOTE[self.sort]} (s)", jobs=view.jobs if view is not None else (),
            lost=lost_line(view.lost_by_cause) if view is not None else "")

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action in TABLE_ACTIONS and len(self.screen_stack) > 1:
            return False
        return True

    # ------------------------------------------------------------------ actions
    def action_move(self, delta: int) -> None:
        self.query_one(FleetTable).move(delta)

    def action_page(self, direction: int) -> None:
        table = self.query_one(FleetTable)
        table.move(direction * max(1, table.size.height - 2))

    def action_ends(self, direction: int) -> None:
        table = self.query_one(FleetTable)
        table.move(direction * len(table.order))

    def action_open_node(self) -> None:
        node = self.query_one(FleetTable).cursor
        if node is not None:
            self.open_node(node)

    def open_node(self, key: str) -> None:
        """The timeline of the node of the row `key` (NodeRow.key: a job's row opens its
        node's); a row that gathers several scrape targets (--by cluster) is no one node:
        said, not opened."""
        row = self.row_of(key)
        why = not_one_node(row, self.target("group_by"))
        if why:
            self.notify(why + " (g, /)", severity="warning", timeout=6, markup=False)
            return
        wall_s = self.view.wall_s if self.view is not None else time.time()
        self.push_screen(NodeScreen(self.source, row.node if row is not None else key, row,
                                    wall_s, self.interval_s, self.source_lock, key=key))

    def action_jobs(self) -> None:
        jobs = list(self.view.jobs) if self.view is not None else []
        if not jobs:
            label = self.source.job_label
            self.notify(f"no training job: no node carries the label {label}", timeout=4)
            return
        if len(jobs) == 1:
            self.open_job(jobs[0].job)
            return
        cursor = self.query_one(FleetTable).cursor
        first = next((j.job for j in jobs if any(n.key == cursor for n in j.nodes)), None)
        self.push_screen(JobPicker(jobs, first), self._picked_job)

    def _picked_job(self, job: str | None) -> None:
        if job:
            self.open_job(job)

    def open_job(self, job: str) -> None:
        if isinstance(self.screen, JobScreen):
            self.pop_screen()
        screen = JobScreen(job)
        self.push_screen(screen)
        if self.view is not None:
            self.call_after_refresh(screen.show, self.view)

    def labels_seen(self) -> list[str]:
        """The labels the nodes have carried since the start (their targets' labels; a row
        grouped by a wide label keeps only those its nodes share: `g` must still reach
        the others)."""
        for r in self.view.rows if self.view is not None else []:
            self._labels.update(k for k in r.labels if not k.startswith("__"))
        return sorted(self._labels)

    def target(self, what: str):
        """The source's group_by or filters, as the next refresh will ask."""
        with self._pending_lock:
            if what in self._pending:
                return self._pending[what]
        return getattr(self.source, what)

    def retarget(self, **change) -> None:
        """Other rows from now on (FleetSource.retarget's group_by, filters), given to the
        source by the next refresh, which is now; the old rows go."""
        with self._pending_lock:
            self._pending.update(change)
        self._generation += 1
        self.view = None
        self.render_view()
        self.action_refresh()

    def action_filter(self) -> None:
        current = format_filters(self.target("filters"))
        self.push_screen(LabelFilterScreen(current, self.labels_seen()), self._set_filter)

    def _set_filter(self, text: str | None) -> None:
        if text is None:
            return
        try:
            filters = parse_filter_text(text)
        except ValueError as err:
            self.notify(str(err), severity="error", timeout=5, markup=False)
            return
        self.set_filters(filters)

    def action_clear_filter(self) -> None:
        if self.target("filters"):
            self.set_filters({})

    def set_filters(self, filters: dict[str, str]) -> None:
        """filters: label -> value (parse_filter_text's checked names and values)."""
        self.notify("filter: " + (format_filters(filters) or "none (every node)"), timeout=2,
                    markup=False)
        self.retarget(filters=dict(filters))

    def action_group(self) -> None:
        """`g`: the rows grouped by the next label the nodes carry."""
        current = self.target("group_by")
        labels = sorted(set(self.labels_seen()) | {current})
        if len(labels) < 2:
            self.notify("the nodes carry no other label to group by", timeout=3)
            return
        group_by = labels[(labels.index(current) + 1) % len(labels)]
        self.notify(f"rows grouped by {group_by}", timeout=2, markup=False)
        self.retarget(group_by=group_by)

    def action_sort(self) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        self.render_view()
        self.notify(f"sorted: {SORT_NOTE[self.sort]}", timeout=2)

    def action_pause(self) -> None:
        self.paused = not self.paused
        self.render_view()

    def action_help(self) -> None:
        self.push_screen(FleetHelpScreen())

    def _set_interval(self, step: int) -> None:
        self.interval_s = stepped_interval(self.interval_s, step, INTERVALS_S)
        if self._timer is not None:
            self._timer.stop()
            self._timer = self.set_interval(self.interval_s, self._tick)
        self.notify(f"refresh every {self.interval_s:g} s", timeout=2)
        self.render_view()

    def action_slower(self) -> None:
        self._set_interval(+1)

    def action_faster(self) -> None:
        self._set_interval(-1)

    def commands(self) -> tuple:
        return (
            ("Open node", "The timeline of the node under the cursor", self.action_open_node),
            ("Job view", "The nodes of one training job, the straggler named", self.action_jobs),
            ("Filter by label", "label=value pairs; empty: every node", self.action_filter),
            ("Clear the filter", "Every node", self.action_clear_filter),
            ("Group by", "Cycle the label the rows are grouped by", self.action_group),
            ("Sort", "Starved first, node, GPU util, since", self.action_sort),
            ("Refresh now", "Query Prometheus now", self.action_refresh),
            ("Pause or resume", "Stop querying; the screen stays", self.action_pause),
            ("Longer interval", "Refresh less often", self.action_slower),
            ("Shorter interval", "Refresh more often", self.action_faster),
            ("Keys and glyphs", "The help screen", self.action_help),
            ("Quit", "Quit gpudisk-top fleet", self.action_quit),
        )


def _Failed(error: str) -> FleetView:
    """A refresh that raised (a bug): a view with its error, shown like Prometheus's."""
    return FleetView(wall_s=time.time(), error=error)

