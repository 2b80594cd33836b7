"""Which devices to show: whole disks and dm/md devices that have done I/O, by default."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from gpudisk_top.collect.diskstats import DiskCounters
from gpudisk_top.collect.sample import DeviceInfo

DEFAULT_KINDS = frozenset(("disk", "dm", "md"))


@dataclass(frozen=True)
class DeviceFilter:
    """all_devices: every device, partitions and loops included.
    patterns: shell globs matched against the kernel name and the display name; when
    given, every kind of device may match (as `iostat -x sda1` shows a partition)."""

    all_devices: bool = False
    patterns: tuple[str, ...] = ()

    @classmethod
    def from_option(cls, all_devices: bool, devices: str | None) -> "DeviceFilter":
        pats = tuple(p.strip().removeprefix("/dev/") for p in (devices or "").split(",") if p.strip())
        return cls(all_devices=all_devices, patterns=pats)

    def matches_name(self, info: DeviceInfo) -> bool:
        return any(fnmatch.fnmatchcase(info.name, p) or fnmatch.fnmatchcase(info.display_name, p)
                   or fnmatch.fnmatchcase("mapper/" + info.display_name, p)
                   for p in self.patterns)

    def selected(self, info: DeviceInfo, counters: DiskCounters | None) -> bool:
        if self.patterns:
            return self.matches_name(info)
        if self.all_devices:
            return True
        # iostat's own rule for a device that "has done I/O" (iostat.c write_stats):
        # skip it when rd_ios, wr_ios, dc_ios and fl_ios are all zero
        did_io = counters is not None and counters.total_ios() > 0
        return info.kind in DEFAULT_KINDS and not info.hidden and did_io
