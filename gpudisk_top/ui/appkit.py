"""What every app of gpudisk-top does alike (the dashboard, replay, the fleet screen): the
note that replaces a screen too small to draw, the palette of the tool's own commands,
and leaving a terminal that is gone."""

from __future__ import annotations

from typing import Iterable, Iterator

from textual.app import SystemCommand

from gpudisk_top.ui.terminal import terminal_gone

MIN_SIZE = (80, 24)  # below this the screen says so instead of clipping

# In the app's own CSS (not a widget's DEFAULT_CSS, which any app rule would override):
# a screen with the class too-small shows only the #too-small note.
TOO_SMALL_CSS = """
    #too-small { display: none; width: 100%; height: 100%; content-align: center middle; }
    Screen.too-small > * { display: none; }
    Screen.too-small #too-small { display: block; }
"""


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
