"""The fault matrix's machinery: cases, running the real command line, and judging runs.

A case is one hostile input or fault.  Its function runs gpudisk-top (a fresh interpreter,
`python -m gpudisk_top ...`, or the stand-in GPUs of tests/standin.py) in a directory of
its own under a hard timeout, and returns a Result whose outcome is one of OUTCOMES.
`judge()` holds the classification rules every case shares; the case supplies the
oracle: `ok()` (what must hold after an exit 0) and `harm()` (what must hold whatever the
exit status: the device still a device, the recording still whole, no bystander
signalled).
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import json
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from typing import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTS)
for p in (TESTS, ROOT):
    if p not in sys.path:
        sys.path.insert(0, p)

PY = sys.executable
NOBODY = 65534

# the outcomes, in the table's order
OUTCOMES = ("clean-error", "handled", "hang", "silent-wrong", "crash", "bad-error", "unjudged")
# what each means, for the README and --help
MEANING = {
    "clean-error": "non-zero exit, exactly one `gpudisk-top: error: ...` line on stderr (warning "
                   "lines aside), nothing harmed",
    "handled": "exit 0 and the case's oracle holds",
    "hang": "the hard timeout was hit, or a stated bound (time to answer, to stop on SIGTERM)",
    "silent-wrong": "exit 0 but the oracle fails, or harm done (data lost, a node replaced, a "
                    "bystander signalled) whatever the exit status",
    "crash": "a traceback or `internal error` on stderr",
    "bad-error": "non-zero exit without the one-line error form (no error line, several, or "
                 "other text), nothing harmed",
    "unjudged": "the case could not be judged here (said why); never counted as handled",
}
ERROR_PREFIX = "gpudisk-top: error: "
WARNING_PREFIX = "gpudisk-top: warning: "

# the outcomes right for an input (a case's `expect`)
REFUSED = ("clean-error",)            # must be refused in one line
HANDLED = ("handled",)                # must be handled
EITHER = ("clean-error", "handled")   # may be either
# the words the case tables use for what an input deserves
RIGHT = {"bad": REFUSED, "refuse": REFUSED, "error": REFUSED,
         "ok": HANDLED, "write": HANDLED, "wait": HANDLED, "append": HANDLED, "runs": HANDLED,
         "warn": HANDLED,
         "either": EITHER, "warn-or-error": EITHER}


@dataclasses.dataclass
class Result:
    outcome: str
    detail: str = ""
    took_s: float = 0.0
    rc: int | None = None
    stderr_tail: str = ""
    expected: bool = True          # outcome in the case's expectation
    command: str = ""              # the command line judged (python -c code shown as <code>)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Case:
    category: int
    id: str
    desc: str
    fn: Callable[["Ctx"], Result]
    timeout_s: float = 20.0
    # outcomes that are right for this input (for the "unexpected" list): most hostile
    # inputs may be refused or handled, some must be handled (a hung NVML must not cost
    # --once its answer), some must be refused (record -o /dev/null)
    expect: tuple[str, ...] = EITHER
    solo: bool = False             # timing-sensitive: run when nothing else runs
    repro: str = ""                # a shell command that reproduces it (filled by cases)


class Cases(list):
    """One category's cases, as each cases_*.py builds them: `add()` makes the id
    "<category>/<tail>", and takes what the input deserves either as `expect` or as a
    table's word for it (`right`, a key of RIGHT)."""

    def __init__(self, category: int) -> None:
        super().__init__()
        self.category = category

    def add(self, tail: str, desc: str, fn: Callable[["Ctx"], Result], *,
            right: str | None = None, **kw) -> None:
        if right is not None:
            kw["expect"] = RIGHT[right]
        self.append(Case(self.category, f"{self.category}/{tail}", desc, fn, **kw))


@dataclasses.dataclass
class Run:
    argv: list
    rc: int | None
    out: str
    err: str
    took_s: float
    timed_out: bool
    note: str = ""
    out_bytes: bytes = b""


