"""What a fired alert does: a log line, a file written, a command run without a shell.

Commands are started and never waited for in the sampler thread: the engine polls them on
each update, reports a non-zero exit status or a timeout as a warning, and kills one that
runs past its rule's timeout_s.  A rule whose previous command still runs does not start
another.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import tempfile
import time

from gpudisk_top.alerts.rules import _PLACEHOLDER_RE


def iso_time(wall_s: float) -> str:
    return dt.datetime.fromtimestamp(wall_s).astimezone().isoformat(timespec="milliseconds")


def log_line(wall_s: float, message: str) -> str:
    """'2026-01-01T00:00:03.000+00:00 gpudisk-top alert disk-busy: ...' (no newline)."""
    return f"{iso_time(wall_s)} gpudisk-top alert {' '.join(message.split())}"


def append_line(path: str, line: str) -> None:
    """Append one line to a file.  Raises OSError."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def write_details(path: str, details: dict) -> None:
    """(Re)write `path` atomically with one JSON object: a reader never sees half a file.
    Raises OSError."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".gpudisk-top-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(details, f, sort_keys=True)
            f.write("\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def expand_argv(argv: tuple[str, ...], values: dict[str, str], pids: list[int]) -> list[str]:
    """Placeholders replaced literally (the result is never parsed again); an argument
    that is exactly "{pids}" becomes one argument per PID."""
    out: list[str] = []
    for arg in argv:
        if arg == "{pids}":
            out.extend(str(p) for p in pids)
        else:
            out.append(_PLACEHOLDER_RE.sub(lambda m: values.get(m.group(1), m.group(0)), arg))
    return out


def needs_pids(argv: tuple[str, ...]) -> bool:
    return any(re.search(r"\{pids?\}", a) for a in argv)


class CommandRunner:
    """Starts alert commands and keeps track of them until they exit."""

    def __init__(self, warn, popen=subprocess.Popen, clock=time.monotonic) -> None:
        self.warn = warn
        self._popen = popen
        self._clock = clock
        self._running: dict[str, tuple] = {}   # rule -> (process, started, timeout_s, argv0)
        self.started = 0

    def start(self, rule: str, argv: list[str], env: dict[str, str], timeout_s: float,
              output: str | None = None) -> bool:
        """Start argv (no shell) with env; output appended to the file `output` if given,
        else discarded.  False (and a warning) when it cannot start or still runs."""
        self.poll()
        if rule in self._running:
            self.warn(f"alert {rule}: its previous command ({self._running[rule][3]}) still "
                      "runs; not started again")
            return False
        out = subprocess.DEVNULL
        try:
            if output is not None:
                out = open(output, "ab")
            proc = self._popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                               stderr=subprocess.STDOUT if output is not None else out,
                               close_fds=True, start_new_session=True)
        except OSError as err:
            self.warn(f"alert {rule}: cannot run {argv[0]}: {err.strerror or err}")
            return False
        finally:
            if out is not subprocess.DEVNULL:
                out.close()
        self._running[rule] = (proc, self._clock(), timeout_s, os.path.basename(argv[0]))
        self.started += 1
        return True

    def poll(self) -> None:
        """Reap commands that ended; kill those past their timeout."""
        now = self._clock()
        for rule, (proc, started, timeout_s, name) in list(self._running.items()):
            rc = proc.poll()
            if rc is None:
                if now - started > timeout_s:
                    proc.kill()
                    proc.wait()
                    del self._running[rule]
                    self.warn(f"alert {rule}: command {name} killed after {timeout_s:g} s")
                continue
            del self._running[rule]
            if rc != 0:
                how = f"signal {-rc}" if rc < 0 else f"status {rc}"
                self.warn(f"alert {rule}: command {name} exited with {how}")

    @property
    def running(self) -> int:
        self.poll()
        return len(self._running)

    def close(self, wait_s: float = 5.0) -> None:
        """Wait up to wait_s for commands still running, then kill them."""
        deadline = self._clock() + wait_s
        for rule, (proc, _, _, name) in list(self._running.items()):
            try:
                proc.wait(max(0.0, deadline - self._clock()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                del self._running[rule]
                self.warn(f"alert {rule}: command {name} still ran at exit; killed")
        self.poll()
        self._running.clear()
