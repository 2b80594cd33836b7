"""Times as people type them: ISO 8601, time of day, relative to now, the start, the end."""

from __future__ import annotations

import datetime as dt

import pytest

from gpudisk_top.timeparse import Span, TimeParseError, parse_duration, parse_time

START = 1767225600.0          # 2026-01-01T00:00:00Z
SPAN = Span(start_s=START, end_s=START + 86400.0, now_s=START + 90000.0)


@pytest.mark.parametrize("text, seconds", [
    ("90", 90), ("90s", 90), ("5m", 300), ("5 min", 300), ("1h30m", 5400), ("2.5h", 9000),
    ("1d", 86400), ("1d2h", 93600),
])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "5x", "1h 30", "m5"])
def test_bad_durations(text):
    with pytest.raises(TimeParseError):
        parse_duration(text)


def test_relative_forms():
    assert parse_time("+5m", SPAN) == START + 300
    assert parse_time("-5m", SPAN) == START + 86400 - 300
    assert parse_time("10m ago", SPAN) == START + 90000 - 600
    assert parse_time("1h30m ago", SPAN) == START + 90000 - 5400
    assert parse_time("start", SPAN) == START and parse_time("end", SPAN) == START + 86400
    assert parse_time("now", SPAN) == START + 90000
    assert parse_time("@1767225700.5", SPAN) == 1767225700.5


def test_iso_8601():
    assert parse_time("2026-01-01T03:12:00+00:00", SPAN) == START + 3 * 3600 + 720
    assert parse_time("2026-01-01T03:12:00Z", SPAN) == START + 3 * 3600 + 720
    assert parse_time("2026-01-01T05:12:00+02:00", SPAN) == START + 3 * 3600 + 720
    local = dt.datetime(2026, 1, 1, 3, 12).astimezone().timestamp()
    assert parse_time("2026-01-01 03:12", SPAN) == local        # no zone: local time
    assert parse_time("2026-01-01T03:12:00", SPAN) == local


def test_time_of_day_is_the_first_at_or_after_the_start():
    start_local = dt.datetime.fromtimestamp(START).astimezone()
    t = parse_time(start_local.strftime("%H:%M"), SPAN)
    assert t == pytest.approx(START)
    later = start_local + dt.timedelta(hours=5, minutes=7)
    assert parse_time(later.strftime("%H:%M:%S"), SPAN) == pytest.approx(START + 5 * 3600 + 420)
    earlier = start_local - dt.timedelta(minutes=1)                     # tomorrow's
    assert parse_time(earlier.strftime("%H:%M"), SPAN) == pytest.approx(START + 86400 - 60)


@pytest.mark.parametrize("text", ["yesterday", "25:00", "2026-13-01", "@soon", "+", "-x", ""])
def test_bad_times_are_one_line_errors(text):
    with pytest.raises(TimeParseError) as err:
        parse_time(text, SPAN)
    assert "\n" not in str(err.value)
