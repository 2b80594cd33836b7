"""Where /proc and /sys live (`--procfs`, `--sysfs`), like node_exporter's `--path.procfs`."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Roots:
    """The procfs and sysfs trees every collector reads from."""

    procfs: str = "/proc"
    sysfs: str = "/sys"

    def proc(self, *parts: str) -> str:
        return os.path.join(self.procfs, *parts)

    def sys(self, *parts: str) -> str:
        return os.path.join(self.sysfs, *parts)


def read_text(path: str) -> str | None:
    """The file's text, or None when it is missing or unreadable (a value, not an error)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def read_first_line(path: str) -> str | None:
    text = read_text(path)
    if text is None:
        return None
    return text.split("\n", 1)[0].strip()
