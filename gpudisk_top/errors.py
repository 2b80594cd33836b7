"""The two failures a user sees, each printed as one line by cli.main(), and warnings.

Exit status (an API): 0 success; 1 RuntimeFailure (nothing could be read or done, or an
internal error); 2 UsageError (bad usage or bad input).
"""

import sys

from gpudisk_top.textsafe import printable


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit status 2."""


class RuntimeFailure(Exception):
    """Nothing could be read or done: printed as one line, exit status 1."""


def warn(line: str) -> None:
    """One warning line on stderr ("gpudisk-top: warning: ..."), made printable.  Never
    raises: a closed or full stderr loses the warning, not the work."""
    _say("warning: ", line)


def note(line: str) -> None:
    """One line on stderr saying what the tool did ("gpudisk-top: ..."), as warn()."""
    _say("", line)


def _say(prefix: str, line: str) -> None:
    if sys.stderr is None:                  # started with stderr closed
        return
    try:
        # one write, the newline in it: print() writes the line and its end apart, and a
        # line from another thread (the recorder's writer) could fall between them
        sys.stderr.write(f"gpudisk-top: {prefix}{printable(str(line))}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
