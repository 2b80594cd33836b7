"""When to take the next sample, and how a headless loop is stopped: the one tick policy
and the one signal helper of the dashboard, `--once`, `serve` and `record`.

Ticks lie on a grid of interval_s from the start, on the monotonic clock.  A loop that
falls behind (a slow NVML call, a hung disk read) skips the ticks it missed and takes
the next one on the grid: never a burst of samples to catch up, and the grid never
drifts.  A new interval (the dashboard's +/-) starts a new grid, whose first tick is no
later than the old one's next.
"""

from __future__ import annotations

import math
import os
import select
import signal
import threading
import time



def stepped_interval(interval_s: float, direction: int, choices) -> float:
    """The interval after one +/- key: the next longer (+1) or shorter (-1) of `choices`
    (ascending) than interval_s, or interval_s where there is none.  The one rule of the
    dashboard (session/live.py) and the fleet screen (ui/fleet_app.py), each with its own
    choices; an interval between two (set by --interval) steps to its neighbours."""
    if direction > 0:
        return next((s for s in choices if s > interval_s + 1e-9), interval_s)
    return next((s for s in reversed(choices) if s < interval_s - 1e-9), interval_s)

class Ticker:
    def __init__(self, interval_s: float, now_s: float | None = None) -> None:
        self.interval_s = interval_s
        self._t0_s = time.monotonic() if now_s is None else now_s
        self.ticks = 0          # grid points since the start, the missed ones included

    @property
    def due_s(self) -> float:
        """The monotonic time of the current tick."""
        return self._t0_s + self.ticks * self.interval_s

    def advance(self, now_s: float | None = None) -> float:
        """Move past the tick just served: to the next one, or when that one has gone by,
        to the first still ahead (the missed ones are skipped).  Returns the seconds
        until it."""
        now = time.monotonic() if now_s is None else now_s
        self.ticks += 1
        if now > self.due_s:
            self.ticks = math.ceil((now - self._t0_s) / self.interval_s)
        return max(0.0, self.due_s - now)

    def retime(self, interval_s: float, now_s: float | None = None) -> None:
        """A new interval: a new grid whose next tick is the sooner of the old one's next
        and one new interval from now."""
        now = time.monotonic() if now_s is None else now_s
        due = min(self.due_s, now + interval_s)
        self.interval_s = interval_s
        self._t0_s, self.ticks = due - interval_s, 1


# Every signal whose default action ends the process and that comes from outside it: a
# hang-up (an SSH session dropped, a tmux pane closed), a stop asked for (TERM, INT, QUIT),
# a kill by mistake (USR1, USR2, ALRM, the realtime ones), a limit reached (XCPU), a
# power failure (PWR).  Each stops a command as SIGTERM does, so what it changed on the
# node (kernel.task_delayacct, collect/delayacct.py) is put back.  The faults a process
# raises on itself (SEGV, BUS, ILL, FPE, TRAP, SYS) are no stop request; KILL and STOP
# cannot be caught; PIPE and XFSZ the interpreter ignores from the start; VTALRM and PROF
# come from a process's own timers (a sampling profiler's, which a handler would break).
_ENDING = ("SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGALRM",
           "SIGXCPU", "SIGPWR", "SIGSTKFLT", "SIGIO")
STOP_SIGNALS = tuple(getattr(signal, name) for name in _ENDING if hasattr(signal, name)) + tuple(
    range(signal.SIGRTMIN, signal.SIGRTMAX + 1))


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:          # a realtime signal has no name of its own
        return f"SIGRTMIN+{signum - signal.SIGRTMIN}"


class StopSignals:
    """Each of STOP_SIGNALS sets `reason` (the signal's name) and `signum`, and wakes
    wait() at once; the previous handlers come back on restore().  A signal ignored when
    it is made (`nohup` ignores SIGHUP, a shell's background job SIGINT) stays ignored: the
    user asked for that.  Only the main thread can install handlers: elsewhere none is,
    and wait() is a plain sleep.  Created before anything is changed on the node, so that
    no signal can end the process between the change and its undoing."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.signum: int | None = None
        self._old: dict[int, object] = {}
        self._rfd = self._wfd = None
        self._old_wakeup = -1
        self._notify = None
        if threading.current_thread() is not threading.main_thread():
            return
        self._rfd, self._wfd = os.pipe()
        # poll, not select: a process serving many connections (serve --nodes) has fds
        # past select()'s 1024
        self._poll = select.poll()
        self._poll.register(self._rfd, select.POLLIN)
        os.set_blocking(self._rfd, False)
        os.set_blocking(self._wfd, False)
        self._old_wakeup = signal.set_wakeup_fd(self._wfd, warn_on_full_buffer=False)
        for sig in STOP_SIGNALS:
            try:
                if signal.getsignal(sig) == signal.SIG_IGN:
                    continue
                self._old[sig] = signal.signal(sig, self._handle)
            except (OSError, ValueError):
                continue       # one the platform keeps for itself

    def _handle(self, signum, frame) -> None:
        self.signum = signum
        self.reason = _signal_name(signum)
        notify = self._notify
        if notify is not None:
            try:
                notify(self.reason)
            except RuntimeError:    # the loop has closed since: the flag is enough
                pass

    def call_in(self, loop, stop) -> None:
        """From now on each stop signal also calls stop(reason) on the asyncio `loop` (the
        dashboard's, which sleeps in its selector and never calls wait()); one that came
        before is answered at once.  loop None: no more calls."""
        if loop is None:
            self._notify = None
            return
        self._notify = lambda reason: loop.call_soon_threadsafe(stop, reason)
        if self.reason is not None:
            loop.call_soon(stop, self.reason)

    def wait(self, timeout_s: float) -> None:
        """Sleep timeout_s, or less when a signal comes."""
        if timeout_s <= 0 or self.reason:
            return
        if self._rfd is None:
            time.sleep(timeout_s)
            return
        if self._poll.poll(timeout_s * 1000):
            try:
                while os.read(self._rfd, 512):
                    pass
            except BlockingIOError:
                pass

    def restore(self) -> None:
        self._notify = None
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old = {}
        if self._rfd is not None:
            signal.set_wakeup_fd(self._old_wakeup)
            os.close(self._rfd)
            os.close(self._wfd)
            self._rfd = self._wfd = None
