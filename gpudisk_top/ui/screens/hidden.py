"""`!`: what cannot be seen from here and how to fix it, in the words of `--once`'s
warnings (the sampler's own lines: collect/visibility.py BlindSpot.line() and what a
collector could not read), for the header's flags (NOT ROOT, CONTAINER PIDS...)."""

from __future__ import annotations

from textual.binding import Binding

from gpudisk_top.textsafe import printable
from gpudisk_top.ui.screens.help import HelpScreen


def hidden_text(warnings: list[str]) -> str:
    """The screen's text: each warning of the latest interval (as `--once` prints it)."""
    if not warnings:
        return "Nothing is hidden from here: the latest interval has no warnings.\n"
    return ("What cannot be seen from here, and the fix (as gpudisk-top --once says it):\n\n"
            + "".join(f"warning: {printable(w)}\n" for w in warnings))


class HiddenScreen(HelpScreen):
    """The help screen's frame (ui/screens/help.py), in the warning colour, with the
    machine's text shown as text (no markup)."""

    DEFAULT_CSS = "HiddenScreen > VerticalScroll { border: round $warning; }"
    BINDINGS = [Binding("escape,exclamation_mark,q", "dismiss", "Close")]
    MARKUP = False

    def __init__(self, warnings: list[str]) -> None:
        super().__init__()
        self.text = hidden_text(warnings)
