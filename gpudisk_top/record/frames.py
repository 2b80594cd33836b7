"""The container of a recording: a preamble, then length-prefixed frames with a CRC each.

    preamble  8 bytes MAGIC, u16 format version, u16 reserved (0)       little-endian
    frame     2 bytes SYNC, u8 type, u8 flags, u32 payload length, f64 wall_s, u32 crc32,
              then the payload; the CRC covers type..wall_s and the payload

Every number is little-endian.  A frame is written with one write() and never rewritten,
so a file cut anywhere (kill -9, power loss, a full disk) holds a run of whole frames and
at most one torn frame at its end; the CRC tells a torn or corrupted frame from a good
one, and SYNC plus the CRC let a reader find the next good frame after damage in the
middle.  Frame types are ASCII letters: upper case ones are critical (a reader must
understand them), lower case ones may be skipped by a reader that does not know them, as
PNG does with its chunks.  docs/recording-format.md describes the whole format.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from dataclasses import dataclass

MAGIC = b"\x89GDTREC\n"       # \x89 and \n catch 7-bit and newline-mangling copies, as PNG's
PREAMBLE = struct.Struct("<8sHH")
SYNC = b"\xa5\x5a"
HEADER = struct.Struct("<2sBBIdI")  # sync, type, flags, length, wall_s, crc32
HEADER_SIZE = HEADER.size           # 20
_CRC_PART = struct.Struct("<BBId")  # what the CRC covers before the payload

# Frame types
SESSION = ord("H")    # JSON: who recorded what (host, GPUs, devices, schema); starts a session
END = ord("E")        # JSON: the session ended cleanly (why, how many samples)
KEYFRAME = ord("K")   # v1: a sample that starts a new compressed segment
DELTA = ord("D")      # v1: a sample coded against the previous one in the same segment
ROW = ord("R")        # v2: one sample as soon as it is taken (the crash-safe tail)
BLOCK = ord("B")      # v2: a block of samples, column by column, with their summaries
SUMMARY = ord("s")    # v2: summaries of the tail's samples (derived: may be skipped)
KNOWN = frozenset((SESSION, KEYFRAME, DELTA, END, ROW, BLOCK, SUMMARY))
SAMPLE_TYPES = frozenset((KEYFRAME, DELTA, ROW, BLOCK))

MAX_PAYLOAD = 64 * 2**20  # no frame is this large; a bigger length is damage, not data


def preamble(version: int) -> bytes:
    return PREAMBLE.pack(MAGIC, version, 0)


def pack(kind: int, payload: bytes, wall_s: float = 0.0, flags: int = 0) -> bytes:
    """One frame: header and payload, ready for a single write()."""
    crc = zlib.crc32(payload, zlib.crc32(_CRC_PART.pack(kind, flags, len(payload), wall_s)))
    return HEADER.pack(SYNC, kind, flags, len(payload), wall_s, crc) + payload


@dataclass(slots=True)
class Frame:
    offset: int          # where the frame's header starts
    kind: int
    flags: int
    wall_s: float
    start: int           # where its payload starts
    end: int             # where it ends (the next frame's offset)


@dataclass(slots=True)
class Damage:
    """Bytes [start, end) that hold no good frame."""

    start: int
    end: int
    torn_tail: bool      # the damage runs to the end of the file: a write cut short


def scan(buf, start: int) -> tuple[list[Frame], list[Damage]]:
    """Every good frame of buf from `start` on, and the damaged stretches between them.

    A frame is good when its sync bytes, length and CRC check out.  After damage the
    scan looks for the next SYNC whose frame checks out, so a bad stretch in the middle
    costs only itself.  Never raises on bad bytes.
    """
    frames: list[Frame] = []
    damage: list[Damage] = []
    size = len(buf)
    pos = start
    unpack = HEADER.unpack_from
    crc32 = zlib.crc32
    crc_part = _CRC_PART.pack
    view = memoryview(buf)
    try:
        while pos < size:
            if pos + HEADER_SIZE <= size:
                sync, kind, flags, length, wall_s, crc = unpack(buf, pos)
                end = pos + HEADER_SIZE + length
                if (sync == SYNC and end <= size and length <= MAX_PAYLOAD
                        and crc32(view[pos + HEADER_SIZE:end], crc32(crc_part(kind, flags, length, wall_s))) == crc):
                    frames.append(Frame(pos, kind, flags, wall_s, pos + HEADER_SIZE, end))
                    pos = end
                    continue
            # damage: find the next frame that checks out
            bad_start = pos
            pos = _resync(buf, view, pos + 1, size)
            damage.append(Damage(bad_start, pos, torn_tail=pos >= size))
    finally:
        view.release()
    return frames, damage


def _resync(buf, view, pos: int, size: int) -> int:
    find = buf.find
    while True:
        pos = find(SYNC, pos)
        if pos < 0 or pos + HEADER_SIZE > size:
            return size
        sync, kind, flags, length, wall_s, crc = HEADER.unpack_from(buf, pos)
        end = pos + HEADER_SIZE + length
        if end <= size and length <= MAX_PAYLOAD and zlib.crc32(
                view[pos + HEADER_SIZE:end], zlib.crc32(_CRC_PART.pack(kind, flags, length, wall_s))) == crc:
            return pos
        pos += 1


def read_all(fd: int, size: int) -> bytes:
    """The first `size` bytes of an open file (fewer if it is shorter), in pieces of 16 MiB."""
    chunks, got = [], 0
    while got < size:
        chunk = os.pread(fd, min(1 << 24, size - got), got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def frame_json(buf, fr: Frame, path: str, warnings: list[str]) -> dict:
    """A session header or end frame's JSON object; {} with a warning when unreadable."""
    try:
        value = json.loads(bytes(buf[fr.start:fr.end]))
        return value if isinstance(value, dict) else {}
    except (ValueError, RecursionError):   # RecursionError: JSON nested beyond reason
        warnings.append(f"{path}: a session header at byte {fr.offset} could not be read")
        return {}
