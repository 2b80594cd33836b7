"""The recorder: appends raw Samples to a recording, crash-safe, from any one thread.

    rec = Recorder("node17.gdtrec", make_header(origin, interval_s=1.0))
    rec.append(sampler.sample())      # e.g. from the dashboard's sampler thread
    rec.close("SIGTERM")

Durability: each sample is one write() of a row (an R frame) as soon as it is taken, so a
kill -9 loses nothing already appended; a background thread calls fdatasync() once a
second when something was written, so after a power loss every sample older than about
a second (two at most, with a slow disk) is on disk.  The sampler never waits for a sync.

Every SEGMENT_SAMPLES samples the rows become one block (a B frame: the samples column by
column, LZMA-compressed, with their summaries), written in three steps so that no moment
loses a sample: the block is appended after the rows and synced, then copied over the
first rows and synced, then the file is cut after the copy.  A reader that meets the
rows and the block at once keeps the block.

Summaries (record/derived.py): the recorder feeds its samples to the model and the
detector, a summary block at a time, so that `report` need not replay them.

An existing recording is appended to (a new session: header, then rows), after any torn
tail a crash left is cut off; a file that is not a recording of this version, a session
of another source (a simulated node's samples into a live node's recording, or another
host's), a symbolic link, a device or a FIFO is never written, and two recorders never
write one file (an exclusive lock).  New files are created 0o640 less the umask: they
hold the GPU processes' command lines.

A full disk (or any write the disk refuses) never stops recording and never costs a
sample already written.  Before the disk fills, the rows are compacted early: while the
free space left could not hold the next block, the tail becomes a block at once (blocks
are about a tenth of their rows).  When a write fails anyway, the partial frame is cut
off, the tail is compacted (in place, over its own rows, when there is no room after
them: a crash in the milliseconds of that write costs those rows, which the block
replaces), the sample is written again (as a row that carries every record: those are
tens of KB on a node with many processes), then as a block of its own (a few KB; the
only form the first sample of a session may fit in), and only if that fails too is it
dropped.  A session also ends with its tail compacted in place when there is no room
after it.  Each kind of failure is reported once a minute with a count, and recording
goes on; a recorder started on a full disk waits for room the same way, and if not even
a session's header and first sample ever fitted, close() deletes the empty file it
created (removed_empty).
"""

from __future__ import annotations

import errno
import fcntl
import json
import mmap
import os
import threading
import time

from gpudisk_top import outfile
from gpudisk_top.collect.sample import Sample
from gpudisk_top.errors import RuntimeFailure, UsageError
from gpudisk_top.ratelimit import OncePer
from gpudisk_top.record import frames, v2
from gpudisk_top.record.header import (FORMAT_VERSION, SEGMENT_SAMPLES, complete_header, iso,
                                       make_header)
from gpudisk_top.record.rotate import Rotation
from gpudisk_top.record.v2.summary import encode_blocks

SYNC_INTERVAL_S = 1.0
FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # no room: compacting may make some
ROOM_MARGIN_BYTES = 64 * 1024   # free space kept beyond the next block's estimate
MIN_BLOCK_ROOM_BYTES = 4096     # the least a block of one sample is expected to take
MIN_EARLY_BLOCK = 8             # rows at least, before the tail is compacted early: a block
                                # of fewer is larger than its rows (its own process table)
LZMA_PRESET = 6           # blocks: 6 is 10 % smaller than 0 for a few ms a block (bench)


