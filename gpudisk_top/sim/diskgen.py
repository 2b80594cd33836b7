"""Cumulative /proc/diskstats counters from per-interval disk rates, printed as kernel text.

The simulator says what each disk did over an interval (DiskRatesIn: r/s, kB/s, await,
aqu-sz, %util, ...); this module turns that into the counters the kernel would have
counted, so that iostat's formulas (gpudisk_top.model.disk) give those numbers back:
  rd_ios    += r/s * dt              rd_sectors += rd_ios * request_kb * 2
  rd_ticks  += rd_ios * r_await      (ms; r_await = rd_ticks delta / rd_ios delta)
  rq_ticks  += aqu_sz * dt_ms        (aqu_sz = rq_ticks delta / interval_ms)
  tot_ticks += util / 100 * dt_ms    (%util = tot_ticks delta / interval_ms * 100)
Counters are kept as exact floats and printed floored, so the rounding of one interval is
paid back in the next instead of drifting.  The tick fields are printed modulo 2**32, as
the kernel's `unsigned int` (Documentation/admin-guide/iostats.rst), so they wrap.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass

from gpudisk_top.collect.diskstats import COUNTER_FIELDS, MASK32, MASK64
from gpudisk_top.collect.sample import DeviceInfo
from gpudisk_top.sim.scenario import DiskSpec

_U32 = frozenset(i for i, f in enumerate(COUNTER_FIELDS)
                 if f in ("rd_ticks", "wr_ticks", "ios_pgr", "tot_ticks", "rq_ticks",
                          "dc_ticks", "fl_ticks"))
_IDX = {f: i for i, f in enumerate(COUNTER_FIELDS)}
_SCSI = re.compile(r"^(sd|hd)([a-z]+)$")
_VIRT = re.compile(r"^(vd|xvd)([a-z]+)$")


@dataclass(slots=True)
class DiskRatesIn:
    """What one disk does over one interval, in iostat -x units."""

    r_s: float = 0.0
    read_kb_s: float = 0.0
    read_await_ms: float = 0.0
    read_merge_pct: float = 0.0
    w_s: float = 0.0
    write_kb_s: float = 0.0
    write_await_ms: float = 0.0
    f_s: float = 0.0
    flush_await_ms: float = 0.0
    aqu_sz: float = 0.0
    util_pct: float = 0.0
    in_flight: int = 0


def _letters_index(letters: str) -> int:
    n = 0
    for ch in letters:
        n = n * 26 + (ord(ch) - ord("a") + 1)
    return n - 1


def device_numbers(disks: list[DiskSpec]) -> dict[str, tuple[int, int]]:
    """(major, minor) of every disk and partition, as Linux numbers them: sd* 8:16n,
    NVMe 259:n in probe order, virtio 252:16n; others a local major 240."""
    out: dict[str, tuple[int, int]] = {}
    nvme_minor = 0
    for i, d in enumerate(disks):
        if (m := _SCSI.match(d.name)):
            major, minor = 8, 16 * _letters_index(m.group(2))
        elif (m := _VIRT.match(d.name)):
            major, minor = 252, 16 * _letters_index(m.group(2))
        elif d.name.startswith("nvme"):
            major, minor = 259, nvme_minor
            nvme_minor += 2 if d.partition else 1
        else:
            major, minor = 240, 16 * i
        out[d.name] = (major, minor)
        if d.partition:
            out[d.partition] = (major, minor + 1)
    return out


def _whole(c: list[float], field: str, ios: float) -> int:
    """Add `ios` requests to counter `field`; return how many whole requests completed."""
    before = math.floor(c[_IDX[field]])
    c[_IDX[field]] += ios
    return math.floor(c[_IDX[field]]) - before


class DiskCounterGen:
    """Counters of every disk of a scenario (and of its partitions, which carry all of their
    disk's I/O, the filesystem being on them)."""

    def __init__(self, disks: list[DiskSpec], rng: random.Random,
                 ticks_start: int | None = None) -> None:
        self._disks = list(disks)
        self._numbers = device_numbers(self._disks)
        # A node that has been up a while: large ios and sectors, ticks anywhere in their
        # 32-bit range (so long runs meet a wrap), unless a test asks for a fixed start.
        self._counters: dict[str, list[float]] = {}
        for d in self._disks:
            c = [0.0] * len(COUNTER_FIELDS)
            for i, f in enumerate(COUNTER_FIELDS):
                if f == "ios_pgr":
                    continue
                if i in _U32:
                    c[i] = float(ticks_start if ticks_start is not None else rng.randrange(0, 2**32))
                elif f.endswith("_ios"):
                    c[i] = float(rng.randrange(10**5, 10**8))
                elif f.endswith("_merges"):
                    c[i] = float(rng.randrange(0, 10**6))
                else:  # sectors
                    c[i] = float(rng.randrange(10**8, 10**11))
            self._counters[d.name] = c
        self._lines: list[tuple[str, str]] = []  # (device name, the name whose counters it prints)
        for d in self._disks:
            self._lines.append((d.name, d.name))
            if d.partition:
                self._lines.append((d.partition, d.name))

    def advance(self, rates: dict[str, DiskRatesIn], interval_s: float) -> None:
        """Add one interval of `rates` (disk name -> rates; a disk missing is idle)."""
        dt_ms = interval_s * 1000.0
        for d in self._disks:
            r = rates.get(d.name)
            c = self._counters[d.name]
            if r is None:
                c[_IDX["ios_pgr"]] = 0.0
                continue
            # Whole requests only: sectors and ticks move with the requests that complete,
            # so a trickle never shows kB/s without r/s (the fraction carries over).
            rd_ios = _whole(c, "rd_ios", r.r_s * interval_s)
            wr_ios = _whole(c, "wr_ios", r.w_s * interval_s)
            fl_ios = _whole(c, "fl_ios", r.f_s * interval_s)
            # %rrqm = merges / (merges + ios): merges = ios * p / (1 - p)
            p = min(r.read_merge_pct, 95.0) / 100.0
            c[_IDX["rd_merges"]] += rd_ios * p / (1.0 - p)
            c[_IDX["rd_sectors"]] += rd_ios * (r.read_kb_s / r.r_s * 2.0 if r.r_s > 0 else 0.0)
            c[_IDX["rd_ticks"]] += rd_ios * r.read_await_ms
            c[_IDX["wr_merges"]] += wr_ios * 0.05
            c[_IDX["wr_sectors"]] += wr_ios * (r.write_kb_s / r.w_s * 2.0 if r.w_s > 0 else 0.0)
            c[_IDX["wr_ticks"]] += wr_ios * r.write_await_ms
            c[_IDX["fl_ticks"]] += fl_ios * r.flush_await_ms
            c[_IDX["ios_pgr"]] = float(r.in_flight)
            c[_IDX["tot_ticks"]] += min(max(r.util_pct, 0.0), 100.0) / 100.0 * dt_ms
            c[_IDX["rq_ticks"]] += max(r.aqu_sz, 0.0) * dt_ms

    def busy_ms(self, name: str) -> float:
        """Disk `name`'s busy time (io_ticks, ms) as counted, not wrapped at 2**32."""
        return self._counters[name][_IDX["tot_ticks"]]

    def text(self) -> str:
        """/proc/diskstats as a 5.5+ kernel prints it: 20 fields a line."""
        lines = []
        for name, source in self._lines:
            major, minor = self._numbers[name]
            values = " ".join(str(math.floor(v) & (MASK32 if i in _U32 else MASK64))
                              for i, v in enumerate(self._counters[source]))
            lines.append(f"{major:4d} {minor:7d} {name} {values}")
        return "\n".join(lines) + "\n"

    def devices(self) -> dict[str, DeviceInfo]:
        """DeviceInfo of every line, as BlockDevices would describe the simulated node."""
        out: dict[str, DeviceInfo] = {}
        for d in self._disks:
            major, minor = self._numbers[d.name]
            mounts = (d.mountpoint,) if d.mountpoint else ()
            out[d.name] = DeviceInfo(name=d.name, display_name=d.name, major=major, minor=minor,
                                     kind="disk", rotational=d.rotational, dev_class=d.dev_class,
                                     model=d.model, mountpoints=mounts)
            if d.partition:
                pmajor, pminor = self._numbers[d.partition]
                out[d.partition] = DeviceInfo(
                    name=d.partition, display_name=d.partition, major=pmajor, minor=pminor,
                    kind="partition", parent=d.name, rotational=d.rotational,
                    dev_class=d.dev_class, model=d.model, mountpoints=mounts)
        return out
