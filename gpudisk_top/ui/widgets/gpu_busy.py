"""The GPU panel's busy figure with its tier (model/busy_tier.py): in each cell the tier's
tag before the percent ("  SM  34%", "util  34%") and a mark after it, and one line
under the cells that says what the marks mean: `!` SM activity and utilization.gpu far
apart ("GPU 0 SM 3% (util 100%)"), `*` a GPU with GPM whose figure fell back to
utilization.gpu this interval, and why (its busy_note).  One line whatever the number of
GPUs, so that 8 GPUs still fit at 80x24.
"""

from __future__ import annotations

from gpudisk_top.model.busy_tier import TAG_W, apart, busy_text, tag
from gpudisk_top.ui import theme

APART_MARK = "!"
FELL_BACK_MARK = "*"
BUSY_W = TAG_W + 2       # what a cell's busy figure adds to a percent: the tag, a space, the mark


def mark(g) -> str:
    """A GpuView's mark: APART_MARK, FELL_BACK_MARK or a blank."""
    if apart(g):
        return APART_MARK
    return FELL_BACK_MARK if g.busy_note else " "


def busy_cell(g) -> str:
    """The busy figure as a cell shows it, TAG_W + 6 wide: "  SM  34% ", "util 100%!"."""
    pct = "n/a" if g.util_pct is None else f"{g.util_pct:3.0f}%"
    return f"{tag(g.busy_source):>{TAG_W}} {pct:>4}{mark(g)}"


def notes_line(gpus, width: int) -> list:
    """[] where no GPU is marked, else one line: each marked GPU's figures, or why it fell
    back, cut to `width`."""
    parts = []
    for g in gpus:
        if g.lost:
            continue
        if apart(g):
            parts.append(f"{APART_MARK} GPU {g.index} {busy_text(g)}")
        elif g.busy_note:
            parts.append(f"{FELL_BACK_MARK} GPU {g.index} util: {g.busy_note}")
    if not parts:
        return []
    text = "  " + "; ".join(parts)
    if len(text) > width:
        text = text[:max(0, width - 1)] + "…"
    return [[(text, theme.DIM)]]
