"""The range each figure of a disk's health reading can take, and a reading held to it.

smartctl writes what the drive (or a USB bridge, a RAID controller, a firmware bug)
answers, and a recording keeps it: `available_spare: -7` was shown as given and judged
the drive failing ("spare -7% < threshold 10%").  A figure outside what its field can
hold is not a reading of the drive: the model leaves it out (None, n/a, as a figure the
drive does not give), judges the rest, and says which it left out in the reading's
reasons.  RANGES is the one table of those ranges; the standards say each.

Temperatures are not here: collect/health_smartctl.py sane_temp_c() bounds them where they are
read (a drive's thresholds come from several places, each checked as it is taken).
"""

from __future__ import annotations

import dataclasses

from gpudisk_top.collect.sample import DiskHealth

_BYTE = 2**8 - 1
_U32 = 2**32 - 1
_U48 = 2**48 - 1
_U128 = 2**128 - 1

# field -> (lowest, highest, unit as shown): inclusive
RANGES: dict[str, tuple[float, float, str]] = {
    # NVMe SMART / Health log byte 0: a bit mask
    "critical_warning": (0, _BYTE, ""),
    # NVMe Available Spare and its threshold: "a normalized percentage (0% to 100%)"
    "available_spare_pct": (0, 100, "%"),
    "available_spare_threshold_pct": (0, 100, "%"),
    # NVMe Percentage Used: one byte, may pass 100 (255: 255 or more); ATA's device
    # statistic the same
    "percentage_used_pct": (0, _BYTE, "%"),
    # NVMe Warning / Critical Composite Temperature Time: 4-byte minute counts
    "warning_temp_time_min": (0, _U32, " min"),
    "critical_temp_time_min": (0, _U32, " min"),
    # NVMe 16-byte counters
    "media_errors": (0, _U128, ""),
    "unsafe_shutdowns": (0, _U128, ""),
    "error_log_entries": (0, _U128, ""),
    # ATA attributes' raw values are 6 bytes (SCSI's grown defect list, a count, fits)
    "reallocated_sectors": (0, _U48, ""),
    "pending_sectors": (0, _U48, ""),
    "offline_uncorrectable": (0, _U48, ""),
    # no drive has been powered a million hours (114 years); smartctl decodes the
    # vendors' packed raw values into hours, so more is a misread, not an old drive
    "power_on_hours": (0, 1_000_000, " h"),
    # NVMe Total Time For Thermal Management Temperature 1 and 2: 4-byte second counts
    "thermal_throttle_s": (0, 2 * _U32, " s"),
}


def _shown(value: float, unit: str) -> str:
    if isinstance(value, int) and value > _BYTE and (value + 1) & value == 0:
        return f"2^{value.bit_length()}-1{unit}"      # a field's width, not 39 digits
    return f"{value:g}{unit}" if isinstance(value, float) else f"{value}{unit}"


def in_range(h: DiskHealth) -> tuple[DiskHealth, tuple[str, ...]]:
    """(h with every figure outside its RANGES left out (None), a note for each:
    "available_spare_pct -7% is impossible (0 to 100%): left out").  h itself, not a
    copy, when every figure is in range.  Never raises."""
    dropped: dict[str, None] = {}
    notes: list[str] = []
    for name, (low, high, unit) in RANGES.items():
        value = getattr(h, name)
        if value is None or low <= value <= high:
            continue
        dropped[name] = None
        notes.append(f"{name} {_shown(value, unit)} is impossible ({_shown(low, '')} to "
                     f"{_shown(high, unit)}): left out")
    if not dropped:
        return h, ()
    return dataclasses.replace(h, **dropped), tuple(notes)
