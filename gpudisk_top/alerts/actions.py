"""What a fired alert does: a log line, a file written, a command run without a shell.

Commands are started and never waited for in the sampler thread: the engine polls them on
each update, reports a non-zero exit status or a timeout as a warning, and kills one that
runs past its rule's timeout_s, with every process it started that is still in its
process group (kill_command: `sh -c 'notify & sleep 1000'` leaves no `notify` behind).  At most MAX_RUNNING commands run at once; the others
wait in a queue and start as those end, so sixteen devices that fire together run
sixteen commands, not three.  Per rule and subject at most one command runs and one
waits (the newest): a rule cannot pile up commands.

Files (log, touch) are written through gpudisk_top.outfile: never through a symbolic link
another user planted, with the permissions the umask allows.
"""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import subprocess
import time

from gpudisk_top import outfile
from gpudisk_top.alerts.rules import _PLACEHOLDER_RE
from gpudisk_top.model.vocab import iso_time
from gpudisk_top.textsafe import printable

MAX_RUNNING = 8       # commands running at once, all rules together
MAX_WAITING = 256     # commands waiting to start; beyond this the oldest is dropped
NAMED_AT_EXIT = 5     # subjects named in the warning for commands never run


def log_line(wall_s: float, message: str) -> str:
    """'2026-01-01T00:00:03.000+00:00 gpudisk-top alert disk-busy: ...' (no newline).
    Control characters and line breaks in the message (a verdict's reason, a mountpoint)
    are shown escaped, as on a terminal: `tail -f` on a log file must not be retitled by
    ESC and BEL, nor a reader of the log be handed a line we did not write."""
    return printable(f"{iso_time(wall_s)} gpudisk-top alert {message}")


def append_line(path: str, line: str) -> None:
    """Append one line to a file.  Raises OSError (outfile.OutputError)."""
    outfile.append_text(path, line + "\n", wait=False)   # the sampler's thread: never wait


def write_details(path: str, details: dict) -> None:
    """(Re)write `path` whole with one JSON object: a reader never sees half a file.
    Raises OSError (outfile.OutputError)."""
    with outfile.replaced(path, wait=False) as f:
        json.dump(details, f, sort_keys=True)
        f.write("\n")


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


