"""What every app of gpudisk-top does alike (the dashboard, replay, the fleet screen): the
note that replaces a screen too small to draw, the palette of the tool's own commands,
and leaving a terminal that is gone; ToolApp, the one base they derive from, puts them
together with the footer, NO_COLOR's styles and drawing in ASCII (glyphs.py)."""

from __future__ import annotations

from typing import Iterable, Iterator

from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.widgets import Footer, Static

from gpudisk_top.ui import glyphs, theme
from gpudisk_top.ui.asciiscreen import ASCII_FILTER, key_display, use_ascii_scrollbars
from gpudisk_top.ui.terminal import terminal_gone

MIN_SIZE = (80, 24)  # below this the screen says so instead of clipping

# In the app's own CSS (not a widget's DEFAULT_CSS, which any app rule would override):
# a screen with the class too-small shows only the #too-small note.
TOO_SMALL_CSS = """
    #too-small { display: none; width: 100%; height: 100%; content-align: center middle; }
    Screen.too-small > * { display: none; }
    Screen.too-small #too-small { display: block; }
"""


def app_css(own: str = "") -> str:
    """An app's CSS: its screen a column that never scrolls, then `own` rules, then the
    too-small note's (TOO_SMALL_CSS, last: a screen too small hides everything else)."""
    return "\n    Screen { layout: vertical; overflow: hidden; }\n" + own + TOO_SMALL_CSS


def fit_screen(screen, note, size, name: str) -> None:
    """Give `screen` the class too-small while `size` (width, height) is under MIN_SIZE,
    and have the Static `note` (#too-small) say so, naming the command `name`."""
    width, height = size
    small = width < MIN_SIZE[0] or height < MIN_SIZE[1]
    screen.set_class(small, "too-small")
    if small:
        note.update(f"terminal too small: {width}x{height}\n"
                    f"{name} needs {MIN_SIZE[0]}x{MIN_SIZE[1]}; q quits")


def palette(commands: Iterable[tuple]) -> Iterator[SystemCommand]:
    """An app's get_system_commands: its own (title, help, action) commands only, not
    Textual's stock Theme, Maximize, Keys..."""
    for title, help_text, action in commands:
        yield SystemCommand(title, help_text, action)


def left_dead_terminal(app) -> bool:
    """On an app's clock: True when its terminal is gone, and the app is then told to
    exit (Textual's input thread would spin on a dead terminal)."""
    gone = terminal_gone()
    if gone is None:
        return False
    app.exit(return_code=1, message=f"gpudisk-top: {gone}; exiting")
    return True


class ToolApp(App):
    """The base of the dashboard (and so replay) and the fleet screen.

    A subclass names its command (COMMAND, for the too-small note), yields its panels
    (panels(): the footer and the note follow them), lists the palette's commands
    (commands(): (title, help, action) each) and builds its CSS with app_css().  NO_COLOR's
    styles are chosen as the app loads, before anything is drawn; under glyphs.ascii_on()
    every line of every screen is drawn in ASCII (ui/asciiscreen.py)."""

    COMMAND = "gpudisk-top"
    CSS = app_css()
    # Ctrl+C quits, as in htop, glances and nvitop, on every screen of every app (Textual
    # only says "Do you want to quit? Press ctrl+q"); priority: a prompt's input would
    # take it as copy.  A subclass's BINDINGS add to these.
    BINDINGS = [Binding("ctrl+c", "quit", show=False, priority=True)]

    def panels(self) -> ComposeResult:
        return iter(())

    def compose(self) -> ComposeResult:
        yield from self.panels()
        yield Footer(compact=True)
        yield Static(id="too-small")

    def on_load(self) -> None:
        theme.use_no_color(self.no_color)  # Textual greys every colour: emphasis by attributes
        use_ascii_scrollbars(glyphs.ascii_on())

    def get_line_filters(self):
        filters = super().get_line_filters()
        if not glyphs.ascii_on():
            return filters
        return [*filters, ASCII_FILTER]

    def get_key_display(self, binding) -> str:
        shown = super().get_key_display(binding)
        if not glyphs.ascii_on():
            return shown
        return key_display(shown, binding.key)

    def fit_too_small(self, screen, size) -> None:
        """fit_screen for `screen` with this app's note and command."""
        fit_screen(screen, self.query_one("#too-small", Static), size, self.COMMAND)

    def leave_if_terminal_gone(self) -> bool:
        """left_dead_terminal for this app: True when it was told to exit."""
        return left_dead_terminal(self)

    def commands(self) -> Iterable[tuple]:
        return ()

    def get_system_commands(self, screen) -> Iterator[SystemCommand]:
        return palette(self.commands())
