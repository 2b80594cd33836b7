"""Rotation and retention, as logrotate and atop users know them.

FILE is always the recording being written; older generations are FILE.1 (the newest)
to FILE.N (the oldest), each a complete recording with its own header.

  --max-size MB   FILE + its generations stay under MB in total.  FILE is rotated when
                  it reaches a tenth of MB, and the oldest generations are deleted until
                  the rest fits: at most a tenth of the budget is dropped at a time.
  --retain DAYS   FILE is rotated at local midnight (of the samples' clock), so each
                  generation holds one day, like atop's daily files; a generation whose
                  last sample is more than DAYS days older than the newest sample is
                  deleted.

Nothing else is ever deleted: only files named FILE.<n> that start like a recording.
"""

from __future__ import annotations

import datetime as dt
import os
import re

from gpudisk_top.record import frames

PARTS = 10                 # --max-size: FILE rotates at 1/PARTS of the budget
MIN_PART_BYTES = 64 * 1024


class Rotation:
    def __init__(self, path: str, max_size_mb: float | None = None,
                 retain_days: float | None = None) -> None:
        if max_size_mb is not None and retain_days is not None:
            raise ValueError("max_size_mb and retain_days exclude each other")
        self.path = path
        self.max_bytes = int(max_size_mb * 2**20) if max_size_mb is not None else None
        self.retain_s = retain_days * 86400.0 if retain_days is not None else None

    @property
    def part_bytes(self) -> int | None:
        if self.max_bytes is None:
            return None
        return max(MIN_PART_BYTES, self.max_bytes // PARTS)

    def due(self, file_bytes: int, next_frame_bytes: int, first_wall_s: float | None,
            wall_s: float) -> bool:
        """Should FILE be rotated before the next sample goes in?  Never for a file
        without samples (first_wall_s is None)."""
        if first_wall_s is None:
            return False
        if self.max_bytes is not None:
            return file_bytes + next_frame_bytes > self.part_bytes
        if self.retain_s is not None:
            return _local_day(first_wall_s) != _local_day(wall_s)
        return False

    def generations(self) -> list[tuple[int, str]]:
        """(n, path) of FILE.n that are recordings, oldest last."""
        folder = os.path.dirname(os.path.abspath(self.path))
        base = os.path.basename(self.path)
        pattern = re.compile(re.escape(base) + r"\.([1-9][0-9]*)$")
        out = []
        try:
            names = os.listdir(folder)
        except OSError:
            return []
        for name in names:
            m = pattern.match(name)
            if m and _is_recording(os.path.join(folder, name)):
                out.append((int(m.group(1)), os.path.join(folder, name)))
        return sorted(out)

    def rotate(self) -> None:
        """FILE.n -> FILE.n+1 (oldest first), FILE -> FILE.1.  FILE then does not exist."""
        for n, path in reversed(self.generations()):
            os.replace(path, f"{self.path}.{n + 1}")
        if os.path.exists(self.path):
            os.replace(self.path, f"{self.path}.1")

    def prune(self, newest_wall_s: float) -> list[str]:
        """Delete the generations the policy drops; returns their paths."""
        gens = self.generations()
        removed: list[str] = []
        if self.max_bytes is not None:
            room = self.max_bytes - self.part_bytes  # FILE may grow to a part
            sizes = {p: _size(p) for _, p in gens}
            total = sum(sizes.values())
            for _, path in reversed(gens):
                if total <= room:
                    break
                total -= sizes[path]
                _remove(path, removed)
        elif self.retain_s is not None:
            for _, path in gens:
                end = _last_sample_s(path)
                if end is not None and end < newest_wall_s - self.retain_s:
                    _remove(path, removed)
        return removed


def _local_day(wall_s: float) -> dt.date:
    return dt.datetime.fromtimestamp(wall_s).date()


def _is_recording(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(frames.MAGIC)) == frames.MAGIC
    except OSError:
        return False


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _remove(path: str, removed: list[str]) -> None:
    try:
        os.remove(path)
        removed.append(path)
    except FileNotFoundError:
        pass


def _last_sample_s(path: str) -> float | None:
    from gpudisk_top.errors import RuntimeFailure, UsageError
    from gpudisk_top.record.reader import Recording

    try:
        with Recording.open(path) as rec:
            if len(rec):
                return rec.end_s
    except (UsageError, RuntimeFailure):
        pass
    try:
        return os.path.getmtime(path)
    except OSError:
        return None
