"""Opening an existing recording to append to it (record/writer.py's contract: "An
existing recording is appended to ... after any torn tail a crash left is cut off; a file
that is not a recording of this version, a session of another source ... is never
written"): the checks that refuse it, the torn tail cut off, and a block copy a crash
interrupted (steps 2 and 3 of record/compact.py TailWriter._commit) finished.
"""

from __future__ import annotations

import mmap
import os

from gpudisk_top.errors import UsageError
from gpudisk_top.record import frames, v2
from gpudisk_top.record.header import FORMAT_VERSION, OLDEST_APPENDED


def resume(fd: int, size: int, path: str, header: dict) -> tuple[int, float | None, list[str]]:
    """Check that fd (size bytes) holds a recording a recorder of `header` may append
    to; cut off a torn tail, and finish a block copy a crash interrupted.  Returns
    (where the file now ends, the wall time of its first sample or None, what was
    done, as warning lines).  Raises UsageError when it may not be appended to (not
    a recording, an older format version, another source: nothing is written then)."""
    from gpudisk_top.record.reader import check_preamble

    warnings: list[str] = []
    head = os.pread(fd, frames.PREAMBLE.size, 0)
    if not head.startswith(frames.MAGIC[:len(head)]):
        raise UsageError(f"{path} exists and is not a gpudisk-top recording; "
                         "not writing over it")
    if len(head) == frames.PREAMBLE.size:
        _, version, _ = frames.PREAMBLE.unpack_from(head)
        if version < OLDEST_APPENDED:
            raise UsageError(f"{path} is a recording of format version {version}; "
                             f"this recorder writes version {OLDEST_APPENDED} or "
                             f"{FORMAT_VERSION}: record to another file")
    check_preamble(path, head, size)
    try:
        buf = mmap.mmap(fd, size, access=mmap.ACCESS_READ)  # no copy of a big file
    except (OSError, ValueError):
        buf = frames.read_all(fd, size)
    try:
        found, damage = frames.scan(buf, frames.PREAMBLE.size)
        good_end = found[-1].end if found else frames.PREAMBLE.size
        unfinished = unfinished_copy(buf, found)
        check_source(buf, found, damage, path, header)
    finally:
        if isinstance(buf, mmap.mmap):
            buf.close()
    first = next((f for f in found if f.kind in frames.SAMPLE_TYPES), None)
    first_wall_s = first.wall_s if first is not None else None
    if good_end < size:
        os.ftruncate(fd, good_end)
        warnings.append(f"{path}: cut off a torn tail of {size - good_end} "
                        "bytes left by a recorder that was stopped while writing")
    if unfinished is not None:
        # finish the block copy a crash interrupted (steps 2 and 3 of _commit); the
        # copy goes over rows the block holds, so it needs no room: if it fails all
        # the same, the file stays as it is (readers keep the block)
        at, frame = unfinished
        try:
            if frame is not None:
                os.pwrite(fd, frame, at)
                os.fdatasync(fd)
                at += len(frame)
            os.ftruncate(fd, at)
            os.fdatasync(fd)
            good_end = at
        except OSError as err:
            warnings.append(f"{path}: could not finish compacting the last "
                            f"block ({err.strerror or err}); it is read as it is")
            good_end = os.fstat(fd).st_size
    return good_end, first_wall_s, warnings


def check_source(buf, found: list, damage: list, path: str, header: dict) -> None:
    """Refuse to add a session of another source: a simulated node's samples in a live
    node's recording, another scenario's or another host's.  Readers would have to
    tell them apart sample by sample; one file holds one source.  The file's last
    session decides; when its header is damaged, what remains of it does
    (record/sources.py), and a source that cannot be told is refused too.  Raises
    UsageError."""
    from gpudisk_top.record import sources

    starts = [(fr.offset, frames.frame_json(buf, fr, path, []), False)
              for fr in found if fr.kind == frames.SESSION]
    for d in damage:
        raw = sources.damaged_header(buf, d)
        if raw is not None:
            starts.append((d.start, sources.salvage(raw), True))
    if not starts:
        return
    _offset, theirs, damaged = max(starts, key=lambda item: item[0])
    src = sources.source_of(theirs, damaged=damaged or not theirs)
    mine = sources.source_of(header)
    if src.kind == sources.UNKNOWN or src.host_name is None:
        raise UsageError(f"{path}: the header of its last session is damaged, so its "
                         "source cannot be told: record to another file")
    if damaged:
        same = (src.kind, src.host_name) == (mine.kind, mine.host_name)
    else:
        same = (theirs.get("source"), theirs.get("host_name")) == (
            header.get("source"), header.get("host_name"))
    if not same:
        raise UsageError(f"{path} holds {src.describe()}; these samples are "
                         f"{mine.describe()}: record to another file")


def unfinished_copy(buf, found: list) -> tuple[int, bytes | None] | None:
    """A block whose copy over its rows (TailWriter._commit, steps 2 and 3) a crash cut short:
    the file ends in that block, and before it (back to the previous block, header or end
    frame) lie only rows it holds, summaries and damage.  Returns (where the block goes,
    the block's frame, or None when its copy is already there: cut after it), or None
    when there is nothing to finish."""
    if not found or found[-1].kind != frames.BLOCK:
        return None
    last = found[-1]
    frame = bytes(buf[last.offset:last.end])
    try:
        first, n, _ = v2.block_info(buf[last.start:last.end])
    except v2.FormatError:
        return None
    start = None
    for fr in reversed(found[:-1]):
        if fr.kind == frames.BLOCK:
            if bytes(buf[fr.offset:fr.end]) == frame:
                return fr.end, None               # step 2 was done: cut after the copy
            start = fr.end
            break
        if fr.kind == frames.ROW:
            (number,) = v2.ROW.unpack_from(buf, fr.start)
            if not first <= number < first + n:
                return None
            continue
        if fr.kind == frames.SUMMARY:
            continue
        start = fr.end                            # a header or an end frame
        break
    if start is None or last.offset - start <= len(frame):
        return None                               # nothing to win, or no room: leave it
    return start, frame
