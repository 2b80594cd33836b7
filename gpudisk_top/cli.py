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
    real_stdout = sys.stdout
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
        sys.stdout = real_stdout


def _main(argv: list[str]) -> int:
    try:
        if argv and argv[0] in COMMANDS:
            module = importlib.import_module(COMMANDS[argv[0]][0])
            args = module.build_parser(f"gpudisk-top {argv[0]}").parse_args(argv[1:])
            return module.run(args)
        return default.run(default.build_parser().parse_args(argv))
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