class Ctx:
    """A case's working directory and its helpers."""

    def __init__(self, base: str, case: Case) -> None:
        self.case = case
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", case.id)[:80]
        self.dir = tempfile.mkdtemp(prefix=f"{safe}-", dir=base)
        os.chmod(self.dir, 0o755)
        self.xdg = os.path.join(self.dir, "xdg")
        os.mkdir(self.xdg)
        self.mounts: list[str] = []
        self.children: list[subprocess.Popen] = []
        self.deadline = time.monotonic() + case.timeout_s

    # -------------------------------------------------------------- paths and env
    def path(self, *parts: str) -> str:
        return os.path.join(self.dir, *parts)

    def env(self, **extra) -> dict:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("GDT_", "GPUDISK_TOP", "XDG_CONFIG"))}
        env.update(XDG_CONFIG_HOME=self.xdg, HOME=self.dir, LC_ALL="C.UTF-8",
                   PYTHONPATH=ROOT, PYTHONDONTWRITEBYTECODE="1")
        env.update({k: v for k, v in extra.items() if v is not None})
        for k, v in extra.items():
            if v is None:
                env.pop(k, None)
        return env

    def remaining(self) -> float:
        return max(0.5, self.deadline - time.monotonic())

    def mount_tmpfs(self, name: str, size: str, *opts: str) -> str | None:
        mnt = self.path(name)
        os.makedirs(mnt, exist_ok=True)
        o = ",".join((f"size={size}",) + opts)
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", o, "tmpfs", mnt],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            return None
        self.mounts.append(mnt)
        return mnt

    # -------------------------------------------------------------- processes
    def spawn(self, argv: list, *, env: dict | None = None, stdin=subprocess.DEVNULL,
              stdout=subprocess.PIPE, stderr=subprocess.PIPE, uid: int | None = None,
              umask: int | None = None, cwd: str | None = None) -> subprocess.Popen:
        def pre():
            if umask is not None:
                os.umask(umask)
            if uid is not None:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
        proc = subprocess.Popen(argv, env=env or self.env(), stdin=stdin, stdout=stdout,
                                stderr=stderr, cwd=cwd or self.dir, start_new_session=True,
                                preexec_fn=pre)
        self.children.append(proc)
        return proc

    def run(self, argv: list, *, timeout: float | None = None, input: bytes | None = None,
            **kw) -> Run:
        """Run argv to its end or the timeout (then its whole process group is killed)."""
        timeout = min(timeout or self.remaining(), self.remaining())
        stdin = subprocess.PIPE if input is not None else kw.pop("stdin", subprocess.DEVNULL)
        t0 = time.monotonic()
        proc = self.spawn(argv, stdin=stdin, **kw)
        timed_out = False
        try:
            out, err = proc.communicate(input=input, timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(proc)
            out, err = proc.communicate()
        took = time.monotonic() - t0
        return Run(argv, proc.returncode, _text(out), _text(err), took, timed_out,
                   out_bytes=out or b"")

    def gdt(self, *args: str, **kw) -> Run:
        return self.run(gdt_argv(*args), **kw)

    def cleanup(self, keep: bool = False) -> None:
        for proc in self.children:
            if proc.poll() is None:
                kill_group(proc)
        for mnt in reversed(self.mounts):
            subprocess.run(["umount", "-l", mnt], capture_output=True)
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)


def _text(b) -> str:
    if b is None:
        return ""
    if isinstance(b, str):
        return b
    return b.decode("utf-8", errors="replace")


# The interpreter lives under /root (0700) here, so another user cannot start it: like
# tests/test_fault_inputs.py, import everything as root, then drop to the user and run.
AS_USER = r"""
import importlib, os, pkgutil, sys
import csv, json, lzma, zlib, tomllib, urllib.request, http.server, socketserver, glob
import fnmatch, shutil, tempfile, textwrap, datetime, signal, threading, concurrent.futures
import concurrent.futures.thread  # concurrent.futures imports it lazily, on first use
import importlib.readers, importlib.resources, importlib.metadata, encodings.idna
import gpudisk_top
for m in pkgutil.walk_packages(gpudisk_top.__path__, "gpudisk_top."):
    if ".ui" in m.name or m.name.endswith("__main__"):
        continue
    try:
        importlib.import_module(m.name)
    except Exception:
        pass
from gpudisk_top.sim import BUILTIN_NAMES, builtin
for name in BUILTIN_NAMES:
    builtin(name)
uid = int(sys.argv[1])
os.setgroups([])
os.setgid(uid)
os.setuid(uid)
from gpudisk_top.cli import main
sys.exit(main(sys.argv[2:]))
"""


