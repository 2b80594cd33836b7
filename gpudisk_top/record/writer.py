"""The recorder: appends raw Samples to a recording, crash-safe, from any one thread.

    rec = Recorder("node17.gdtrec", make_header(origin, interval_s=1.0))
    rec.append(sampler.sample())      # e.g. from the dashboard's sampler thread
    rec.close("SIGTERM")

Durability: each sample is one write() of whole frames as soon as it is taken, so a kill -9
loses nothing already appended; a background thread calls fdatasync() once a second when
something was written, so after a power loss every sample older than about a second (two
at most, with a slow disk) is on disk.  The sampler never waits for the disk to sync.
An existing recording is appended to (a new session: header, then a keyframe), after any
torn tail a crash left is cut off; a file that is not a recording is never written over.
"""

from __future__ import annotations

import json
import mmap
import os
import threading
import time

from gpudisk_top.collect.sample import Sample
from gpudisk_top.errors import RuntimeFailure, UsageError
from gpudisk_top.record import frames
from gpudisk_top.record.format_v1 import Encoder
from gpudisk_top.record.header import (FORMAT_VERSION, SEGMENT_SAMPLES, complete_header, iso,
                                       make_header)
from gpudisk_top.record.rotate import Rotation

SYNC_INTERVAL_S = 1.0


