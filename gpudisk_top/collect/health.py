"""Device health, read slowly: `smartctl --json` per physical disk, and the kernel's own
view of a drive's temperature (hwmon) where smartctl cannot read it.

What is read, per whole disk found under /sys/block that is not virtual (loop, zram,
dm, md are not disks; a partition's or a dm device's health is its disks', model/health.py
health_of):

  - `smartctl --json=c -x -n standby /dev/X` (smartmontools >= 7; 6.7's experimental
    JSON, format 0.1, reads too), run without a shell, with a timeout, stdin closed.
    -x adds what -a lacks: the NVMe temperature thresholds (in JSON since smartctl 7.5;
    before, only the kernel's hwmon gives them), ATA SCT temperature limits and device
    statistics (endurance used).
    -n standby never spins up a sleeping disk to read it.  Its exit status is a bit mask
    (smartctl(8) EXIT STATUS): bit 0 (the command line did not parse) or bit 1 (the
    device could not be opened, did not identify, or is asleep) mean no data, and the
    disk is unreadable with smartctl's own message; bit 2 (a SMART command failed) and
    bits 3-7 (failing, prefail attributes at threshold, errors logged) still come with
    data, which parse_smartctl() reads.
  - hwmon (/sys/block/X/device/hwmon*, the NVMe controller's and the SATA drivetemp
    driver's): temp1_input, temp1_max (NVMe: the over-temperature threshold, WCTEMP by
    default), temp1_crit (CCTEMP).  No tools, no privileges.  It fills the thresholds
    smartctl did not give, and is the whole reading (source "sysfs") where smartctl is
    not installed or cannot open the disk.  The kernel keeps no error counters for a
    disk: media errors, spare and wear come only from smartctl.

A virtio or Xen disk has no SMART (the hypervisor does not pass it through): said so
without running anything.  Nothing here writes to a device node, and nothing runs on the
sampling thread: HealthPoller reads on a thread of its own and hands each poll's
readings over as one immutable HealthSnapshot, which the Sampler attaches to every
Sample by reference.

Cost (bench/bench_health.py): smartctl is a process per disk per poll, a few ms of CPU
each (the figures are in the README's Performance table); at the default interval of
600 s that is a hundred-thousandth of a core per disk.
"""

from __future__ import annotations

import glob
import json
import os
import re
import resource
import shutil
import subprocess
import threading
import time
from collections.abc import Callable

from gpudisk_top.collect.roots import Roots, read_first_line
from gpudisk_top.collect.sample import (HEALTH_SMARTCTL, HEALTH_SYSFS, DiskHealth,
                                        HealthSnapshot)

DEFAULT_INTERVAL_S = 600.0
SMARTCTL_TIMEOUT_S = 30.0   # an HDD that spins up can take 10 s; a wedged bridge forever
SMARTCTL_ARGS = ("--json=c", "-x", "-n", "standby")
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
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _first(*values):
    return next((v for v in values if v is not None), None)


def _attr_raw(table: dict[int, dict], attr_id: int) -> int | None:
    return _int(_get(table.get(attr_id), "raw", "value"))


def _attr_temp(table: dict[int, dict]) -> float | None:
    """A temperature attribute's reading: its raw string starts with the degrees
    ("25 (Min/Max 19/39)"); the raw value packs min/max in its upper bytes."""
    for attr_id in (ATA_TEMP, ATA_AIRFLOW_TEMP):
        text = _get(table.get(attr_id), "raw", "string")
        m = re.match(r"\s*(\d+)", text) if isinstance(text, str) else None
        if m:
            return float(m.group(1))
    return None


def _device_statistic(doc: dict, name: str) -> int | None:
    """An ATA Device Statistics entry by name (smartctl -x: ata_device_statistics)."""
    for page in _get(doc, "ata_device_statistics", "pages") or ():
        for entry in (page.get("table") or ()) if isinstance(page, dict) else ():
            if isinstance(entry, dict) and entry.get("name") == name:
                return _int(entry.get("value"))
    return None


def smartctl_messages(doc: dict) -> list[str]:
    """smartctl's own messages (errors first), one line each."""
    msgs = [m for m in _get(doc, "smartctl", "messages") or () if isinstance(m, dict)]
    msgs.sort(key=lambda m: m.get("severity") != "error")
    return [str(m.get("string", "")).strip() for m in msgs if m.get("string")]


