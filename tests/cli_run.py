"""The command line run as a user runs it, for the tests that judge its output and exit
status: `python -m gpudisk_top ARGS` (the console script's own entry point) from the
repository's root, its output captured, its stdin closed unless the test feeds it (no
test waits on a terminal), and a bound on how long it may take.  One owner for that
subprocess call and for the one-line error a test expects of bad input."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ERROR = "gpudisk-top: error: "


def gdt_argv(*args: str) -> list[str]:
    """The command line that runs gpudisk-top with args in this interpreter."""
    return [sys.executable, "-m", "gpudisk_top", *args]


def gdt(*args: str, timeout: float = 120, text: bool = True, umask: int | None = None,
        **kwargs) -> subprocess.CompletedProcess:
    """gpudisk-top run with args to its end, under `umask` when given; kwargs go to
    subprocess.run (env, cwd, input...).  Raises subprocess.TimeoutExpired past timeout
    seconds (a hang, which the test reports as one)."""
    kwargs.setdefault("cwd", ROOT)
    if "input" not in kwargs:
        kwargs.setdefault("stdin", subprocess.DEVNULL)
    if umask is not None:
        kwargs["preexec_fn"] = lambda: os.umask(umask)
    return subprocess.run(gdt_argv(*args), capture_output=True, text=text, timeout=timeout,
                          **kwargs)


def one_line_error(proc: subprocess.CompletedProcess, status: int, words: str = "") -> str:
    """The error line of a run that must fail with `status` and say so in one line that
    starts 'gpudisk-top: error: ' and holds `words`: no traceback, nothing else on stderr.
    Raises AssertionError otherwise."""
    assert proc.returncode == status, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(ERROR), proc.stderr
    assert words in lines[0], lines[0]
    return lines[0]
