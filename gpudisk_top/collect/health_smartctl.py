"""smartctl's answer about one disk, read: its command line (smartctl_argv: `smartctl
--json=co -x -n standby`, the node in dev_dir) and its JSON document into a DiskHealth
(parse_smartctl), with the two NVMe facts smartctl before 7.5 prints as text only
(nvme_text_facts).  Running it, bounded, is collect/health_children.py's; when and for
which disks, collect/health.py's.

  - smartctl >= 7 (6.7's experimental JSON, format 0.1, reads too).  -x adds what -a
    lacks: the NVMe temperature thresholds, ATA SCT temperature limits and device
    statistics (endurance used).  --json=o adds smartctl's text to the same document
    (smartctl.output[]): smartctl before 7.5 prints the NVMe thresholds (WCTEMP/CCTEMP)
    and the thermal management times as text only, and nvme_text_facts() reads those two
    from it wherever the JSON has no key for them.  -n standby never spins up a sleeping
    disk to read it (ASLEEP).  The node is looked up in dev_dir (--devfs: the host's /dev
    mounted in a container; smartctl_argv says why the type is then given).
  - Its exit status is a bit mask (smartctl(8) EXIT STATUS): bit 0 (the command line did
    not parse) or bit 1 (the device could not be opened, did not identify, or is asleep)
    mean no data, and the disk is unreadable with smartctl's own message; bit 2 (a SMART
    command failed) and bits 3-7 (failing, prefail attributes at threshold, errors
    logged) still come with data, which parse_smartctl() reads.  parse_smartctl() never
    raises, whatever the document holds, and a temperature or threshold no drive could
    have (sane_temp_c, which the kernel's readings go through too) is None.

An NVMe drive's warning and critical temperatures, first found first: smartctl's JSON key
(7.5 and later), smartctl's text in the same document (before 7.5), the kernel's hwmon
(collect/health_sysfs.py merge_sysfs).  The first two are one value, the drive's own
WCTEMP/CCTEMP from its Identify Controller data, which a 7.5 node and a 7.3 node thus read
alike.  hwmon's temp1_crit is that CCTEMP too, but its temp1_max is the controller's
over-temperature threshold (Get Features, Temperature Threshold), which the host can set
(a write to temp1_max, nvme set-feature): WCTEMP only until someone changes it.  The
warning the verdict judges by is the drive's rated one, so hwmon comes last, for a drive
smartctl says nothing of (not installed, no permission, an older smartctl run without its
text).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil

from gpudisk_top.collect.sample import HEALTH_SMARTCTL, DiskHealth

# --json=c: compact; o: smartctl's text too, as smartctl.output[] (nvme_text_facts reads two
# NVMe facts from it that smartctl before 7.5 keeps out of its JSON).  Both letters are
# smartctl's since 6.7's JSON (o: December 2017, c: October 2018).  The text makes the
# document 2-4 kB larger for an NVMe drive, 4-13 kB for an ATA one, and its parse tens of
# µs longer, within the noise of smartctl's own 10-30 ms (bench/bench_health.py): every
# disk gets it, so one command line serves all, an NVMe drive behind a USB bridge (sdX)
# included.
SMARTCTL_ARGS = ("--json=co", "-x", "-n", "standby")
NOT_INSTALLED = "smartctl not installed (smartmontools >= 7 reads SMART and NVMe health)"

# smartctl(8) EXIT STATUS bits
BIT_PARSE, BIT_OPEN, BIT_COMMAND, BIT_FAILING = 0x01, 0x02, 0x04, 0x08

# ATA attributes, by ID (smartmontools' drivedb names them; the IDs are the de facto
# standard Backblaze's studies use)
ATA_REALLOCATED, ATA_PENDING, ATA_OFFLINE_UNC, ATA_TEMP, ATA_AIRFLOW_TEMP = 5, 197, 198, 194, 190

ASLEEP = "in standby: not woken to read its health (smartctl -n standby)"


# ---------------------------------------------------------------------------- smartctl JSON
def _get(doc, *path):
    for key in path:
        if isinstance(doc, dict):
            doc = doc.get(key)
        elif isinstance(doc, list) and isinstance(key, int) and -len(doc) <= key < len(doc):
            doc = doc[key]
        else:
            return None
    return doc


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _num(value) -> float | None:
    """A finite number as float; None for anything else (a string, a bool, NaN or an
    infinity, which json.loads takes, an integer too large for a float)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    try:
        value = float(value)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def _str(value) -> str | None:
    return value if isinstance(value, str) else None


