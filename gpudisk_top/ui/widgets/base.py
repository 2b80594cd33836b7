"""A panel drawn with the Line API: the panel builds its lines once per update and
render_line() hands them out, so a repaint costs no formatting."""

from __future__ import annotations

from typing import Sequence

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

from gpudisk_top.textsafe import printable
from gpudisk_top.ui import glyphs

Line = list[tuple[str, Style]]  # runs of text with one style each


_PAD = Style()
_MORE = Style(dim=True, italic=True)

# What is cut first when a line does not fit, least important first: the one table of
# every panel's columns and the header's parts (issue 23: at 80 columns an id was kept
# and the command cut; a health word kept and the mountpoint cut).  A part a panel
# gives fit() that is not named here is never cut.
CUT_FIRST = {
    # the header: the tool's own CPU and RSS go first, the flags (and the `!` that opens
    # what cannot be seen, with its fix) last, and they only get shorter words
    "header": ("self", "kernel", "app", "every", "host", "fix-hint", "flags"),
    # the disk table: iostat's wide columns, a health reason's tail, the numbers' padding,
    # the class, the rest of the reason, the health word (its glyph stays), and only
    # then the mountpoint
    "disks": ("wide", "reason-tail", "pad", "class", "health-reason", "health-word", "mount"),
    # I/O by process: a long command's tail, the cgroup id, then the command itself; in
    # its title and legend, the longer words, then how the processes were found
    "ioprocs": ("command-tail", "cgroup", "command", "legend", "order", "note"),
    # the timeline's title: the state letters' meanings (down to the letters), how to
    # see hidden rows, the letters, the "disk rows:" word, the keys back to now; the
    # metric, the time scrolled back to and how many rows are hidden stay
    "timeline": ("legend", "rows-detail", "letters", "rows-word", "keys"),
    # the GPU panel's rows of jobs (widgets/jobrows.py): the job's id (its name says
    # who it is), the GPUs' glyphs (the mean stays), the state's word (down to its sign
    # and letter), then the name, down to a few characters
    "jobs": ("id", "bars", "word", "name"),
}


def fit(panel: str, parts: dict[str, Sequence[int]], room: int) -> dict[str, int]:
    """For each part (key -> the widths it may take, widest first) the index of the width
    it gets, so that the widths add up to `room` if they can: the panel's parts are cut
    in CUT_FIRST[panel]'s order, each as far as it must before the next is touched; then
    what a later, coarser cut left room for grows back, the most important first.
    Raises KeyError for an unknown panel."""
    choice = {key: 0 for key in parts}
    total = sum(widths[0] for widths in parts.values() if widths)
    for key in CUT_FIRST[panel]:
        widths = parts.get(key)
        if not widths:
            continue
        i = 0
        while total > room and i < len(widths) - 1:
            i += 1
            total -= widths[i - 1] - widths[i]
        choice[key] = i
        if total <= room:
            break
    # a later cut may have freed more than it had to: what matters more grows back first
    for key in reversed(CUT_FIRST[panel]):
        widths, i = parts.get(key), choice.get(key, 0)
        while i > 0 and total + widths[i - 1] - widths[i] <= room:
            total += widths[i - 1] - widths[i]
            i -= 1
        if key in choice:
            choice[key] = i
    return choice


def cut(text: str, width: int) -> str:
    """`text` in at most `width` cells, a cut one ending in …."""
    return text if len(text) <= width else text[:max(0, width - 1)] + glyphs.ELLIPSIS[:width]


def strip(line: Line, width: int) -> Strip:
    # never a None style: Textual's NO_COLOR (monochrome) filter cannot take one; text
    # from the machine (a process's name, a device's) may hold escape sequences: a
    # Segment goes to the terminal as it is, so every one is made printable here
    segments = [Segment(printable(text), style or _PAD) for text, style in line if text]
    return Strip(segments).crop_extend(0, width, _PAD)


