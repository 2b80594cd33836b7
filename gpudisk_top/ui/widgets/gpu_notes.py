"""The GPU panel's throttle line, under the cells beside the busy tier's notes
(widgets/gpu_busy.py): which GPUs had their clocks held down this interval, by what and
for what share of it, the GPUs that read alike grouped by range ("throttled: GPU 0-3
pwr 40-44%, therm 10%; GPU 5 pwr cap (mask)").  A GPU that counts no duration says its
reasons at the read and that they are the bit mask, never a share it does not have.
The words are model/gpu_words.py's, as --once says them.  One line whatever the number
of GPUs, so that 8 GPUs still fit at 80x24.
"""

from __future__ import annotations

from gpudisk_top.model.gpu_words import SHORT, held_pct, throttle_short, whole_pct
from gpudisk_top.ui import theme
from gpudisk_top.verdict.detect.states import gpu_ranges

LEAD = "  throttled: "


def throttle_notes(gpus, width: int) -> list:
    """[] where no GPU's clocks were held down, else one line, cut to `width`: the GPUs
    held down by the same reasons together, each reason with its shares' span."""
    groups: dict[tuple, list] = {}
    for g in gpus:
        if g.lost:
            continue
        held = held_pct(g)
        # grouped by what held them: the reasons of the durations, or the mask's words
        key = ("d", *held) if held else ("m", *throttle_short(g))
        if len(key) > 1:
            groups.setdefault(key, []).append(g)
    if not groups:
        return []
    parts = []
    for key, members in groups.items():
        where = gpu_ranges([g.index for g in members])
        if key[0] == "m":
            parts.append(f"{where} {', '.join(key[1:])}")
            continue
        shares = [f"{SHORT[r]} {_span([held_pct(g)[r] for g in members])}" for r in key[1:]]
        parts.append(f"{where} {', '.join(shares)}")
    text = LEAD + "; ".join(parts)
    if len(text) > width:
        text = text[:max(0, width - 1)] + "…"
    return [[(text, theme.WARN)]]


def _span(values) -> str:
    """'42%', or '40-44%' where the GPUs' shares differ in whole percent."""
    lo, hi = whole_pct(min(values)), whole_pct(max(values))
    return lo if lo == hi else f"{lo[:-1]}-{hi}"
