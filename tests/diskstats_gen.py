"""Seeded sequences of /proc/diskstats snapshots, with the edge cases iostat must survive.

Each sequence is a list of (uptime_cs, text).  Devices advance by random increments that
a real device could make (never more busy time than the interval); the generator injects
32-bit tick wraps, 64-bit counter wraps, a device removed and created again (counters
reset), a device that appears (new, or with counters it gathered since boot), one that
vanishes, a line from the sample before (a torn rewrite: its counters go down), zero
intervals, 14/18/20-field lines, and lines that are garbled or truncated.

generate() also returns what each interval should give, from what the generator did (not
from the checks under test): for interval i (snapshot i to i+1), {device: "keep"} for an
interval a device could have produced, "drop" for one it could not (a 64-bit counter
passed 2**64, a stale line whose counters went down, a device appearing with since-boot
counters), "either" where no answer is right (the interval after a stale line spans two
steps; a line of 255 characters or more, which iostat 12.6.1 reads in cut pieces).
"""

from __future__ import annotations

import random

FIELDS = 17  # counters after major, minor, name (20-field line)
U32 = (3, 7, 8, 9, 10, 14, 16)  # indexes of the unsigned int counters (ticks, in-flight)


def _line(major: int, minor: int, name: str, c: list[int], nfields: int) -> str:
    values = [v & (0xFFFFFFFF if i in U32 else 0xFFFFFFFFFFFFFFFF) for i, v in enumerate(c)]
    return f"{major:4d} {minor:7d} {name} " + " ".join(str(v) for v in values[: nfields - 3])


class _Dev:
    def __init__(self, rng: random.Random, major: int, minor: int, name: str, nfields: int,
                 near_wrap: bool) -> None:
        self.rng, self.major, self.minor, self.name, self.nfields = rng, major, minor, name, nfields
        self.c = [0] * FIELDS
        if near_wrap:
            # ticks a little below 2**32, sectors and ios a little below 2**64
            # (on about half the fields, so most lines stay under iostat's 255 characters)
            for i in range(FIELDS):
                top = 1 << 32 if i in U32 else 1 << 64
                self.c[i] = top - rng.randrange(1, 3000) if rng.random() < 0.5 else rng.randrange(0, 10**6)
        else:
            self.c = [rng.randrange(0, 10**7) for _ in range(FIELDS)]

    def step(self, busy: float, interval_ms: int) -> None:
        r = self.rng
        reads, writes = int(r.randrange(0, 5000) * busy), int(r.randrange(0, 2000) * busy)
        discards, flushes = r.choice((0, 0, r.randrange(0, 50))), r.randrange(0, 40)
        self.c[0] += reads
        self.c[1] += r.randrange(0, reads + 1)
        self.c[2] += reads * r.choice((1, 8, 16, 256))
        self.c[3] += int(reads * r.uniform(0.05, 20))
        self.c[4] += writes
        self.c[5] += r.randrange(0, writes + 1)
        self.c[6] += writes * r.choice((8, 16, 2048))
        self.c[7] += int(writes * r.uniform(0.05, 40))
        self.c[8] = r.randrange(0, 64)
        self.c[9] += r.randrange(0, interval_ms + 1)  # busy time: at most the interval
        self.c[10] += r.randrange(0, 40000)
        self.c[11] += discards
        self.c[12] += r.randrange(0, discards + 1)
        self.c[13] += discards * 2048
        self.c[14] += discards * r.randrange(0, 5)
        self.c[15] += flushes
        self.c[16] += flushes * r.randrange(0, 30)

    def reset(self) -> None:
        self.c = [0] * FIELDS

    def line(self) -> str:
        return _line(self.major, self.minor, self.name, self.c, self.nfields)


def sequence(seed: int, steps: int = 6) -> list[tuple[int, str]]:
    return generate(seed, steps)[0]


def _crossed_u64(before: list[int], after: list[int], nfields: int) -> bool:
    """A printed 64-bit counter passed a multiple of 2**64 (its printed value went down)."""
    return any(b >> 64 != a >> 64 for i, (b, a) in enumerate(zip(before, after))
               if i not in U32 and i < nfields - 3)


