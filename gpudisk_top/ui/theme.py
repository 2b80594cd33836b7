"""Glyphs and styles.  Meaning never by colour alone: every starved column also carries a
letter, so NO_COLOR and 16-colour terminals still show it."""

from __future__ import annotations

from rich.style import Style

from gpudisk_top.ui import glyphs
# one letter per state for the timeline's state row (pending, not yet an episode, in lower
# case) and the banner's badge: the detector's list of states carries them (states.py)
from gpudisk_top.verdict import detect as _detect

STATE_GLYPH, STATE_BADGE = _detect.STATE_GLYPH, _detect.STATE_BADGE
BARS = glyphs.BARS

PLAIN = Style()
DIM = Style(dim=True)
BOLD = Style(bold=True)
HEAD = Style(bold=True, reverse=True)
HEAD_SORTED = Style(bold=True, underline=True)   # the column the rows are sorted by
LABEL = Style(bold=True)
GOOD = Style(color="green")
WARN = Style(color="yellow")
BAD = Style(color="red", bold=True)
STARVED_BG = Style(bgcolor="red", color="white", bold=True)
PENDING_BG = Style(bgcolor="yellow", color="black")
BANNER = {"idle": Style(reverse=True), "healthy": Style(bgcolor="green", color="black", bold=True)}
BANNER_STARVED = Style(bgcolor="red", color="white", bold=True)
SELECTED = Style(reverse=True)
FOCUS_MARK = Style(color="cyan", bold=True)
CULPRIT = Style(color="red", bold=True)      # the device or process the verdict blames
STARVED_SHADE = Style(bgcolor="dark_red")     # the timeline's starved columns
PENDING_SHADE = Style(bgcolor="grey35")       # ... and those building up to an episode

# Under NO_COLOR Textual turns every colour into a grey (red into colour 237, close to a
# dark terminal's background): emphasis must then come from attributes, which survive.
_NO_COLOR = {
    "GOOD": Style(), "WARN": Style(bold=True), "BAD": Style(bold=True, reverse=True),
    "CULPRIT": Style(bold=True, reverse=True), "FOCUS_MARK": Style(bold=True),
    "STARVED_BG": Style(bold=True, reverse=True), "PENDING_BG": Style(underline=True),
    "BANNER_STARVED": Style(bold=True, reverse=True),
    "STARVED_SHADE": Style(reverse=True), "PENDING_SHADE": Style(underline=True),
}


_COLOR = {name: globals()[name] for name in _NO_COLOR}
_HEALTHY = BANNER["healthy"]


def use_no_color(on: bool = True) -> None:
    """Swap the coloured styles for attribute-only ones, or back (the app calls this at
    start with Textual's no_color; widgets read theme.NAME at draw time, so all of them
    follow)."""
    globals().update(_NO_COLOR if on else _COLOR)
    BANNER["healthy"] = Style(bold=True) if on else _HEALTHY


def level_style(pct: float | None) -> Style:
    if pct is None:
        return DIM
    if pct >= 70:
        return GOOD
    return WARN if pct >= 30 else BAD


def bar(value: float | None, top: float) -> str:
    """One cell: the value as a block of 0-8 eighths of `top`."""
    if value is None or top <= 0:
        return " "
    i = int(round(min(max(value / top, 0.0), 1.0) * (len(BARS) - 1)))
    return BARS[i]


def hbar(pct: float | None, width: int) -> str:
    """A horizontal bar of `width` cells for 0-100 %."""
    if pct is None:
        return "?" * 0 + " " * width
    full = pct / 100 * width
    n = int(full)
    rest = full - n
    partial = glyphs.HBAR_PARTS[int(rest * 8)] if n < width else ""
    return (glyphs.FULL * n + partial).ljust(width)[:width]
