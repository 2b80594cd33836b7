"""Read Lustre client `stats` files (llite: one per mounted filesystem; osc: one per OST
the client talks to) into raw cumulative counters.

Format (lustre/obdclass/lprocfs_status.c lprocfs_stats_seq_show; the names come from
lustre/llite/lproc_llite.c llite_opcode_table and lustre/osc's RPC opcodes):

    snapshot_time             1510950459.772792457 secs.nsecs     (secs.usecs before 2.10)
    start_time                1710759783.001 secs.nsecs           (2.14+, ignored)
    elapsed_time              0.27 secs.nsecs                     (2.14+, ignored)
    read_bytes                25673 samples [bytes] 1 3366225 145121869 [sumsq]
    open                      136 samples [regs]                  (count only)
    read                      88 samples [usecs] 3 912 20114 9841102   (2.15+ llite)
    ost_read                  1029 samples [usec] 1391 595570 347839127 120942246579015

A counter with no samples is not printed at all, so an absent name means zero.  The
unit is printed as the kernel spells it (usec before 2.14, usecs after; reqs, regs,
bytes, pages).  min, max and sum come together or not at all, sumsq is optional, and
some versions print a sum of squares that overflowed as a negative number: every value
is kept as printed, signs included.  The llite files moved from /proc/fs/lustre to
/sys/kernel/debug/lustre in Lustre 2.12 (debugfs must be mounted and readable, which
usually means root).  osc `rpc_stats` (histograms) is not read.

Nothing here raises on garbled text: a line that cannot be parsed is left out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import NamedTuple

from gpudisk_top.collect.roots import FileCache, Roots, read_text

# the directories under <procfs>/fs/lustre and <sysfs>/kernel/debug/lustre we read
KINDS = ("llite", "osc")


class LustreCounter(NamedTuple):
    """One counter line.  min, max and sum are None on a count-only line; sumsq is None
    where it is not printed."""

    samples: int
    unit: str
    min: int | None = None
    max: int | None = None
    sum: int | None = None
    sumsq: int | None = None


@dataclass(slots=True)
class LustreStatsRaw:
    """One stats file.  name: the directory the file is in ("lustrefs-ffff88105db50000",
    "lustrefs-OST0000-osc-ffff88105db50000"); kind: llite or osc; snapshot_s: the
    kernel's own time of the read (snapshot_time), None when the file has none."""

    name: str
    snapshot_s: float | None
    counters: dict[str, LustreCounter] = field(default_factory=dict)
    kind: str = ""


def _int(token: str) -> int | None:
    """A counter (samples, min, max: s64 or u64; sum of squares: u64), or None: not
    digits, or outside 64 bits (no kernel printed it; int() of 5,000 digits raises)."""
    digits = token[1:] if token[:1] == "-" else token
    if not (digits.isascii() and digits.isdigit() and len(digits) <= 20):
        return None
    value = int(token)
    return value if -(1 << 63) <= value < (1 << 64) else None


def _seconds(token: str) -> float | None:
    whole, _, frac = token.partition(".")
    if not (whole.isascii() and whole.isdigit()) or (frac and not (frac.isascii() and frac.isdigit())):
        return None
    return float(token)


def parse_counter(parts: list[str]) -> tuple[str, LustreCounter] | None:
    """One counter line split in words, or None when it is not one."""
    if len(parts) < 4 or parts[2] != "samples":
        return None
    unit = parts[3]
    if len(unit) < 3 or unit[0] != "[" or unit[-1] != "]":
        return None
    samples = _int(parts[1])
    if samples is None or samples < 0:
        return None
    numbers: list[int] = []
    for token in parts[4:8]:   # as sscanf would: numbers up to the first that is not one
        value = _int(token)
        if value is None:
            break
        numbers.append(value)
    if len(numbers) < 3:
        return parts[0], LustreCounter(samples, unit[1:-1])
    return parts[0], LustreCounter(samples, unit[1:-1], *numbers[:4])


