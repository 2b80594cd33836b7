"""`g` in replay: jump to a time (absolute, or relative: 10m ago, +5m, -5m, start, end)."""

from __future__ import annotations

from gpudisk_top.ui.screens.prompt import PromptScreen, box_css


class JumpScreen(PromptScreen):
    DEFAULT_CSS = box_css("JumpScreen", 70)

    def __init__(self) -> None:
        super().__init__("Go to: 2026-11-30T03:12, 03:12, +5m (after the start), "
                         "-5m (before the end), 10m ago, start, end", "+5m", "when")
