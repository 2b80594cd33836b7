"""`/` on the fleet screen: which nodes to ask Prometheus for, as label=value pairs.

The pairs become equality matchers on every selector of the table's query (the source's
filters), so a filtered table costs Prometheus less, not more."""

from __future__ import annotations

import re

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

_PAIR = re.compile(r'^([A-Za-z_][A-Za-z0-9_]*)=(.*)$')


def parse_filters(text: str) -> dict[str, str]:
    """'job=a cluster=b' or 'job=a,cluster=b' -> {'job': 'a', 'cluster': 'b'}; '' -> {}.
    A value may be quoted ("a b").  Raises ValueError (one line) for a word that is not
    label=value."""
    out: dict[str, str] = {}
    for word in re.findall(r'[^\s,"]+="[^"]*"|[^\s,]+', text or ""):
        m = _PAIR.match(word)
        if m is None or m.group(1).startswith("__"):
            raise ValueError(f"{word!r}: give label=value (e.g. training_job=llama)")
        value = m.group(2)
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        out[m.group(1)] = value
    return out


def format_filters(filters: dict[str, str]) -> str:
    return " ".join(f'{k}="{v}"' if (" " in v or "," in v or not v) else f"{k}={v}"
                    for k, v in sorted(filters.items()))


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
