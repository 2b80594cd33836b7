"""`/`: filter the disk table (and the timeline's disk rows) by device name."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static


class FilterScreen(ModalScreen[str | None]):
    DEFAULT_CSS = """
    FilterScreen { align: center middle; }
    FilterScreen > Vertical { width: 70; max-width: 100%; height: auto;
                              border: round $accent; background: $surface; padding: 0 1; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, current: str) -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Devices to show: globs by kernel or /dev/mapper name, comma-separated "
                         "(e.g. nvme*,sda). Empty: the default (active disks).")
            yield Input(value=self.current, placeholder="nvme*,sda", id="pattern")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)