def _dict(value) -> dict:
    """value where it is a JSON object, else {}: smartctl's layout is read, never trusted."""
    return value if isinstance(value, dict) else {}


def _list(value) -> list:
    return value if isinstance(value, list) else []


# A drive's temperature or threshold outside (TEMP_MIN_C, TEMP_MAX_C] is a value the drive
# did not set, not a temperature: NVMe WCTEMP/CCTEMP 0 K (unset: smartctl and the kernel's
# hwmon say -273 °C) or 0xFFFF K (65262 °C), ATA SCT's -128 (its "no value"), an attribute
# 194 of 0 where there is no sensor.  No drive works at 0 °C or below (their operating
# range starts above it) or above 150 °C (solder and controllers give out first).  Such a
# threshold would make the drive always above its warning, or never.
TEMP_MIN_C, TEMP_MAX_C = 0.0, 150.0


def sane_temp_c(value) -> float | None:
    """value (°C) where it can be a drive's temperature or threshold, else None."""
    value = _num(value)
    return value if value is not None and TEMP_MIN_C < value <= TEMP_MAX_C else None


def first_known(*values):
    """The first of values that is not None (None when all are): the first source of a
    figure that has it (smartctl's keys in order, sysfs's files)."""
    return next((v for v in values if v is not None), None)


def _attr_raw(table: dict[int, dict], attr_id: int) -> int | None:
    return _int(_get(table.get(attr_id), "raw", "value"))


def _attr_temp(table: dict[int, dict]) -> float | None:
    """A temperature attribute's reading: its raw string starts with the degrees
    ("25 (Min/Max 19/39)"); the raw value packs min/max in its upper bytes."""
    for attr_id in (ATA_TEMP, ATA_AIRFLOW_TEMP):
        text = _get(table.get(attr_id), "raw", "string")
        m = re.match(r"\s*(\d{1,6})\b", text) if isinstance(text, str) else None
        if m:
            return sane_temp_c(int(m.group(1)))
    return None


def _device_statistic(doc: dict, name: str) -> int | None:
    """An ATA Device Statistics entry by name (smartctl -x: ata_device_statistics)."""
    for page in _list(_get(doc, "ata_device_statistics", "pages")):
        for entry in _list(_dict(page).get("table")):
            if isinstance(entry, dict) and entry.get("name") == name:
                return _int(entry.get("value"))
    return None


def smartctl_messages(doc: dict) -> list[str]:
    """smartctl's own messages (errors first), one line each."""
    msgs = [m for m in _list(_get(doc, "smartctl", "messages")) if isinstance(m, dict)]
    msgs.sort(key=lambda m: m.get("severity") != "error")
    return [m["string"].strip() for m in msgs if isinstance(m.get("string"), str)
            and m["string"].strip()]


