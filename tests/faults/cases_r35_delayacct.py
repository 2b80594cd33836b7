"""Category 12, part delayacct (issue 35, item 2): `--delayacct` ended by every signal that
ends a process, markers that are links or stale, a setting someone else made, an instance
in another mount namespace.

The README promises (docs/command-line.md, --delayacct): kernel.task_delayacct is switched
on while the command runs and off again when it ends, unless another gpudisk-top
--delayacct still runs or the setting was on before (then it is left as it was).  So every
case's oracle is the node's setting itself, read from /proc/sys after the command ends,
and what the lock directory holds; harm is a setting left on that was off before, a
setting switched off that someone else (an admin, the host's gpudisk-top) made or needs,
and anything written through a link.

The sysctl is node-wide: every case is solo, runs only where no other gpudisk-top
--delayacct holds the lock, and puts back the value and the lock directory it found.
Processes are our own (the real command line, started here); the only signals sent are
to them.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import time

from harness import Case, Cases, Ctx, Result, Run, finish, gdt_argv, judge, parse_json, unjudged
from ptyterm import PtyTerminal

CAT = 12
SYSCTL = "/proc/sys/kernel/task_delayacct"
LOCK_DIR = "/run/gpudisk-top/delayacct"
MARKER = os.path.join(LOCK_DIR, "switched-on")
GUARD = os.path.join(LOCK_DIR, ".guard")
STARTED_S = 20.0          # how long a command may take to switch the setting on
STOPPED_S = 5.0           # ... and to stop once signalled (the README: within 3 s; load)


# ------------------------------------------------------------------ the node's setting
def _sysctl() -> str:
    with open(SYSCTL) as f:
        return f.read().strip()


def _set(value: str) -> None:
    with open(SYSCTL, "w") as f:
        f.write(value + "\n")


def _held(path: str) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _holders() -> list[int]:
    """The pids whose instance file is in the lock directory (held or not)."""
    try:
        return sorted(int(n) for n in os.listdir(LOCK_DIR) if n.isdigit())
    except OSError:
        return []


def _clear_lock_dir() -> None:
    """The lock directory as a fresh node has it: nothing (entries no one holds)."""
    if not os.path.lexists(LOCK_DIR):
        return
    if os.path.islink(LOCK_DIR) or not os.path.isdir(LOCK_DIR):
        os.unlink(LOCK_DIR)
        return
    for name in os.listdir(LOCK_DIR):
        path = os.path.join(LOCK_DIR, name)
        if name.isdigit() and _held(path):
            continue
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        except OSError:
            pass


class Node:
    """The setting as the case found it, put back at the end whatever happened."""

    def __init__(self, ctx: Ctx) -> None:
        self.ctx = ctx
        self.was: str | None = None
        self.why: str | None = None

    def __enter__(self) -> "Node":
        if os.geteuid() != 0:
            self.why = "needs root: kernel.task_delayacct is switched by root only"
        elif not os.path.exists(SYSCTL):
            self.why = "this kernel has no kernel.task_delayacct (before 5.14)"
        elif any(_held(os.path.join(LOCK_DIR, str(p))) for p in _holders()):
            self.why = "another gpudisk-top --delayacct runs on this node"
        else:
            self.was = _sysctl()
            _clear_lock_dir()
            _set("0")
        return self

    def __exit__(self, *exc) -> None:
        if self.was is None:
            return
        for proc in self.ctx.children:        # ours: none may hold the lock any more
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
                proc.wait(5)
        _clear_lock_dir()
        _set(self.was)


def _wait(predicate, timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def _switched_on_by(proc: subprocess.Popen) -> bool:
    return _wait(lambda: proc.poll() is not None or (
        _sysctl() == "1" and proc.pid in _holders()), STARTED_S) and proc.poll() is None


def _left(pid: int, expect: str = "0") -> list[str]:
    """Harm after a command ended: the setting not what it must be, or its files left."""
    problems = []
    value = _sysctl()
    if value != expect:
        problems.append(f"kernel.task_delayacct is {value} after gpudisk-top --delayacct ended "
                        f"(must be {expect})")
    if pid in _holders():
        problems.append(f"its lock file {LOCK_DIR}/{pid} was left behind")
    if expect == "0" and os.path.lexists(MARKER):
        problems.append(f"{MARKER} was left behind")
    return problems


# ------------------------------------------------------------------ commands
def _argv(ctx: Ctx, which: str, *extra: str) -> list[str]:
    if which == "once":
        return gdt_argv("--once", "--json", "--delayacct", "-i", "30", *extra)
    if which == "record":
        return gdt_argv("record", "-o", ctx.path("r.gdtrec"), "--delayacct", "-i", "0.5", *extra)
    if which == "serve":
        return gdt_argv("serve", "--listen", "127.0.0.1:0", "--delayacct", "-i", "0.5", *extra)
    return gdt_argv("--delayacct", "-i", "0.5", "--health-interval", "0", *extra)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


# what the command must have done besides restoring the setting (the README: record keeps
# what it sampled, --once refuses in one line once stopped before its report)
def _kept(ctx: Ctx, which: str, run: Run) -> list[str]:
    if which == "record":
        if _size(ctx.path("r.gdtrec")) == 0:
            return ["no recording kept"]
    return []


def _terminal(ctx: Ctx, argv: list, ignore_hup: bool = False) -> PtyTerminal:
    """argv on a terminal that can hang up (tests/ptyterm.py), as one of ctx's children."""
    term = PtyTerminal(argv, ctx.path("stderr"), ignore_hup=ignore_hup, cwd=ctx.dir,
                       env=ctx.env(TERM="xterm-256color", COLUMNS=None, LINES=None))
    ctx.children.append(term.proc)
    return term


