"""The jobs of a shared node as the GPU panel lists them: a row per job with its number
(what `j` follows and the banner names), its state's mark, its name, its id, its GPUs
with a glyph of each one's utilization, and their mean; then the GPUs of no job.

The marks are the detector's (verdict/detect/states.py): the fleet table's STATE_WORD
("▲ DISK-STARVED") where the row has room, else that word's sign and the timeline's
letter ("▲D"), so a state never rests on colour.  Names are untrusted (a pod's, a
container's, a process's own text): made printable and cut, so that no name moves
another row.  The columns are aligned over every row and cut together (base.CUT_FIRST
["jobs"]); where even the narrowest row does not fit one a line, rows are packed side by
side in cells of one width.  UI-free of Textual: lines of (text, style) only."""

from __future__ import annotations

from dataclasses import dataclass

from gpudisk_top.model.present import pct
from gpudisk_top.textsafe import printable
from gpudisk_top.ui import glyphs, theme
from gpudisk_top.ui.follow import RAW_NAME_MAX
from gpudisk_top.ui.widgets.base import Line, cut, fit
from gpudisk_top.verdict.detect import STARVED_STATES, STATE_GLYPH, STATE_WORD, UNAVAILABLE
from gpudisk_top.verdict.detect.states import gpu_ranges, mean

NAME_MAX = 40        # a name's widest form
NAME_MIN = 6         # ... and its narrowest
BARS_MAX = 8         # GPUs drawn as a glyph each; a job of more shows the first, then …
NO_JOB = "no job"    # the row of the GPUs no job computes on (idle, or lost)


@dataclass(frozen=True)
class JobRow:
    """One row: a job (number from 1, its JobInfo, its state) or, number 0 and info None,
    the GPUs of no job."""

    number: int
    info: object | None
    state: str
    gpus: tuple[int, ...]
    utils: tuple[float | None, ...]

    @property
    def util_pct(self) -> float | None:
        return mean(list(self.utils))


def job_rows(model, verdicts: dict) -> list[JobRow]:
    """The model's jobs in their order with their verdict's state (verdicts: by job id),
    then the GPUs of no job (a row only where there are some)."""
    util = {g.index: (None if g.lost else g.util_pct) for g in model.gpus}
    rows, used = [], set()
    for n, info in enumerate(model.jobs, 1):
        v = verdicts.get(info.id)
        rows.append(JobRow(n, info, v.state if v is not None else "idle", info.gpus,
                           tuple(util.get(i) for i in info.gpus)))
        used.update(info.gpus)
    rest = tuple(g.index for g in model.gpus if g.index not in used)
    if rest:
        rows.append(JobRow(0, None, "idle", rest, tuple(util[i] for i in rest)))
    return rows


def state_style(state: str):
    if state in STARVED_STATES or state == UNAVAILABLE:
        return theme.BAD
    return theme.GOOD if state == "healthy" else theme.DIM


def _short_mark(state: str) -> str:
    """'▲D': the state word's sign and the timeline's letter ('●·' healthy, '○ ' idle)."""
    return STATE_WORD.get(state, "?")[0] + STATE_GLYPH.get(state, "?")


def _bars(utils) -> str:
    bars = "".join(theme.bar(u, 100.0) if u is not None else glyphs.STALE for u in utils)
    return bars if len(bars) <= BARS_MAX else bars[:BARS_MAX - 1] + glyphs.ELLIPSIS


class JobTable:
    """The rows' texts and their columns' widths; line() draws one row in the forms that
    fit(width) chose for every row alike."""

    def __init__(self, rows: list[JobRow]) -> None:
        self.rows = rows
        # a name is escaped before it is measured: an escape sequence shows as \\x1b
        self.names = [printable(r.info.name[:RAW_NAME_MAX]) if r.info is not None else NO_JOB
                      for r in rows]
        # an id its name already says ("slurm 1001 (train.py)", "pid 4121 (python)") is
        # not said twice
        self.ids = [f"[{r.info.id}] " if r.info is not None
                    and r.info.id.partition(":")[2] not in r.info.name else "" for r in rows]
        self.gpu_texts = [gpu_ranges(list(r.gpus)) + " " for r in rows]
        longest = min(NAME_MAX, max(len(n) for n in self.names))
        word_w = max(len(STATE_WORD.get(r.state, r.state)) for r in rows) + 1
        self.parts = {
            "num": [3],
            "word": [word_w, 3],
            "name": [w + 1 for w in range(max(longest, NAME_MIN), NAME_MIN - 1, -1)],
            "id": [max(len(i) for i in self.ids), 0],
            "gpus": [max(len(t) for t in self.gpu_texts)],
            "bars": [max(len(_bars(r.utils)) for r in rows) + 1, 0],
            "util": [4],
        }

    def fit(self, width: int) -> dict[str, int]:
        """The width each column gets so that a row fits `width` cells if it can."""
        pick = fit("jobs", self.parts, width)
        return {k: widths[pick[k]] for k, widths in self.parts.items()}

    def min_width(self) -> int:
        return sum(widths[-1] for widths in self.parts.values())

    def line(self, i: int, w: dict[str, int], followed: bool) -> Line:
        r = self.rows[i]
        style = state_style(r.state)
        if r.info is None:
            num, word = (f" {glyphs.DASH} ", theme.DIM), ("".ljust(w["word"]), theme.DIM)
        else:
            num = (f"{r.number:>2} ", theme.SELECTED if followed else theme.BOLD)
            full = STATE_WORD.get(r.state, r.state)
            word = ((full if w["word"] > 3 else _short_mark(r.state)).ljust(w["word"]), style)
        util = r.util_pct
        level = theme.level_style(util) if r.info is not None else theme.DIM
        name = cut(self.names[i], w["name"] - 1).ljust(w["name"])
        line = [(glyphs.POINTER if followed else " ", theme.FOCUS_MARK), num, word,
                (name, theme.BOLD if followed else theme.PLAIN),
                (self.ids[i][:w["id"]].ljust(w["id"]), theme.DIM),
                (self.gpu_texts[i].ljust(w["gpus"]), theme.PLAIN)]
        if w["bars"]:
            line.append((_bars(r.utils).ljust(w["bars"]), level))
        line.append((f"{pct(util):>4}", level))
        return line


def job_lines(rows: list[JobRow], width: int, budget: int, followed: str | None) -> list[Line]:
    """The rows, one a line where they fit `budget` lines, else packed side by side (as
    many a line as it takes to fit, while a cell keeps its narrowest form); the rows that
    still do not fit are the panel's to scroll."""
    table = JobTable(rows)
    mark = lambda r: r.info is not None and r.info.id == followed  # noqa: E731
    per_line = 1
    while (-(-len(rows) // per_line) > budget
           and (width - 1) // (per_line + 1) - 1 >= table.min_width() + 1):
        per_line += 1
    cell_w = (width - 1) // per_line - (1 if per_line > 1 else 0)
    w = table.fit(cell_w - 1)
    lines = []
    for start in range(0, len(rows), per_line):
        line: Line = []
        for i in range(start, min(start + per_line, len(rows))):
            cell = table.line(i, w, mark(rows[i]))
            used = sum(len(t) for t, _ in cell)
            line.extend(cell)
            if per_line > 1:
                line.append((" " * max(1, cell_w - used + 1), theme.PLAIN))
        lines.append(line)
    return lines
