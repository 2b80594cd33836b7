"""A disk's health as the screens show it: the disk table's cell (a status badge and,
where it fits, the first reason) and the device detail's section (every field of the
reading, the reasons, and what the disk gained since the run's first reading).

The judgement is model/health.py's (classify, trend, health_of); this module only lays
it out.  Unknown numbers are n/a, never 0."""

from __future__ import annotations

import textwrap

from gpudisk_top.collect.blockdev import device_stack
from gpudisk_top.model.health import HealthView
from gpudisk_top.model.vocab import HEALTH_BADGE, NO_HEALTH
from gpudisk_top.ui import glyphs, theme
from gpudisk_top.ui.format import clock, duration

DEG_C = f" {glyphs.DEGREE}C"
SHORT_W = max(len("health"), *map(len, HEALTH_BADGE.values()))   # the status alone


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(0, width - 1)] + glyphs.ELLIPSIS


def style(status: str | None):
    """The style of a health status: warning and failing stand out (their glyph tells
    them apart under NO_COLOR too), OK and unknown stay quiet."""
    return {"warning": theme.WARN, "failing": theme.BAD}.get(status, theme.DIM)


def cell(view: HealthView | None, reason_w: int = 0) -> str:
    """A disk's health cell: its status's badge, then (reason_w > 0, a disk that is not
    OK) its first reason cut to reason_w; NO_HEALTH without a reading."""
    if view is None:
        return NO_HEALTH
    text = HEALTH_BADGE[view.status]
    if reason_w > 0 and view.reasons and view.status != "ok":
        text = f"{text:<{SHORT_W}} {_cut(view.reasons[0], reason_w)}"
    return text


# ---------------------------------------------------------------------------- the detail
def _n(value, unit: str = "", fmt: str = "{:.0f}") -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float) and not value.is_integer():
        fmt = "{:.1f}"
    return fmt.format(value) + unit


def _temps(h) -> str:
    return (f"{_n(h.temperature_c, DEG_C)}  (warning {_n(h.warning_temp_c, DEG_C)}, "
            f"critical {_n(h.critical_temp_c, DEG_C)})")


def _spare(h) -> str:
    return f"{_n(h.available_spare_pct, ' %')}  (threshold {_n(h.available_spare_threshold_pct, ' %')})"


def _passed(h) -> str:
    return {True: "passed", False: "FAILED", None: "n/a"}[h.smart_passed]


def _critical(h) -> str:
    return "n/a" if h.critical_warning is None else f"0x{h.critical_warning:02x}"


def _attrs(h) -> str:
    parts = ([f"failing now: {', '.join(h.failing_attributes)}"] * bool(h.failing_attributes)
             + [f"failed in the past: {', '.join(h.failed_attributes)}"] * bool(h.failed_attributes))
    return "; ".join(parts) or "none"


# (label, the DiskHealth fields it shows, the reading's value as text): every field a
# person reads, in the order a disk's health is judged (model/health.py classify).  A row
# whose fields the reading has none of (an NVMe drive keeps no sector counts) is left out.
FIELDS = (
    ("SMART", ("smart_passed",), _passed),
    ("critical warning", ("critical_warning",), _critical),
    ("temperature", ("temperature_c", "warning_temp_c", "critical_temp_c"), _temps),
    ("above warning", ("warning_temp_time_min", "critical_temp_time_min"),
     lambda h: f"{_n(h.warning_temp_time_min, ' min')} in its life, above critical "
               f"{_n(h.critical_temp_time_min, ' min')}"),
    ("thermal throttle", ("thermal_throttle_s",), lambda h: _n(h.thermal_throttle_s, " s")),
    ("endurance used", ("percentage_used_pct",), lambda h: _n(h.percentage_used_pct, " %")),
    ("available spare", ("available_spare_pct", "available_spare_threshold_pct"), _spare),
    ("media errors", ("media_errors",), lambda h: _n(h.media_errors)),
    ("error log", ("error_log_entries",), lambda h: f"{_n(h.error_log_entries)} entries"),
    ("unsafe shutdowns", ("unsafe_shutdowns",), lambda h: _n(h.unsafe_shutdowns)),
    ("sectors", ("reallocated_sectors", "pending_sectors", "offline_uncorrectable"),
     lambda h: f"reallocated {_n(h.reallocated_sectors)}, pending {_n(h.pending_sectors)}, "
               f"offline uncorrectable {_n(h.offline_uncorrectable)}"),
    ("ATA attributes", ("failing_attributes", "failed_attributes"), _attrs),
    ("power-on", ("power_on_hours",), lambda h: _n(h.power_on_hours, " h")),
)
LABEL_W = 3 + max(len(label) for label, _, _ in FIELDS) + 2


