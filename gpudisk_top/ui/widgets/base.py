"""A panel drawn with the Line API: the panel builds its lines once per update and
render_line() hands them out, so a repaint costs no formatting."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

from gpudisk_top.textsafe import printable

Line = list[tuple[str, Style]]  # runs of text with one style each


_PAD = Style()


def strip(line: Line, width: int) -> Strip:
    # never a None style: Textual's NO_COLOR (monochrome) filter cannot take one; text
    # from the machine (a process's name, a device's) may hold escape sequences: a
    # Segment goes to the terminal as it is, so every one is made printable here
    segments = [Segment(printable(text), style or _PAD) for text, style in line if text]
    return Strip(segments).crop_extend(0, width, _PAD)


class LinesPanel(Widget):
    """Holds a list of lines; `height: auto` follows their count."""

    DEFAULT_CSS = """
    LinesPanel { height: auto; }
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._lines: list[Line] = []
        self._strips: dict[int, Strip] = {}
        self._scroll = 0  # first line shown, when the panel is shorter than its lines
        self._input: tuple | None = None  # show()'s arguments, to rebuild on resize and focus

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
        self.redraw()  # the focus mark moves

    def set_lines(self, lines: list[Line]) -> None:
        """Replace the lines; repaint only those that changed (a 1 Hz screen where most
        numbers of idle disks stay put costs little)."""
        old = self._lines
        self._lines = lines
        if len(lines) != len(old):
            self._strips.clear()
            self.refresh(layout=True)
            return
        changed = [i for i, (a, b) in enumerate(zip(old, lines)) if a != b]
        if not changed:
            return
        for i in changed:
            self._strips.pop(i, None)
        if len(changed) > len(lines) // 2:
            self.refresh()
            return
        width = self.size.width
        for i in changed:
            y = i - self._scroll
            if 0 <= y < self.size.height:
                self.refresh(Region(0, y, width, 1))

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return max(1, len(self._lines))

    def scroll_lines(self, delta: int) -> None:
        visible = self.size.height
        top = max(0, len(self._lines) - visible)
        new = min(max(0, self._scroll + delta), top)
        if new != self._scroll:
            self._scroll = new
            self._strips.clear()
            self.refresh()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        i = y + self._scroll
        cached = self._strips.get(i)
        if cached is not None and cached.cell_length == width:
            return cached
        line = self._lines[i] if i < len(self._lines) else []
        s = strip(line, width)
        self._strips[i] = s
        return s