class LinesPanel(Widget):
    """Holds a list of lines; `height: auto` follows their count.

    The first `fixed` lines (a title, a column header) stay put while the rest scrolls
    (up/down while focused); when lines are hidden below, the last row says how many."""

    DEFAULT_CSS = """
    LinesPanel { height: auto; }
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._lines: list[Line] = []
        self._strips: dict[int, Strip] = {}
        self._scroll = 0  # lines scrolled past, below the fixed ones
        self.fixed = 0    # lines at the top that never scroll (set by show())
        self._input: tuple | None = None  # show()'s arguments, to rebuild on resize and focus
        self._built_from: tuple | None = None  # unchanged()'s last key

    def redraw(self) -> None:
        """Rebuild the lines from the panel's last input (after focus or size changes)."""
        if self._input is not None:
            self.show(*self._input)

    def show(self, *args) -> None:
        """Build the lines from `args`; panels that redraw keep them in self._input."""
        raise NotImplementedError

    def on_resize(self) -> None:
        self.redraw()

    def watch_has_focus(self, _focused: bool) -> None:
        if self.hidden_below():
            self.refresh()     # the last row's hint ("tab to this panel") comes or goes
        self.redraw()  # the focus mark moves

    def unchanged(self, *inputs) -> bool:
        """The one rule of every panel: draw only what changed.  True when `inputs` (what
        the panel's lines are made of, as values that compare cheaply), the panel's size
        and its focus are those of its last build: its lines would be the same, and the
        caller skips building them.  False (and `inputs` remembered) otherwise.  A panel
        whose inputs are new each sample needs not call it: set_lines compares the lines
        themselves."""
        key = (inputs, self.size, self.has_focus)
        if key == self._built_from:
            return True
        self._built_from = key
        return False

    def set_lines(self, lines: list[Line]) -> None:
        """Replace the lines; repaint only the rows whose content changed (a 1 Hz screen
        where most numbers of idle disks stay put costs little, and a timeline's rows
        below its last never repaint), and nothing when none did."""
        old = self._lines
        self._lines = lines
        if lines == old:
            return
        if len(lines) != len(old) and self._height_follows_lines():
            self._strips.clear()
            self.refresh(layout=True)
            return
        width, height = self.size
        if self._hidden(lines, height) != self._hidden(old, height):
            # the last row says how many are hidden, and that changed
            self._strips.clear()
            self.refresh()
            return
        changed = [i for i in range(max(len(old), len(lines)))
                   if i >= len(old) or i >= len(lines) or old[i] != lines[i]]
        for i in changed:
            self._strips.pop(i, None)
        rows = [y for i in changed
                if (y := i if i < self.fixed else i - self._scroll) >= 0
                and (i < self.fixed or y >= self.fixed)]
        rows = [y for y in rows if y < height]
        if rows:
            # one region from the first changed row to the last: the rows between repaint
            # too, which costs less than a region each
            self.refresh(Region(0, min(rows), width, max(rows) - min(rows) + 1))

    def _height_follows_lines(self) -> bool:
        """Whether the panel's height is its lines' count (`height: auto`): a change of
        the count is then a change of the layout."""
        height = self.styles.height
        return height is None or height.is_auto

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return max(1, len(self._lines))

    def scroll_lines(self, delta: int) -> None:
        """↑/↓ while focused (a panel with a cursor moves it instead)."""
        self._scroll_by(delta)

    def _scroll_by(self, delta: int) -> None:
        top = max(0, len(self._lines) - self.size.height)
        new = min(max(0, self._scroll + delta), top)
        if new != self._scroll:
            self._scroll = new
            self._strips.clear()
            self.refresh()

    def scroll_to_show(self, i: int) -> None:
        """Scroll so that line i (not a fixed one) is on screen, above the "more" row."""
        height = self.size.height or len(self._lines)
        room = max(1, height - self.fixed - 1)
        if i - self.fixed < self._scroll:
            self._scroll_by(i - self.fixed - self._scroll)
        elif i - self.fixed >= self._scroll + room:
            self._scroll_by(i - self.fixed - room + 1 - self._scroll)

    def hidden_below(self) -> int:
        """How many lines do not fit below the last row shown."""
        return self._hidden(self._lines, self.size.height)

    def _hidden(self, lines: list[Line], height: int) -> int:
        """How many of `lines` do not fit in `height` rows below the last shown."""
        if height <= 0:
            return 0
        return max(0, len(lines) - self._scroll - height)

    def render_line(self, y: int) -> Strip:
        width, height = self.size
        more = self._hidden(self._lines, height)
        if more and y == height - 1 and height > self.fixed + 1:
            # the last row says what is hidden, never a silent cut
            hint = "" if self.has_focus else f" (tab to this panel, then {glyphs.DOWN})"
            return strip([(f" {glyphs.DOWN} {more + 1} more{hint}", _MORE)], width)
        i = y if y < self.fixed else y + self._scroll
        cached = self._strips.get(i)
        if cached is not None and cached.cell_length == width:
            return cached
        line = self._lines[i] if i < len(self._lines) else []
        s = strip(line, width)
        self._strips[i] = s
        return s


class CursorPanel(LinesPanel):
    """A LinesPanel whose rows under its one header line carry a row cursor (the disk
    table, the fleet table): the cursor stays on its key while the rows reorder, goes to
    the first row when its key leaves, and ↑/↓ move it, the rows scrolling to keep it in
    sight while the panel has focus."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.cursor: str | None = None     # the key of the row under the cursor
        self._order: list[str] = []        # the rows' keys, as last drawn

    def _set_order(self, keys: list[str]) -> None:
        """The rows' keys, top to bottom, before the rows are built (they mark the
        cursor's)."""
        self._order = keys
        if self.cursor not in self._order:
            self.cursor = self._order[0] if self._order else None

    def _show_cursor(self) -> None:
        """After set_lines: scroll the cursor's row into sight while focused."""
        if self.has_focus and self.cursor in self._order:
            self.scroll_to_show(1 + self._order.index(self.cursor))

    def scroll_lines(self, delta: int) -> None:
        """↑/↓: the row cursor moves (the rows scroll to keep it in sight)."""
        if not self._order:
            return
        i = self._order.index(self.cursor) if self.cursor in self._order else 0
        self.cursor = self._order[min(max(0, i + delta), len(self._order) - 1)]
        self.redraw()