# ---------------------------------------------------------------------------- smartctl's text
# Two NVMe facts smartctl before 7.5 prints as text only (nvmeprint.cpp's pout(), which
# its JSON does not see): the composite temperature thresholds WCTEMP/CCTEMP from Identify
# Controller (JSON nvme_composite_temperature_threshold from 7.5, commit 9b473b7) and the
# thermal management transition times of the SMART / Health log (JSON
# thermal_mgmt_temperature_{1,2}_total_time only after 7.5, commit 8d65173).  With
# --json=o smartctl also writes its whole text, line by line, as smartctl.output[]; these
# lines are read from it, and only where the JSON has no key for the fact.  The labels
# and formats are nvmeprint.cpp's, the same in 7.0 to 7.5 ("%s" of kelvin_to_str(): "75
# Celsius", or "-" for 0 K; "%d" of a 32-bit count of seconds); a line that is not exactly
# that (another label, "-", a negative %d of a count past 2^31, text after the number) is
# not read.
_TEXT_WCTEMP = re.compile(r"Warning +Comp\. Temp\. Threshold: +(-?\d{1,6}) Celsius")
_TEXT_CCTEMP = re.compile(r"Critical +Comp\. Temp\. Threshold: +(-?\d{1,6}) Celsius")
_TEXT_TMT_LABEL = re.compile(r"Thermal Temp\. ([12]) Total Time:")
_TEXT_TMT = re.compile(r"Thermal Temp\. ([12]) Total Time: +(\d{1,10})")
_TEXT_STARTS = ("Warning", "Critical", "Thermal")     # the only lines looked at
_UNREAD = object()


def _text_value(lines: list[str], label: re.Pattern) -> float | None:
    """The one number `label` (a fullmatch pattern with one group) gives in lines; None
    where no line has it, or where two lines disagree."""
    found = {int(m.group(1)) for line in lines if (m := label.fullmatch(line))}
    return float(found.pop()) if len(found) == 1 else None


def nvme_text_facts(doc: dict) -> tuple[float | None, float | None, int | None]:
    """(WCTEMP °C, CCTEMP °C, thermal management seconds, both transitions summed) as
    smartctl's text says them in smartctl.output[] (--json=o); None each where it does
    not.  smartctl before the JSON keys prints a transition time only where it is not 0:
    one of the two printed makes the other 0, neither printed is None (0, or a drive
    that keeps no such times: smartctl's text cannot tell which, nor can its JSON since
    8d65173, which writes the keys only where one is not 0).  A time line that is not
    read (a negative %d) makes the sum None, never a part of it.  Never raises."""
    lines = [line.rstrip() for line in _list(_get(doc, "smartctl", "output"))
             if isinstance(line, str) and line.startswith(_TEXT_STARTS)]
    if not lines:
        return None, None, None
    times: dict[str, object] = {}      # "1", "2": seconds, or _UNREAD
    for line in lines:
        label = _TEXT_TMT_LABEL.match(line)
        if label is None:
            continue
        m = _TEXT_TMT.fullmatch(line)
        value = int(m.group(2)) if m else _UNREAD
        n = label.group(1)
        times[n] = value if times.get(n, value) == value else _UNREAD
    if not times or _UNREAD in times.values():
        throttle = None
    else:
        throttle = sum(times.values())
    return _text_value(lines, _TEXT_WCTEMP), _text_value(lines, _TEXT_CCTEMP), throttle


