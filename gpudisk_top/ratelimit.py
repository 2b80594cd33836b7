"""Warnings that repeat say so once a minute, not once a sample.

    warn = OncePer(print_line, period_s=60)
    warn("disk-full", "cannot write node.gdtrec: No space left on device")

The first line of a kind goes out at once; the same kind again within the period is
counted, and the next one after the period goes out with the count ("... (and 59 more
like it in the last 60 s)").  A kind is whatever the caller chooses: one alert rule's
failing command, one file that cannot be written.  UI-free, thread-safe.
"""

from __future__ import annotations

import threading
import time
from typing import Callable


class OncePer:
    def __init__(self, emit: Callable[[str], None], period_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.emit = emit
        self.period_s = period_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}     # kind -> when a line of it last went out
        self._held: dict[str, int] = {}       # kind -> lines held back since then
        self._latest: dict[str, str] = {}     # kind -> the latest line held back

    def __call__(self, kind: str, line: str) -> bool:
        """Emit `line` now, or count it; True when it went out."""
        now = self._clock()
        with self._lock:
            last = self._last.get(kind)
            if last is not None and now - last < self.period_s:
                self._held[kind] = self._held.get(kind, 0) + 1
                self._latest[kind] = line
                return False
            held = self._held.pop(kind, 0)
            self._latest.pop(kind, None)
            self._last[kind] = now
        if held:
            line += f" (and {held} more like it in the last {self.period_s:g} s)"
        self.emit(line)
        return True

    def flush(self) -> None:
        """Say what was held back (at exit: nothing counted goes unsaid)."""
        with self._lock:
            pending = [(self._latest[k], n) for k, n in self._held.items() if n]
            self._held.clear()
            self._latest.clear()
        for line, n in pending:
            self.emit(f"{line} ({n} like it since the last said)" if n > 1 else line)

    def held(self, kind: str) -> int:
        """Lines of this kind counted and not yet reported."""
        with self._lock:
            return self._held.get(kind, 0)
