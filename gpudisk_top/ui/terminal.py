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


@contextlib.contextmanager
def screen_on_terminal():
    """For the app's run: draw on the terminal even when stderr is redirected."""
    real = sys.__stderr__
    try:
        redirect = not os.isatty(real.fileno()) and os.isatty(sys.__stdout__.fileno())
    except (AttributeError, ValueError, OSError):
        redirect = False
    if not redirect:
        yield
        return
    screen = os.fdopen(os.dup(sys.__stdout__.fileno()), "w", encoding="utf-8")
    sys.__stderr__ = screen
    try:
        yield
    finally:
        sys.__stderr__ = real
        with contextlib.suppress(OSError):
            screen.close()


def terminal_gone() -> str | None:
    """Why this process cannot use its terminal any more (hung up, or not in its
    foreground, where every read fails at once); None while all is well, and when stdin
    is not a terminal (the test harness, a pipe) or not this process's controlling
    terminal (`setsid`: its foreground cannot be known, and reads still work)."""
    try:
        fd = sys.__stdin__.fileno()
        if not os.isatty(fd):
            return None
        if os.tcgetpgrp(fd) != os.getpgrp():
            return "not in the foreground of its terminal"
    except OSError as err:
        if err.errno == errno.ENOTTY:
            return None
        return "its terminal is gone"
    except (ValueError, AttributeError):
        return "its terminal is gone"
    return None