def kill_command(proc) -> None:
    """SIGKILL a command this runner started and every process still in its process
    group, then reap it.  Each command starts in a session of its own
    (start_new_session), so its group's ID is its PID; while the command is not reaped
    (poll() finds no status: running, or a zombie only we can reap) no other process can
    have that PID, so the group is positively ours.  Once reaped the number may belong to
    anyone, and only the process itself is signalled (a no-op: it has ended).  Children
    that made a group or session of their own left ours on purpose and are not chased.
    Never raises."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    proc.kill()
    proc.wait()


def needs_pids(argv: tuple[str, ...]) -> bool:
    return any(re.search(r"\{pids?\}", a) for a in argv)


class CommandRunner:
    """Starts alert commands and keeps track of them until they exit.  `warn(kind, line)`
    gets one line per problem; kind groups repeats (the engine says them once a minute)."""

    def __init__(self, warn, popen=subprocess.Popen, clock=time.monotonic,
                 max_running: int = MAX_RUNNING, max_waiting: int = MAX_WAITING) -> None:
        self.warn = warn
        self._popen = popen
        self._clock = clock
        self.max_running = max_running
        self.max_waiting = max_waiting
        # (rule, subject) -> (process, started, timeout_s, argv0)
        self._running: dict[tuple[str, str], tuple] = {}
        # (rule, subject) -> (argv, env, timeout_s, output), oldest first
        self._waiting: collections.OrderedDict = collections.OrderedDict()
        self.started = 0

    def start(self, rule: str, argv: list[str], env: dict[str, str], timeout_s: float,
              output: str | None = None, subject: str = "") -> bool:
        """Start argv (no shell) with env, or queue it; output appended to the file
        `output` if given, else discarded.  True when it started now."""
        key = (rule, subject)
        self.poll()
        if key in self._running:
            self.warn(f"{rule}:busy", f"alert {rule}: its previous command "
                      f"({self._running[key][3]}) for {subject or 'the node'} still runs; "
                      "this one starts when it ends")
        self._waiting.pop(key, None)              # the newest replaces one still waiting
        self._waiting[key] = (argv, env, timeout_s, output)
        while len(self._waiting) > self.max_waiting:
            (old_rule, old_subject), _ = self._waiting.popitem(last=False)
            self.warn(f"{old_rule}:dropped", f"alert {old_rule}: more than "
                      f"{self.max_waiting} commands wait; the oldest (for "
                      f"{old_subject or 'the node'}) is not run")
        self._start_waiting()
        return key in self._running and key not in self._waiting

    def _spawn(self, key, argv, env, timeout_s, output) -> bool:
        rule = key[0]
        out = subprocess.DEVNULL
        try:
            if output is not None:
                out = os.fdopen(outfile.open_append(output, wait=False), "ab")
            proc = self._popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                               stderr=subprocess.STDOUT if output is not None else out,
                               close_fds=True, start_new_session=True)
        except OSError as err:
            self.warn(f"{rule}:start", f"alert {rule}: cannot run {argv[0]}: "
                      f"{err.strerror or err}")
            return False
        finally:
            if out is not subprocess.DEVNULL:
                out.close()
        self._running[key] = (proc, self._clock(), timeout_s, os.path.basename(argv[0]))
        self.started += 1
        return True

    def _start_waiting(self) -> None:
        for key in list(self._waiting):
            if len(self._running) >= self.max_running:
                return
            if key in self._running:
                continue
            argv, env, timeout_s, output = self._waiting.pop(key)
            self._spawn(key, argv, env, timeout_s, output)

    def poll(self) -> None:
        """Reap commands that ended; kill those past their timeout; start waiting ones."""
        now = self._clock()
        for key, (proc, started, timeout_s, name) in list(self._running.items()):
            rule = key[0]
            rc = proc.poll()
            if rc is None:
                if now - started > timeout_s:
                    kill_command(proc)
                    del self._running[key]
                    self.warn(f"{rule}:timeout", f"alert {rule}: command {name} killed after "
                              f"{timeout_s:g} s")
                continue
            del self._running[key]
            if rc != 0:
                how = f"signal {-rc}" if rc < 0 else f"status {rc}"
                self.warn(f"{rule}:status", f"alert {rule}: command {name} exited with {how}")
        if self._waiting:
            self._start_waiting()

    @property
    def running(self) -> int:
        self.poll()
        return len(self._running)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def close(self, wait_s: float = 5.0) -> None:
        """Start what waits, wait up to wait_s for every command, then kill the rest."""
        deadline = self._clock() + wait_s
        while (self._running or self._waiting) and self._clock() < deadline:
            self.poll()
            if self._running or self._waiting:
                time.sleep(0.02)
        for key, (proc, _, _, name) in list(self._running.items()):
            kill_command(proc)
            self.warn(f"{key[0]}:killed", f"alert {key[0]}: command {name} still ran at exit; "
                      "killed")
        waiting: dict[str, list[str]] = {}
        for rule, subject in self._waiting:
            waiting.setdefault(rule, []).append(subject or "the node")
        for rule, subjects in waiting.items():
            n = len(subjects)
            named = ", ".join(subjects[:NAMED_AT_EXIT])
            if n > NAMED_AT_EXIT:
                named += f" and {n - NAMED_AT_EXIT} more"
            self.warn(f"{rule}:not-run", f"alert {rule}: {n} command{'s' * (n != 1)} still "
                      f"waiting at exit {'were' if n != 1 else 'was'} not run (for {named})")
        self._running.clear()
        self._waiting.clear()
