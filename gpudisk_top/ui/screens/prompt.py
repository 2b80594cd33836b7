"""A one-line question over the screen (the dashboard's and the fleet's `/` filters,
replay's go-to): Enter answers with the text typed, stripped; escape with None."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static


def box_css(screen: str, width: int) -> str:
    """A question's DEFAULT_CSS: its box `width` cells wide, in the middle.  Each subclass
    has its own (under its own name), so that its width is its own."""
    return f"""
    {screen} {{ align: center middle; }}
    {screen} > Vertical {{ width: {width}; max-width: 100%; height: auto;
                          border: round $accent; background: $surface; padding: 0 1; }}
    """


class PromptScreen(ModalScreen[str | None]):
    """A subclass says its question (its __init__) and sizes its box (box_css)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, question: str, placeholder: str, input_id: str, value: str = "") -> None:
        """question: said above the input, as it is (no markup); value: the input's text
        to start from."""
        super().__init__()
        self.question = question
        self.placeholder = placeholder
        self.input_id = input_id
        self.value = value

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.question, markup=False)
            yield Input(value=self.value, placeholder=self.placeholder, id=self.input_id)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)
