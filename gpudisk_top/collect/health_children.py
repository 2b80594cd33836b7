"""One smartctl run, bounded: our own child (Children: known by its Popen object, killed
only while not reaped), stdin closed, no shell, killed past SMARTCTL_TIMEOUT_S or past
MAX_SMARTCTL_BYTES of answer (one that writes for ever costs 4 MiB), reaped with its CPU
time (run_smartctl).  A smartctl killed by a signal is no reading, and says so.  What its
answer means is collect/health_smartctl.py's.
"""

from __future__ import annotations

import os
import resource
import selectors
import signal
import subprocess
import threading
import time

SMARTCTL_TIMEOUT_S = 30.0   # an HDD that spins up can take 10 s; a wedged bridge forever
# The most of smartctl's answer read: a real `smartctl --json=o -x` is tens of kB (an HDD
# with a long error log ~150 kB).  A smartctl that writes without end (a wrapper gone
# wrong, a hostile one on PATH) took serve to 6 GB in 14 s; past this it is stopped.
MAX_SMARTCTL_BYTES = 4 * 2**20


class Children:
    """The smartctl processes a poller has started and not yet reaped.  kill_all() stops
    them at close: each is known by its own Popen object and signalled only while it is
    not reaped (reaping and signalling hold one lock, so a PID the kernel has handed to
    another process is never signalled); nothing else is ever signalled."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen] = set()
        self.closed = False

    def start(self, argv: list[str]) -> subprocess.Popen | None:
        """A started child, or None once closed.  Raises OSError when it cannot run."""
        with self._lock:
            if self.closed:
                return None
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, close_fds=True)
            self._procs.add(proc)
            return proc

    def reap(self, proc: subprocess.Popen) -> resource.struct_rusage | None:
        """Reap proc if it has exited, setting its returncode; its rusage (the CPU it
        used), or None while it runs."""
        with self._lock:
            if proc.returncode is not None:
                self._procs.discard(proc)
                return None
            try:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            except ChildProcessError:       # reaped by someone else: a bug, said as one
                self._procs.discard(proc)
                raise
            if pid == 0:
                return None
            proc.returncode = os.waitstatus_to_exitcode(status)
            self._procs.discard(proc)
            return usage

    def kill(self, proc: subprocess.Popen) -> None:
        with self._lock:
            if proc.returncode is None:
                os.kill(proc.pid, signal.SIGKILL)

    def kill_all(self) -> None:
        """Kill every child still running; start() starts none after this."""
        with self._lock:
            self.closed = True
            for proc in self._procs:
                if proc.returncode is None:
                    os.kill(proc.pid, signal.SIGKILL)


_REAP_WAIT_S = 5.0   # for a killed child to go: one in an ioctl of a wedged device may not


def run_smartctl(argv: list[str], timeout_s: float, children: Children | None = None
                  ) -> tuple[int | None, str, str | None, float | None]:
    """(exit status, stdout, None, the child's CPU seconds), or (None, "", why no data,
    its CPU seconds or None).  A child killed by a signal (close(), the OOM killer) is
    no reading, and says which signal; one that does not answer in timeout_s is killed
    (our own child: `children` knows it by its Popen object) and says so."""
    children = children if children is not None else Children()
    try:
        proc = children.start(argv)
    except OSError as err:
        return None, "", f"cannot run smartctl: {err.strerror or err}", None
    if proc is None:
        return None, "", "not read: gpudisk-top is stopping", None
    deadline = time.monotonic() + timeout_s
    chunks: list[bytes] = []
    timed_out = flooded = False
    total = 0
    try:
        fd = proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    timed_out = True
                    break
                data = os.read(fd, 1 << 16)
                if not data:
                    break
                total += len(data)
                if total > MAX_SMARTCTL_BYTES:
                    flooded = True
                    break
                chunks.append(data)
    except BaseException:
        children.kill(proc)     # no child left behind, whatever went wrong here
        _reap(proc, children, _REAP_WAIT_S)
        raise
    finally:
        proc.stdout.close()
    if timed_out or flooded:
        chunks.clear()
        children.kill(proc)
        cpu_s = _reap(proc, children, _REAP_WAIT_S)
        if flooded:
            return None, "", (f"smartctl wrote more than {MAX_SMARTCTL_BYTES // 2**20} MiB "
                              "(stopped; a real answer is tens of kB): no reading"), cpu_s
        return None, "", f"smartctl did not answer in {timeout_s:g} s (stopped)", cpu_s
    # its answer is written: it exits now (one that does not is stopped)
    cpu_s = _reap(proc, children, _REAP_WAIT_S)
    if proc.returncode is None:
        children.kill(proc)
        cpu_s = _reap(proc, children, _REAP_WAIT_S)
        return None, "", "smartctl did not exit after its answer (stopped)", cpu_s
    rc = proc.returncode
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return None, "", f"smartctl was killed by {name}: no reading", cpu_s
    return rc, b"".join(chunks).decode("utf-8", "replace"), None, cpu_s


def _reap(proc: subprocess.Popen, children: Children, wait_s: float) -> float | None:
    """Wait up to wait_s for proc to end and reap it: its CPU seconds (None: unknown, or
    still running)."""
    gone_by = time.monotonic() + wait_s
    while True:
        usage = children.reap(proc)
        if usage is not None:
            return usage.ru_utime + usage.ru_stime
        if proc.returncode is not None or time.monotonic() >= gone_by:
            return None
        time.sleep(0.002)