class Recorder:
    """Appends Samples to `path`.  Raises UsageError from the constructor when path
    exists and is not a recording of this format version (nothing is written then), and
    RuntimeFailure from append() when the disk refuses a write (the partial frame is cut
    off; the next append starts a new segment, so the file stays readable)."""

    def __init__(self, path, header: dict | None = None, *, max_size_mb: float | None = None,
                 retain_days: float | None = None, segment_samples: int = SEGMENT_SAMPLES,
                 sync_interval_s: float | None = SYNC_INTERVAL_S, level: int = 6) -> None:
        self.path = os.fspath(path)
        self.header = dict(header if header is not None else make_header())
        self.header.setdefault("segment_samples", segment_samples)
        self.segment_samples = segment_samples
        self.rotation = (Rotation(self.path, max_size_mb, retain_days)
                         if max_size_mb is not None or retain_days is not None else None)
        self.warnings: list[str] = []     # what opening found (a torn tail cut off, ...)
        self.removed: list[str] = []      # generations the retention policy deleted
        self.samples = 0                  # appended by this recorder, all files together
        self.closed = False
        self._enc = Encoder(level)
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._size = 0
        self._in_segment = 0              # samples in the current segment
        self._session_samples = 0         # samples since this file's H frame (0: none yet)
        self._file_first_wall_s: float | None = None
        self._dirty = False
        self._open_file()
        self._stop = threading.Event()
        self._syncer = None
        if sync_interval_s:
            self._syncer = threading.Thread(target=self._sync_loop, args=(sync_interval_s,),
                                            name="gpudisk-top-recorder-sync", daemon=True)
            self._syncer.start()

    # ------------------------------------------------------------------ the file
    def _open_file(self) -> None:
        path = self.path
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        except IsADirectoryError:
            raise UsageError(f"{path}: is a directory") from None
        except OSError as err:
            raise UsageError(f"cannot write {path}: {err.strerror or err}") from None
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                os.write(fd, frames.preamble(FORMAT_VERSION))
                size = frames.PREAMBLE.size
            else:
                size = self._resume(fd, size)
        except UsageError:
            os.close(fd)
            raise
        except OSError as err:
            os.close(fd)
            raise RuntimeFailure(f"cannot write {path}: {err.strerror or err}") from None
        self._fd, self._size = fd, size
        self._in_segment = 0
        self._session_samples = 0

    def _resume(self, fd: int, size: int) -> int:
        """Check that fd holds a recording we may append to; cut off a torn tail."""
        from gpudisk_top.record.reader import check_preamble

        head = os.pread(fd, frames.PREAMBLE.size, 0)
        if not head.startswith(frames.MAGIC[:len(head)]):
            raise UsageError(f"{self.path} exists and is not a gpudisk-top recording; "
                             "not writing over it")
        version = check_preamble(self.path, head, size)
        if version != FORMAT_VERSION:
            raise UsageError(f"{self.path} is a recording of format version {version}; this "
                             f"recorder writes version {FORMAT_VERSION}: record to another file")
        try:
            buf = mmap.mmap(fd, size, access=mmap.ACCESS_READ)  # no copy of a big file
        except (OSError, ValueError):
            buf = _pread_all(fd, size)
        try:
            found, _ = frames.scan(buf, frames.PREAMBLE.size)
        finally:
            if isinstance(buf, mmap.mmap):
                buf.close()
        good_end = found[-1].end if found else frames.PREAMBLE.size
        first = next((f for f in found if f.kind in frames.SAMPLE_TYPES), None)
        self._file_first_wall_s = first.wall_s if first is not None else None
        if good_end < size:
            os.ftruncate(fd, good_end)
            self.warnings.append(f"{self.path}: cut off a torn tail of {size - good_end} bytes "
                                 "left by a recorder that was stopped while writing")
        return good_end

    def _rotate(self) -> None:
        """Close this file's session, move it to FILE.1 and start a fresh FILE."""
        self._end_session("rotated")
        os.fdatasync(self._fd)
        os.close(self._fd)
        self._fd = None
        self.rotation.rotate()
        self._file_first_wall_s = None
        self._open_file()

    # ------------------------------------------------------------------ writing
    def append(self, sample: Sample) -> None:
        """Write one sample (and the session header before the first).  Thread-safe."""
        with self._lock:
            if self.closed:
                raise RuntimeFailure(f"{self.path}: the recorder is closed")
            if self._in_segment == 0 or self._in_segment >= self.segment_samples:
                self._enc.start_segment()
                self._in_segment = 0
            payload = self._enc.encode(sample)
            kind = frames.KEYFRAME if self._in_segment == 0 else frames.DELTA
            frame = frames.pack(kind, payload, sample.wall_s)
            rot = self.rotation
            if rot is not None and rot.due(self._size, len(frame), self._file_first_wall_s, sample.wall_s):
                try:
                    self._rotate()
                    self.removed += rot.prune(sample.wall_s)
                except OSError as err:
                    raise RuntimeFailure(f"cannot rotate {self.path}: {err.strerror or err}") from None
                if kind == frames.DELTA:  # the new file must start with a keyframe
                    self._enc.start_segment()
                    self._in_segment = 0
                    frame = frames.pack(frames.KEYFRAME, self._enc.encode(sample), sample.wall_s)
            data = frame
            if self._session_samples == 0:
                hdr = json.dumps(complete_header(self.header, sample), allow_nan=False,
                                 default=str).encode()
                data = frames.pack(frames.SESSION, hdr) + frame
            self._write(data)
            if self._file_first_wall_s is None:
                self._file_first_wall_s = sample.wall_s
            self._in_segment += 1
            self._session_samples += 1
            self.samples += 1

    def _write(self, data: bytes) -> None:
        try:
            view = memoryview(data)
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
        except OSError as err:
            # cut off what part of the frame got out, and start over with a keyframe
            try:
                os.ftruncate(self._fd, self._size)
            except OSError:
                pass
            self._in_segment = 0
            raise RuntimeFailure(f"cannot write {self.path}: {err.strerror or err}") from None
        self._size += len(data)
        self._dirty = True

    def _end_session(self, reason: str) -> None:
        if self._fd is None or self._session_samples == 0:
            return
        end = {"reason": reason, "samples": self._session_samples, "ended": iso(time.time())}
        try:
            self._write(frames.pack(frames.END, json.dumps(end).encode()))
        except RuntimeFailure:
            pass  # the samples are safe; only the note that we ended cleanly is missing
        self._session_samples = 0

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
        """End the session (an E frame saying why), sync and close.  Idempotent."""
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
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _pread_all(fd: int, size: int) -> bytes:
    chunks, got = [], 0
    while got < size:
        chunk = os.pread(fd, min(1 << 24, size - got), got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)