def parse(text: str, name: str = "", kind: str = "") -> LustreStatsRaw:
    """Parse one stats file's text.  A name printed twice keeps the first line.  Never
    raises; a text with nothing usable gives no counters and snapshot_s None."""
    out = LustreStatsRaw(name=name, snapshot_s=None, kind=kind)
    counters = out.counters
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "snapshot_time":
            if len(parts) > 1 and out.snapshot_s is None:
                out.snapshot_s = _seconds(parts[1])
            continue
        parsed = parse_counter(parts)
        if parsed is not None and parsed[0] not in counters:
            counters[parsed[0]] = parsed[1]
    return out


def stats_paths(roots: Roots) -> list[tuple[str, str, str]]:
    """(kind, name, path) of every llite and osc stats file under the roots: first
    <procfs>/fs/lustre, then <sysfs>/kernel/debug/lustre; a name found in both is taken
    from procfs.  Sorted by kind and name.  Never raises."""
    found: dict[tuple[str, str], str] = {}
    for base in (roots.proc("fs", "lustre"), roots.sys("kernel", "debug", "lustre")):
        for kind in KINDS:
            directory = os.path.join(base, kind)
            try:
                names = sorted(entry.name for entry in os.scandir(directory))
            except OSError:
                continue
            for entry_name in names:
                path = os.path.join(directory, entry_name, "stats")
                if (kind, entry_name) not in found and os.path.isfile(path):
                    found[(kind, entry_name)] = path
    return [(kind, name, found[(kind, name)]) for kind, name in sorted(found)]


def read(roots: Roots, files: FileCache | None = None) -> dict[str, LustreStatsRaw]:
    """Every llite and osc stats file under the roots, keyed "llite/NAME" or "osc/NAME".
    files: a roots.FileCache that keeps the files open between samples.  Never raises:
    no Lustre, or files we may not read (debugfs as a user), give {} or fewer keys."""
    read_file = files.read if files is not None else read_text
    out: dict[str, LustreStatsRaw] = {}
    for kind, name, path in stats_paths(roots):
        text = read_file(path)
        if text is not None:
            out[f"{kind}/{name}"] = parse(text, name=name, kind=kind)
    return out


# ---------------------------------------------------------------------------- recorded
# What a recording keeps of a Lustre client (MountRaw.counters): the read counters' number
# of samples and sum, flat ("read_bytes/samples", "read/sum", ...); from_counters() gives
# the LustreStatsRaw back (the unit of a latency counter is usec).
RECORDED = ("read_bytes", "read", "ost_read")


def mount_counters(raw: LustreStatsRaw) -> dict[str, int]:
    out: dict[str, int] = {}
    for name in RECORDED:
        c = raw.counters.get(name)
        if c is not None and c.sum is not None:
            out[f"{name}/samples"], out[f"{name}/sum"] = c.samples, c.sum
    return out


def from_counters(name: str, counters: dict) -> LustreStatsRaw:
    """The LustreStatsRaw mount_counters() kept; a value no kernel could have printed
    (not a whole number in [0, 2^64)) is left out."""
    counters = {k: v for k, v in counters.items()
                if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 64}
    raw = LustreStatsRaw(name=name, snapshot_s=None, kind="llite")
    for key in RECORDED:
        if f"{key}/samples" in counters and f"{key}/sum" in counters:
            unit = "bytes" if key == "read_bytes" else "usec"
            raw.counters[key] = LustreCounter(counters[f"{key}/samples"], unit,
                                              sum=counters[f"{key}/sum"])
    return raw


def read_counters(roots: Roots, mounts, files: FileCache | None = None,
                  pid: int | None = None) -> dict[str, dict]:
    """{mountpoint: mount_counters} of the job's Lustre mounts: an llite instance is
    "FSNAME-<superblock>", and a mount's source "MGS@tcp:/FSNAME" (one instance per
    mounted filesystem; a filesystem mounted twice is taken as the first).  pid: unused
    (Lustre's statistics are the node's, in /sys or /proc/fs, not a namespace's)."""
    llite = [(name, path) for kind, name, path in stats_paths(roots) if kind == "llite"]
    read_file = files.read if files is not None else read_text
    out = {}
    for m in mounts:
        fsname = m.source.rsplit(":/", 1)[-1]
        for name, path in llite:
            if name.rsplit("-", 1)[0] == fsname:
                # only this mount's llite file, every sample: not the osc files (one per OST)
                text = read_file(path)
                if text is not None:
                    out[m.mountpoint] = mount_counters(parse(text, name=name, kind="llite"))
                break
    return out