def gdt_argv(*args: str, as_uid: int | None = None) -> list[str]:
    if as_uid is not None:
        return [PY, "-c", AS_USER, str(as_uid), *args]
    return [PY, "-m", "gpudisk_top", *args]


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group this harness started for proc (never anything else)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        pass


def stop(proc: subprocess.Popen, bound_s: float = 3.0, sig=signal.SIGTERM) -> tuple[float, bool]:
    """Send sig to proc (only); (seconds it took to exit, whether it exited within bound_s).
    Past the bound the group is killed."""
    t0 = time.monotonic()
    try:
        proc.send_signal(sig)
    except ProcessLookupError:
        pass
    try:
        proc.wait(bound_s)
        return time.monotonic() - t0, True
    except subprocess.TimeoutExpired:
        kill_group(proc)
        return time.monotonic() - t0, False


def finish(proc: subprocess.Popen, t0: float, timed_out: bool = False, note: str = "") -> Run:
    """Collect a spawned process's output into a Run (it has ended or been killed)."""
    try:
        out, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
    return Run(proc.args, proc.returncode, _text(out), _text(err), time.monotonic() - t0,
               timed_out, note, out or b"")


# ------------------------------------------------------------------------ judging
def error_lines(err: str) -> tuple[list[str], list[str]]:
    """(error lines, lines that are neither errors nor warnings nor notes of ours)."""
    errors, other = [], []
    for line in err.splitlines():
        if line.startswith(ERROR_PREFIX):
            errors.append(line)
        elif line.startswith("gpudisk-top: ") or re.match(r"^\S+ gpudisk-top alert ", line) \
                or line.startswith("usage: "):
            continue
        elif line.strip():
            other.append(line)
    return errors, other


def is_crash(err: str) -> bool:
    return "Traceback (most recent call last)" in err or "internal error" in err


def judge(run: Run, ok: Callable[[], list[str] | None] | None = None,
          harm: Callable[[], list[str]] | None = None, bound_s: float | None = None,
          bound_what: str = "finished", usage_ok: bool = True) -> Result:
    """The shared classification (module docstring).  ok() returns the problems with an
    exit-0 run ([]: right; None: cannot be judged here); harm() the damage done whatever
    the exit status."""
    def result(outcome, detail=""):
        return Result(outcome, detail, round(run.took_s, 3), run.rc, run.err[-600:],
                      command=shown(run.argv))

    if re.search(r"Permission denied: '/root/\.pyenv", run.err) or (
            len(run.argv) > 2 and run.argv[2] == AS_USER and "No module named" in run.err):
        return result("unjudged", "harness: a module was imported after dropping root")
    if run.timed_out:
        return result("hang", f"hard timeout after {run.took_s:.1f} s" + (f"; {run.note}" if run.note else ""))
    if bound_s is not None and run.took_s > bound_s:
        return result("hang", f"{bound_what} in {run.took_s:.1f} s, bound {bound_s:.1f} s")
    if is_crash(run.err) or is_crash(run.out):
        line = next((x for x in reversed(run.err.splitlines()) if x.strip()), "")
        return result("crash", line[:300])
    damage = harm() if harm else []
    if run.rc == 0:
        problems = [] if ok is None else ok()
        if problems is None:
            return result("unjudged", "no oracle could judge this output")
        problems = list(problems)
        errors, _ = error_lines(run.err)
        if errors:
            problems.append(f"exit 0 with an error line: {errors[0][:200]}")
        if "\x1b" in run.err or "\x07" in run.err:
            problems.append("raw control characters on stderr")
        problems += damage
        if problems:
            return result("silent-wrong", "; ".join(problems)[:800])
        return result("handled", run.note)
    errors, other = error_lines(run.err)
    if damage:
        return result("silent-wrong", ("exit %s, but: " % run.rc) + "; ".join(damage)[:800])
    raw = "\x1b" in run.err or "\x07" in run.err
    if len(errors) == 1 and not other and not raw and run.rc in (1, 2):
        return result("clean-error", errors[0][len(ERROR_PREFIX):][:300])
    why = (f"exit {run.rc}, {len(errors)} error lines, {len(other)} other lines"
           + (", raw control characters" if raw else ""))
    return result("bad-error", why + ": " + " | ".join(run.err.splitlines()[-3:])[:400])


