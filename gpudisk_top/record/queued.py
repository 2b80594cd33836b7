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

import threading

from gpudisk_top.deadline import QueueWorker
from gpudisk_top.errors import RuntimeFailure
from gpudisk_top.ratelimit import OncePer
from gpudisk_top.record.header import iso

QUEUE_SAMPLES = 60        # a minute at 1 s: what a short hiccup of the output costs nothing
STALL_AFTER_S = 5.0       # a write that takes longer: the output is said to be stalled
CLOSE_WAIT_S = 3.0        # what close() gives the writer before it gives up on the output


class QueuedRecorder:
    """recorder: a Recorder (record/writer.py), used from the writer thread only once
    given here.  warn(line): where "not recording" goes, once a minute (default: none).
    Its counters (samples, dropped, bytes_written, removed, removed_empty, warnings, path) are the
    Recorder's; lost: samples never queued (the output stalled, the queue full)."""

    def __init__(self, recorder, warn=None, max_queued: int = QUEUE_SAMPLES,
                 stall_after_s: float = STALL_AFTER_S) -> None:
        self.recorder = recorder
        self.stall_after_s = stall_after_s
        self.lost = 0
        self._warn = OncePer(warn) if warn is not None else None
        self._lock = threading.Lock()
        self._gap: list | None = None          # [first wall_s, last wall_s, samples]
        self._error: str | None = None         # why the Recorder dropped the last sample
        self._closed = False
        self._worker = QueueWorker(self._write, "gpudisk-top-recorder-writer",
                                   max(2, max_queued), on_error=self._failed)

    # ------------------------------------------------------------------ the Recorder's
    path = property(lambda self: self.recorder.path)
    samples = property(lambda self: self.recorder.samples)
    dropped = property(lambda self: self.recorder.dropped)
    removed = property(lambda self: self.recorder.removed)
    removed_empty = property(lambda self: self.recorder.removed_empty)
    warnings = property(lambda self: self.recorder.warnings)
    bytes_written = property(lambda self: self.recorder.bytes_written)

    # ------------------------------------------------------------------ sampling side
    def append(self, sample) -> str | None:
        """Queue the sample; never waits on the output.  Returns status() (None while
        recording keeps up).  Raises RuntimeFailure once closed."""
        with self._lock:
            if self._closed:
                raise RuntimeFailure(f"{self.path}: the recorder is closed")
            # after lost samples their gap goes first, in the same put (all or none)
            items = ((tuple(self._gap),) if self._gap is not None else ()) + (sample,)
            if self._worker.put(*items):
                self._gap = None
            else:
                self.lost += 1
                if self._gap is None:
                    self._gap = [sample.wall_s, sample.wall_s, 0]
                self._gap[1] = sample.wall_s
                self._gap[2] += 1
        stalled = self._stalled()
        if stalled is not None and self._warn is not None:
            # (what the disk refuses the Recorder says itself, through its own warn)
            self._warn("not-recording", f"not recording {self.path}: {stalled}")
        return stalled or self._error

    def status(self) -> str | None:
        """Why samples are not being recorded now (the output stalled, the queue full,
        the disk refusing them), else None."""
        return self._stalled() or self._error

    def _stalled(self) -> str | None:
        busy_s = self._worker.busy_s
        gap = self._gap
        if busy_s > self.stall_after_s:
            lost = f"; {gap[2]} samples since {iso(gap[0])} not recorded" if gap else ""
            return (f"the output has taken no write for {busy_s:.0f} s, "
                    f"{self._worker.queued} samples queued{lost}")
        if gap is not None:
            return f"the output stalled: {gap[2]} samples not recorded"
        return None

    # ------------------------------------------------------------------ writer side
    def _write(self, item) -> None:
        if isinstance(item, tuple):
            self.recorder.mark_gap(*item)
        else:
            self._error = self.recorder.append(item)

    def _failed(self, _item, err: Exception) -> None:
        self._error = f"{type(err).__name__}: {err}"

    def close(self, reason: str = "closed", wait_s: float = CLOSE_WAIT_S) -> bool:
        """Have the writer write what is queued (and the gap, if samples were lost at the
        end) and close the Recorder; wait for it wait_s at most.  True when it did; False
        when the output did not answer in time (said through warn).  Idempotent."""
        with self._lock:
            first = not self._closed
            self._closed = True
            if first and self._gap is not None:
                # the end's gap: queued past the bound, there is nothing after it
                self._worker.max_queued += 1
                self._worker.put(tuple(self._gap))
                self._gap = None
        done = self._worker.close(wait_s, last=lambda: self.recorder.close(reason))
        if not done and first and self._warn is not None:
            self._warn("not-closed", f"{self.path}: the output took no write for "
                       f"{wait_s:g} s; {self._worker.queued} samples queued were not written "
                       "(what was written before stays)")
        return done

    def __enter__(self) -> "QueuedRecorder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
