"""Recordings as the fault-injection round made them: sessions months apart, files
concatenated (the clock goes back), a live recording with a simulated session appended,
a flipped bit in a session header.  Mixed files are built by concatenating recordings
made apart, as a user's `cat` does, so they do not depend on what the recorder lets one
append."""

from __future__ import annotations

import dataclasses
import os

from gpudisk_top.record import Recorder, frames, make_header
from gpudisk_top.sim import Simulator, builtin
from gpudisk_top.collect import source
from gpudisk_top.collect.source import Source
from recording_helpers import origin

LIVE = Source(source.LIVE, "node-17", source.LIVE, kernel="6.8.0-45-generic")
DAY_S = 86400.0


def record(path, samples, header_origin=None, **kwargs) -> str:
    """A recording of `samples` in one session (appended when path exists)."""
    kwargs.setdefault("sync_interval_s", None)
    with Recorder(path, make_header(header_origin or origin(), 1.0), **kwargs) as rec:
        for s in samples:
            rec.append(s)
    return os.fspath(path)


def sim(n: int, scenario: str = "demo", seed: int = 0, start_wall_s: float | None = None,
        start_mono_s: float | None = None) -> list:
    kwargs = {}
    if start_wall_s is not None:
        kwargs["start_wall_s"] = start_wall_s
    if start_mono_s is not None:
        kwargs["start_mono_s"] = start_mono_s
    s = Simulator(builtin(scenario), seed=seed, **kwargs)
    return [s.sample() for _ in range(n)]


def live(n: int) -> list:
    """n samples of this machine, through the real collectors (no GPU here: NVML is
    unavailable, which a live recording may well say)."""
    from gpudisk_top.collect.roots import Roots
    from gpudisk_top.collect.sampler import Sampler

    sampler = Sampler(Roots())
    try:
        return [sampler.sample() for _ in range(n)]
    finally:
        sampler.close()


def concat(dst, *paths, keep_preambles: bool = False) -> str:
    """`cat a b > dst`: with keep_preambles the second file's preamble stays in the middle,
    as cat leaves it; without, only its frames follow (a session appended)."""
    out = bytearray()
    for k, p in enumerate(paths):
        data = open(p, "rb").read()
        out += data if k == 0 or keep_preambles else data[frames.PREAMBLE.size:]
    with open(dst, "wb") as f:
        f.write(out)
    return os.fspath(dst)


def shifted(samples, wall_shift_s: float) -> list:
    """The samples with their wall clock moved (the monotonic clock as it was): a clock
    step inside a recorder run."""
    return [dataclasses.replace(s, wall_s=s.wall_s + wall_shift_s) for s in samples]


def header_frames(path) -> list:
    data = open(path, "rb").read()
    found, _ = frames.scan(data, frames.PREAMBLE.size)
    return [f for f in found if f.kind == frames.SESSION]


def flip(path, dst, byte: int, bit: int = 0) -> str:
    data = bytearray(open(path, "rb").read())
    data[byte] ^= 1 << bit
    with open(dst, "wb") as f:
        f.write(bytes(data))
    return os.fspath(dst)