def parse_smartctl(doc: dict | str | bytes, device: str, exit_status: int | None = None,
                   read_wall_s: float = 0.0) -> DiskHealth:
    """A DiskHealth from one `smartctl --json` document (any json_format_version; a key
    an older smartctl does not write is None).  exit_status: smartctl's, else the one
    the document records.  Never raises: text that is not JSON is an unreadable reading
    that says so."""
    h = DiskHealth(device=device, read_wall_s=read_wall_s, source=HEALTH_SMARTCTL)
    if not isinstance(doc, dict):
        try:
            doc = json.loads(doc)
        except (ValueError, TypeError) as err:
            h.unreadable_reason = f"smartctl gave no JSON ({err})"
            return h
        if not isinstance(doc, dict):
            h.unreadable_reason = "smartctl gave no JSON object"
            return h
    if exit_status is None:
        exit_status = _int(_get(doc, "smartctl", "exit_status")) or 0
    messages = smartctl_messages(doc)
    if exit_status & (BIT_PARSE | BIT_OPEN):
        why = messages[0] if messages else f"smartctl exit status {exit_status}"
        # -n standby: smartctl leaves a sleeping disk asleep ("Device is in STANDBY mode")
        asleep = re.search(r"\bis in (STANDBY|SLEEP)", why) and exit_status & BIT_OPEN
        h.unreadable_reason = ASLEEP if asleep else why.replace(f"/dev/{device}: ", "")
        return h
    h.protocol = _get(doc, "device", "protocol")
    h.model = _first(_get(doc, "model_name"), _get(doc, "scsi_model_name"),
                     _get(doc, "product"))
    h.serial = _get(doc, "serial_number")
    h.firmware = _first(_get(doc, "firmware_version"), _get(doc, "revision"))
    passed = _get(doc, "smart_status", "passed")
    h.smart_passed = passed if isinstance(passed, bool) else None

    nvme = _get(doc, "nvme_smart_health_information_log") or {}
    table = {a["id"]: a for a in _get(doc, "ata_smart_attributes", "table") or ()
             if isinstance(a, dict) and isinstance(a.get("id"), int)}
    temp = _get(doc, "temperature") or {}
    thresholds = _get(doc, "nvme_composite_temperature_threshold") or {}

    h.critical_warning = _int(nvme.get("critical_warning"))
    h.temperature_c = _first(_num(temp.get("current")), _num(nvme.get("temperature")),
                             _attr_temp(table))
    # NVMe WCTEMP/CCTEMP (smartctl >= 7.5 -x); ATA SCT's highest recommended operating
    # temperature and its limit; SCSI's drive trip temperature
    h.warning_temp_c = _first(_num(thresholds.get("warning")), _num(temp.get("op_limit_max")))
    h.critical_temp_c = _first(_num(thresholds.get("critical")),
                               _num(temp.get("critical_limit_max")),
                               _num(temp.get("limit_max")), _num(temp.get("drive_trip")))
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
    h.failing_attributes = tuple(f"{a.get('name', '?')} ({i})" for i, a in table.items()
                                 if a.get("when_failed") == "now")
    h.failed_attributes = tuple(f"{a.get('name', '?')} ({i})" for i, a in table.items()
                                if a.get("when_failed") == "past")
    tmt = [_int(nvme.get(f"thermal_mgmt_temperature_{n}_total_time")) for n in (1, 2)]
    h.thermal_throttle_s = sum(t for t in tmt if t is not None) if any(
        t is not None for t in tmt) else None

    said = (h.smart_passed, h.temperature_c, h.percentage_used_pct, h.available_spare_pct,
            h.media_errors, h.reallocated_sectors, h.pending_sectors, h.power_on_hours)
    if all(v is None for v in said):
        h.unreadable_reason = (messages[0] if messages else
                               "smartctl read no health data from it (no SMART)")
        h.unreadable_reason = h.unreadable_reason.replace(f"/dev/{device}: ", "")
        return h
    h.readable = True
    return h


