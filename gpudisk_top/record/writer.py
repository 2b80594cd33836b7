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

The processes' cadence (issue 41): a Sample taken while the sampler reads the processes
only every few seconds (collect/detail.py) that did not read them carries the last read's
counters unchanged and says how old they are (Sample.procs_age_s).  It is appended as it
is, with its age (record/v2's "t/procs_age_ms"; the carried counters are zero differences,
next to nothing in a block), so a recording replays with the cadence it was recorded with:
a replay, `report` and the summaries take the same process rates at the same samples as
the live session did (model/detail.py, the one rule).
Each job's cgroup totals (Sample.cgjobs) are live figures only: not kept, n/a in a replay.

An existing recording is appended to (a new session: header, then rows), after any torn
tail a crash left is cut off (a version 2 file goes on as version 2: header.py); a file
that is not a recording of version 2 or 3, a session
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

This module is the Recorder's sessions, rotation, syncing and closing; opening an existing
recording is record/resume.py's, and the rows and blocks on the file record/compact.py's.
"""

from __future__ import annotations

import fcntl
import json
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
from gpudisk_top.record.compact import (FULL_ERRNOS, MIN_BLOCK_ROOM_BYTES, MIN_EARLY_BLOCK,
                                        TailWriter)
from gpudisk_top.record.resume import resume
from gpudisk_top.record.rotate import Rotation

SYNC_INTERVAL_S = 1.0
LZMA_PRESET = 6           # blocks: 6 is 10 % smaller than 0 for a few ms a block (bench)


class Recorder(TailWriter):
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
        # the format this file is written in: a version 2 file goes on as version 2
        self.file_version = (frames.PREAMBLE.unpack(os.pread(fd, frames.PREAMBLE.size, 0))[1]
                             if size else FORMAT_VERSION)
        self._new_session()

    def _resume(self, fd: int, size: int) -> int:
        """Check that fd holds a recording we may append to (record/resume.py); returns
        where it now ends."""
        good_end, self._file_first_wall_s, notes = resume(fd, size, self.path, self.header)
        self.warnings += notes
        return good_end

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
                complete_header(dict(self.header, format_version=self.file_version), sample),
                allow_nan=False, default=str).encode())
        if self._size == 0:
            data = frames.preamble(self.file_version) + data
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

    def _drop(self, kind: str, line: str) -> str:
        self.dropped += 1
        self._warn(kind, line)
        return line

    def _stop_summaries(self, err: Exception) -> None:
        """The model or the detector failed on a sample: record raw samples only for the
        rest of the session (report replays what has no summary)."""
        self._deriver = None
        self.warnings.append(f"{self.path}: no more summaries in this session "
                             f"({type(err).__name__}: {err}); the samples are recorded")

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
