"""Which stream the dashboard draws on, and whether its terminal is still there.

Textual draws on sys.__stderr__.  Run as `gpudisk-top 2>warnings.log` (stdout still the
terminal), the screen would go into the file and the terminal would stay blank; so for
the app's run sys.__stderr__ is pointed at the terminal (a duplicate of stdout), while
sys.stderr stays the file, where the lines said after the app ends go.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import termios


class _Screen:
    """The stream Textual draws on, less the failures of a terminal that hung up: a write
    or flush it refuses (EIO) is dropped.  Else Textual's writer thread dies of it with a
    traceback on stderr, and its queue of 30 writes, no longer read, fills up: the next
    draw, or the exit, would wait for ever."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError:
            return len(text)

    def flush(self) -> None:
        with contextlib.suppress(OSError):
            self._stream.flush()

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextlib.contextmanager
def screen_on_terminal():
    """For the app's run: draw on the terminal even when stderr is redirected, and lose
    only the drawing when the terminal hangs up."""
    real = sys.__stderr__
    try:
        redirect = not os.isatty(real.fileno()) and os.isatty(sys.__stdout__.fileno())
    except (AttributeError, ValueError, OSError):
        redirect = False
    screen = os.fdopen(os.dup(sys.__stdout__.fileno()), "w", encoding="utf-8") if redirect else None
    sys.__stderr__ = _Screen(screen or real) if (screen or real) is not None else real
    try:
        yield
    finally:
        sys.__stderr__ = real
        if screen is not None:
            with contextlib.suppress(OSError):
                screen.close()


def terminal_gone() -> str | None:
    """Why this process cannot use its terminal any more (hung up, or not in its
    foreground, where every read fails at once); None while all is well, and when stdin
    is not a terminal (the test harness, a pipe) or not this process's controlling
    terminal (`setsid`: its foreground cannot be known, and reads still work)."""
    try:
        fd = sys.__stdin__.fileno()
        try:
            termios.tcgetattr(fd)
        except termios.error as err:
            # a hung-up terminal answers every ioctl with EIO (so isatty() says it is no
            # terminal): under nohup no SIGHUP comes, and this is all that tells
            return "its terminal is gone" if err.args[0] == errno.EIO else None
        if os.tcgetpgrp(fd) != os.getpgrp():
            return "not in the foreground of its terminal"
    except OSError as err:
        if err.errno == errno.ENOTTY:
            return None
        return "its terminal is gone"
    except (ValueError, AttributeError):
        return "its terminal is gone"
    return None
