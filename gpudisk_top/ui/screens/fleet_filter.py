"""`/` on the fleet screen: which nodes to ask Prometheus for, as label=value pairs.

The pairs become equality matchers on every selector of the table's query (the source's
filters), so a filtered table costs Prometheus less, not more.  Their syntax is
`--match`'s (gpudisk_top/fleet/labels.py parses both)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

class LabelFilterScreen(ModalScreen[str | None]):
    DEFAULT_CSS = """
    LabelFilterScreen { align: center middle; }
    LabelFilterScreen > Vertical { width: 76; max-width: 100%; height: auto;
                                   border: round $accent; background: $surface; padding: 0 1; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, current: str, labels: list[str]) -> None:
        super().__init__()
        self.current = current
        self.labels = labels

    def compose(self) -> ComposeResult:
        seen = ", ".join(self.labels[:8]) or "none yet"
        with Vertical():
            yield Static("Nodes to show: label=value pairs, several separated by spaces "
                         "(e.g. training_job=llama cluster=a). Empty: every node. "
                         f"Labels seen: {seen}", markup=False)
            yield Input(value=self.current, placeholder="training_job=llama", id="labels")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)
