"""Times and durations as the tool prints them: the one owner of these formats.

The fleet's --once text (fleet/text.py), the fleet screens and the dashboard's widgets
(ui/format.py re-exports what they use) all format here, so a clock or an age reads the
same wherever it is shown.  UI-free: no Textual.

  clock(wall_s)        '14:02:11'   local time, '' for None
  clock_hm(wall_s)     '14:02'      local time, '?' for None
  date_clock(wall_s)   '2026-12-02 14:02:11'
  duration(s)          '45 s', '12 min', '3 h 05 min', '2 d 4 h'   (words: --once)
  duration_compact(s)  '45 s', '2m05s', '1h02m'                    (the dashboard's)
  age(s)               '45s', '12m', '3h', '2d'; '?' for None      (a table column)
"""

from __future__ import annotations

import datetime as dt
import math


def _local(wall_s: float, fmt: str) -> str:
    """'?' for a time the platform cannot show (NaN, ±inf, beyond year 9999 or what
    localtime() takes: OverflowError, OSError EOVERFLOW, ValueError): a time another
    machine sent must not end a screen."""
    try:
        return dt.datetime.fromtimestamp(wall_s).strftime(fmt)
    except (OverflowError, OSError, ValueError):
        return "?"


def clock(wall_s: float | None) -> str:
    """The local wall clock to the second; '' when unknown."""
    return "" if wall_s is None else _local(wall_s, "%H:%M:%S")


def clock_hm(wall_s: float | None) -> str:
    """The local wall clock to the minute; '?' when unknown."""
    return "?" if wall_s is None else _local(wall_s, "%H:%M")


def date_clock(wall_s: float) -> str:
    return _local(wall_s, "%Y-%m-%d %H:%M:%S")


def duration(seconds: float | None) -> str:
    """'45 s', '12 min', '3 h 05 min', '2 d 4 h'; '' for None; never negative."""
    if seconds is None:
        return ""
    if not math.isfinite(seconds):
        return "?"
    s = max(0, int(round(seconds)))
    if s < 120:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def duration_compact(seconds: float) -> str:
    """'45 s', '2m05s', '1h02m' (the dashboard's banners and position line)."""
    if not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


# age()'s units, the largest first: it gives the whole number of the largest that fits
_AGE_UNITS = ((86400, "d"), (3600, "h"), (60, "m"), (1, "s"))


def age(seconds: float | None) -> str:
    """A short relative time: 45s, 12m, 3h, 2d ('?' when unknown)."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    s = max(0, int(seconds))
    size, unit = next((n, u) for n, u in _AGE_UNITS if s >= n or n == 1)
    return f"{s // size}{unit}"
