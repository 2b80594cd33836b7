"""A Recorder written from a thread of its own: the sampling loop never waits on the disk.

    rec = QueuedRecorder(Recorder(path, header), warn=warn)
    why = rec.append(sample)      # never blocks: None, or why samples are not recorded now
    rec.close("SIGTERM")          # waits CLOSE_WAIT_S at most, then gives up on the output

A write to a stalled output (a hung NFS or FUSE server, a frozen filesystem, a disk that
stops answering) blocks in the kernel for as long as it likes; done on the sampling
thread, it would stop sampling, the screen, the exporter and the alerts with it.  Here
append() only queues the sample (QUEUE_SAMPLES at most); the writer thread hands them to
the Recorder in order.  While the output takes no write for STALL_AFTER_S, or the queue
is full, status() says why nothing is recorded (the dashboard's header shows it as NOT
RECORDING); the samples that found the queue full are not kept, and once the output
answers again the recording gets a gap there (Recorder.mark_gap: the session ends with
an E frame holding "gap"), so that `report` shows the time that was not recorded instead
of rates across it.  Nothing already queued is dropped.

close() gives the writer CLOSE_WAIT_S to write what is queued and close the Recorder,
then returns anyway (False): a command asked to stop (SIGTERM, SIGINT, q) stops within a
few seconds whatever the output does; the writer, a daemon thread, is left in its write.
"""

from __future__ import annotations

import collections
import threading
import time

from gpudisk_top.errors import RuntimeFailure
from gpudisk_top.ratelimit import OncePer
from gpudisk_top.record.header import iso

QUEUE_SAMPLES = 60        # a minute at 1 s: what a short hiccup of the output costs nothing
STALL_AFTER_S = 5.0       # a write that takes longer: the output is said to be stalled
CLOSE_WAIT_S = 3.0        # what close() gives the writer before it gives up on the output


class QueuedRecorder:
    """recorder: a Recorder (record/writer.py), used from the writer thread only once
    given here.  warn(line): where "not recording" goes, once a minute (default: none).
    Its counters (samples, dropped, bytes_written, removed, warnings, path) are the
    Recorder's; lost: samples never queued (the output stalled, the queue full)."""

    def __init__(self, recorder, warn=None, max_queued: int = QUEUE_SAMPLES,
                 stall_after_s: float = STALL_AFTER_S) -> None:
        self.recorder = recorder
        self.max_queued = max(2, max_queued)
        self.stall_after_s = stall_after_s
        self.lost = 0
        self._warn = OncePer(warn) if warn is not None else None
        self._items: collections.deque = collections.deque()
        self._cond = threading.Condition()
        self._gap: list | None = None          # [first wall_s, last wall_s, samples]
        self._busy_since: float | None = None  # monotonic, while the writer is in a write
        self._error: str | None = None         # why the Recorder dropped the last sample
        self._closing: str | None = None
        self._thread = threading.Thread(target=self._run, name="gpudisk-top-recorder-writer",
                                        daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ the Recorder's
    path = property(lambda self: self.recorder.path)
    samples = property(lambda self: self.recorder.samples)
    dropped = property(lambda self: self.recorder.dropped)
    removed = property(lambda self: self.recorder.removed)
    warnings = property(lambda self: self.recorder.warnings)
    bytes_written = property(lambda self: self.recorder.bytes_written)

    # ------------------------------------------------------------------ sampling side
    def append(self, sample) -> str | None:
        """Queue the sample; never waits on the output.  Returns status() (None while
        recording keeps up).  Raises RuntimeFailure once closed."""
        with self._cond:
            if self._closing is not None:
                raise RuntimeFailure(f"{self.path}: the recorder is closed")
            if len(self._items) >= self.max_queued - 1:      # room for a gap's mark too
                self.lost += 1
                if self._gap is None:
                    self._gap = [sample.wall_s, sample.wall_s, 0]
                self._gap[1] = sample.wall_s
                self._gap[2] += 1
            else:
                self._put_gap()
                self._items.append(sample)
                self._cond.notify()
        stalled = self._stalled()
        if stalled is not None and self._warn is not None:
            # (what the disk refuses the Recorder says itself, through its own warn)
            self._warn("not-recording", f"not recording {self.path}: {stalled}")
        return stalled or self._error

    def _put_gap(self) -> None:
        if self._gap is not None:
            self._items.append(tuple(self._gap))
            self._gap = None

    def status(self) -> str | None:
        """Why samples are not being recorded now (the output stalled, the queue full,
        the disk refusing them), else None."""
        return self._stalled() or self._error

    def _stalled(self) -> str | None:
        busy = self._busy_since
        if busy is not None and time.monotonic() - busy > self.stall_after_s:
            gap = self._gap
            lost = f"; {gap[2]} samples since {iso(gap[0])} not recorded" if gap else ""
            return (f"the output has taken no write for {time.monotonic() - busy:.0f} s, "
                    f"{len(self._items)} samples queued{lost}")
        gap = self._gap
        if gap is not None:
            return f"the output stalled: {gap[2]} samples not recorded"
        return None

    # ------------------------------------------------------------------ writer side
    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._items and self._closing is None:
                    self._cond.wait()
                if not self._items:
                    break
                item = self._items.popleft()
            self._busy_since = time.monotonic()
            try:
                if isinstance(item, tuple):
                    self.recorder.mark_gap(*item)
                else:
                    self._error = self.recorder.append(item)
            except Exception as err:  # noqa: BLE001 - the writer outlives one bad write
                self._error = f"{type(err).__name__}: {err}"
            finally:
                self._busy_since = None
        try:
            self.recorder.close(self._closing)
        except Exception as err:  # noqa: BLE001
            self._error = f"{type(err).__name__}: {err}"

    def close(self, reason: str = "closed", wait_s: float = CLOSE_WAIT_S) -> bool:
        """Have the writer write what is queued (and the gap, if samples were lost at the
        end) and close the Recorder; wait for it wait_s at most.  True when it did; False
        when the output did not answer in time (said through warn).  Idempotent."""
        with self._cond:
            if self._closing is None:
                self._closing = reason
                self._put_gap()
                self._cond.notify()
        self._thread.join(wait_s)
        if not self._thread.is_alive():
            return True
        if self._warn is not None:
            self._warn("not-closed", f"{self.path}: the output took no write for "
                       f"{wait_s:g} s; {len(self._items)} samples queued were not written "
                       "(what was written before stays)")
        return False

    def __enter__(self) -> "QueuedRecorder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
