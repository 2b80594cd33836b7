"""The recorder's file below the session: rows appended, and the tail's rows becoming one
block (record/writer.py's contract: "Every SEGMENT_SAMPLES samples the rows become one
block ... written in three steps so that no moment loses a sample", and on a full disk
"the tail is compacted (in place, over its own rows ...)").  TailWriter is the part of
the Recorder that does it, split from writer.py by job.  It works on the recorder's state
(the file: _fd, _size, _dirty; the tail: _rows, _layouts, _layout_ids, _rowcoder,
_tail_start, _block_first, _block_wall_s, _state, _summary_blocks, _deriver,
_commit_retry; what blocks took: _bytes_per_sample, _alone_bytes) and
its settings (path, level, segment_samples, rotation), and calls back its _warn and
_stop_summaries.
"""

from __future__ import annotations

import errno
import os

from gpudisk_top.collect.sample import Sample
from gpudisk_top.record import frames, v2
from gpudisk_top.record.v2.summary import encode_blocks

FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # no room: compacting may make some
ROOM_MARGIN_BYTES = 64 * 1024   # free space kept beyond the next block's estimate
MIN_BLOCK_ROOM_BYTES = 4096     # the least a block of one sample is expected to take
MIN_EARLY_BLOCK = 8             # rows at least, before the tail is compacted early: a block
                                # of fewer is larger than its rows (its own process table)


class TailWriter:
    """Appends to the recording's file and compacts its tail into blocks (see the
    module's doc); a base of record/writer.Recorder, which holds the state it works on."""

    def _full_line(self, err: OSError) -> str:
        return (f"cannot write {self.path}: {err.strerror or err}; compacting, and samples "
                "the disk refuses are dropped until it takes them again (those recorded are "
                "kept)")

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
        # deflated: a minute's summaries, replaced by the block's (LZMA would cost 30 ms)
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
            summaries = encode_blocks(blocks, self.file_version >= 3)
        payload = v2.encode_block(self._block_first, rows, self._layouts, self._state,
                                  self.level, summaries, predict_cols=self.file_version >= 3)
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
