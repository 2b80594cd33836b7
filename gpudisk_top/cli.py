"""Command line: dispatch to a command (commands/; the one without a name, the dashboard
and --once, is commands/default.py), and turn every failure into one line.

Exit status (an API): 0 success; 1 nothing at all could be read, or an internal error;
2 bad usage or bad input.  No traceback reaches the user unless GPUDISK_TOP_DEBUG=1.
"""

from __future__ import annotations

import importlib
import os
import sys

from gpudisk_top.commands import COMMANDS, default
from gpudisk_top.errors import RuntimeFailure, UsageError
from gpudisk_top.textsafe import printable
from gpudisk_top.ui import glyphs

# The commands that draw glyphs (their screens, or --once's and the report's text): they
# take --ascii.  Each interactive one, with what to use where a terminal cannot draw it.
ASCII_COMMANDS = ("", "replay", "fleet", "report")
DATA_COMMANDS = ("export",)   # its standard output is data (-o -): written as it is
_PLAIN_INSTEAD = {"": "`gpudisk-top --once` for plain text",
                  "replay": "`gpudisk-top report FILE` for plain text",
                  "fleet": "`gpudisk-top fleet --once` for plain text"}


class _Stdout:
    """sys.stdout while a command runs: a write the system refuses (a full disk behind a
    redirect, /dev/full, a hung-up terminal) becomes a one-line RuntimeFailure instead of
    an internal error.  A reader that left (BrokenPipeError) stays what it is."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def _refused(self, err: OSError) -> RuntimeFailure:
        return RuntimeFailure(f"cannot write to standard output: {err.strerror or err}")

    def write(self, text: str) -> int:
        if self._stream is None:            # started with stdout closed (`>&-`)
            raise RuntimeFailure("cannot write to standard output: it is closed")
        if glyphs.ascii_on():
            text = glyphs.to_ascii(text)
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as err:
            raise self._refused(err) from None

    def flush(self) -> None:
        if self._stream is None:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as err:
            raise self._refused(err) from None

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


class _AsciiStderr:
    """sys.stderr while a run draws in ASCII: its warnings' glyphs in ASCII too."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(glyphs.to_ascii(text))

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null so that the interpreter's own flush at exit finds nowhere
    to fail (else it prints "Exception ignored ..." after our one line)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno())
        os.close(devnull)
    except (OSError, AttributeError, ValueError):
        pass


def _error(err: Exception) -> None:
    try:
        print(f"gpudisk-top: error: {printable(str(err))}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    real_stdout, real_stderr = sys.stdout, sys.stderr
    sys.stdout = _Stdout(real_stdout)
    try:
        status = _main(argv)
        sys.stdout.flush()
        return status
    except RuntimeFailure as err:
        if "standard output" in str(err):
            _silence_stdout()
        _error(err)
        return 1
    except BrokenPipeError:
        # `gpudisk-top --once | head`: the reader left; nothing to report
        _silence_stdout()
        return 0
    finally:
        sys.stdout, sys.stderr = real_stdout, real_stderr
        glyphs.use_ascii(False)


def _main(argv: list[str]) -> int:
    try:
        name = argv[0] if argv and argv[0] in COMMANDS else ""
        if name:
            module = importlib.import_module(COMMANDS[name][0])
            parser = module.build_parser(f"gpudisk-top {name}")
        else:
            module, parser = default, default.build_parser()
        if name in ASCII_COMMANDS:
            parser.add_argument("--ascii", action="store_true",
                                help="draw in ASCII only (the default where the locale is "
                                     "not UTF-8, or TERM is linux or vt100-like)")
        args = parser.parse_args(argv[1:] if name else argv)
        _choose_glyphs(name, args)
        return module.run(args)
    except UsageError as err:
        _error(err)
        return 2
    except (RuntimeFailure, BrokenPipeError):
        raise
    except KeyboardInterrupt:
        return 130
    except Exception as err:  # never a traceback for the user
        if os.environ.get("GPUDISK_TOP_DEBUG"):
            raise
        try:
            print(f"gpudisk-top: internal error: {type(err).__name__}: {printable(str(err))} "
                  "(run with GPUDISK_TOP_DEBUG=1 for details)", file=sys.stderr)
        except (OSError, ValueError):
            pass
        return 1


def _interactive(name: str, args) -> bool:
    """Whether the command of `name` and `args` draws a screen (not --once, a list, ...)."""
    return (name in _PLAIN_INSTEAD and not getattr(args, "once", False)
            and not getattr(args, "list_scenarios", False))


def _choose_glyphs(name: str, args) -> None:
    """Once, before anything is drawn or printed: refuse a screen on TERM=dumb, and draw in
    ASCII where asked or where the locale or terminal cannot draw UTF-8 (said in one line
    where a screen is drawn; --once's text just comes in ASCII).  Raises UsageError."""
    if name in DATA_COMMANDS:
        return
    interactive = _interactive(name, args)
    if interactive and glyphs.dumb_terminal():
        raise UsageError(f"TERM=dumb: this terminal cannot draw a screen; use "
                         f"{_PLAIN_INSTEAD[name]}")
    reason = None if getattr(args, "ascii", False) else glyphs.ascii_reason()
    if not (getattr(args, "ascii", False) or reason):
        return
    glyphs.use_ascii(True)
    sys.stderr = _AsciiStderr(sys.stderr)
    if interactive and reason:
        from gpudisk_top.errors import note

        note(f"drawing in ASCII: {reason} (--ascii chooses it; a UTF-8 locale such as "
             "LANG=C.UTF-8 lifts it)")
