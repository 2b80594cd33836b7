"""Device health beside the load: each physical disk's SMART / NVMe health judged OK,
warning or failing with the reasons, and what it gained between two readings.

A disk that is slow because it is dying, throttling on temperature or out of spare blocks
looks like a saturated disk on every other screen; this module says which.  The readings
come from collect/health.py (smartctl --json, or the kernel's NVMe sysfs), slowly, off the
sampling thread, and reach the model as `Sample.health` (a HealthSnapshot).

Public API (stable; the disk table, the device detail, recordings and the report use it):

    DiskHealth          one reading of one disk (collect/sample.py; every field None when
                        not known): device, read_wall_s, source ("smartctl" | "sysfs" |
                        "simulated" | None), readable, unreadable_reason, protocol, model,
                        serial, firmware, smart_passed, critical_warning, temperature_c,
                        warning_temp_c, critical_temp_c, warning_temp_time_min,
                        critical_temp_time_min, percentage_used_pct, available_spare_pct,
                        available_spare_threshold_pct, media_errors, unsafe_shutdowns,
                        reallocated_sectors, pending_sectors, offline_uncorrectable,
                        error_log_entries, power_on_hours, failing_attributes,
                        failed_attributes, thermal_throttle_s, read_cpu_s
    HealthSnapshot      the poller's latest readings by device (`readings`), this run's
                        first readable reading of each (`first`), `polled_wall_s`, `polls`

    classify(reading) -> (status, reasons)
                        THE rule: status is one of STATUSES ("ok", "warning", "failing",
                        "unknown"), reasons short strings, worst first ("spare 8% <
                        threshold 10%", "media errors 12", "78 °C above warning 75 °C").
                        Unreadable: ("unknown", (unreadable_reason,)).
    trend(first, last) -> HealthTrend | None
                        what the disk gained from one reading to a later one (None when
                        they are of two drives: collect.sample.same_drive): span_s,
                        media_errors_gained, error_log_gained, reallocated_gained,
                        pending_gained, unsafe_shutdowns_gained, wear_gained_pct,
                        warning_temp_min_gained, critical_temp_min_gained (None where
                        either reading lacks the number); HealthTrend.as_json()
    minutes_above_warning(readings) -> float | None
                        over a series of readings of one drive (oldest first): the drive's own counter
                        where both ends have it (NVMe), else the time between readings
                        that found it at or above its warning temperature
    HealthView          what the model shows for one disk: reading, status, reasons,
                        since_start (trend from the run's first reading, or None);
                        .device, .summary() ("warning: media errors 12"), .as_json()
    view_of(reading, first=None) -> HealthView
                        one reading judged, with its trend since `first` (a recording's
                        replay builds views this way from its slow samples)
    health_views(snapshot) -> {device: HealthView}
                        Model.health; the same dict object while the snapshot is the same
    health_of(views, devices, name) -> HealthView | None
                        the health of whatever disk(s) hold `name` (a partition's disk,
                        a dm/md device's worst member), the worst status first
    health_value(view, field) -> float | None
                        a number alert rules test (vocab HEALTH and HEALTH_COMPUTED:
                        the reading's fields, spare_margin_pct, above_warning_c,
                        media_errors_gained, failing, warning)
    evidence_clause(view) -> str | None
                        the verdict's words for a disk warning or failing on temperature
                        or media errors ("composite temperature 78 °C, above its 75 °C
                        warning for 14 min: thermal throttling"; "12 media errors (3
                        since start)"), None otherwise
    STATUSES, STATUS_RANK, PCT_USED_WARNING_PCT

Thresholds are the drive's own where it keeps them (WCTEMP/CCTEMP, the spare threshold,
ATA attribute thresholds); the rest are below, each with why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpudisk_top.collect.blockdev import device_stack
from gpudisk_top.collect.sample import (HEALTH_SIMULATED, HEALTH_SMARTCTL, HEALTH_SYSFS,
                                        DiskHealth, HealthSnapshot, same_drive)
from gpudisk_top.model.health_range import in_range

__all__ = ["DiskHealth", "HealthSnapshot", "HealthTrend", "HealthView", "STATUSES",
           "STATUS_RANK", "HEALTH_SMARTCTL", "HEALTH_SYSFS", "HEALTH_SIMULATED", "classify",
           "trend", "minutes_above_warning", "health_views", "health_of", "evidence_clause"]

OK, WARNING, FAILING, UNKNOWN = "ok", "warning", "failing", "unknown"
STATUSES = (OK, WARNING, FAILING, UNKNOWN)
# worst first when sorted by rank descending; unknown is not better than ok, only less said
STATUS_RANK = {UNKNOWN: 0, OK: 1, WARNING: 2, FAILING: 3}

# NVMe Percentage Used is the vendor's estimate of life used (NVMe 1.4 5.14.1.2: 100 at
# the rated endurance, may exceed it).  At 90 % a replacement is due within the 10 % the
# vendor still warrants; at 100 % the rated endurance is spent.
PCT_USED_WARNING_PCT = 90.0
PCT_USED_FAILING_PCT = 100.0

# NVMe SMART/Health log Critical Warning bits (NVMe base spec, Figure "SMART / Health
# Information Log Page", byte 0): what each says, and whether the drive is failing.
_CRITICAL_BITS = (
    (0x01, "available spare below its threshold", FAILING),
    (0x02, "temperature outside its thresholds", WARNING),
    (0x04, "reliability degraded (media or internal errors)", FAILING),
    (0x08, "media placed in read-only mode", FAILING),
    (0x10, "volatile memory backup failed", FAILING),
    (0x20, "persistent memory region read-only", FAILING),
)


def _fmt(value: float) -> str:
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"


def classify(h: DiskHealth) -> tuple[str, tuple[str, ...]]:
    """The one rule that judges a reading: (status, reasons), the worst reasons first.

    failing: the drive's self-assessment failed; an ATA attribute at or below its
    threshold now; spare below its threshold; rated endurance spent; at or above the
    critical temperature; an NVMe critical warning other than temperature.  warning:
    at or above the warning temperature; media/data-integrity errors; reallocated,
    pending or offline-uncorrectable sectors; an ATA attribute that failed in the past;
    endurance past PCT_USED_WARNING_PCT.  Error-log entries and unsafe shutdowns are
    reported but judge nothing (an NVMe error log fills with harmless aborted commands).
    unknown: not readable, or nothing judged.  Never raises."""
    if not h.readable:
        return UNKNOWN, (h.unreadable_reason or "not readable",)
    failing: list[str] = []
    warning: list[str] = []
    if h.smart_passed is False and not h.critical_warning:
        # (an NVMe drive's "FAILED" is smartctl's reading of its critical warning bits,
        # judged one by one below: a temperature warning alone is not a failing drive)
        failing.append("SMART self-assessment FAILED")
    if h.failing_attributes:
        failing.append("failing now: " + ", ".join(h.failing_attributes))
    spare, spare_min = h.available_spare_pct, h.available_spare_threshold_pct
    if spare is not None and spare_min is not None and spare < spare_min:
        failing.append(f"spare {_fmt(spare)}% < threshold {_fmt(spare_min)}%")
    used = h.percentage_used_pct
    if used is not None and used >= PCT_USED_FAILING_PCT:
        failing.append(f"endurance used {_fmt(used)}%")
    elif used is not None and used >= PCT_USED_WARNING_PCT:
        warning.append(f"endurance used {_fmt(used)}%")
    temp, warn_c, crit_c = h.temperature_c, h.warning_temp_c, h.critical_temp_c
    if temp is not None and crit_c is not None and temp >= crit_c:
        failing.append(f"{_fmt(temp)} °C above critical {_fmt(crit_c)} °C")
    elif temp is not None and warn_c is not None and temp >= warn_c:
        warning.append(f"{_fmt(temp)} °C above warning {_fmt(warn_c)} °C")
    if h.critical_warning:
        said = " ".join(failing + warning)
        for bit, what, level in _CRITICAL_BITS:
            if not h.critical_warning & bit:
                continue
            if bit == 0x01 and "spare" in said or bit == 0x02 and "°C" in said:
                continue   # said above, with the numbers
            (failing if level == FAILING else warning).append(f"critical warning: {what}")
    if h.media_errors:
        warning.append(f"media errors {h.media_errors}")
    if h.reallocated_sectors:
        warning.append(f"reallocated sectors {h.reallocated_sectors}")
    if h.pending_sectors:
        warning.append(f"pending sectors {h.pending_sectors}")
    if h.offline_uncorrectable:
        warning.append(f"offline uncorrectable {h.offline_uncorrectable}")
    if h.failed_attributes:
        warning.append("failed in the past: " + ", ".join(h.failed_attributes))
    if failing:
        return FAILING, tuple(failing + warning)
    if warning:
        return WARNING, tuple(warning)
    judged = (h.smart_passed, spare, used, temp, h.critical_warning, h.media_errors,
              h.reallocated_sectors, h.pending_sectors)
    if all(v is None for v in judged):
        return UNKNOWN, ("nothing to judge: the drive reports no health fields",)
    return OK, ()


# ---------------------------------------------------------------------------- trend
@dataclass(frozen=True, slots=True)
class HealthTrend:
    """What a disk gained from one reading to a later one (None: not known at both)."""

    span_s: float
    media_errors_gained: int | None = None
    error_log_gained: int | None = None
    reallocated_gained: int | None = None
    pending_gained: int | None = None       # may be negative: pending sectors get remapped
    unsafe_shutdowns_gained: int | None = None
    wear_gained_pct: float | None = None
    warning_temp_min_gained: int | None = None
    critical_temp_min_gained: int | None = None

    def as_json(self) -> dict:
        return {f: getattr(self, f) for f in self.__slots__}


def _gain(a, b):
    return None if a is None or b is None else b - a


def trend(first: DiskHealth, last: DiskHealth) -> HealthTrend | None:
    """What the disk gained from `first` to `last` (two readings of one kernel name, first
    the older).  None when they are two drives (same_drive: another serial number in the
    slot), whose counters have nothing to do with each other.  A counter that went down
    (a vendor reset) gives None for it, not a negative gain; pending sectors may go
    down.  Never raises."""
    if not same_drive(first, last):
        return None
    first, last = in_range(first)[0], in_range(last)[0]    # no gain from an impossible figure

    def counter(name):
        g = _gain(getattr(first, name), getattr(last, name))
        return None if g is None or g < 0 else g

    return HealthTrend(
        span_s=max(0.0, last.read_wall_s - first.read_wall_s),
        media_errors_gained=counter("media_errors"),
        error_log_gained=counter("error_log_entries"),
        reallocated_gained=counter("reallocated_sectors"),
        pending_gained=_gain(first.pending_sectors, last.pending_sectors),
        unsafe_shutdowns_gained=counter("unsafe_shutdowns"),
        wear_gained_pct=counter("percentage_used_pct"),
        warning_temp_min_gained=counter("warning_temp_time_min"),
        critical_temp_min_gained=counter("critical_temp_time_min"),
    )


def _above_warning(h: DiskHealth) -> bool:
    return (h.temperature_c is not None and h.warning_temp_c is not None
            and h.temperature_c >= h.warning_temp_c)


def minutes_above_warning(readings: Sequence[DiskHealth]) -> float | None:
    """Minutes the disk spent at or above its warning temperature over `readings` (one
    disk's, oldest first): the drive's own counter (NVMe warning_temp_time) where the
    first and last readings both have it, else the time from each reading that found it
    at or above its warning temperature to the next.  None: fewer than two readable
    readings, or no temperature or warning threshold in them."""
    readable = [h for h in readings if h.readable]
    if len(readable) < 2:
        return None
    t = trend(readable[0], readable[-1])
    g = t.warning_temp_min_gained if t is not None else None
    if g is not None:
        return float(g)
    if not any(h.temperature_c is not None and h.warning_temp_c is not None for h in readable):
        return None
    return sum(max(0.0, b.read_wall_s - a.read_wall_s)
               for a, b in zip(readable, readable[1:]) if _above_warning(a)) / 60.0


# ---------------------------------------------------------------------------- the model's view
@dataclass(frozen=True, slots=True)
class HealthView:
    """One disk's health as the model shows it."""

    reading: DiskHealth
    status: str
    reasons: tuple[str, ...]
    since_start: HealthTrend | None = None   # from this run's first readable reading of this drive

    @property
    def device(self) -> str:
        return self.reading.device

    def summary(self) -> str:
        """'ok', 'warning: media errors 12', 'unknown: no SMART on virtio'."""
        return self.status + (f": {'; '.join(self.reasons)}" if self.reasons else "")

    def as_json(self) -> dict:
        """The reading's fields, then status, reasons and since_start (or null)."""
        h = self.reading
        out = {f: getattr(h, f) for f in DiskHealth.__slots__}
        out["failing_attributes"] = list(h.failing_attributes)
        out["failed_attributes"] = list(h.failed_attributes)
        out["status"] = self.status
        out["reasons"] = list(self.reasons)
        out["since_start"] = self.since_start.as_json() if self.since_start else None
        return out


def view_of(reading: DiskHealth, first: DiskHealth | None = None) -> HealthView:
    """One reading judged, with its trend since `first`.  A figure the reading's field
    cannot hold (health_range.RANGES) is left out of the view's reading and of what is
    judged, and the reasons say so after the judgement's own.  Never raises."""
    checked, notes = in_range(reading)
    status, reasons = classify(checked)
    since = (trend(first, reading) if first is not None and reading.readable
             and first is not reading else None)
    return HealthView(checked, status, reasons + notes, since)


_last_views: tuple[HealthSnapshot | None, dict[str, HealthView]] = (None, {})


def health_views(snapshot: HealthSnapshot | None) -> dict[str, HealthView]:
    """{device: HealthView} of a snapshot (Model.health).  The poller replaces its
    snapshot only every few minutes: while it is the same object, so is the dict (do not
    mutate it), so a sample a second costs one identity test."""
    global _last_views
    if snapshot is None:
        return {}
    cached, views = _last_views
    if cached is snapshot:
        return views
    views = {dev: view_of(h, snapshot.first.get(dev)) for dev, h in snapshot.readings.items()}
    _last_views = (snapshot, views)
    return views


def health_of(views: Mapping[str, HealthView], devices: Mapping, name: str
              ) -> HealthView | None:
    """The health of the disk that holds `name`: its own, a partition's disk's, or the
    worst of a dm/md device's members (devices: Model.devices, for the stack).  None when
    no disk under it was read."""
    found = [views[d] for d in device_stack(devices, name) if d in views]
    if not found:
        return None
    return max(found, key=lambda v: STATUS_RANK[v.status])


def health_value(view: HealthView, name: str) -> float | None:
    """A number of the disk's health by its vocabulary field (vocab.HEALTH: the
    reading's; vocab.HEALTH_COMPUTED: computed here), None when not known."""
    h = view.reading
    if name == "failing":
        return None if view.status == UNKNOWN else float(view.status == FAILING)
    if name == "warning":
        return None if view.status == UNKNOWN else float(view.status in (WARNING, FAILING))
    if not h.readable:
        return None
    if name == "spare_margin_pct":
        g = _gain(h.available_spare_threshold_pct, h.available_spare_pct)
    elif name == "above_warning_c":
        g = _gain(h.warning_temp_c, h.temperature_c)
    elif name == "media_errors_gained":
        g = view.since_start.media_errors_gained if view.since_start else (
            0 if h.media_errors is not None else None)
    else:
        g = getattr(h, name)
    return None if g is None else float(g)


def evidence_clause(view: HealthView | None) -> str | None:
    """The verdict's words for a disk whose health explains its latency: above its warning
    temperature (the drive throttles there), or media errors.  None otherwise."""
    if view is None or view.status not in (WARNING, FAILING):
        return None
    h, parts = view.reading, []
    if _above_warning(h):
        word = "composite temperature" if h.protocol == "NVMe" else "temperature"
        crit = (h.critical_temp_c is not None and h.temperature_c >= h.critical_temp_c)
        limit, which = (h.critical_temp_c, "critical") if crit else (h.warning_temp_c, "warning")
        gained = view.since_start.warning_temp_min_gained if view.since_start else None
        span = f" for {gained} min" if gained else ""
        parts.append(f"{word} {_fmt(h.temperature_c)} °C, above its {_fmt(limit)} °C "
                     f"{which}{span}: thermal throttling")
    if h.media_errors:
        gained = view.since_start.media_errors_gained if view.since_start else None
        since = f" ({gained} since start)" if gained else ""
        parts.append(f"{h.media_errors} media errors{since}")
    return "; ".join(parts) or None