def parse_smartctl(doc: dict | str | bytes, device: str, exit_status: int | None = None,
                   read_wall_s: float = 0.0, path: str | None = None) -> DiskHealth:
    """A DiskHealth from one `smartctl --json` document (any json_format_version; a key
    an older smartctl does not write is None).  exit_status: smartctl's, else the one
    the document records.  path: the device node smartctl was given (default
    /dev/DEVICE), left out of its messages.  Never raises, whatever the document holds:
    text that is not JSON is an unreadable reading that says so, and a key of an
    unexpected type is None (every nested read is type-checked: _get, _dict, _list)."""
    h = DiskHealth(device=device, read_wall_s=read_wall_s, source=HEALTH_SMARTCTL)
    if not isinstance(doc, dict):
        try:
            doc = json.loads(doc)
        except (ValueError, TypeError, RecursionError) as err:
            h.unreadable_reason = f"smartctl gave no JSON ({err})"
            return h
        if not isinstance(doc, dict):
            h.unreadable_reason = "smartctl gave no JSON object"
            return h
    prefix = f"{path or '/dev/' + device}: "
    if exit_status is None:
        exit_status = _int(_get(doc, "smartctl", "exit_status")) or 0
    messages = smartctl_messages(doc)
    if exit_status & (BIT_PARSE | BIT_OPEN):
        why = messages[0] if messages else f"smartctl exit status {exit_status}"
        # -n standby: smartctl leaves a sleeping disk asleep ("Device is in STANDBY mode")
        asleep = re.search(r"\bis in (STANDBY|SLEEP)", why) and exit_status & BIT_OPEN
        h.unreadable_reason = ASLEEP if asleep else why.replace(prefix, "")
        return h
    h.protocol = _str(_get(doc, "device", "protocol"))
    h.model = first_known(_str(_get(doc, "model_name")), _str(_get(doc, "scsi_model_name")),
                          _str(_get(doc, "product")))
    h.serial = _str(_get(doc, "serial_number"))
    h.firmware = first_known(_str(_get(doc, "firmware_version")), _str(_get(doc, "revision")))
    passed = _get(doc, "smart_status", "passed")
    h.smart_passed = passed if isinstance(passed, bool) else None

    nvme = _dict(_get(doc, "nvme_smart_health_information_log"))
    table = {a["id"]: a for a in _list(_get(doc, "ata_smart_attributes", "table"))
             if isinstance(a, dict) and _int(a.get("id")) is not None}
    temp = _dict(_get(doc, "temperature"))
    thresholds = _dict(_get(doc, "nvme_composite_temperature_threshold"))

    # the NVMe facts older smartctl prints as text only (nvme_text_facts): read from its
    # text, but never over a key its JSON has
    text_warning = text_critical = text_throttle = None
    if h.protocol == "NVMe":
        text_warning, text_critical, text_throttle = nvme_text_facts(doc)
        if "warning" in thresholds:
            text_warning = None
        if "critical" in thresholds:
            text_critical = None

    h.critical_warning = _int(nvme.get("critical_warning"))
    h.temperature_c = first_known(sane_temp_c(temp.get("current")),
                                  sane_temp_c(nvme.get("temperature")), _attr_temp(table))
    # NVMe WCTEMP/CCTEMP (smartctl >= 7.5 -x); ATA SCT's highest recommended operating
    # temperature and its limit; SCSI's drive trip temperature; before 7.5, NVMe
    # WCTEMP/CCTEMP from smartctl's text (--json=o)
    h.warning_temp_c = first_known(sane_temp_c(thresholds.get("warning")),
                                   sane_temp_c(temp.get("op_limit_max")),
                                   sane_temp_c(text_warning))
    h.critical_temp_c = first_known(sane_temp_c(thresholds.get("critical")),
                                    sane_temp_c(temp.get("critical_limit_max")),
                                    sane_temp_c(temp.get("limit_max")),
                                    sane_temp_c(temp.get("drive_trip")),
                                    sane_temp_c(text_critical))
    h.warning_temp_time_min = _int(nvme.get("warning_temp_time"))
    h.critical_temp_time_min = _int(nvme.get("critical_comp_time"))
    h.percentage_used_pct = first_known(
        _num(nvme.get("percentage_used")), _num(_get(doc, "endurance_used", "current_percent")),
        _num(_device_statistic(doc, "Percentage Used Endurance Indicator")))
    h.available_spare_pct = first_known(_num(nvme.get("available_spare")),
                                        _num(_get(doc, "spare_available", "current_percent")))
    h.available_spare_threshold_pct = first_known(
        _num(nvme.get("available_spare_threshold")),
        _num(_get(doc, "spare_available", "threshold_percent")))
    h.media_errors = _int(nvme.get("media_errors"))
    if h.media_errors is None and _get(doc, "scsi_error_counter_log") is not None:
        # SCSI: the errors the drive could not correct, reading, writing or verifying
        uncorrected = [_int(_get(doc, "scsi_error_counter_log", op, "total_uncorrected_errors"))
                       for op in ("read", "write", "verify")]
        known = [u for u in uncorrected if u is not None]
        h.media_errors = sum(known) if known else None
    h.unsafe_shutdowns = _int(nvme.get("unsafe_shutdowns"))
    h.reallocated_sectors = first_known(_attr_raw(table, ATA_REALLOCATED),
                                        _int(_get(doc, "scsi_grown_defect_list")))
    h.pending_sectors = _attr_raw(table, ATA_PENDING)
    h.offline_uncorrectable = _attr_raw(table, ATA_OFFLINE_UNC)
    h.error_log_entries = first_known(_int(nvme.get("num_err_log_entries")),
                                      _int(_get(doc, "ata_smart_error_log", "extended", "count")),
                                      _int(_get(doc, "ata_smart_error_log", "summary", "count")))
    h.power_on_hours = first_known(_int(_get(doc, "power_on_time", "hours")),
                                   _int(nvme.get("power_on_hours")))
    h.failing_attributes = tuple(f"{_str(a.get('name')) or '?'} ({i})" for i, a in table.items()
                                 if a.get("when_failed") == "now")
    h.failed_attributes = tuple(f"{_str(a.get('name')) or '?'} ({i})" for i, a in table.items()
                                if a.get("when_failed") == "past")
    # the thermal management transition times: smartctl's JSON keys (after 7.5) where it
    # has either, else its text (--json=o, nvme_text_facts)
    tmt_keys = [f"thermal_mgmt_temperature_{n}_total_time" for n in (1, 2)]
    if any(k in nvme for k in tmt_keys):
        tmt = [_int(nvme.get(k)) for k in tmt_keys]
        h.thermal_throttle_s = sum(t for t in tmt if t is not None) if any(
            t is not None for t in tmt) else None
    else:
        h.thermal_throttle_s = text_throttle

    said = (h.smart_passed, h.temperature_c, h.percentage_used_pct, h.available_spare_pct,
            h.media_errors, h.reallocated_sectors, h.pending_sectors, h.power_on_hours)
    if all(v is None for v in said):
        h.unreadable_reason = (messages[0] if messages else
                               "smartctl read no health data from it (no SMART)")
        h.unreadable_reason = h.unreadable_reason.replace(prefix, "")
        return h
    h.readable = True
    return h


