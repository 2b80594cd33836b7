"""`/`: filter the disk table (and the timeline's disk rows) by device name."""

from __future__ import annotations

from gpudisk_top.ui.screens.prompt import PromptScreen, box_css


class FilterScreen(PromptScreen):
    DEFAULT_CSS = box_css("FilterScreen", 70)

    def __init__(self, current: str) -> None:
        super().__init__("Devices to show: globs by kernel or /dev/mapper name, "
                         "comma-separated (e.g. nvme*,sda). Empty: the default (active disks).",
                         "nvme*,sda", "pattern", current)
        self.current = current
