"""`/` on the fleet screen: which nodes to ask Prometheus for, as label=value pairs.

The pairs become equality matchers on every selector of the table's query (the source's
filters), so a filtered table costs Prometheus less, not more.  Their syntax is
`--match`'s (gpudisk_top/fleet/labels.py parses both)."""

from __future__ import annotations

from gpudisk_top.ui.screens.prompt import PromptScreen, box_css


class LabelFilterScreen(PromptScreen):
    DEFAULT_CSS = box_css("LabelFilterScreen", 76)

    def __init__(self, current: str, labels: list[str]) -> None:
        seen = ", ".join(labels[:8]) or "none yet"
        super().__init__("Nodes to show: label=value pairs, several separated by spaces "
                         "(e.g. training_job=llama cluster=a). Empty: every node. "
                         f"Labels seen: {seen}", "training_job=llama", "labels", current)
        self.current = current
        self.labels = labels
