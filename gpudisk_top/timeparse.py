"""Times as people type them, for --from/--to and replay's jump-to-time.

    parse_time("2026-01-01T03:12:00+00:00", span)  # ISO 8601; without a zone: local time
    parse_time("2026-01-01 03:12", span)
    parse_time("03:12", span)       # that time of day, the first one at or after the start
    parse_time("@1767237120", span) # seconds since the epoch, as date -d @S
    parse_time("10m ago", span)     # before now (the wall clock)
    parse_time("+5m", span)         # after the recording's start
    parse_time("-1h30m", span)      # before the recording's end
    parse_time("start", span), parse_time("end", span)

Durations are a number with a unit (s, m, h, d; "1h30m"; a bare number is seconds).
A time is between 0001-01-02 and 9999-12-30 (what every time zone can write as a date);
anything else, @1e20 or "1e11d ago", is a TimeParseError like any other bad time, never
an overflow further on.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import time
from dataclasses import dataclass

_UNITS = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(s|sec|min|m|h|d)?", re.I)


class TimeParseError(ValueError):
    """A time that cannot be read; the message is one line, fit for the user."""


# the first and last moments every time zone can write as a date (years 1 and 9999)
MIN_S = dt.datetime(1, 1, 2, tzinfo=dt.timezone.utc).timestamp()
MAX_S = dt.datetime(9999, 12, 30, tzinfo=dt.timezone.utc).timestamp()


@dataclass(frozen=True)
class Span:
    """What relative times are relative to: the recording's first and last sample, and
    now (None: the wall clock)."""

    start_s: float
    end_s: float
    now_s: float | None = None


def parse_duration(text: str) -> float:
    """'90', '90s', '5m', '1h30m', '2.5h', '1d' -> seconds.  Raises TimeParseError."""
    s = text.strip().lower().replace(" ", "")
    if not s:
        raise TimeParseError("empty duration")
    pos, total = 0, 0.0
    while pos < len(s):
        m = _PART.match(s, pos)
        if not m or m.end() == pos:
            raise TimeParseError(f"not a duration: {text!r} (e.g. 90s, 5m, 1h30m, 2d)")
        unit = (m.group(2) or "s").lower()
        if m.group(2) is None and (pos > 0 or m.end() != len(s)):
            raise TimeParseError(f"not a duration: {text!r} (give every part a unit: s, m, h, d)")
        total += float(m.group(1)) * _UNITS[unit]
        pos = m.end()
    if not math.isfinite(total):
        raise TimeParseError(f"not a duration: {text!r}")
    return total


def parse_time(text: str, span: Span) -> float:
    """Wall time in seconds since the epoch, between MIN_S and MAX_S.  Raises
    TimeParseError with a one-line reason."""
    if not text.strip():
        raise TimeParseError("empty time (e.g. 03:12, +5m, -1h, 2026-11-30T03:12, start)")
    try:
        value = _parse_time(text, span)
    except (OverflowError, OSError):
        value = math.inf        # a date arithmetic cannot hold: out of range below
    except ValueError as err:
        if isinstance(err, TimeParseError):
            raise
        value = math.inf
    if not (math.isfinite(value) and MIN_S <= value <= MAX_S):
        raise TimeParseError(f"out of range: {text.strip()!r} "
                             "(a time must be between 0001-01-02 and 9999-12-30)")
    return value


def _parse_time(text: str, span: Span) -> float:
    s = text.strip()
    low = s.lower()
    if not s:
        raise TimeParseError("empty time")
    if low in ("start", "begin", "beginning"):
        return span.start_s
    if low == "end":
        return span.end_s
    if low == "now":
        return span.now_s if span.now_s is not None else time.time()
    if low.endswith("ago"):
        now = span.now_s if span.now_s is not None else time.time()
        return now - parse_duration(low[:-3])
    if s[0] == "+":
        return span.start_s + parse_duration(s[1:])
    if s[0] == "-":
        return span.end_s - parse_duration(s[1:])
    if s[0] == "@":
        try:
            value = float(s[1:])
        except ValueError:
            raise TimeParseError(f"not a time: {text!r} (@ takes seconds since the epoch)") from None
        if not math.isfinite(value):
            raise TimeParseError(f"not a time: {text!r}")
        return value
    if re.fullmatch(r"\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?", s):
        return _time_of_day(s, span)
    return _iso(s, text)


def _iso(s: str, text: str) -> float:
    iso = s.replace(" ", "T", 1) if re.match(r"\d{4}-\d{2}-\d{2} \d", s) else s
    if iso.endswith(("Z", "z")):
        iso = iso[:-1] + "+00:00"
    try:
        when = dt.datetime.fromisoformat(iso)
    except ValueError:
        raise TimeParseError(
            f"not a time: {text!r} (use ISO 8601 such as 2026-01-01T03:12:00, HH:MM, "
            "'10m ago', '+5m' from the start or '-5m' from the end)") from None
    if when.tzinfo is None:
        when = when.astimezone()  # a time without a zone is local time
    return when.timestamp()


def _time_of_day(s: str, span: Span) -> float:
    parts = s.split(":")
    hour, minute = int(parts[0]), int(parts[1])
    second = float(parts[2]) if len(parts) > 2 else 0.0
    if hour > 23 or minute > 59 or second >= 60:
        raise TimeParseError(f"not a time of day: {s!r}")
    start = dt.datetime.fromtimestamp(span.start_s).astimezone()
    day = start.replace(hour=hour, minute=minute, second=int(second),
                        microsecond=int(round((second % 1) * 1e6)))
    if day.timestamp() < span.start_s - 1e-6:
        day = (day + dt.timedelta(days=1)).replace(hour=hour, minute=minute)
    return day.timestamp()