def _has(h, fields) -> bool:
    if fields[0] == "failing_attributes":        # none failing says something on ATA only
        return h.protocol == "ATA" or bool(h.failing_attributes or h.failed_attributes)
    return any(getattr(h, f) is not None for f in fields)


# what the disk gained since the run's first reading (HealthTrend), as the detail says it
GAINED = (("media_errors_gained", "media errors", ""), ("error_log_gained", "error log", ""),
          ("reallocated_gained", "reallocated", ""), ("pending_gained", "pending", ""),
          ("unsafe_shutdowns_gained", "unsafe shutdowns", ""),
          ("wear_gained_pct", "wear", " %"), ("warning_temp_min_gained", "above warning", " min"),
          ("critical_temp_min_gained", "above critical", " min"))


def since_text(t) -> str:
    """A HealthTrend in words: 'over 12m00s: media errors +3, wear +0 %, ...'."""
    parts = [f"{label} {'+' if v >= 0 else ''}{_n(v, unit)}" for attr, label, unit in GAINED
             if (v := getattr(t, attr)) is not None]
    return f"over {duration(t.span_s)}: " + (", ".join(parts) or "no counters to compare")


def detail_lines(model, name: str, width: int) -> list:
    """The device detail's health section for device `name`: one part per disk under it
    that the poller read (a partition's disk, each member of a dm/md device), or why
    there is none."""
    lines = [[(" Health", theme.LABEL)]]
    if model.sample.health is None:
        lines[0].append(("  not read (the health poller does not run here)", theme.DIM))
        return lines
    disks = [d for d in device_stack(dict(model.devices), name) if d in model.health]
    if not disks:
        lines[0].append((f"  {NO_HEALTH} no reading of the disk under it", theme.DIM))
        return lines
    for k, disk in enumerate(disks):
        if k:
            lines.append([])
        lines += _disk_lines(model, model.health[disk], disk != name or len(disks) > 1, width)
    return lines


def _label(text: str) -> tuple:
    return (f"   {text:<{LABEL_W - 3}}", theme.DIM)


def _disk_lines(model, view: HealthView, named: bool, width: int) -> list:
    h = view.reading
    ago = f", {duration(max(0.0, model.wall_s - h.read_wall_s))} ago" if h.read_wall_s else ""
    what = " ".join(x for x in (h.protocol, h.model, f"serial {h.serial}" if h.serial else None,
                                f"firmware {h.firmware}" if h.firmware else None) if x)
    head = [(" " * 3 + (f"{h.device}: " if named else ""), theme.BOLD),
            (HEALTH_BADGE[view.status], style(view.status)),
            (f"  {h.source or 'no source'}"
             + (f", read {clock(h.read_wall_s)}{ago}" if h.read_wall_s else "")
             + (f" {glyphs.DOT} {what}" if what else ""), theme.DIM)]
    lines = [head]
    wrap = max(20, width - LABEL_W - 1)
    for k, reason in enumerate(view.reasons):
        for j, part in enumerate(textwrap.wrap(reason, wrap) or [""]):
            lines.append([_label("why" if not k and not j else ""), (part, style(view.status))])
    if not h.readable:
        return lines
    for label, fields, value in FIELDS:
        if _has(h, fields):
            lines.append([_label(label), (_cut(value(h), width - LABEL_W), theme.PLAIN)])
    since = view.since_start
    text = since_text(since) if since is not None else "this is the run's first reading"
    if h.read_cpu_s is not None:
        text += f" (the reading cost {h.read_cpu_s * 1000:.0f} ms of CPU)"
    for k, part in enumerate(textwrap.wrap(text, wrap)):
        lines.append([_label("since start" if not k else ""), (part, theme.PLAIN)])
    return lines
