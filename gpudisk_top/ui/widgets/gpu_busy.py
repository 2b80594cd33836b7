"""The GPU panel's busy figure with its tier (model/busy_tier.py): in each cell the tier's
tag before the percent ("  SM  34%", "util  34%") and a mark after it, and one line
under the cells that says what the marks mean: `!` SM activity and utilization.gpu far
apart ("GPU 0 SM 3% (util 100%)"; several together: "GPU 0-6 SM 3-9% (util 97-100%)"), `*` a GPU with GPM whose figure fell back to
utilization.gpu this interval, and why (its busy_note).  One line whatever the number of
GPUs, so that 8 GPUs still fit at 80x24.
"""

from __future__ import annotations

from gpudisk_top.model.busy_tier import TAG_W, apart, busy_text, tag
from gpudisk_top.model.gpu import BUSY_GPM
from gpudisk_top.ui import theme
from gpudisk_top.verdict.detect.states import gpu_ranges

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
    """[] where no GPU is marked, else one line: the GPUs far apart together, with their
    figures ("! GPU 0-6 SM 3-9% (util 97-100%)"; one GPU: busy_text's), then the GPUs
    that fell back, by reason ("* GPU 5 util: GPM: first sample ..."), cut to `width`."""
    live = [g for g in gpus if not g.lost]
    apart_gpus = [g for g in live if apart(g)]
    parts = []
    if len(apart_gpus) == 1:
        g = apart_gpus[0]
        parts.append(f"{APART_MARK} GPU {g.index} {busy_text(g)}")
    elif apart_gpus:
        sm = _span([g.util_pct for g in apart_gpus])
        util = _span([g.gpu_util_pct for g in apart_gpus])
        parts.append(f"{APART_MARK} {gpu_ranges([g.index for g in apart_gpus])} "
                     f"{tag(BUSY_GPM)} {sm} (util {util})")
    by_note: dict[str, list[int]] = {}
    for g in live:
        if g.busy_note and not apart(g):
            by_note.setdefault(g.busy_note, []).append(g.index)
    parts += [f"{FELL_BACK_MARK} {gpu_ranges(idx)} util: {note}" for note, idx in by_note.items()]
    if not parts:
        return []
    text = "  " + "; ".join(parts)
    if len(text) > width:
        text = text[:max(0, width - 1)] + "…"
    return [[(text, theme.DIM)]]


def _span(values) -> str:
    """'9%', or '3-9%' where they differ (whole percent)."""
    lo, hi = round(min(values)), round(max(values))
    return f"{lo}%" if lo == hi else f"{lo}-{hi}%"
