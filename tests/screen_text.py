"""What a test reads off the screen, as text: a Line-API panel's rows (its `_lines`, the
(text, style) pairs it drew) and the whole screen as Textual composed it.  One owner, so
that a change in how a panel keeps its rows is mended once for every UI test."""

from __future__ import annotations


def lines_of(widget) -> list[str]:
    """The rows `widget` (a Line-API panel of ui/widgets/) last drew, as plain text."""
    return ["".join(text for text, _ in line) for line in widget._lines]


def text_of(widget) -> str:
    """The rows `widget` last drew, one a line."""
    return "\n".join(lines_of(widget))


def screen_lines(app) -> list[str]:
    """The whole screen of a running app as the compositor would draw it now (every
    layer, modal screens included), a line a row, each line's trailing blanks cut."""
    strips = app.screen._compositor.render_strips()
    return ["".join(seg.text for seg in strip).rstrip() for strip in strips]


def screen_text(app) -> str:
    """screen_lines(app), one a line."""
    return "\n".join(screen_lines(app))
