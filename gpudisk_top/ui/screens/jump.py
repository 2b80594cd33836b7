"""`g` in replay: jump to a time (absolute, or relative: 10m ago, +5m, -5m, start, end)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static


class JumpScreen(ModalScreen[str | None]):
    DEFAULT_CSS = """
    JumpScreen { align: center middle; }
    JumpScreen > Vertical { width: 70; max-width: 100%; height: auto;
                            border: round $accent; background: $surface; padding: 0 1; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Go to: 2026-11-30T03:12, 03:12, +5m (after the start), "
                         "-5m (before the end), 10m ago, start, end")
            yield Input(placeholder="+5m", id="when")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)
