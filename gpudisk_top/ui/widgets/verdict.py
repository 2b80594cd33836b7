"""The verdict banner: the state in words and glyph, since when, and its evidence; on a
shared node, which job it is of (the node's worst, or the job `j` follows)."""

from __future__ import annotations

import textwrap

from gpudisk_top.verdict.detect import STARVED_STATES, UNAVAILABLE
from gpudisk_top.verdict.whatif import best_line
from gpudisk_top.model.present import pct
from gpudisk_top.textsafe import printable
from gpudisk_top.ui import glyphs, theme
from gpudisk_top.ui.format import clock, duration
from gpudisk_top.ui.widgets.base import LinesPanel

MORE = f" {glyphs.ELLIPSIS} (e)"


def _cuts(text: str, parts: bool) -> list[int]:
    """Where text may be cut, in order: before each "; " (between clauses) and, with
    parts, each ", " outside parentheses (between a clause's figures)."""
    cuts, depth = [], 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if text.startswith("; ", i) or (parts and depth == 0 and text.startswith(", ", i)):
            cuts.append(i)
    return cuts


def fit_clauses(text: str, width: int, lines: int, more: str = MORE,
                parts: bool = False) -> list[str]:
    """text wrapped to `width` in at most `lines` lines, cut between its clauses ("; ")
    rather than mid-sentence, saying so with `more`; with parts, also between a clause's
    parts (", " outside parentheses: the verdict's 'sdb r_await 9.87 ms (baseline 0.75
    ms)' stays when its 'aqu-sz 34.27' no longer fits); a first clause too long is cut at
    a word.  [] when lines is 0."""
    if lines <= 0:
        return []
    wrapped = textwrap.wrap(text, width)
    if len(wrapped) <= lines:
        return wrapped or [""]
    for end in reversed(_cuts(text, parts)):
        wrapped = textwrap.wrap(text[:end] + more, width)
        if len(wrapped) <= lines:
            return wrapped
    wrapped = textwrap.wrap(text, width)[:lines]
    last = wrapped[-1]
    wrapped[-1] = last[:max(0, width - 1)].rstrip() + glyphs.ELLIPSIS
    return wrapped


class VerdictBanner(LinesPanel):
    DEFAULT_CSS = "VerdictBanner { height: auto; }"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.max_lines = 4     # the evidence's and the advice's, together (set by the app)

    def show(self, update, enter_intervals: int, alert: str | None = None,
             who: str | None = None) -> None:
        """who: what the verdict is of, said first ("job 3/8 NAME", "8 jobs"), printable
        and cut by the caller; None: the node, as a node of one job says it."""
        if self.unchanged(update, enter_intervals, alert, self.max_lines, who):
            return
        width = max(20, self.size.width or 80)
        v = update.verdict if update is not None else None
        if v is None:
            self.set_lines([[(f" {glyphs.ELLIPSIS} ", theme.HEAD), (" collecting the first interval", theme.DIM)]])
            return
        model = update.model
        badge = theme.STATE_BADGE.get(v.state, v.state.upper())
        style = theme.BANNER_STARVED if v.state in STARVED_STATES else theme.BANNER.get(v.state, theme.HEAD)
        text = ""
        if v.episode is not None:
            text = (f" since {clock(v.episode.start_wall_s)} "
                    f"({duration(v.wall_s - v.episode.start_wall_s)}): {v.reason}")
        elif v.raw_state in STARVED_STATES:
            run = update.pending_intervals
            text = (f" watching: {v.raw_state} {run}/{enter_intervals} intervals: "
                    f"{v.raw_reason}")
        elif v.state == "healthy":
            # a job's verdict: its own GPUs
            mine = set(v.job.gpus) if v.job is not None and who else None
            utils = [g.util_pct for g in model.gpus if g.processes and g.util_pct is not None
                     and (mine is None or g.index in mine)]
            whose = "GPUs with a job" if mine is None else "its GPUs"
            text = (f" {whose} are busy (mean {pct(sum(utils) / len(utils))})"
                    if utils else "")
        elif v.state == UNAVAILABLE:
            text = f" {v.reason}"       # why no GPU can be read (the GPU panel does not repeat it)
        elif v.state == "idle":
            text = " no compute process on the GPUs"
        if who:
            text = f" {who}:{text}"
        advice = ("advice: " + v.advice) if v.state in STARVED_STATES and v.advice else None
        best = best_line(v.whatif) if v.state in STARVED_STATES else None
        if best:
            # the best fix first: a banner cut to its first clause still says what it gains
            advice = f"{best}; {advice}" if advice else best
        # escaped before it is wrapped: textwrap would make a mountpoint's newline a space
        # (the path shown as one it is not) and count an escape's width wrong
        text = printable(text)
        advice = printable(advice) if advice else advice
        alert_lines = 1 if alert else 0
        budget = max(1, self.max_lines - alert_lines)
        advice_lines = 0 if not advice else (1 if budget < 5 else 2)
        text_w = width - len(badge) - 3
        reason = fit_clauses(text, text_w, max(1, budget - advice_lines), parts=True)
        lines = [[(f" {badge} ", style), (reason[0], theme.PLAIN)]]
        indent = " " * (len(badge) + 2)
        lines += [[(indent + more, theme.PLAIN)] for more in reason[1:]]
        if advice and budget > 1:
            for more in fit_clauses(advice, text_w, advice_lines, more=" " + glyphs.ELLIPSIS):
                lines.append([(indent + more, theme.DIM)])
        if alert:
            lines.insert(0, [(" ALERT ", theme.BAD), (" " + alert, theme.BOLD)])
        self.set_lines(lines)
