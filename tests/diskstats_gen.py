"""Seeded sequences of /proc/diskstats snapshots, with the edge cases iostat must survive.

Each sequence is a list of (uptime_cs, text).  Devices advance by random increments; the
generator injects 32-bit tick wraps, 64-bit counter wraps, a device removed and created
again (counters reset), devices that appear and vanish, zero intervals, 14/18/20-field
lines, and lines that are garbled or truncated.
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

    def step(self, busy: float) -> None:
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
        self.c[9] += r.randrange(0, 1001)
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
    late_at = rng.randrange(1, steps)
    gone_at = rng.randrange(1, steps)
    reset_dev, reset_at = rng.choice(devs[:5]), rng.randrange(1, steps)
    uptime_cs = rng.randrange(10_000, 10**9)
    out = []
    for step in range(steps):
        if step:
            uptime_cs += rng.choice((100, 100, 100, 250, 0, 1, 3000))  # 0: a zero interval
            for d in devs:
                d.step(rng.random())
            late.step(1.0)
            if step == reset_at:
                reset_dev.reset()  # device removed and created again
                reset_dev.step(0.2)
        lines = [d.line() for d in devs if not (d.name == "dm-0" and step >= gone_at)]
        if step >= late_at:
            lines.append(late.line())
        if rng.random() < 0.5:  # a garbled line and a truncated one, both skipped
            lines.append(" 8 48 sdd 10 0 80 x 5 0 40 3 0 4 7")
            lines.append(" 8 64 sde 1 2 3 4 5 6")
        rng.shuffle(lines)
        out.append((uptime_cs, "\n".join(lines) + "\n"))
    return out
