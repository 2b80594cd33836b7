"""`!`: what cannot be seen from here and how to fix it, in the words of `--once`'s
warnings (the sampler's own lines: collect/visibility.py BlindSpot.line() and what a
collector could not read), for the header's flags (NOT ROOT, CONTAINER PIDS...)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gpudisk_top.textsafe import printable


def hidden_text(warnings: list[str]) -> str:
    """The screen's text: each warning of the latest interval (as `--once` prints it)."""
    if not warnings:
        return "Nothing is hidden from here: the latest interval has no warnings.\n"
    return ("What cannot be seen from here, and the fix (as gpudisk-top --once says it):\n\n"
            + "".join(f"warning: {printable(w)}\n" for w in warnings))


class HiddenScreen(ModalScreen):
    DEFAULT_CSS = """
    HiddenScreen { align: center middle; }
    HiddenScreen > VerticalScroll { width: 90; max-width: 100%; height: auto; max-height: 100%;
                                    border: round $warning; background: $surface; padding: 0 1; }
    """
    BINDINGS = [Binding("escape,exclamation_mark,q", "dismiss", "Close")]

    def __init__(self, warnings: list[str]) -> None:
        super().__init__()
        self.text = hidden_text(warnings)

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(self.text, markup=False)
