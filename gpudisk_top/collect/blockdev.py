"""What each block device is: whole disk or partition, dm/md stack, NVMe path, class, and
the mountpoints whose data lives on it.

Read from sysfs (/sys/class/block/NAME) and mountinfo.  Without /sys (some containers)
the kind is guessed from the kernel name and the class is "unknown"; nothing here raises.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections.abc import Mapping

from gpudisk_top.collect.diskstats import DiskCounters
from gpudisk_top.collect.mounts import REMOTE_KINDS, mount_kind, unescape_mountinfo
from gpudisk_top.collect.roots import Roots, read_bytes, read_first_line
from gpudisk_top.collect.sample import DeviceInfo

# Kernel names that are never real storage a job reads from.
_NAME_KINDS = (
    (re.compile(r"^loop\d+$"), "loop"),
    (re.compile(r"^(ram|brd)\d+$"), "ram"),
    (re.compile(r"^zram\d+$"), "zram"),
    (re.compile(r"^(sr|scd)\d+$"), "sr"),
    (re.compile(r"^fd\d+$"), "other"),
    (re.compile(r"^dm-\d+$"), "dm"),
    (re.compile(r"^md\d+$|^md_"), "md"),
    (re.compile(r"^nvme\d+c\d+n\d+$"), "nvme-path"),
    (re.compile(r"^nvme\d+n\d+p\d+$"), "partition"),
    (re.compile(r"^(mmcblk|nbd|rbd|loop)\d+p\d+$"), "partition"),
    (re.compile(r"^(sd|vd|xvd|hd)[a-z]+\d+$"), "partition"),
)
_NVME_PATH = re.compile(r"^nvme(\d+)c\d+n(\d+)$")
_VIRTUAL_NAME = re.compile(r"^(vd|xvd)[a-z]+$|^(loop|ram|zram|nbd|rbd)\d+$")
# vendor/model strings of disks that are really a hypervisor's or a cloud's volume
_VIRTUAL_MODEL = re.compile(
    r"QEMU|VMware|Virtual|VBOX|Elastic Block Store|PersistentDisk|Google|Xen", re.I)
# Slowest first: a dm/md device is as slow as its slowest member.
_CLASS_ORDER = ("HDD", "virtual", "SSD", "NVMe", "unknown")


def _kind_from_name(name: str) -> str:
    for pattern, kind in _NAME_KINDS:
        if pattern.search(name):
            return kind
    return "disk"


# How long a device's own sysfs attributes (kind, parent, disk model, rotational flag,
# class) are trusted between two describe() calls.  In between, a device is read again
# at once when its sysfs directory is another one (a device removed and made again under
# the same name gets a new sysfs node, so a new inode), its numbers changed, or its disk's
# diskseq moved (Linux 5.15+: a new number at every add, loop attach and media change,
# where the sysfs node stays); a device read before its queue was registered (a disk
# still being added) is not kept; what can change in place is read every time: a dm
# device's name (dmsetup rename) and the members of a dm or md device (a table reload, a
# disk added to an array).  What is left to this bound: an administrator writing
# queue/rotational, and, on kernels without diskseq that hand a freed sysfs inode number
# to the next node (before 4.14), a disk swapped for another under the same name and
# numbers; a describe() within the next minute shows either.
ATTRIBUTES_RECHECK_S = 60.0


class BlockDevices:
    """Describes block devices.  Cheap enough to call every few seconds, not every sample:
    a device's sysfs attributes are read again only when it may have changed (see
    ATTRIBUTES_RECHECK_S), its mountpoints at every call."""

    def __init__(self, roots: Roots, clock=time.monotonic) -> None:
        self.roots = roots
        self.clock = clock
        # why the last describe() could not read a mountinfo that is there (one line each)
        self.warnings: list[str] = []
        # name -> (what the device was read as, its sysfs key, when it was read)
        self._read: dict[str, tuple[DeviceInfo, tuple | None, float]] = {}

    # ------------------------------------------------------------------ sysfs reads
    def _sys_dir(self, name: str) -> str | None:
        for path in (self.roots.sys("class", "block", name), self.roots.sys("block", name)):
            if os.path.isdir(path):
                return path
        return None

    def _describe_one(self, name: str, counters: DiskCounters | None) -> DeviceInfo:
        info = DeviceInfo(name=name, display_name=name, kind=_kind_from_name(name))
        if counters is not None:
            info.major, info.minor = counters.major, counters.minor
        sysdir = self._sys_dir(name)
        if sysdir is None:
            if info.kind == "partition":
                info.parent = _parent_from_name(name)
            return info
        if os.path.exists(os.path.join(sysdir, "partition")):
            info.kind = "partition"
            info.parent = os.path.basename(os.path.dirname(os.path.realpath(sysdir)))
        elif os.path.isdir(os.path.join(sysdir, "dm")):
            info.kind = "dm"
            mapper = read_first_line(os.path.join(sysdir, "dm", "name"))
            if mapper:
                info.display_name = mapper
        elif os.path.isdir(os.path.join(sysdir, "md")):
            info.kind = "md"
        elif read_first_line(os.path.join(sysdir, "hidden")) == "1" or _NVME_PATH.match(name):
            info.kind = "nvme-path"
        if info.kind == "nvme-path":
            info.hidden = True
            m = _NVME_PATH.match(name)
            if m:  # nvme0c1n1 is one path to the multipath head nvme0n1
                info.parent = f"nvme{m.group(1)}n{m.group(2)}"
        info.slaves = _slaves(sysdir)
        disk_dir = sysdir
        if info.kind == "partition" and info.parent:
            disk_dir = self._sys_dir(info.parent) or sysdir
        rot = read_first_line(os.path.join(disk_dir, "queue", "rotational"))
        info.rotational = None if rot not in ("0", "1") else rot == "1"
        model = read_first_line(os.path.join(disk_dir, "device", "model"))
        vendor = read_first_line(os.path.join(disk_dir, "device", "vendor"))
        info.model = " ".join(x for x in (vendor, model) if x) if model else None
        info.dev_class = self._leaf_class(name, info, disk_dir)
        return info

    def _leaf_class(self, name: str, info: DeviceInfo, disk_dir: str) -> str:
        if info.kind in ("loop", "ram", "zram"):
            return "virtual"
        base = info.parent if info.kind == "partition" and info.parent else name
        if info.model and _VIRTUAL_MODEL.search(info.model):
            return "virtual"
        if base.startswith("nvme"):
            return "NVMe"
        if _VIRTUAL_NAME.match(base) or "/virtio" in os.path.realpath(disk_dir):
            return "virtual"
        if info.rotational is None:
            return "unknown"
        return "HDD" if info.rotational else "SSD"

    # ------------------------------------------------------------------ mountinfo
    def _read_mountinfo(self, path: str, instead: str = "") -> str | None:
        """The text, or None; a file that is there but cannot be read is a warning
        (`instead`: what is used in its place)."""
        try:
            return read_bytes(path).decode("utf-8", errors="replace")
        except FileNotFoundError:
            return None
        except OSError as err:
            self.warnings.append(f"cannot read {path}: {err.strerror or err}{instead}")
            return None

    def _mountinfo(self) -> tuple[str | None, bool]:
        """(mountinfo text, whether it is our own mount namespace's)."""
        # With --procfs pointing at the host's /proc, "self" would be our own mount
        # namespace; the host's init process sees the host's mounts.
        if os.path.realpath(self.roots.procfs) != "/proc":
            text = self._read_mountinfo(self.roots.proc("1", "mountinfo"),
                                        "; mount points are those of our own namespace")
            if text is not None:
                return text, False
        return self._read_mountinfo(self.roots.proc("self", "mountinfo")), True

    def _mounts(self) -> list[tuple[int, int, str, str]]:
        """(major, minor, mountpoint, source) of every mount."""
        out = []
        text, own_namespace = self._mountinfo()
        if text is None:
            return out
        lines = text.splitlines()
        for line in lines:
            left, sep, right = line.partition(" - ")
            fields = left.split()
            if not sep or len(fields) < 5 or ":" not in fields[2]:
                continue
            try:
                major, minor = (int(x) for x in fields[2].split(":", 1))
            except ValueError:
                continue
            mountpoint = unescape_mountinfo(fields[4])
            rfields = right.split()
            # Containers bind-mount single files (/etc/hosts): not places data lives.  A
            # network or FUSE mount is never one, and never stat()ed here: a hung server
            # (or a stopped FUSE daemon) would hold the sampling loop in that stat
            remote = mount_kind(rfields[0] if rfields else "", major) in REMOTE_KINDS
            if own_namespace and not remote and os.path.isfile(mountpoint):
                continue
            source = unescape_mountinfo(rfields[1]) if len(rfields) > 1 else ""
            out.append((major, minor, mountpoint, source))
        return out

    # ------------------------------------------------------------------ public
    def describe(self, counters: dict[str, DiskCounters]) -> dict[str, DeviceInfo]:
        """DeviceInfo for every device in `counters` (a parsed /proc/diskstats): new
        objects at every call, each what a fresh read of sysfs gives (but for the bound
        ATTRIBUTES_RECHECK_S states)."""
        self.warnings = []
        now = self.clock()
        diskseq: dict[str, str | None] = {}
        infos = {name: self._current(name, c, now, diskseq) for name, c in counters.items()}
        for gone in self._read.keys() - infos.keys():
            del self._read[gone]
        self._resolve_stack_classes(infos)
        mounted = self._mounted(infos)
        self._assign_mountpoints(infos, mounted)
        self._assign_backing(infos, mounted)
        return infos

    def _current(self, name: str, counters: DiskCounters | None, now: float,
                 diskseq: dict[str, str | None]) -> DeviceInfo:
        """_describe_one(), or a copy of what it gave while the device cannot have
        changed (ATTRIBUTES_RECHECK_S), with what can change in place read again."""
        known = self._read.get(name)
        key = self._sys_key(name, counters, known[0] if known is not None else None, diskseq)
        if known is not None and key is not None and known[1] == key \
                and now - known[2] < ATTRIBUTES_RECHECK_S:
            info = dataclasses.replace(known[0])
            if info.kind in ("dm", "md"):
                sysdir = self.roots.sys("class", "block", name)
                if info.kind == "dm":
                    info.display_name = read_first_line(os.path.join(sysdir, "dm", "name")) or name
                info.slaves = _slaves(sysdir)
            return info
        info = self._describe_one(name, counters)
        if key is not None and info.kind == "partition" \
                and (known is None or known[0].parent != info.parent):
            key = self._sys_key(name, counters, info, diskseq)   # its disk's diskseq
        if key is not None and info.rotational is not None:
            self._read[name] = (info, key, now)
        else:                 # no sysfs node, or its queue not there yet: read it again
            self._read.pop(name, None)
        return dataclasses.replace(info)

    def _sys_key(self, name: str, counters: DiskCounters | None, info: DeviceInfo | None,
                 diskseq: dict[str, str | None]) -> tuple | None:
        """What says the device is the one read before: its numbers, its sysfs node (the
        inode of the directory /sys/class/block/NAME leads to) and its disk's diskseq
        (a partition's: its disk's, `info` the device as read before); None without a
        sysfs node.  diskseq: this describe()'s reads of it, by disk."""
        try:
            st = os.stat(self.roots.sys("class", "block", name))
        except OSError:
            return None
        numbers = (counters.major, counters.minor) if counters is not None else None
        partition = info is not None and info.kind == "partition" and info.parent
        disk = info.parent if partition else name
        if disk not in diskseq:
            diskseq[disk] = read_first_line(self.roots.sys("class", "block", disk, "diskseq"))
        return numbers, st.st_dev, st.st_ino, diskseq[disk]

    def _resolve_stack_classes(self, infos: dict[str, DeviceInfo]) -> None:
        def leaf_classes(name: str, seen: set[str]) -> set[str]:
            info = infos.get(name)
            if info is None or name in seen:
                return set()
            seen.add(name)
            if info.kind in ("dm", "md") and info.slaves:
                out: set[str] = set()
                for s in info.slaves:
                    out |= leaf_classes(s, seen)
                return out
            return {info.dev_class}

        for info in infos.values():
            if info.kind in ("dm", "md"):
                classes = leaf_classes(info.name, set()) or {"unknown"}
                info.dev_class = min(classes, key=_CLASS_ORDER.index)

    def _mounted(self, infos: dict[str, DeviceInfo]) -> list[tuple[str, str | None]]:
        """(mountpoint, the device in `infos` its data lives on, or None) of every mount,
        in mountinfo's order (of two mounts on one mountpoint, the later hides the other)."""
        by_devno = {(i.major, i.minor): i.name for i in infos.values() if i.major or i.minor}
        by_display = {i.display_name: i.name for i in infos.values()}
        out: list[tuple[str, str | None]] = []
        for major, minor, mountpoint, source in self._mounts():
            name = by_devno.get((major, minor))
            if name is None and major == 0 and source.startswith("/dev/"):
                # btrfs and others report an anonymous device number; the source names
                # the block device instead (/dev/sda2, /dev/mapper/vg-root)
                base = os.path.basename(source)
                name = base if base in infos else by_display.get(base)
            out.append((mountpoint, name))
        return out

    def _assign_mountpoints(self, infos: dict[str, DeviceInfo],
                            mounted: list[tuple[str, str | None]]) -> None:
        found: dict[str, list[str]] = {name: [] for name in infos}
        for mountpoint, name in mounted:
            if name is None:
                continue
            for dev in device_stack(infos, name):
                if dev in found and mountpoint not in found[dev]:
                    found[dev].append(mountpoint)
        for name, mps in found.items():
            infos[name].mountpoints = tuple(sorted(mps, key=lambda p: (p != "/", len(p), p)))

    def _assign_backing(self, infos: dict[str, DeviceInfo],
                        mounted: list[tuple[str, str | None]]) -> None:
        """Each attached loop device's backing: the device under the mount that holds its
        backing file (/sys/class/block/loopN/loop/backing_file), the deepest mountpoint
        the file's path lies under.  The path is sysfs's text as our root sees it, only
        compared with mountpoints, never opened or stat()ed; read at every describe, as a
        loop device can be detached and attached to another file under the same name.
        A file on tmpfs, overlayfs or a mount this namespace does not see: None."""
        for info in infos.values():
            if info.kind == "loop":
                path = read_first_line(self.roots.sys("class", "block", info.name, "loop",
                                                      "backing_file"))
                backing = _device_holding(path.removesuffix(" (deleted)"), mounted) \
                    if path else None
                info.backing = backing if backing != info.name else None


def _device_holding(path: str, mounted: list[tuple[str, str | None]]) -> str | None:
    """The device of the deepest mount (the later of two on one mountpoint) that the
    absolute `path` lies under; None for a relative path or one no mount holds."""
    best: tuple[int, str | None] = (-1, None)
    if path.startswith("/"):
        for mountpoint, name in mounted:
            top = mountpoint.rstrip("/")
            if (path == mountpoint or path.startswith(top + "/")) and len(top) >= best[0]:
                best = (len(top), name)
    return best[1]


def _slaves(sysdir: str) -> tuple[str, ...]:
    """The devices under a dm or md device (/sys/block/X/slaves), sorted; () for others."""
    try:
        return tuple(sorted(os.listdir(os.path.join(sysdir, "slaves"))))
    except OSError:
        return ()


def _parent_from_name(name: str) -> str | None:
    m = re.match(r"^(nvme\d+n\d+|mmcblk\d+|nbd\d+|rbd\d+|loop\d+)p\d+$", name)
    if m:
        return m.group(1)
    m = re.match(r"^((?:sd|vd|xvd|hd)[a-z]+)\d+$", name)
    return m.group(1) if m else None


# A value made only of zeros (and separators) is no identity: cheap NVMe namespaces report
# an all-zero EUI-64 or NGUID, and some hypervisors an all-zero WWN.
_BLANK_ID = re.compile(r"^(?:[a-z0-9]+\.)?[0\s._-]*$", re.I)


def read_identity(roots: Roots, name: str) -> tuple[str, str] | None:
    """(kind, value) naming the hardware or volume behind the block device `name`, as
    sysfs gives it, or None when it gives none:

    - "wwid": a world-wide name (NVMe namespaces: /sys/block/X/wwid; SCSI and ATA disks
      with VPD page 0x83: /sys/block/X/device/wwid);
    - "serial": the drive's serial (virtio: /sys/block/X/serial; SCSI, ATA and NVMe
      controllers: /sys/block/X/device/serial);
    - "dm-uuid", "md-uuid": a device-mapper or md array's own UUID.

    Never raises: a file that cannot be read is a missing value."""
    base = roots.sys("class", "block", name)
    for kind, rel in (("wwid", "wwid"), ("wwid", "device/wwid"), ("serial", "serial"),
                      ("serial", "device/serial"), ("dm-uuid", "dm/uuid"),
                      ("md-uuid", "md/uuid")):
        value = read_first_line(os.path.join(base, rel))
        if value and not _BLANK_ID.match(value):
            return kind, value
    return None


def device_stack(infos: Mapping[str, DeviceInfo], name: str) -> list[str]:
    """name, then every device below it: a partition's disk, a dm/md device's members,
    recursively (the one walker of device stacks: mountpoints, the detector, probe)."""
    out: list[str] = []
    todo = [name]
    while todo:
        cur = todo.pop(0)
        if cur in out:
            continue
        out.append(cur)
        info = infos.get(cur)
        if info is not None:
            todo.extend(info.slaves)
            if info.parent:
                todo.append(info.parent)
    return out
