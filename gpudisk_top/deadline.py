"""Work that may hang, done on a daemon thread and waited for at most a deadline.

An NVML call into a wedged driver, a statvfs of a hung NFS mount: either can block for
good, and the sampler must not block with it.  A DeadlineWorker runs its job on a thread
of its own when asked, and the asker waits at most the timeout:

    worker = DeadlineWorker(collect, name="gpudisk-top-gpu")
    done, result = worker.ask(timeout_s=0.5)   # (False, None) while the job has not ended
    worker.busy_s                              # how long the job in progress has taken

While a job hangs no other is started (it would only queue behind it); asking returns at
once.  The thread is a daemon: a job that never returns never keeps the process from
exiting, and close() does not wait for it.  UI-free, used by collect/ and watch/; QueueWorker (below) by record/ and alerts/.
"""

from __future__ import annotations

import threading
import time
from typing import Callable


class DeadlineWorker:
    def __init__(self, job: Callable[[], object], name: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._job = job
        self._clock = clock
        self._lock = threading.Lock()
        self._asked = threading.Event()
        self._answered = threading.Event()
        self._result: object = None
        self._has_result = False
        self._busy_since: float | None = None
        self._closing: Callable[[], None] | None = None
        self._closed = False
        self._ended = False          # the thread has run the closing and returned
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            self._asked.wait()
            self._asked.clear()
            if self._closed:
                if self._closing is not None:
                    self._closing()
                with self._lock:
                    self._ended = True
                self._answered.set()
                return
            try:
                result = self._job()
            except Exception as err:  # noqa: BLE001 - handed to the asker, the thread lives on
                result = err
            with self._lock:
                self._result, self._has_result = result, True
                self._busy_since = None
            self._answered.set()

    def start(self) -> bool:
        """Start a job unless one is still running.  True when one was started."""
        with self._lock:
            if self._busy_since is not None or self._closed:
                return False
            self._busy_since = self._clock()
            self._result, self._has_result = None, False
            self._answered.clear()
        self._asked.set()
        return True

    def wait(self, timeout_s: float) -> tuple[bool, object]:
        """(True, the job's result or the exception it raised) once it ended, within
        timeout_s; (False, None) while it runs."""
        self._answered.wait(max(0.0, timeout_s))
        with self._lock:
            return (True, self._result) if self._has_result else (False, None)

    def ask(self, timeout_s: float) -> tuple[bool, object]:
        """Start a job (unless one still runs) and wait for it at most timeout_s."""
        if not self.start():
            return False, None
        return self.wait(timeout_s)

    @property
    def busy_s(self) -> float | None:
        """How long the job in progress has taken, or None when none is."""
        with self._lock:
            return None if self._busy_since is None else self._clock() - self._busy_since

    def close(self, closing: Callable[[], None] | None = None, wait_s: float = 2.0) -> None:
        """End the thread; `closing` runs on it first (a library's shutdown belongs to
        the thread that used it), waited for at most wait_s.  A job that hangs is left
        behind: closing would only queue behind it.  Closing again once the thread has
        ended returns at once (nobody is left to answer: it waited wait_s)."""
        with self._lock:
            if self._ended:
                return
            busy = self._busy_since is not None
            self._closed = True
            self._closing = closing
            self._answered.clear()
        if busy:
            return
        self._asked.set()
        self._answered.wait(wait_s)


class QueueWorker:
    """Writes that may hang (a recording, an alert's log on a stalled filesystem), done in
    order on a daemon thread of their own from a bounded queue: the asker never waits.

        worker = QueueWorker(handle, name="gpudisk-top-recorder-writer", max_queued=60)
        worker.put(item)          # False when the queue is full (nothing queued)
        worker.busy_s             # how long the item in hand has taken (0 when idle)
        worker.close(wait_s=3.0, last=finish)   # finish() on the thread after the queue

    handle(item) runs on the thread; what it raises goes to on_error(item, err) (also on
    the thread), and the thread goes on.  close() waits wait_s at most: True when the
    queue was done and `last` ran, False when an item still hangs (the thread, a daemon,
    is left to it)."""

    def __init__(self, handle: Callable[[object], object], name: str, max_queued: int,
                 on_error: Callable[[object, Exception], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._handle = handle
        self._on_error = on_error
        self._clock = clock
        self.max_queued = max(1, max_queued)
        self._items: list = []
        self._cond = threading.Condition()
        self._busy_since: float | None = None
        self._last: Callable[[], None] | None = None
        self._closing = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def queued(self) -> int:
        return len(self._items)

    @property
    def busy_s(self) -> float:
        since = self._busy_since
        return 0.0 if since is None else self._clock() - since

    def put(self, *items) -> bool:
        """Queue the items, all or none: False (none queued) when they do not fit or the
        worker is closing."""
        with self._cond:
            if self._closing or len(self._items) + len(items) > self.max_queued:
                return False
            self._items.extend(items)
            self._cond.notify()
            return True

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._items and not self._closing:
                    self._cond.wait()
                if not self._items:
                    break
                item = self._items.pop(0)
                self._busy_since = self._clock()
            try:
                self._handle(item)
            except Exception as err:  # noqa: BLE001 - the thread outlives one bad write
                if self._on_error is not None:
                    self._on_error(item, err)
            finally:
                self._busy_since = None
        if self._last is not None:
            try:
                self._last()
            except Exception as err:  # noqa: BLE001 - said like an item's failure
                if self._on_error is not None:
                    self._on_error(None, err)

    def close(self, wait_s: float = 3.0, last: Callable[[], None] | None = None) -> bool:
        """No more items; the queue is done, then last() runs, on the thread.  Waits wait_s
        at most (see the class).  Idempotent."""
        with self._cond:
            if not self._closing:
                self._closing, self._last = True, last
                self._cond.notify()
        self._thread.join(wait_s)
        return not self._thread.is_alive()