def _recreated(before: list[int], after: list[int]) -> bool:
    """Whether sysstat sees a device created again (the rule of iostat.c write_stats(), as
    its source states it): fewer I/Os in all, and every sector counter that was not zero
    went down.  Printed values, so modulo 2**64."""
    m = 0xFFFFFFFFFFFFFFFF
    ios = (0, 4, 11, 15)
    return (sum(after[i] & m for i in ios) & m < sum(before[i] & m for i in ios) & m
            and all(not before[i] & m or after[i] & m < before[i] & m for i in (2, 6, 13)))


def generate(seed: int, steps: int = 6) -> tuple[list[tuple[int, str]], list[dict[str, str]]]:
    """(snapshots, truth): see the module docstring."""
    rng = random.Random(seed)
    devs = [
        _Dev(rng, 8, 0, "sda", 20, near_wrap=False),
        _Dev(rng, 8, 1, "sda1", 20, near_wrap=False),
        _Dev(rng, 8, 16, "sdb", 18, near_wrap=rng.random() < 0.5),
        _Dev(rng, 259, 0, "nvme0n1", 20, near_wrap=True),
        _Dev(rng, 253, 0, "dm-0", 14, near_wrap=rng.random() < 0.5),
        _Dev(rng, 7, 0, "loop0", 20, near_wrap=False),
    ]
    devs[-1].reset()  # an idle loop device: all zero
    late = _Dev(rng, 8, 32, "sdc", 20, near_wrap=False)
    late_fresh = rng.random() < 0.5
    if not late_fresh:
        late.c[9] = rng.randrange(10**6, 10**7)  # since boot: far more busy time than any interval
    late_at = rng.randrange(1, steps)
    gone_at = rng.randrange(1, steps)
    reset_dev, reset_at = rng.choice(devs[:5]), rng.randrange(1, steps)
    # a torn rewrite: one device's line is the one of the sample before
    stale_dev, stale_at = rng.choice(devs[:2]), rng.randrange(2, steps)
    uptime_cs = rng.randrange(10_000, 10**9)
    out, truth = [], []
    printed: dict[str, list[int]] = {}
    history: dict[str, list[list[int]]] = {d.name: [] for d in devs}
    for step in range(steps):
        want: dict[str, str] = {}
        if step:
            gap_cs = rng.choice((100, 100, 100, 250, 0, 1, 3000))  # 0: a zero interval
            uptime_cs += gap_cs
            for d in devs:
                d.step(rng.random(), gap_cs * 10)
            if late_fresh and step == late_at:
                late.reset()  # created during this interval
            late.step(1.0, gap_cs * 10)
            if step == reset_at:
                reset_dev.reset()  # device removed and created again
                reset_dev.step(0.2, gap_cs * 10)
        shown = [d for d in devs if not (d.name == "dm-0" and step >= gone_at)]
        if step >= late_at:
            shown.append(late)
        lines = []
        for d in shown:
            values = list(d.c)
            if d is stale_dev and step == stale_at:
                values = history[d.name][-1]
            history.setdefault(d.name, []).append(list(d.c))
            lines.append(_line(d.major, d.minor, d.name, values, d.nfields))
            before = printed.get(d.name)
            if step:
                if before is None:
                    want[d.name] = "keep" if (d is not late or late_fresh) else "drop"
                elif d is stale_dev and step == stale_at:
                    # went back: a counter went down unless the device was idle
                    moved = any(a != b for i, (a, b) in enumerate(zip(before, values)) if i != 8)
                    want[d.name] = "drop" if moved else "keep"
                elif d is stale_dev and step == stale_at + 1:
                    want[d.name] = "either"
                elif d is reset_dev and step == reset_at:
                    # compared against zeros if sysstat sees it created again; if not,
                    # its counters went down
                    want[d.name] = "keep" if _recreated(before, values) else "drop"
                else:
                    want[d.name] = "drop" if _crossed_u64(before, values, d.nfields) else "keep"
            printed[d.name] = values
            before_line = before and _line(d.major, d.minor, d.name, before, d.nfields)
            if len(lines[-1]) >= 255 or (before_line and len(before_line) >= 255):
                want[d.name] = "either"
        if rng.random() < 0.5:  # a garbled line and a truncated one, both skipped
            lines.append(" 8 48 sdd 10 0 80 x 5 0 40 3 0 4 7")
            lines.append(" 8 64 sde 1 2 3 4 5 6")
        rng.shuffle(lines)
        out.append((uptime_cs, "\n".join(lines) + "\n"))
        if step:
            truth.append(want)
    return out, truth