def shown(argv) -> str:
    import shlex

    argv = [str(a) for a in (argv or [])]
    if len(argv) > 2 and argv[1] == "-c":
        argv = [argv[0], "-c", "<code>", *argv[3:]]
    return " ".join(shlex.quote(a[:300]) for a in argv)


def unjudged(why: str) -> Result:
    return Result("unjudged", why)


# ------------------------------------------------------------------------ small oracles
def lstat_sig(path: str):
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_mode, st.st_ino, st.st_rdev, st.st_uid)


def same_node(path: str, before) -> list[str]:
    after = lstat_sig(path)
    if after != before:
        return [f"{os.path.basename(path)} changed: {before} -> {after}"]
    return []


def file_is(path: str, content: bytes) -> list[str]:
    try:
        with open(path, "rb") as f:
            got = f.read()
    except OSError as err:
        return [f"cannot read {os.path.basename(path)}: {err.strerror}"]
    if got != content:
        return [f"{os.path.basename(path)} holds {len(got)} bytes, not the {len(content)} expected"]
    return []


def mode_of(path: str) -> int | None:
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        return None


def leftovers(directory: str, allowed: set[str]) -> list[str]:
    extra = sorted(set(os.listdir(directory)) - allowed)
    return [f"left behind in the directory: {extra}"] if extra else []


def parse_json(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


def peak_rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            m = re.search(r"VmHWM:\s+(\d+)", f.read())
        return int(m.group(1)) if m else 0
    except OSError:
        return 0


# ------------------------------------------------------------------------ a terminal
def run_pty(ctx: Ctx, argv: list, *, quit_after_s: float = 3.0, keys: bytes = b"q",
            env: dict | None = None, exit_bound_s: float = 10.0, cols: int = 100,
            rows: int = 30) -> tuple[Run, bytes, list[float]]:
    """Run argv (the dashboard) on a pseudo-terminal (stderr to a pipe), send keys after
    quit_after_s, wait for it to end.  Returns the Run, the screen bytes, and the times
    (since start) at which output arrived."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = env or ctx.env(TERM="xterm-256color", COLUMNS=None, LINES=None)
    t0 = time.monotonic()
    proc = ctx.spawn(argv, env=env, stdin=slave, stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    screen = bytearray()
    arrivals: list[float] = []
    sent = False
    timed_out = False
    err_chunks: list[bytes] = []
    t_err = threading.Thread(target=lambda: err_chunks.append(proc.stderr.read()), daemon=True)
    t_err.start()
    while True:
        now = time.monotonic() - t0
        if not sent and now >= quit_after_s:
            try:
                os.write(master, keys)
            except OSError:
                pass
            sent = True
            sent_at = now
        if sent and proc.poll() is not None:
            break
        if proc.poll() is not None and not sent:
            break
        if sent and now - sent_at > exit_bound_s:
            timed_out = True
            kill_group(proc)
            break
        if time.monotonic() > ctx.deadline:     # the case's own deadline
            timed_out = True
            kill_group(proc)
            break
        r, _, _ = select.select([master], [], [], 0.1)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError as err:
                if err.errno == errno.EIO:
                    chunk = b""
                else:
                    raise
            if chunk:
                screen += chunk
                arrivals.append(now)
                # answer the terminal's queries Textual may send (cursor position)
                if b"\x1b[6n" in chunk:
                    os.write(master, f"\x1b[{rows};{cols}R".encode())
    # drain
    try:
        while select.select([master], [], [], 0.2)[0]:
            chunk = os.read(master, 65536)
            if not chunk:
                break
            screen += chunk
    except OSError:
        pass
    os.close(master)
    proc.wait(10)
    t_err.join(5)
    err = b"".join(err_chunks)
    run = Run(argv, proc.returncode, "", _text(err), time.monotonic() - t0, timed_out)
    return run, bytes(screen), arrivals
