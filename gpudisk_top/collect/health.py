"""Device health, read slowly: `smartctl --json` per physical disk, and the kernel's own
view of a drive's temperature (hwmon) where smartctl cannot read it.

What is read, per whole disk found under /sys/block that is not virtual (loop, zram,
dm, md are not disks; a partition's or a dm device's health is its disks', model/health.py
health_of):

  - `smartctl --json=co -x -n standby /dev/X` (smartmontools >= 7; 6.7's experimental
    JSON, format 0.1, reads too), run without a shell, stdin closed, with a timeout
    after which it is killed (our own child, by its Popen object: Children), as it is
    past MAX_SMARTCTL_BYTES of answer (one that writes for ever costs 4 MiB), up to
    PARALLEL_READS disks at a time.  The node is looked up in dev_dir (--devfs: the
    host's /dev mounted in a container; smartctl_argv says why the type is then given).
    -x adds what -a lacks: the NVMe temperature thresholds, ATA SCT temperature limits
    and device statistics (endurance used).  --json=o adds smartctl's text to the same
    document (smartctl.output[]): smartctl before 7.5 prints the NVMe thresholds
    (WCTEMP/CCTEMP) and the thermal management times as text only, and
    nvme_text_facts() reads those two from it wherever the JSON has no key for them.
    -n standby never spins up a sleeping disk to read it, and then the kernel is not
    asked either (read_device).  Its exit status is a bit mask (smartctl(8) EXIT
    STATUS): bit 0 (the command line did not parse) or bit 1 (the device could not be
    opened, did not identify, or is asleep) mean no data, and the disk is unreadable
    with smartctl's own message; bit 2 (a SMART command failed) and bits 3-7 (failing,
    prefail attributes at threshold, errors logged) still come with data, which
    parse_smartctl() reads.  A smartctl killed by a signal is no reading, and says so.
    parse_smartctl() never raises, whatever the document holds, and a temperature or
    threshold no drive could have (sane_temp_c) is None.
  - hwmon (/sys/block/X/device/hwmon*, the NVMe controller's and the SATA drivetemp
    driver's): temp1_input, temp1_max (NVMe: the over-temperature threshold, WCTEMP by
    default), temp1_crit (CCTEMP).  No tools, no privileges.  It fills the thresholds
    smartctl did not give, and is the whole reading (source "sysfs") where smartctl is
    not installed or cannot open the disk.  The kernel keeps no error counters for a
    disk: media errors, spare and wear come only from smartctl.

An NVMe drive's warning and critical temperatures, first found first: smartctl's JSON key
(7.5 and later), smartctl's text in the same document (before 7.5), the kernel's hwmon.
The first two are one value, the drive's own WCTEMP/CCTEMP from its Identify Controller
data, which a 7.5 node and a 7.3 node thus read alike.  hwmon's temp1_crit is that CCTEMP
too, but its temp1_max is the controller's over-temperature threshold (Get Features,
Temperature Threshold), which the host can set (a write to temp1_max, nvme set-feature):
WCTEMP only until someone changes it.  The warning the verdict judges by is the drive's
rated one, so hwmon comes last, for a drive smartctl says nothing of (not installed, no
permission, an older smartctl run without its text).

A virtio or Xen disk has no SMART (the hypervisor does not pass it through): said so
without running anything.  Nothing here writes to a device node, and nothing runs on the
sampling thread: HealthPoller reads on threads of its own and hands each poll's
readings over as one immutable HealthSnapshot, which the Sampler attaches to every
Sample by reference.  One disk that cannot be read (a bug) is that disk's reading, not
the poll's; a poll that fails as a whole is HealthPoller.error, which the Sampler says
once.

Cost (bench/bench_health.py): smartctl is a process per disk per poll, a few ms of CPU
each (the figures are in the README's Performance table); at the default interval of
600 s that is a hundred-thousandth of a core per disk.
"""

from __future__ import annotations

import glob
import json
import math
import os
import re
import resource
import selectors
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable

from gpudisk_top.collect.roots import Roots, read_first_line
from gpudisk_top.collect.sample import (HEALTH_SMARTCTL, HEALTH_SYSFS, DiskHealth,
                                        HealthSnapshot, same_drive)

