"""Textual's side of drawing in ASCII (glyphs.py chooses, and owns every form): a line
filter that writes each line of every widget of an app, borders and scroll bars
included, in ASCII cell for cell; scroll bars whose thumbs are whole cells (their
eighths would come out as the bars' density ramp); and key names for the footer's
arrows and icons."""

from __future__ import annotations

from rich.segment import Segment
from textual.filter import LineFilter
from textual.scrollbar import ScrollBar, ScrollBarRender

from gpudisk_top.ui import glyphs


class AsciiFilter(LineFilter):
    """Every segment's text through glyphs.to_ascii: the same cells, ASCII characters."""

    def apply(self, segments: list[Segment], background) -> list[Segment]:
        if all(s.text.isascii() for s in segments):
            return segments
        return [s if s.text.isascii() else Segment(glyphs.to_ascii(s.text), s.style, s.control)
                for s in segments]


ASCII_FILTER = AsciiFilter()


class _WholeCellScrollBar(ScrollBarRender):
    # a thumb's ends are drawn in eighths of a cell by these; blanks keep it whole cells,
    # drawn by its colour (or, under NO_COLOR, by Textual's reverse)
    VERTICAL_BARS = [" "] * 8
    HORIZONTAL_BARS = [" "] * 8


def use_ascii_scrollbars(on: bool = True) -> None:
    """Draw every scroll bar in whole cells, or back in eighths (Textual's renderer is one
    for all bars, so the app that loads last decides)."""
    ScrollBar.renderer = _WholeCellScrollBar if on else ScrollBarRender


def key_display(shown: str, key: str) -> str:
    """A key as the footer shows it, in ASCII: Textual's arrows in their forms, an icon
    that has none (⏎ ...) by the key's name."""
    if shown.isascii():
        return shown
    if all(c.isascii() or ord(c) in glyphs.TABLE for c in shown):
        return glyphs.to_ascii(shown)
    return key