# ---------------------------------------------------------------------------- sysfs
def _milli_c(path: str) -> float | None:
    line = read_first_line(path)
    try:
        return int(line) / 1000.0 if line is not None else None
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
    for it.  Never raises."""
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
    """smartctl's reading with the thresholds only the kernel gave (a smartctl before
    7.5 writes no NVMe WCTEMP/CCTEMP to JSON).  The kernel's is the reading when
    smartctl's is unreadable; then smartctl's reason stays, as a note of what is not
    known (errors, spare, wear)."""
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


def _run_smartctl(smartctl: str, device: str, dev_dir: str, timeout_s: float
                  ) -> tuple[int | None, str, str | None]:
    """(exit status, stdout, None) or (None, "", why it did not run)."""
    argv = [smartctl, *SMARTCTL_ARGS, os.path.join(dev_dir, device)]
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=timeout_s, check=False, close_fds=True)
    except subprocess.TimeoutExpired:
        return None, "", f"smartctl did not answer in {timeout_s:g} s"
    except OSError as err:
        return None, "", f"cannot run smartctl: {err.strerror or err}"
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), None


def read_device(roots: Roots, device: str, smartctl: str | None, dev_dir: str = "/dev",
                why_not: str | None = None, timeout_s: float = SMARTCTL_TIMEOUT_S
                ) -> DiskHealth:
    """One disk's health now: smartctl's reading (smartctl None: not installed), the
    kernel's filling what it lacks or standing in for it.  why_not: the disk is known to
    have no SMART (virtio): nothing is run.  read_cpu_s is the CPU it cost (smartctl's,
    from this process's children's rusage, and ours; a child of another thread that ends
    meanwhile counts too).  Never raises."""
    wall = time.time()
    cpu0, child0 = time.thread_time(), resource.getrusage(resource.RUSAGE_CHILDREN)
    if why_not is not None:
        h = DiskHealth(device=device, read_wall_s=wall, unreadable_reason=why_not)
    elif smartctl is None:
        h = DiskHealth(device=device, read_wall_s=wall, unreadable_reason=NOT_INSTALLED)
    else:
        rc, out, err = _run_smartctl(smartctl, device, dev_dir, timeout_s)
        if err is not None:
            h = DiskHealth(device=device, read_wall_s=wall, source=HEALTH_SMARTCTL,
                           unreadable_reason=err)
        else:
            h = parse_smartctl(out, device, rc, wall)
    if why_not is None:
        h = merge_sysfs(h, read_sysfs(roots, device, wall))
    child1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    h.read_cpu_s = (time.thread_time() - cpu0 + (child1.ru_utime - child0.ru_utime)
                    + (child1.ru_stime - child0.ru_stime))
    return h


def find_smartctl() -> str | None:
    """smartctl on PATH, else None.  (Debian puts it in /usr/sbin, which only root's
    PATH has: without root it could not open a disk anyway.)"""
    return shutil.which("smartctl")


# ---------------------------------------------------------------------------- the poller
def next_snapshot(last: HealthSnapshot | None, readings: dict[str, DiskHealth],
                  polled_wall_s: float) -> HealthSnapshot:
    """The snapshot a poll hands over: its readings, with `first` (each disk's first
    readable reading of the run) carried on from `last` and the polls counted.  The one
    rule for every poller (this module's, the simulator's).  Never raises."""
    first = dict(last.first) if last is not None else {}
    for device, h in readings.items():
        if h.readable:
            first.setdefault(device, h)
    return HealthSnapshot(readings=readings, first=first, polled_wall_s=polled_wall_s,
                          polls=(last.polls if last is not None else 0) + 1)


class HealthPoller:
    """Reads every physical disk's health every interval_s on a daemon thread of its own.

        poller = HealthPoller(roots, interval_s=600)
        poller.start()
        poller.latest          # the latest HealthSnapshot (None before the first poll)
        poller.wait_first(10)  # block until the first poll is in (--once)
        poller.close()

    The snapshot is replaced whole at each poll (never mutated), so a reader on another
    thread takes it with one attribute read and no lock.  The first readable reading of
    each disk is kept as `first` (the trend since start).  smartctl: its path, None to
    find it on PATH, or False for none (the kernel's view only)."""

    def __init__(self, roots: Roots | None = None, interval_s: float = DEFAULT_INTERVAL_S,
                 smartctl: str | None | bool = None, dev_dir: str = "/dev",
                 timeout_s: float = SMARTCTL_TIMEOUT_S,
                 on_poll: Callable[[HealthSnapshot], None] | None = None) -> None:
        self.roots = roots or Roots()
        self.interval_s = interval_s
        self.smartctl = (find_smartctl() if smartctl is None else smartctl) or None
        self.dev_dir = dev_dir
        self.timeout_s = timeout_s
        self.on_poll = on_poll
        self.latest: HealthSnapshot | None = None
        self.error: str | None = None             # why the latest poll failed (a bug)
        self.poll_thread_id: int | None = None    # the thread polls run on (tests)
        self._stop = threading.Event()
        self._polled = threading.Event()
        self._thread: threading.Thread | None = None

    def poll(self) -> HealthSnapshot:
        """Read every disk once, now, on the calling thread; publish and return it."""
        self.poll_thread_id = threading.get_ident()
        readings = {}
        before = self.latest.readings if self.latest is not None else {}
        for device, why_not in physical_disks(self.roots).items():
            if self._stop.is_set():
                break
            h = read_device(self.roots, device, self.smartctl, self.dev_dir, why_not,
                            self.timeout_s)
            if h.unreadable_reason == ASLEEP and before.get(device) is not None \
                    and before[device].readable:
                h = before[device]   # a disk asleep is not read: its last reading stands
            readings[device] = h
        snap = next_snapshot(self.latest, readings, time.time())
        self.latest = snap
        self._polled.set()
        if self.on_poll is not None:
            self.on_poll(snap)
        return snap

    def start(self) -> "HealthPoller":
        if self._thread is None and self.interval_s > 0:
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
                self.error = f"device health poll failed: {err!r}"
                self._polled.set()
            self._stop.wait(self.interval_s)

    def wait_first(self, timeout_s: float) -> bool:
        """Wait until the first poll is in; False when it is not after timeout_s."""
        return self._polled.wait(timeout_s)

    def close(self) -> None:
        self._stop.set()
