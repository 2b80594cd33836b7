"""`J` (or `fleet --job NAME`): the nodes of one training job side by side, a row each on
the fleet table's columns (their last-hour sparklines on one time axis), the straggler
called out: a banner line with the model's reason (fleet.jobs.judge_job), its row
labelled ▲ STRAGGLER with ◀ after its name, the rows of the nodes that wait on it
◇ WAITING ("waiting on" it), and the banner's counts those of the rows' badges.  A list
picks the job when there are several."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from gpudisk_top.fleet.text import job_reason, job_title
from gpudisk_top.model.timefmt import clock_hm
from gpudisk_top.textsafe import printable
from gpudisk_top.ui import glyphs, theme
from gpudisk_top.ui.widgets.base import LinesPanel
from gpudisk_top.ui.widgets.fleet_table import (NOGPU_GLYPH, STALE_GLYPH, STARVED_GLYPH, WAIT_GLYPH,
                                                 FleetTable, marks)
from gpudisk_top.ui.widgets.verdict import fit_clauses


class JobBanner(LinesPanel):
    """The job, its counts, and the straggler in words (or why there is none)."""

    DEFAULT_CSS = "JobBanner { height: auto; }"

    def show(self, label: str, job: str, group) -> None:
        width = max(40, self.size.width or 80)
        if group is None:
            self.set_lines([[(f" {printable(job)} ", theme.HEAD),
                             ("  no node of this job reports now", theme.DIM)]])
            return
        nodes = group.nodes
        marked = marks(nodes, group)      # what the rows' badges show, counted
        # the job by the exporters' name and id, or by the label written on its targets
        title = printable(group.title)[:max(20, width // 2)]
        dot = glyphs.DOT
        lines = [[(f" {title} ", theme.HEAD),
                  (f"  {len(nodes)} nodes {dot} {STARVED_GLYPH} {marked[STARVED_GLYPH]} starved "
                   f"{dot} {WAIT_GLYPH} {marked[WAIT_GLYPH]} waiting {dot} "
                   f"{STALE_GLYPH} {marked[STALE_GLYPH]} stale"
                   + (f" {dot} {NOGPU_GLYPH} {marked[NOGPU_GLYPH]} no GPUs" if marked[NOGPU_GLYPH]
                      else ""), theme.PLAIN)]]
        if group.straggler is not None:
            badge, style = f"{glyphs.BLAMED} STRAGGLER {group.straggler.node}", theme.BANNER_STARVED
        else:
            badge, style = "● NO STRAGGLER", theme.BANNER.get("healthy", theme.HEAD)
        text = fit_clauses(job_reason(group, clock_hm), max(20, width - len(badge) - 3), 2, more=" " + glyphs.ELLIPSIS)
        lines.append([(f" {badge} ", style), (" " + text[0], theme.PLAIN)])
        lines += [[(" " * (len(badge) + 3) + more, theme.PLAIN)] for more in text[1:]]
        self.set_lines(lines)


class JobScreen(Screen):
    BINDINGS = [
        Binding("escape,q", "app.pop_screen", "Back"),
        Binding("enter", "open_node", "Node"),
        Binding("J", "app.jobs", "Jobs", key_display="J"),
        Binding("up,k", "move(-1)", show=False),
        Binding("down,j", "move(1)", show=False),
    ]
    DEFAULT_CSS = """
    JobScreen { layout: vertical; overflow: hidden; }
    JobScreen FleetTable { height: 1fr; }
    """

    def __init__(self, job: str) -> None:
        super().__init__()
        self.job = job

    def compose(self) -> ComposeResult:
        yield JobBanner()
        yield FleetTable()
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one(FleetTable).focus()

    def show(self, view) -> None:
        """The app's latest FleetView (every refresh)."""
        group = view.job(self.job)
        self.query_one(JobBanner).show(view.job_label, self.job, group)
        rows = group.nodes if group is not None else []
        self.query_one(FleetTable).show(
            rows, view.wall_s, old=bool(view.error), marked=group.straggler.node
            if group is not None and group.straggler is not None else None,
            empty=f"no node of job {printable(self.job)}", jobs=view.jobs, job=group)

    @property
    def cursor(self) -> str | None:
        return self.query_one(FleetTable).cursor

    def action_move(self, delta: int) -> None:
        self.query_one(FleetTable).move(delta)

    def action_open_node(self) -> None:
        if self.cursor is not None:
            self.app.open_node(self.cursor)


def _describe(group) -> Text:
    stale = sum(1 for r in group.nodes if r.stale)
    what = (f"{glyphs.BLAMED} straggler {group.straggler.node}" if group.straggler is not None
            else "no straggler")
    n = len(group.nodes)
    return Text(printable(f"{job_title(group)}  {n} node{'' if n == 1 else 's'}"
                          + (f", {stale} stale" if stale else "") + f"  {what}"))


class JobPicker(ModalScreen[str | None]):
    """The jobs, those with a straggler first (the model's order); Enter opens one."""

    DEFAULT_CSS = """
    JobPicker { align: center middle; }
    JobPicker > Vertical { width: 80; max-width: 100%; height: auto; max-height: 90%;
                           border: round $accent; background: $surface; }
    JobPicker OptionList { height: auto; max-height: 20; }
    """
    BINDINGS = [Binding("escape,q", "cancel", "Close")]

    def __init__(self, jobs, first: str | None = None) -> None:
        super().__init__()
        self.jobs = list(jobs)
        self.first = first

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(" Training jobs: enter opens one", markup=False)
            yield OptionList(*[Option(_describe(g), id=f"job-{i}")
                               for i, g in enumerate(self.jobs)])

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        at = next((i for i, g in enumerate(self.jobs) if g.job == self.first), 0)
        options.highlighted = at
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.jobs[int(event.option.id.split("-", 1)[1])].job)

    def action_cancel(self) -> None:
        self.dismiss(None)