# ------------------------------------------------------------------ a node, second by second
# (name, major, minor, nfields, reads/s at most, whether it counts busy time): an NVMe
# drive and its partition, a SATA SSD on an 18-field kernel line, an HDD, a dm device on
# a 14-field line, an md array that keeps no busy time (Linux 5.4 prints 0 ms for md),
# and an idle loop device.
NODE_DEVICES = (
    ("nvme0n1", 259, 0, 20, 60000, True), ("nvme0n1p1", 259, 1, 20, 60000, True),
    ("sda", 8, 0, 18, 8000, True), ("sdb", 8, 16, 20, 200, True),
    ("dm-0", 253, 0, 14, 8000, True), ("md0", 9, 0, 20, 3000, False),
    ("loop0", 7, 0, 20, 0, True),
)


def node_texts(seed: int, steps: int, interval_ms: int = 1000) -> list[str]:
    """/proc/diskstats of a busy training node, one text per interval_ms, every increment
    one a real device could make in that time (since-boot counters to start with)."""
    rng = random.Random(seed)
    counters = {}
    for name, _major, _minor, _n, top, ticking in NODE_DEVICES:
        c = [0] * FIELDS
        if top:
            c = [rng.randrange(10**6, 10**9) for _ in range(FIELDS)]
            for i in U32:
                c[i] = rng.randrange(0, 2**32) if ticking else 0
        counters[name] = c
    out = []
    for _ in range(steps):
        for name, _major, _minor, _n, top, ticking in NODE_DEVICES:
            if not top:
                continue
            c, busy = counters[name], rng.random()
            reads = int(rng.randrange(0, top) * busy)
            writes = int(rng.randrange(0, top // 4) * busy)
            flushes = rng.randrange(0, 20)
            c[0] += reads
            c[1] += rng.randrange(0, reads // 4 + 1)
            c[2] += reads * rng.choice((8, 64, 256))
            c[4] += writes
            c[5] += rng.randrange(0, writes // 4 + 1)
            c[6] += writes * rng.choice((8, 2048))
            c[15] += flushes
            if ticking:
                rd_ms = int(reads * rng.uniform(0.02, 5))
                wr_ms = int(writes * rng.uniform(0.02, 10))
                c[3] += rd_ms
                c[7] += wr_ms
                c[8] = rng.randrange(0, 64)
                c[9] += int(interval_ms * busy)
                c[10] += rd_ms + wr_ms  # time_in_queue: the requests' summed durations
                c[16] += flushes * rng.randrange(0, 5)
        out.append("\n".join(_line(major, minor, name, counters[name], n)
                             for name, major, minor, n, _top, _t in NODE_DEVICES) + "\n")
    return out


TORN_KINDS = ("lines", "bytes", "cut", "empty", "interleaved")


def torn(rng: random.Random, new: str, old: str, kind: str) -> str:
    """What a reader may see while `old` is rewritten in place as `new`:
    lines: the first lines new, the rest old (a rewrite that has reached a line boundary);
    bytes: the same at any byte, so the line at the seam mixes both;
    cut: the new text up to some byte and nothing after (truncated, still being written);
    empty: truncated, not written yet;
    interleaved: each device's line from either text, some from both (names repeat)."""
    if kind == "lines":
        a, b = new.splitlines(keepends=True), old.splitlines(keepends=True)
        k = rng.randrange(1, len(a))
        return "".join(a[:k] + b[k:])
    if kind == "bytes":
        k = rng.randrange(1, len(new))
        return new[:k] + old[k:]
    if kind == "cut":
        return new[:rng.randrange(1, len(new))]
    if kind == "empty":
        return ""
    lines = []
    for a, b in zip(new.splitlines(keepends=True), old.splitlines(keepends=True)):
        pick = rng.random()
        lines.extend([a] if pick < 0.4 else [b] if pick < 0.8 else rng.sample([a, b], 2))
    return "".join(lines)