class Recorder:
    """Appends Samples to `path`.  Raises UsageError from the constructor when path
    cannot be a recording (a symbolic link, a device, a FIFO, a directory), exists and is
    not a recording of this format version or holds another source's sessions, or another
    recorder writes it (nothing is written then).  append() raises only once closed: a
    write the disk refuses costs at most that sample (see the module's doc), reported
    through `warn` once a minute per kind.

    thresholds: the detector's, for the summaries (default: Thresholds()); summaries=False
    records raw samples only (report then replays them).  warn(line): where problems
    found while recording go (default: kept in .warnings)."""

    def __init__(self, path, header: dict | None = None, *, max_size_mb: float | None = None,
                 retain_days: float | None = None, segment_samples: int = SEGMENT_SAMPLES,
                 sync_interval_s: float | None = SYNC_INTERVAL_S, level: int = LZMA_PRESET,
                 thresholds=None, summaries: bool = True, warn=None) -> None:
        self.path = os.fspath(path)
        self.header = dict(header if header is not None else make_header())
        self.header.setdefault("segment_samples", segment_samples)
        self.segment_samples = max(1, segment_samples)
        self.level = level
        self.thresholds = thresholds
        self.summaries = summaries
        self.rotation = (Rotation(self.path, max_size_mb, retain_days)
                         if max_size_mb is not None or retain_days is not None else None)
        self.warnings: list[str] = []     # what opening found (a torn tail cut off, ...)
        self._warn = OncePer(warn if warn is not None else self.warnings.append)
        self.dropped = 0                  # samples the disk refused, all files together
        self.removed: list[str] = []      # generations the retention policy deleted
        self.removed_empty = False        # close() deleted the empty file it created: the
                                          # disk refused even the first sample
        self.samples = 0                  # appended by this recorder, all files together
        self.closed = False
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._size = 0
        self._file_first_wall_s: float | None = None
        self._dirty = False
        self._bytes_per_sample = 400.0    # of a block, for --max-size before the first one
        self._alone_bytes = MIN_BLOCK_ROOM_BYTES  # the last block of one sample
        if summaries:
            from gpudisk_top.record import derived  # the model: only when summaries are made
            from gpudisk_top.verdict.detect import Thresholds

            self._derived = derived
            if self.thresholds is None:
                self.thresholds = Thresholds()
            self.header["derived"] = derived.meta(self.thresholds)
        self._open_file()
        self._stop = threading.Event()
        self._syncer = None
        if sync_interval_s:
            self._syncer = threading.Thread(target=self._sync_loop, args=(sync_interval_s,),
                                            name="gpudisk-top-recorder-sync", daemon=True)
            self._syncer.start()

    # ------------------------------------------------------------------ sessions
    def _new_session(self) -> None:
        self._flat = v2.Flattener()
        self._rowcoder = v2.RowCoder()
        self._session_samples = 0         # samples since this file's H frame (0: none yet)
        self._block_first = 0             # session number of the block's first sample
        self._rows: list[tuple[int, list]] = []
        self._layouts: list[tuple] = []
        self._layout_ids: dict = {}
        self._block_wall_s: float | None = None
        self._state: dict = {}            # processes' rebuilt counters before the block
        self._summary_blocks: list = []
        self._deriver = self._derived.Deriver(self.thresholds, cadence_s=self.header.get("interval_s")) if self.summaries else None
        self._tail_start = self._size     # where the rows of the current block begin
        self._commit_retry = 0

    # ------------------------------------------------------------------ the file
    def _open_file(self) -> None:
        path = self.path
        self._created = not os.path.lexists(path)
        try:
            fd = outfile.open_regular(path, mode=outfile.PRIVATE_MODE)
        except outfile.OutputError as err:
            raise UsageError(str(err)) from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise UsageError(f"{path}: another gpudisk-top recorder is writing it") from None
            size = os.fstat(fd).st_size
            if size:
                size = self._resume(fd, size)
        except UsageError:
            os.close(fd)
            raise
        except OSError as err:
            os.close(fd)
            raise RuntimeFailure(f"cannot write {path}: {err.strerror or err}") from None
        self._fd, self._size = fd, size   # size 0: the preamble goes before the first frame
        self._new_session()

    def _resume(self, fd: int, size: int) -> int:
        """Check that fd holds a recording we may append to; cut off a torn tail, and
        finish a block copy a crash interrupted."""
        from gpudisk_top.record.reader import check_preamble

        head = os.pread(fd, frames.PREAMBLE.size, 0)
        if not head.startswith(frames.MAGIC[:len(head)]):
            raise UsageError(f"{self.path} exists and is not a gpudisk-top recording; "
                             "not writing over it")
        if len(head) == frames.PREAMBLE.size:
            _, version, _ = frames.PREAMBLE.unpack_from(head)
            if version < FORMAT_VERSION:
                raise UsageError(f"{self.path} is a recording of format version {version}; "
                                 f"this recorder writes version {FORMAT_VERSION}: record to "
                                 "another file")
        check_preamble(self.path, head, size)
        try:
            buf = mmap.mmap(fd, size, access=mmap.ACCESS_READ)  # no copy of a big file
        except (OSError, ValueError):
            buf = frames.read_all(fd, size)
        try:
            found, damage = frames.scan(buf, frames.PREAMBLE.size)
            good_end = found[-1].end if found else frames.PREAMBLE.size
            unfinished = _unfinished_copy(buf, found)
            self._check_source(buf, found, damage)
        finally:
            if isinstance(buf, mmap.mmap):
                buf.close()
        first = next((f for f in found if f.kind in frames.SAMPLE_TYPES), None)
        self._file_first_wall_s = first.wall_s if first is not None else None
        if good_end < size:
            os.ftruncate(fd, good_end)
            self.warnings.append(f"{self.path}: cut off a torn tail of {size - good_end} "
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
                self.warnings.append(f"{self.path}: could not finish compacting the last "
                                     f"block ({err.strerror or err}); it is read as it is")
                good_end = os.fstat(fd).st_size
        return good_end

    def _check_source(self, buf, found: list, damage: list) -> None:
        """Refuse to add a session of another source: a simulated node's samples in a live
        node's recording, another scenario's or another host's.  Readers would have to
        tell them apart sample by sample; one file holds one source.  The file's last
        session decides; when its header is damaged, what remains of it does
        (record/sources.py), and a source that cannot be told is refused too."""
        from gpudisk_top.record import sources

        starts = [(fr.offset, frames.frame_json(buf, fr, self.path, []), False)
                  for fr in found if fr.kind == frames.SESSION]
        for d in damage:
            raw = sources.damaged_header(buf, d)
            if raw is not None:
                starts.append((d.start, sources.salvage(raw), True))
        if not starts:
            return
        _offset, theirs, damaged = max(starts, key=lambda item: item[0])
        src = sources.source_of(theirs, damaged=damaged or not theirs)
        mine = sources.source_of(self.header)
        if src.kind == sources.UNKNOWN or src.host_name is None:
            raise UsageError(f"{self.path}: the header of its last session is damaged, so its "
                             "source cannot be told: record to another file")
        if damaged:
            same = (src.kind, src.host_name) == (mine.kind, mine.host_name)
        else:
            same = (theirs.get("source"), theirs.get("host_name")) == (
                self.header.get("source"), self.header.get("host_name"))
        if not same:
            raise UsageError(f"{self.path} holds {src.describe()}; these samples are "
                             f"{mine.describe()}: record to another file")

    def _rotate(self, newest_wall_s: float) -> None:
        """Close this file's session, move it to FILE.1, start a fresh FILE and delete the
        generations the policy drops.  A failure is a warning: recording goes on, in FILE
        as it is if it could not be moved."""
        self._end_session("rotated")
        try:
            os.fdatasync(self._fd)
        except OSError:
            pass
        os.close(self._fd)
        self._fd = None
        try:
            self.rotation.rotate()
        except OSError as err:
            self._warn("rotate", f"cannot rotate {self.path}: {err.strerror or err}; "
                       "recording goes on in it")
        else:
            self._file_first_wall_s = None
        try:
            self._open_file()
        except (UsageError, RuntimeFailure) as err:
            self._warn("reopen", f"{err}")
            return
        try:
            self.removed += self.rotation.prune(newest_wall_s)
        except OSError as err:
            self._warn("prune", f"cannot delete an old generation of {self.path}: "
                       f"{err.strerror or err}")

    # ------------------------------------------------------------------ writing
    def append(self, sample: Sample) -> str | None:
        """Write one sample (and the session header before the first).  Thread-safe.
        Returns None, or why the sample was dropped (the disk refused it).  Raises
        RuntimeFailure only when the recorder is closed."""
        with self._lock:
            if self.closed:
                raise RuntimeFailure(f"{self.path}: the recorder is closed")
            rot = self.rotation
            layout, vals, token, data = self._encode(sample)
            if rot is not None and self._session_samples:
                # the next sample's row as it will be written (a row after a block carries
                # every record; the others only what changed), and the block the tail
                # becomes (written beside the rows before it replaces them): the most the
                # file can take up before it shrinks again (a minute's summaries are left
                # to the block, below)
                peak = self._size + len(data) + self._block_bytes(1)
                if (rot.part_bytes is not None and peak > rot.part_bytes
                        and len(self._rows) >= MIN_EARLY_BLOCK):
                    # rows take several times the room of their block: compact before the
                    # file outgrows its part of --max-size, not only every SEGMENT_SAMPLES
                    # (fewer rows than MIN_EARLY_BLOCK would make a block larger than them)
                    self._commit()
                    layout, vals, token, data = self._encode(sample)
                    peak = self._size + len(data) + self._block_bytes(1)
                if rot.due(peak, 0, self._file_first_wall_s, sample.wall_s):
                    self._rotate(sample.wall_s)
                    layout, vals, token, data = self._encode(sample)
            if self._fd is None:
                return self._drop("cannot-open", f"cannot write {self.path}: it could not be "
                                  "opened again after rotating")
            written = self._write_sample(sample, (layout, vals, token, data))
            if isinstance(written, str):
                return written
            if written:                              # written as a row of the tail
                layout, vals, token, _data = written
                self._rowcoder.accepted(token)
                lid = self._layout_ids.get(layout)
                if lid is None:
                    lid = self._layout_ids[layout] = len(self._layouts)
                    self._layouts.append(layout)
                self._rows.append((lid, vals))
                if self._block_wall_s is None:
                    self._block_wall_s = sample.wall_s
            self._flat.accept(sample)
            if self._file_first_wall_s is None:
                self._file_first_wall_s = sample.wall_s
            self._session_samples += 1
            self.samples += 1
            deriver = self._deriver
            if deriver is not None:
                try:
                    if deriver.add(sample):
                        self._write_summaries(deriver.take())
                except Exception as err:  # noqa: BLE001 - never lose a sample to a summary
                    self._stop_summaries(err)
            if (len(self._rows) >= self.segment_samples + self._commit_retry
                    or self._short_of_room()):
                self._commit()
            return None

    def _encode(self, sample: Sample) -> tuple:
        """(layout, vals, token, row frame) of the sample as the next row of this session:
        nothing changes until the row is accepted, so a block or a rotation in between
        only means encoding it again (a row after either carries every record)."""
        layout, vals = self._flat.flatten(sample)
        payload, token = self._rowcoder.encode(self._session_samples, layout, vals)
        return layout, vals, token, frames.pack(frames.ROW, payload, sample.wall_s)

    def _session_start(self, sample: Sample) -> bytes:
        """What goes before the session's first sample: its H frame, and the preamble
        before the first frame of a new file (b"" once the session has a sample)."""
        data = b""
        if self._session_samples == 0:
            data = frames.pack(frames.SESSION, json.dumps(
                complete_header(self.header, sample), allow_nan=False, default=str).encode())
        if self._size == 0:
            data = frames.preamble(FORMAT_VERSION) + data
        return data

    def _write_sample(self, sample: Sample, encoded: tuple) -> tuple | bool | str:
        """Append a sample (after the session's start, before its first): as the next row,
        or, when the disk refuses that, as a row again after compacting the tail, and
        then as a block of its own.  Returns the encoding of the row written (the
        sample's row may have been encoded again after a block), False when the sample
        went into a block of its own, or why it was dropped (said once a minute)."""
        start = self._session_start(sample)
        try:
            self._write_at_tail(start, encoded[3])
            return encoded
        except OSError as err:
            first = err
        if first.errno in FULL_ERRNOS and self._rows:
            self._commit(in_place=True)
            if not self._rows:
                # a row after a block carries every record: the one encoded before it
                # holds only what changed since a row that is now in the block
                encoded = self._encode(sample)
                try:
                    self._write_at_tail(start, encoded[3])
                    return encoded
                except OSError as err:
                    first = err
        if first.errno in FULL_ERRNOS and not self._rows:
            # a row that carries every record (the first of a session, or the first after
            # a block) is tens of KB on a node with many processes; its block, a few KB
            if self._write_alone(sample, start, encoded[0], encoded[1]):
                return False
        if first.errno in FULL_ERRNOS:
            return self._drop("full", self._full_line(first))
        return self._drop(f"write-{first.errno}",
                          f"cannot write {self.path}: {first.strerror or first}; samples are "
                          "dropped until the disk takes them again (those recorded are kept)")

    def _full_line(self, err: OSError) -> str:
        return (f"cannot write {self.path}: {err.strerror or err}; compacting, and samples "
                "the disk refuses are dropped until it takes them again (those recorded are "
                "kept)")

    def _drop(self, kind: str, line: str) -> str:
        self.dropped += 1
        self._warn(kind, line)
        return line

    def _block_bytes(self, more: int = 0) -> int:
        """What a block of the tail (and `more` samples) would take, from the last one."""
        return int((len(self._rows) + more) * self._bytes_per_sample) + frames.HEADER_SIZE

    def _short_of_room(self) -> bool:
        """True while the free space left could not take a block of the tail beside its
        rows: compact now, while a block can still be written safely (see the module's
        doc).  One fstatvfs, only once the tail has a few rows."""
        if len(self._rows) < MIN_EARLY_BLOCK or self._fd is None:
            return False
        try:
            st = os.fstatvfs(self._fd)
        except OSError:
            return False
        free = st.f_bavail * st.f_frsize
        need = 2 * self._block_bytes() + ROOM_MARGIN_BYTES
        return free < need

    def _stop_summaries(self, err: Exception) -> None:
        """The model or the detector failed on a sample: record raw samples only for the
        rest of the session (report replays what has no summary)."""
        self._deriver = None
        self.warnings.append(f"{self.path}: no more summaries in this session "
                             f"({type(err).__name__}: {err}); the samples are recorded")

    def _write_at_tail(self, start: bytes, row: bytes) -> None:
        """Append the session's start (if any) and a row, in one write; raises OSError."""
        tail_start = self._size + len(start)     # a block never goes over the header
        self._write(start + row)
        if start:
            self._tail_start = tail_start

    def _write_alone(self, sample: Sample, start: bytes, layout: tuple, vals: list) -> bool:
        """Write the sample as a block of its own, after the session's start (if any), in
        one write: when the tail is empty and its row does not fit.  False when the disk
        refuses that too (nothing written).  Its summaries go with a later block."""
        try:
            st = os.fstatvfs(self._fd)
            if st.f_bavail * st.f_frsize < len(start) + self._alone_bytes:
                return False        # no room for one (the last one's size): no LZMA for it
        except OSError:
            pass
        payload = v2.encode_block(self._block_first, [(0, vals)], [layout], self._state,
                                  self.level, b"")
        frame = frames.pack(frames.BLOCK, payload, sample.wall_s)
        self._alone_bytes = len(frame)
        try:
            self._write(start + frame)
        except OSError:
            return False
        self._blocked([(0, vals)], [layout])
        return True

    def _blocked(self, rows: list, layouts: list) -> None:
        """The tail (rows and their layouts) is now a block, at the end of the file: the
        next sample begins a new run of rows after it."""
        # the processes' counters as a reader rebuilds them after this block
        un = v2.Unflattener(self._state)
        for lid, vals in rows:
            un.advance(layouts[lid], vals)
        self._state = un.counters
        self._block_first += len(rows)
        self._rows, self._layouts, self._layout_ids = [], [], {}
        self._block_wall_s = None
        self._tail_start = self._size
        self._rowcoder.reset()
        self._commit_retry = 0

    def _write_summaries(self, blocks: list) -> None:
        """Summaries of the tail go out as s frames (the block will carry them too), but
        under a --max-size whose parts they would crowd (they are derived data: the block
        carries them, and report can replay the rows)."""
        self._summary_blocks += blocks
        frame = frames.pack(frames.SUMMARY, encode_blocks(blocks))
        part = self.rotation.part_bytes if self.rotation is not None else None
        if part is not None and len(frame) > part // 20:
            return
        try:
            self._write(frame)
        except OSError:
            pass

    def _commit(self, in_place: bool = False) -> None:
        """The rows of the current block become one B frame (see the module's doc).
        in_place: when the disk has no room for the block after the rows, write it over
        them directly (a full disk; the only way to make room without losing a sample)."""
        rows = self._rows
        if not rows:
            return
        n = len(rows)
        summaries = b""
        blocks = self._summary_blocks
        if self._deriver is not None:
            try:
                self._deriver.finish()
                blocks = blocks + self._deriver.take()
            except Exception as err:  # noqa: BLE001
                self._stop_summaries(err)
        if blocks:
            summaries = encode_blocks(blocks)
        payload = v2.encode_block(self._block_first, rows, self._layouts, self._state,
                                         self.level, summaries)
        frame = frames.pack(frames.BLOCK, payload, self._block_wall_s or 0.0)
        start, end = self._tail_start, self._size
        try:
            self._pwrite_all(frame, end)            # 1: after the rows, then synced
            os.fdatasync(self._fd)
        except OSError as err:
            try:
                os.ftruncate(self._fd, end)
            except OSError:
                pass
            if not (in_place and err.errno in FULL_ERRNOS and self._overwrite_rows(frame)):
                # the rows are safe; try again after a while
                self._commit_retry += max(1, self.segment_samples // 10)
                if err.errno in FULL_ERRNOS:
                    self._warn("full", self._full_line(err))
                else:
                    self._warn(f"block-{err.errno}", f"cannot write a block to {self.path}: "
                               f"{err.strerror or err}; its samples stay as rows")
                return
            size = start + len(frame)               # over its rows: steps 2 and 3 done
        else:
            size = end + len(frame)
            if len(frame) <= end - start:
                try:
                    self._pwrite_all(frame, start)  # 2: over the rows, synced
                    os.fdatasync(self._fd)
                    os.ftruncate(self._fd, start + len(frame))   # 3: cut after the copy
                    size = start + len(frame)
                except OSError:
                    pass  # the file holds rows then the block: readers keep the block
        self._size = size
        self._dirty = True
        if n >= MIN_EARLY_BLOCK:
            # a block of a few rows carries the processes' table for itself alone: its
            # bytes a sample would predict the next blocks too large
            self._bytes_per_sample = len(frame) / n
        self._summary_blocks = []                  # the block carries them
        self._blocked(rows, self._layouts)

    def _overwrite_rows(self, frame: bytes) -> bool:
        """Write the block over the first of its own rows and cut the file after it.  On a
        copy-on-write filesystem even an overwrite can fail for want of room: the bytes
        it covered are then put back.  True when the block replaced its rows."""
        start, end = self._tail_start, self._size
        if len(frame) > end - start:
            return False
        saved = os.pread(self._fd, len(frame), start)
        try:
            self._pwrite_all(frame, start)
            os.fdatasync(self._fd)
            os.ftruncate(self._fd, start + len(frame))
        except OSError:
            try:
                self._pwrite_all(saved, start)
                os.ftruncate(self._fd, end)
            except OSError:
                pass
            return False
        return True

    def _pwrite_all(self, data: bytes, offset: int) -> None:
        view = memoryview(data)
        while view:
            n = os.pwrite(self._fd, view, offset)
            view = view[n:]
            offset += n

    def _write(self, data: bytes) -> None:
        """Append data at the end.  Raises OSError, after cutting off what part of it got
        out (the file ends in whole frames)."""
        try:
            self._pwrite_all(data, self._size)
        except OSError:
            try:
                os.ftruncate(self._fd, self._size)
            except OSError:
                pass
            raise
        self._size += len(data)
        self._dirty = True

    def mark_gap(self, first_wall_s: float, last_wall_s: float, samples: int) -> None:
        """Samples taken from first_wall_s to last_wall_s (`samples` of them) were never
        given to the recorder (the output stalled, record/queued.py): the session ends
        here with an E frame saying so (its "gap"), and the next sample begins a new one,
        so that `report` shows the hole instead of rates across it."""
        with self._lock:
            if self.closed:
                return
            self._end_session(f"output stalled: {samples} samples not recorded",
                              gap={"from": iso(first_wall_s), "to": iso(last_wall_s),
                                   "from_s": first_wall_s, "to_s": last_wall_s,
                                   "samples": samples})

    def _end_session(self, reason: str, gap: dict | None = None) -> None:
        if self._fd is None or self._session_samples == 0:
            return
        # in place when the disk has no room for the block after the rows: a session's
        # last rows are its largest part on a full disk (the first after a block carries
        # every record), and the end frame needs room too
        self._commit(in_place=True)
        end = {"reason": reason, "samples": self._session_samples, "ended": iso(time.time())}
        if gap is not None:
            end["gap"] = gap
        try:
            self._write(frames.pack(frames.END, json.dumps(end).encode()))
        except OSError:
            pass  # the samples are safe; only the note that we ended cleanly is missing
        self._new_session()

    # ------------------------------------------------------------------ syncing, closing
    def _sync_loop(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            self.sync()

    def sync(self) -> None:
        """fdatasync() now if anything was written since the last one."""
        with self._lock:
            if not self._dirty or self._fd is None:
                return
            self._dirty = False
            fd = os.dup(self._fd)  # sync outside the lock: a slow disk never blocks append()
        try:
            os.fdatasync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    @property
    def bytes_written(self) -> int:
        """The current file's size."""
        return self._size

    def close(self, reason: str = "closed") -> None:
        """Write the last block, end the session (an E frame saying why), sync and close.
        Idempotent."""
        self._stop.set()
        if self._syncer is not None and self._syncer is not threading.current_thread():
            self._syncer.join()
        with self._lock:
            if self.closed:
                return
            self.closed = True
            if self._fd is None:
                return
            self._end_session(reason)
            try:
                os.fdatasync(self._fd)
            except OSError:
                pass
            if self._size == 0 and self._created and self.dropped:
                self._remove_empty()
            os.close(self._fd)
            self._fd = None

    def _remove_empty(self) -> None:
        """Delete the file this recorder created when not even a session's header and
        first sample fitted in it: an empty file is no recording, and readers refuse it."""
        try:
            mine = os.fstat(self._fd)
            there = os.lstat(self.path)
            if (there.st_dev, there.st_ino) == (mine.st_dev, mine.st_ino) and not mine.st_size:
                os.unlink(self.path)
                self.removed_empty = True
        except OSError:
            pass

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _unfinished_copy(buf, found: list) -> tuple[int, bytes | None] | None:
    """A block whose copy over its rows (writer._commit, steps 2 and 3) a crash cut short:
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
