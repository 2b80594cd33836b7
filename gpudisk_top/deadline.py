"""Work that may hang, done on a daemon thread and waited for at most a deadline.

An NVML call into a wedged driver, a statvfs of a hung NFS mount: either can block for
good, and the sampler must not block with it.  A DeadlineWorker runs its job on a thread
of its own when asked, and the asker waits at most the timeout:

    worker = DeadlineWorker(collect, name="gpudisk-top-gpu")
    done, result = worker.ask(timeout_s=0.5)   # (False, None) while the job has not ended
    worker.busy_s                              # how long the job in progress has taken

While a job hangs no other is started (it would only queue behind it); asking returns at
once.  The thread is a daemon: a job that never returns never keeps the process from
exiting, and close() does not wait for it.  UI-free, used by collect/ and watch/.
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
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            self._asked.wait()
            self._asked.clear()
            if self._closed:
                if self._closing is not None:
                    self._closing()
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
        behind: closing would only queue behind it."""
        with self._lock:
            busy = self._busy_since is not None
            self._closed = True
            self._closing = closing
            self._answered.clear()
        if busy:
            return
        self._asked.set()
        self._answered.wait(wait_s)