# ---------------------------------------------------------------------------- the command line
DEV_DIR = "/dev"


def smartctl_argv(smartctl: str, device: str, dev_dir: str = DEV_DIR) -> list[str]:
    """smartctl's command line for the disk the kernel calls `device`, whose node is in
    dev_dir (--devfs: the host's /dev mounted in a container).  smartctl guesses a
    device's type from its name only under /dev/ (os_linux.cpp autodetect_smart_device:
    /host/dev/sda would be "Unable to detect device type"), so elsewhere the type is
    given from the kernel's name: nvme; sat,auto for sd* (SAT for an ATA disk behind
    the kernel's SCSI layer, SCSI for a SAS one: what autodetection picks; smartctl(8)
    -d sat,auto); ata for hd*."""
    argv = [smartctl, *SMARTCTL_ARGS]
    if os.path.normpath(dev_dir) != DEV_DIR:
        kind = ("nvme" if device.startswith("nvme") else "sat,auto" if device.startswith("sd")
                else "ata" if device.startswith("hd") else None)
        if kind is not None:
            argv += ["-d", kind]
    return argv + [os.path.join(dev_dir, device)]


def find_smartctl() -> str | None:
    """smartctl on PATH, else None.  (Debian puts it in /usr/sbin, which only root's
    PATH has: without root it could not open a disk anyway.)"""
    return shutil.which("smartctl")
