"""The kernel's view of a disk's health, from sysfs: which disks under /sys/block are
physical ones with health of their own (physical_disks: loop, zram, dm, md are not disks; a
partition's or a dm device's health is its disks', model/health.py health_of; a virtio or
Xen disk has no SMART, said so without running anything), and a drive's temperature from
hwmon (read_sysfs) with what it fills into smartctl's reading (merge_sysfs).

hwmon (/sys/block/X/device/hwmon*, the NVMe controller's and the SATA drivetemp driver's):
temp1_input, temp1_max (NVMe: the over-temperature threshold, WCTEMP by default),
temp1_crit (CCTEMP).  No tools, no privileges.  It fills the thresholds smartctl did not
give, and is the whole reading (source "sysfs") where smartctl is not installed or cannot
open the disk.  The kernel keeps no error counters for a disk: media errors, spare and
wear come only from smartctl (collect/health_smartctl.py, which says why hwmon's
thresholds come last).
"""

from __future__ import annotations

import glob
import os
import re

from gpudisk_top.collect.health_smartctl import first_known, sane_temp_c
from gpudisk_top.collect.roots import Roots, read_first_line
from gpudisk_top.collect.sample import HEALTH_SYSFS, DiskHealth

# kernel names that are never a physical disk with health of its own
_NOT_DISKS = re.compile(r"^(loop|ram|zram|dm-|md|sr|fd|nbd|rbd|drbd|zd)\d|^nvme\d+c\d+n\d+$"
                        r"|^mmcblk\d+(boot\d+|rpmb)$")
# why a virtual disk has no health to read (the simulator's virtual disks say the same)
VIRTIO_NO_SMART = "virtio disk: no SMART (the hypervisor does not pass it through)"
XEN_NO_SMART = "Xen virtual disk: no SMART"


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


# ---------------------------------------------------------------------------- hwmon
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
    h.firmware = first_known(read_first_line(os.path.join(dev, "firmware_rev")),
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