def _ended(proc: subprocess.Popen, t0: float, bound_s: float, note: str,
           err: str | None = None) -> Run:
    """The Run of a command told to stop: a hang past bound_s (then killed)."""
    try:
        proc.wait(bound_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait(5)
        timed_out = True
    if err is None:
        return finish(proc, t0, timed_out, note)
    return Run(proc.args, proc.returncode, "", err, time.monotonic() - t0, timed_out, note)


# ------------------------------------------------------------------ the cases
def signalled(which: str, sig: signal.Signals):
    """The command switched the setting on; then `sig` (the README: it stops, and the
    setting is off again)."""
    def fn(ctx: Ctx) -> Result:
        with Node(ctx) as node:
            if node.why:
                return unjudged(node.why)
            term = None
            if which == "dashboard":
                term = _terminal(ctx, _argv(ctx, which))
                proc = term.proc
            else:
                proc = ctx.spawn(_argv(ctx, which))
            if not _switched_on_by(proc):
                run = finish(proc, time.monotonic()) if term is None else _ended(
                    proc, time.monotonic(), 1, "", term.stderr())
                return judge(run, lambda: ["the setting was never switched on"])
            if term is not None:
                _wait(lambda: term.drawn_bytes > 2000, 10)
            if which == "record":        # it has recorded: what it keeps can be judged
                _wait(lambda: _size(ctx.path("r.gdtrec")) > 0, 10)
            t0 = time.monotonic()
            proc.send_signal(sig)
            run = _ended(proc, t0, STOPPED_S, f"{sig.name} sent",
                         None if term is None else term.stderr())
            if term is not None:
                term.hang_up()
            pid = proc.pid
            return judge(run, lambda: _kept(ctx, which, run), harm=lambda: _left(pid),
                         bound_s=STOPPED_S, bound_what=f"stopped after {sig.name}")
    return fn


def terminal_closed(ignore_hup: bool):
    """The dashboard's terminal hung up (its tmux pane closed, its SSH session dropped):
    the kernel's SIGHUP, or under nohup the terminal simply gone."""
    def fn(ctx: Ctx) -> Result:
        with Node(ctx) as node:
            if node.why:
                return unjudged(node.why)
            term = _terminal(ctx, _argv(ctx, "dashboard"), ignore_hup=ignore_hup)
            proc = term.proc
            if not _switched_on_by(proc):
                return judge(_ended(proc, time.monotonic(), 1, "", term.stderr()),
                             lambda: ["the setting was never switched on"])
            _wait(lambda: term.drawn_bytes > 2000, 10)
            t0 = time.monotonic()
            term.hang_up()
            run = _ended(proc, t0, STOPPED_S, "terminal hung up", term.stderr())
            pid = proc.pid
            return judge(run, lambda: [], harm=lambda: _left(pid), bound_s=STOPPED_S,
                         bound_what="left its hung-up terminal")
    return fn


def nohup_record(ctx: Ctx) -> Result:
    """`nohup gpudisk-top record --delayacct`: SIGHUP is ignored as asked (it records on,
    the setting stays on); SIGTERM then stops it and switches the setting off."""
    with Node(ctx) as node:
        if node.why:
            return unjudged(node.why)
        proc = subprocess.Popen(_argv(ctx, "record"), env=ctx.env(), cwd=ctx.dir,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True,
                                preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
        ctx.children.append(proc)
        if not _switched_on_by(proc):
            return judge(finish(proc, time.monotonic()), lambda: ["never switched on"])
        proc.send_signal(signal.SIGHUP)
        time.sleep(1.5)
        during = []
        if proc.poll() is not None:
            during.append(f"SIGHUP ended it (exit {proc.returncode}) though nohup ignores it")
        elif _sysctl() != "1":
            during.append("the setting went off while it still runs")
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        run = _ended(proc, t0, STOPPED_S, "SIGHUP (ignored), then SIGTERM")
        return judge(run, lambda: during + _kept(ctx, "record", run),
                     harm=lambda: _left(proc.pid), bound_s=STOPPED_S,
                     bound_what="stopped after SIGTERM")


def two_instances(ctx: Ctx) -> Result:
    """Two `record --delayacct`: SIGHUP the one that switched it on; the other still
    needs it (on), then SIGHUP that one (off)."""
    with Node(ctx) as node:
        if node.why:
            return unjudged(node.why)
        first = ctx.spawn(_argv(ctx, "record"))
        if not _switched_on_by(first):
            return judge(finish(first, time.monotonic()), lambda: ["never switched on"])
        second = ctx.spawn(gdt_argv("record", "-o", ctx.path("s.gdtrec"), "--delayacct",
                                    "-i", "0.5"))
        if not _wait(lambda: second.pid in _holders() or second.poll() is not None, STARTED_S):
            return judge(finish(second, time.monotonic()), lambda: ["the second never joined"])
        first.send_signal(signal.SIGHUP)
        one = _ended(first, time.monotonic(), STOPPED_S, "SIGHUP to the first")
        between = [] if _sysctl() == "1" else [
            "the setting went off while the second gpudisk-top --delayacct still runs"]
        t0 = time.monotonic()
        second.send_signal(signal.SIGHUP)
        run = _ended(second, t0, STOPPED_S, "SIGHUP to the second")
        if one.timed_out or one.rc != 0:
            run = one           # the first is judged, the one that went wrong
        return judge(run, lambda: [],
                     harm=lambda: between + _left(first.pid) + _left(second.pid),
                     bound_s=STOPPED_S, bound_what="stopped after SIGHUP")


def _killed_instance(ctx: Ctx) -> str | None:
    """A real `--once --delayacct` that switched the setting on, then SIGKILL'd (the one
    signal no process can answer): its marker and lock file are left, stale."""
    proc = ctx.spawn(_argv(ctx, "once"))
    if not _switched_on_by(proc):
        return "the setting was never switched on"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(5)
    return None


def stale_then_admin(made_by: str):
    """A marker left by a gpudisk-top that has exited (SIGKILL'd, or a marker file of an
    older version), and kernel.task_delayacct=1 set by an admin since; the next
    --delayacct must leave the admin's setting on."""
    def fn(ctx: Ctx) -> Result:
        with Node(ctx) as node:
            if node.why:
                return unjudged(node.why)
            if made_by == "sigkill":
                why = _killed_instance(ctx)
                if why:
                    return unjudged(why)
            else:
                os.makedirs(LOCK_DIR, mode=0o700, exist_ok=True)
                with open(MARKER, "w"):
                    pass                         # the marker of the version before
            _set("1")                            # the admin: `sysctl kernel.task_delayacct=1`
            run = ctx.gdt("--once", "--json", "--delayacct", "-i", "0.5", timeout=40)
            return judge(run, lambda: [] if parse_json(run.out) else ["stdout is not JSON"],
                         harm=lambda: [] if _sysctl() == "1" else [
                             "switched off the kernel.task_delayacct=1 an admin set"])
    return fn


def marker_link(target: str, admin_on: bool):
    """A symbolic link at the marker (dangling, or to a file of someone's): never followed,
    never written through, never taken for a marker of ours."""
    def fn(ctx: Ctx) -> Result:
        with Node(ctx) as node:
            if node.why:
                return unjudged(node.why)
            os.makedirs(LOCK_DIR, mode=0o700, exist_ok=True)
            victim = ctx.path("victim")
            if target == "file":
                with open(victim, "wb") as f:
                    f.write(b"someone's file\n")
            os.symlink(victim, MARKER)
            if admin_on:
                _set("1")
            run = ctx.gdt("--once", "--json", "--delayacct", "-i", "0.5", timeout=40)

            def harm():
                problems = _left(-1, "1" if admin_on else "0")
                problems = [p for p in problems if MARKER not in p]   # the link itself stays
                if target == "dangling" and os.path.lexists(victim):
                    problems.append("created the file the dangling link names")
                if target == "file":
                    with open(victim, "rb") as f:
                        if f.read() != b"someone's file\n":
                            problems.append("wrote through the link into the file it names")
                return problems
            return judge(run, lambda: [] if parse_json(run.out) else ["stdout is not JSON"],
                         harm=harm)
    return fn


def lock_link(which: str):
    """The guard file, or the lock directory itself, a symbolic link: the lock cannot be
    trusted, so the setting must not be switched on and left on."""
    def fn(ctx: Ctx) -> Result:
        with Node(ctx) as node:
            if node.why:
                return unjudged(node.why)
            elsewhere = ctx.path("elsewhere")
            if which == "guard":
                os.makedirs(LOCK_DIR, mode=0o700, exist_ok=True)
                os.symlink(elsewhere, GUARD)
            else:
                os.mkdir(elsewhere, 0o700)
                os.makedirs(os.path.dirname(LOCK_DIR), mode=0o755, exist_ok=True)
                if os.path.isdir(LOCK_DIR) and not os.path.islink(LOCK_DIR):
                    os.rmdir(LOCK_DIR)           # emptied by Node
                os.symlink(elsewhere, LOCK_DIR)
            run = ctx.gdt("--once", "--json", "--delayacct", "-i", "0.5", timeout=40)

            def harm():
                problems = [p for p in _left(-1) if MARKER not in p]
                if which == "guard" and os.path.lexists(elsewhere):
                    problems.append("created the file the guard's link names")
                if which == "dir" and os.listdir(elsewhere):
                    problems.append(f"wrote into the linked directory: {os.listdir(elsewhere)}")
                return problems
            return judge(run, lambda: [] if parse_json(run.out) else ["stdout is not JSON"],
                         harm=harm)
    return fn


UNSHARE = ("unshare", "-m", "--propagation", "private", "sh", "-c",
           'mount -t tmpfs tmpfs /run && exec "$@"', "sh")


def other_namespace(ctx: Ctx) -> Result:
    """An instance in a mount namespace of its own (a container's /run) switched it on
    first; the host's `record --delayacct` started meanwhile must not lose it when the
    other one ends; then the host's ends and it is off."""
    if shutil.which("unshare") is None:
        return unjudged("no unshare(1)")
    with Node(ctx) as node:
        if node.why:
            return unjudged(node.why)
        err_path = ctx.path("ns.stderr")
        with open(err_path, "wb") as err:
            inner = ctx.spawn([*UNSHARE, *gdt_argv("--once", "--json", "--delayacct", "-i", "4")],
                              stderr=err)
        said = lambda: "--delayacct" in open(err_path, encoding="utf-8", errors="replace").read()
        if not _wait(lambda: said() or inner.poll() is not None, STARTED_S):
            return unjudged("the namespaced instance said nothing about --delayacct")
        host = ctx.spawn(_argv(ctx, "record"))
        if not _wait(lambda: host.pid in _holders() or host.poll() is not None, STARTED_S):
            return judge(finish(host, time.monotonic()), lambda: ["the host's never joined"])
        inner_run = _ended(inner, time.monotonic(), 30, "namespaced --once",
                           open(err_path, encoding="utf-8", errors="replace").read())
        time.sleep(0.5)
        between = [] if _sysctl() == "1" else [
            "the namespaced instance switched it off under the host's record --delayacct"]
        t0 = time.monotonic()
        host.send_signal(signal.SIGTERM)
        run = _ended(host, t0, STOPPED_S, "SIGTERM to the host's")
        if inner_run.rc != 0 or inner_run.timed_out:
            run = inner_run
        return judge(run, lambda: [], harm=lambda: between + _left(host.pid),
                     bound_s=STOPPED_S, bound_what="stopped after SIGTERM")


def other_namespace_alone(ctx: Ctx) -> Result:
    """An instance in a mount namespace of its own, alone, SIGHUP'd: the setting is off
    after it as before it."""
    if shutil.which("unshare") is None:
        return unjudged("no unshare(1)")
    with Node(ctx) as node:
        if node.why:
            return unjudged(node.why)
        proc = ctx.spawn([*UNSHARE, *gdt_argv("record", "-o", ctx.path("r.gdtrec"),
                                              "--delayacct", "-i", "0.5")])
        time.sleep(3.0)
        if proc.poll() is not None:
            return judge(finish(proc, time.monotonic()), lambda: ["it ended by itself"])
        t0 = time.monotonic()
        proc.send_signal(signal.SIGHUP)
        run = _ended(proc, t0, STOPPED_S, "SIGHUP")
        return judge(run, lambda: [], harm=lambda: [p for p in _left(-1) if MARKER not in p],
                     bound_s=STOPPED_S, bound_what="stopped after SIGHUP")


SIGNALS = (signal.SIGHUP, signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)


def cases() -> list[Case]:
    out = Cases(CAT)
    for which in ("once", "record", "serve", "dashboard"):
        # --once stopped before its report refuses in one line; the others stop cleanly
        right = "refuse" if which == "once" else "ok"
        for sig in SIGNALS:
            out.add(f"delayacct/signal/{which}-{sig.name}", f"{which} --delayacct, then "
                    f"{sig.name}: the setting is off again", signalled(which, sig),
                    right=right, timeout_s=60, solo=True)
    out.add("delayacct/signal/record-SIGUSR1", "record --delayacct, then SIGUSR1 (its default "
            "action ends a process too)", signalled("record", signal.SIGUSR1), right="ok",
            timeout_s=60, solo=True)
    out.add("delayacct/terminal-closed/dashboard", "the dashboard --delayacct whose terminal "
            "hangs up (the kernel's SIGHUP)", terminal_closed(False), right="ok",
            timeout_s=60, solo=True)
    out.add("delayacct/terminal-closed/dashboard-nohup", "the dashboard --delayacct started "
            "with SIGHUP ignored whose terminal hangs up", terminal_closed(True), right="ok",
            timeout_s=60, solo=True)
    out.add("delayacct/nohup/record", "record --delayacct under nohup: SIGHUP ignored, then "
            "SIGTERM", nohup_record, right="ok", timeout_s=60, solo=True)
    out.add("delayacct/two-instances/sighup-each", "two record --delayacct, each SIGHUP'd in "
            "turn", two_instances, right="ok", timeout_s=90, solo=True)
    for made_by in ("sigkill", "old-version"):
        out.add(f"delayacct/stale-marker/{made_by}-then-admin-on", f"a stale marker "
                f"({made_by}), then an admin's kernel.task_delayacct=1, then --once "
                "--delayacct", stale_then_admin(made_by), right="ok", timeout_s=60, solo=True)
    for target, admin_on in (("dangling", False), ("file", False), ("file", True)):
        tail = f"{target}{'-admin-on' if admin_on else ''}"
        out.add(f"delayacct/marker-link/{tail}", f"a symbolic link ({target}) at the marker"
                + (", kernel.task_delayacct=1 set by an admin" if admin_on else ""),
                marker_link(target, admin_on), right="ok", timeout_s=60, solo=True)
    for which in ("guard", "dir"):
        out.add(f"delayacct/lock-link/{which}", f"the lock's {which} a symbolic link",
                lock_link(which), right="ok", timeout_s=60, solo=True)
    out.add("delayacct/mount-namespace/host-instance", "an instance with its own /run (unshare "
            "-m) switched it on, the host's record --delayacct joins, the other ends",
            other_namespace, right="ok", timeout_s=90, solo=True)
    out.add("delayacct/mount-namespace/alone", "an instance with its own /run (unshare -m) "
            "alone, SIGHUP'd", other_namespace_alone, right="ok", timeout_s=60, solo=True)
    return out