DEFAULT_INTERVAL_S = 600.0
SMARTCTL_TIMEOUT_S = 30.0   # an HDD that spins up can take 10 s; a wedged bridge forever
# The most of smartctl's answer read: a real `smartctl --json=o -x` is tens of kB (an HDD
# with a long error log ~150 kB).  A smartctl that writes without end (a wrapper gone
# wrong, a hostile one on PATH) took serve to 6 GB in 14 s; past this it is stopped.
MAX_SMARTCTL_BYTES = 4 * 2**20
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

# kernel names that are never a physical disk with health of its own
_NOT_DISKS = re.compile(r"^(loop|ram|zram|dm-|md|sr|fd|nbd|rbd|drbd|zd)\d|^nvme\d+c\d+n\d+$"
                        r"|^mmcblk\d+(boot\d+|rpmb)$")
ASLEEP = "in standby: not woken to read its health (smartctl -n standby)"
# why a virtual disk has no health to read (the simulator's virtual disks say the same)
VIRTIO_NO_SMART = "virtio disk: no SMART (the hypervisor does not pass it through)"
XEN_NO_SMART = "Xen virtual disk: no SMART"


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


def _first(*values):
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
    h.model = _first(_str(_get(doc, "model_name")), _str(_get(doc, "scsi_model_name")),
                     _str(_get(doc, "product")))
    h.serial = _str(_get(doc, "serial_number"))
    h.firmware = _first(_str(_get(doc, "firmware_version")), _str(_get(doc, "revision")))
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
    h.temperature_c = _first(sane_temp_c(temp.get("current")), sane_temp_c(nvme.get("temperature")),
                             _attr_temp(table))
    # NVMe WCTEMP/CCTEMP (smartctl >= 7.5 -x); ATA SCT's highest recommended operating
    # temperature and its limit; SCSI's drive trip temperature; before 7.5, NVMe
    # WCTEMP/CCTEMP from smartctl's text (--json=o)
    h.warning_temp_c = _first(sane_temp_c(thresholds.get("warning")),
                              sane_temp_c(temp.get("op_limit_max")),
                              sane_temp_c(text_warning))
    h.critical_temp_c = _first(sane_temp_c(thresholds.get("critical")),
                               sane_temp_c(temp.get("critical_limit_max")),
                               sane_temp_c(temp.get("limit_max")),
                               sane_temp_c(temp.get("drive_trip")),
                               sane_temp_c(text_critical))
    h.warning_temp_time_min = _int(nvme.get("warning_temp_time"))
    h.critical_temp_time_min = _int(nvme.get("critical_comp_time"))
    h.percentage_used_pct = _first(
        _num(nvme.get("percentage_used")), _num(_get(doc, "endurance_used", "current_percent")),
        _num(_device_statistic(doc, "Percentage Used Endurance Indicator")))
    h.available_spare_pct = _first(_num(nvme.get("available_spare")),
                                   _num(_get(doc, "spare_available", "current_percent")))
    h.available_spare_threshold_pct = _first(
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
    h.reallocated_sectors = _first(_attr_raw(table, ATA_REALLOCATED),
                                   _int(_get(doc, "scsi_grown_defect_list")))
    h.pending_sectors = _attr_raw(table, ATA_PENDING)
    h.offline_uncorrectable = _attr_raw(table, ATA_OFFLINE_UNC)
    h.error_log_entries = _first(_int(nvme.get("num_err_log_entries")),
                                 _int(_get(doc, "ata_smart_error_log", "extended", "count")),
                                 _int(_get(doc, "ata_smart_error_log", "summary", "count")))
    h.power_on_hours = _first(_int(_get(doc, "power_on_time", "hours")),
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


# ---------------------------------------------------------------------------- sysfs
def _milli_c(path: str) -> float | None:
    """A hwmon temperature file (millidegrees Celsius, hwmon's sysfs ABI) in °C, where
    it is a sane one (sane_temp_c: the NVMe driver writes an unset WCTEMP as -273150)."""
    line = read_first_line(path)
    try:
        return sane_temp_c(int(line) / 1000.0) if line is not None else None
    except ValueError:
        return None


def hwmon_dir(roots: Roots, device: str) -> str | None:
    """The hwmon directory with the disk's temperature: the NVMe controller's
    (/sys/block/nvme0n1/device/hwmonN; under a multipath head, its first controller's)
    or the SATA drivetemp driver's (/sys/block/sda/device/hwmon/hwmonN)."""
    base = roots.sys("block", device, "device")
    patterns = [os.path.join(base, "hwmon*"), os.path.join(base, "hwmon", "hwmon*"),
                os.path.join(base, "nvme*", "hwmon*")]
    m = re.match(r"^nvme(\d+)n\d+$", device)
    if m:
        patterns.append(roots.sys("class", "nvme", f"nvme{m.group(1)}", "hwmon*"))
    for pattern in patterns:
        for d in sorted(glob.glob(pattern)):
            if os.path.exists(os.path.join(d, "temp1_input")):
                return d
    return None


def read_sysfs(roots: Roots, device: str, read_wall_s: float = 0.0) -> DiskHealth | None:
    """The kernel's view of the disk's temperature and its thresholds (hwmon), and its
    model, serial and firmware from sysfs; None where the kernel keeps no temperature
    for it (or only one that is not sane_temp_c).  Never raises."""
    hw = hwmon_dir(roots, device)
    if hw is None:
        return None
    dev = roots.sys("block", device, "device")
    h = DiskHealth(device=device, read_wall_s=read_wall_s, source=HEALTH_SYSFS,
                   protocol="NVMe" if device.startswith("nvme") else None)
    h.temperature_c = _milli_c(os.path.join(hw, "temp1_input"))
    if h.temperature_c is None:
        return None
    h.warning_temp_c = _milli_c(os.path.join(hw, "temp1_max"))
    h.critical_temp_c = _milli_c(os.path.join(hw, "temp1_crit"))
    h.model = read_first_line(os.path.join(dev, "model"))
    h.serial = read_first_line(os.path.join(dev, "serial"))
    h.firmware = _first(read_first_line(os.path.join(dev, "firmware_rev")),
                        read_first_line(os.path.join(dev, "rev")))
    h.model, h.serial, h.firmware = (v.strip() if v else None
                                     for v in (h.model, h.serial, h.firmware))
    h.readable = True
    return h


def merge_sysfs(h: DiskHealth, kernel: DiskHealth | None) -> DiskHealth:
    """smartctl's reading with the thresholds only the kernel gave (smartctl's JSON and
    its text had none: the drive's own WCTEMP/CCTEMP come first, the module says why).
    The kernel's is the reading when smartctl's is unreadable; then smartctl's reason
    stays, as a note of what is not known (errors, spare, wear)."""
    if kernel is None:
        return h
    if not h.readable:
        kernel.unreadable_reason = h.unreadable_reason
        return kernel
    if h.warning_temp_c is None:
        h.warning_temp_c = kernel.warning_temp_c
    if h.critical_temp_c is None:
        h.critical_temp_c = kernel.critical_temp_c
    if h.temperature_c is None:
        h.temperature_c = kernel.temperature_c
    return h


# ---------------------------------------------------------------------------- the disks
def physical_disks(roots: Roots) -> dict[str, str | None]:
    """{kernel name: None, or why it has no health to read} for the whole disks under
    /sys/block that are not virtual (loop, ram, zram, dm, md, optical drives and NVMe
    multipath paths are left out).  No /sys: {}.  Never raises."""
    try:
        names = sorted(os.listdir(roots.sys("block")))
    except OSError:
        return {}
    out: dict[str, str | None] = {}
    for name in names:
        if _NOT_DISKS.match(name):
            continue
        try:
            real = os.path.realpath(roots.sys("block", name))
        except OSError:
            real = ""
        if "/devices/virtual/" in real:
            continue
        if "/virtio" in real:
            out[name] = VIRTIO_NO_SMART
        elif "/vbd-" in real or name.startswith("xvd"):
            out[name] = XEN_NO_SMART
        else:
            out[name] = None
    return out


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


class Children:
    """The smartctl processes a poller has started and not yet reaped.  kill_all() stops
    them at close: each is known by its own Popen object and signalled only while it is
    not reaped (reaping and signalling hold one lock, so a PID the kernel has handed to
    another process is never signalled); nothing else is ever signalled."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen] = set()
        self.closed = False

    def start(self, argv: list[str]) -> subprocess.Popen | None:
        """A started child, or None once closed.  Raises OSError when it cannot run."""
        with self._lock:
            if self.closed:
                return None
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, close_fds=True)
            self._procs.add(proc)
            return proc

    def reap(self, proc: subprocess.Popen) -> resource.struct_rusage | None:
        """Reap proc if it has exited, setting its returncode; its rusage (the CPU it
        used), or None while it runs."""
        with self._lock:
            if proc.returncode is not None:
                self._procs.discard(proc)
                return None
            try:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            except ChildProcessError:       # reaped by someone else: a bug, said as one
                self._procs.discard(proc)
                raise
            if pid == 0:
                return None
            proc.returncode = os.waitstatus_to_exitcode(status)
            self._procs.discard(proc)
            return usage

    def kill(self, proc: subprocess.Popen) -> None:
        with self._lock:
            if proc.returncode is None:
                os.kill(proc.pid, signal.SIGKILL)

    def kill_all(self) -> None:
        """Kill every child still running; start() starts none after this."""
        with self._lock:
            self.closed = True
            for proc in self._procs:
                if proc.returncode is None:
                    os.kill(proc.pid, signal.SIGKILL)


_REAP_WAIT_S = 5.0   # for a killed child to go: one in an ioctl of a wedged device may not


def _run_smartctl(argv: list[str], timeout_s: float, children: Children | None = None
                  ) -> tuple[int | None, str, str | None, float | None]:
    """(exit status, stdout, None, the child's CPU seconds), or (None, "", why no data,
    its CPU seconds or None).  A child killed by a signal (close(), the OOM killer) is
    no reading, and says which signal; one that does not answer in timeout_s is killed
    (our own child: `children` knows it by its Popen object) and says so."""
    children = children if children is not None else Children()
    try:
        proc = children.start(argv)
    except OSError as err:
        return None, "", f"cannot run smartctl: {err.strerror or err}", None
    if proc is None:
        return None, "", "not read: gpudisk-top is stopping", None
    deadline = time.monotonic() + timeout_s
    chunks: list[bytes] = []
    timed_out = flooded = False
    total = 0
    try:
        fd = proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    timed_out = True
                    break
                data = os.read(fd, 1 << 16)
                if not data:
                    break
                total += len(data)
                if total > MAX_SMARTCTL_BYTES:
                    flooded = True
                    break
                chunks.append(data)
    except BaseException:
        children.kill(proc)     # no child left behind, whatever went wrong here
        _reap(proc, children, _REAP_WAIT_S)
        raise
    finally:
        proc.stdout.close()
    if timed_out or flooded:
        chunks.clear()
        children.kill(proc)
        cpu_s = _reap(proc, children, _REAP_WAIT_S)
        if flooded:
            return None, "", (f"smartctl wrote more than {MAX_SMARTCTL_BYTES // 2**20} MiB "
                              "(stopped; a real answer is tens of kB): no reading"), cpu_s
        return None, "", f"smartctl did not answer in {timeout_s:g} s (stopped)", cpu_s
    # its answer is written: it exits now (one that does not is stopped)
    cpu_s = _reap(proc, children, _REAP_WAIT_S)
    if proc.returncode is None:
        children.kill(proc)
        cpu_s = _reap(proc, children, _REAP_WAIT_S)
        return None, "", "smartctl did not exit after its answer (stopped)", cpu_s
    rc = proc.returncode
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return None, "", f"smartctl was killed by {name}: no reading", cpu_s
    return rc, b"".join(chunks).decode("utf-8", "replace"), None, cpu_s


def _reap(proc: subprocess.Popen, children: Children, wait_s: float) -> float | None:
    """Wait up to wait_s for proc to end and reap it: its CPU seconds (None: unknown, or
    still running)."""
    gone_by = time.monotonic() + wait_s
    while True:
        usage = children.reap(proc)
        if usage is not None:
            return usage.ru_utime + usage.ru_stime
        if proc.returncode is not None or time.monotonic() >= gone_by:
            return None
        time.sleep(0.002)


def read_device(roots: Roots, device: str, smartctl: str | None, dev_dir: str = DEV_DIR,
                why_not: str | None = None, timeout_s: float = SMARTCTL_TIMEOUT_S,
                children: Children | None = None) -> DiskHealth:
    """One disk's health now: smartctl's reading (smartctl None: not installed), the
    kernel's filling what it lacks or standing in for it.  why_not: the disk is known to
    have no SMART (virtio): nothing is run.  A disk asleep (-n standby) is not asked
    again through the kernel either: drivetemp reads a SATA disk's temperature with SCT
    and SMART commands, which may reset its spin-down timer.  read_cpu_s is the CPU it
    cost (smartctl's own, from its rusage, and this thread's).  Never raises for what a
    disk or smartctl answers."""
    wall = time.time()
    cpu0 = time.thread_time()
    child_cpu_s = None
    if why_not is not None:
        h = DiskHealth(device=device, read_wall_s=wall, unreadable_reason=why_not)
    elif smartctl is None:
        h = DiskHealth(device=device, read_wall_s=wall, unreadable_reason=NOT_INSTALLED)
    else:
        argv = smartctl_argv(smartctl, device, dev_dir)
        rc, out, err, child_cpu_s = _run_smartctl(argv, timeout_s, children)
        if err is not None:
            h = DiskHealth(device=device, read_wall_s=wall, source=HEALTH_SMARTCTL,
                           unreadable_reason=err)
        else:
            h = parse_smartctl(out, device, rc, wall, path=argv[-1])
    if why_not is None and h.unreadable_reason != ASLEEP:
        h = merge_sysfs(h, read_sysfs(roots, device, wall))
    h.read_cpu_s = time.thread_time() - cpu0 + (child_cpu_s or 0.0)
    return h


def find_smartctl() -> str | None:
    """smartctl on PATH, else None.  (Debian puts it in /usr/sbin, which only root's
    PATH has: without root it could not open a disk anyway.)"""
    return shutil.which("smartctl")


# ---------------------------------------------------------------------------- the poller
# smartctl processes at once: a node's disks answer in parallel (each is its own device;
# an awake HDD takes about a second for -x), so a pass over 16 takes a quarter of the
# time, while a few processes at a time keep a node's HBA and CPUs out of it
PARALLEL_READS = 4
NOT_READ_YET = "not read yet: smartctl had not answered when this was taken"


def next_snapshot(last: HealthSnapshot | None, readings: dict[str, DiskHealth],
                  polled_wall_s: float) -> HealthSnapshot:
    """The snapshot a poll hands over: its readings, with `first` (each disk's first
    readable reading of the run) carried on from `last` and the polls counted.  The one
    rule for every poller (this module's, the simulator's).  Never raises."""
    first = dict(last.first) if last is not None else {}
    for device, h in readings.items():
        old = first.get(device)
        if h.readable and (old is None or not same_drive(old, h)):
            first[device] = h      # a drive replaced in the slot starts its trend again
    return HealthSnapshot(readings=readings, first=first, polled_wall_s=polled_wall_s,
                          polls=(last.polls if last is not None else 0) + 1)


class HealthPoller:
    """Reads every physical disk's health every interval_s on a daemon thread of its own.

        poller = HealthPoller(roots, interval_s=600)
        poller.start()
        poller.latest          # the latest HealthSnapshot (None before the first poll)
        poller.wait_first(10)  # block until the first poll is in (--once)
        poller.publish_partial()   # what the first poll has read so far (--once)
        poller.close()         # stop: kill a running smartctl, join the thread

    The snapshot is replaced whole at each poll (never mutated), so a reader on another
    thread takes it with one attribute read and no lock.  The first readable reading of
    each drive is kept as `first` (the trend since start; a drive replaced in the slot
    starts again).  smartctl: its path, None to find it on PATH, or False for none (the
    kernel's view only); up to `parallel` disks are read at once.  dev_dir: where the
    disks' device nodes are (--devfs).  `error`: why the latest poll failed (a bug), said
    once in the samples' warnings by the Sampler."""

    def __init__(self, roots: Roots | None = None, interval_s: float = DEFAULT_INTERVAL_S,
                 smartctl: str | None | bool = None, dev_dir: str = DEV_DIR,
                 timeout_s: float = SMARTCTL_TIMEOUT_S,
                 on_poll: Callable[[HealthSnapshot], None] | None = None,
                 parallel: int = PARALLEL_READS) -> None:
        self.roots = roots or Roots()
        self.interval_s = interval_s
        self.smartctl = (find_smartctl() if smartctl is None else smartctl) or None
        self.dev_dir = dev_dir
        self.timeout_s = timeout_s
        self.on_poll = on_poll
        self.parallel = max(1, parallel)
        self.latest: HealthSnapshot | None = None
        self.error: str | None = None             # why the latest poll failed (a bug)
        self.poll_thread_id: int | None = None    # the thread polls run on (tests)
        self._stop = threading.Event()
        self._polled = threading.Event()
        self._thread: threading.Thread | None = None
        self._children = Children()
        self._lock = threading.Lock()
        self._progress: tuple[dict, dict] = ({}, {})   # this poll's disks, those read

    def _read_one(self, device: str, why_not: str | None) -> DiskHealth:
        try:
            return read_device(self.roots, device, self.smartctl, self.dev_dir, why_not,
                               self.timeout_s, self._children)
        except Exception as err:  # noqa: BLE001 - one disk's failure (a bug) is its reading, not the poll's
            return DiskHealth(device=device, read_wall_s=time.time(),
                              unreadable_reason=f"health read failed: {type(err).__name__}: {err}")

    def _read_all(self, disks: dict[str, str | None]) -> dict[str, DiskHealth]:
        """Every disk's reading, up to `parallel` at a time, on daemon threads (a wedged
        smartctl never holds the process at exit)."""
        done: dict[str, DiskHealth] = {}
        with self._lock:
            self._progress = (disks, done)
        todo = list(disks.items())

        def work() -> None:
            while not self._stop.is_set():
                with self._lock:
                    if not todo:
                        return
                    device, why_not = todo.pop(0)
                h = self._read_one(device, why_not)
                with self._lock:
                    done[device] = h

        threads = [threading.Thread(target=work, name=f"gpudisk-top-health-{i}", daemon=True)
                   for i in range(min(self.parallel, len(todo)))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return {d: done[d] for d in disks if d in done}

    def poll(self) -> HealthSnapshot | None:
        """Read every disk once, now, on the calling thread; publish and return it
        (None when close() stopped it half way: nothing is published then)."""
        self.poll_thread_id = threading.get_ident()
        before = self.latest.readings if self.latest is not None else {}
        readings = self._read_all(physical_disks(self.roots))
        if self._stop.is_set():
            return None
        for device, h in readings.items():
            old = before.get(device)
            if h.unreadable_reason == ASLEEP and old is not None and old.readable:
                readings[device] = old   # a disk asleep is not read: its last reading stands
        with self._lock:    # publish_partial() publishes only while latest is None
            snap = next_snapshot(self.latest, readings, time.time())
            self.latest = snap
        self._polled.set()
        if self.on_poll is not None:
            self.on_poll(snap)
        return snap

    def publish_partial(self) -> HealthSnapshot | None:
        """Before the first poll is in: publish what it has read so far, each disk not
        yet read as unreadable NOT_READ_YET (`--once` makes its report with that rather
        than wait for the slowest disk).  Returns the latest snapshot."""
        with self._lock:
            if self.latest is not None:
                return self.latest
            disks, done = self._progress
            wall = time.time()
            readings = {d: done.get(d) or DiskHealth(device=d, read_wall_s=wall,
                                                     unreadable_reason=NOT_READ_YET)
                        for d in disks}
            self.latest = HealthSnapshot(
                readings=readings, first={d: h for d, h in readings.items() if h.readable},
                polled_wall_s=None, polls=0)
            return self.latest

    def start(self) -> "HealthPoller":
        if self._thread is None and self.interval_s > 0 and not self._stop.is_set():
            self._thread = threading.Thread(target=self._run, name="gpudisk-top-health",
                                            daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
                self.error = None
            except Exception as err:  # noqa: BLE001 - a bug must not end the thread: say it, keep the last
                self.error = f"device health poll failed: {type(err).__name__}: {err}"
                self._polled.set()
            self._stop.wait(self.interval_s)

    def wait_first(self, timeout_s: float) -> bool:
        """Wait until the first poll is in; False when it is not after timeout_s."""
        return self._polled.wait(timeout_s)

    def close(self, join_timeout_s: float = 2.0) -> None:
        """Stop polling: kill the smartctl processes still running (our own children)
        and wait up to join_timeout_s for the poll thread to end."""
        self._stop.set()
        self._children.kill_all()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(join_timeout_s)
