"""Category 1: outputs the user names (export -o, record -o, the dashboard's --record).

Every target is made in the case's own directory: device nodes with mknod (never the
machine's /dev nodes), FIFOs with and without a reader, links (ours, another user's,
dangling, to /dev/stdout), directories, unwritable paths, the recording itself, existing
files with modes, umasks.  Oracles: what the output holds (the bytes `export -o -`
writes), what the target still is (lstat before and after), modes, nothing left behind.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import threading
import time

import fixtures
from harness import (HANDLED, NOBODY, Case, Cases, Ctx, Result, file_is, finish, gdt_argv, judge,
                     leftovers, lstat_sig, mode_of, parse_json, run_pty, same_node, stop)

CAT = 1


class Target:
    """What a case writes to, with what must hold afterwards."""

    def __init__(self, ctx: Ctx, path: str) -> None:
        self.ctx, self.path = ctx, path
        self.watch: list[tuple[str, object]] = []     # (path, lstat signature) to keep
        self.keep_bytes: list[tuple[str, bytes]] = []  # (path, content) to keep
        self.absent: list[str] = []                    # paths that must not appear
        self.reader: threading.Thread | None = None
        self.got: list[bytes] = []
        self.uid: int | None = None
        self.stdout = None
        self.in_place = False                          # content goes through, not to a file
        self.check_content = True
        self.allowed: set[str] | None = None           # the directory's names afterwards

    def keep(self, path: str) -> None:
        self.watch.append((path, lstat_sig(path)))

    def keep_content(self, path: str) -> None:
        with open(path, "rb") as f:
            self.keep_bytes.append((path, f.read()))

    def harm(self) -> list[str]:
        out = []
        for p, sig in self.watch:
            out += same_node(p, sig)
        for p, content in self.keep_bytes:
            out += file_is(p, content)
        for p in self.absent:
            if os.path.lexists(p):
                out.append(f"{os.path.basename(p)} was created")
        return out


def _reader(t: Target, path: str, delay_s: float = 0.0, limit: int | None = None) -> None:
    def read():
        time.sleep(delay_s)
        try:
            with open(path, "rb") as f:
                t.got.append(f.read(limit) if limit else f.read())
        except OSError:
            pass                # the case ended (and its directory went) first
    t.reader = threading.Thread(target=read, daemon=True)
    t.reader.start()


def _mknod(path: str, kind: str, major: int, minor: int) -> None:
    mode = (stat.S_IFCHR if kind == "c" else stat.S_IFBLK) | 0o666
    os.mknod(path, mode, os.makedev(major, minor))


def _victim(ctx: Ctx, name: str = "victim", text: bytes = b"precious\n") -> str:
    p = ctx.path(name)
    with open(p, "wb") as f:
        f.write(text)
    return p


# --------------------------------------------------------------------------- targets
# name -> (setup(ctx, t), what is right: "write" | "refuse" | "either", which commands)
def _new(ctx, t):
    t.absent = []


def _existing(mode):
    def setup(ctx, t):
        with open(t.path, "wb") as f:
            f.write(b"old contents\n")
        os.chmod(t.path, mode)
        t.mode = mode
    return setup


def _chr(major, minor):
    def setup(ctx, t):
        _mknod(t.path, "c", major, minor)
        t.keep(t.path)
        t.in_place = True
    return setup


def _nodriver(kind):
    def setup(ctx, t):
        _mknod(t.path, kind, fixtures.free_major("char" if kind == "c" else "block"), 0)
        t.keep(t.path)
    return setup


def _fifo(reader: str):
    def setup(ctx, t):
        os.mkfifo(t.path)
        t.keep(t.path)
        t.in_place = True
        if reader == "reader":
            _reader(t, t.path)
        elif reader == "late":
            _reader(t, t.path, delay_s=2.0)
        elif reader == "early-close":
            _reader(t, t.path, limit=100)
            t.check_content = False
    return setup


def _link_to(kind):
    def setup(ctx, t):
        target = ctx.path("target")
        if kind == "regular":
            with open(target, "wb") as f:
                f.write(b"old\n")
            os.chmod(target, 0o600)
            t.link_target = target
        elif kind == "null":
            _mknod(target, "c", 1, 3)
            t.keep(target)
            t.in_place = True
        elif kind == "fifo":
            os.mkfifo(target)
            t.keep(target)
            _reader(t, target)
            t.in_place = True
        elif kind == "dir":
            os.mkdir(target)
            t.keep(target)
        elif kind == "dangling":
            t.absent.append(target)
        elif kind == "stdout":
            target = "/dev/stdout"
            t.in_place = True
        elif kind == "chain":
            final = ctx.path("final")
            with open(final, "wb") as f:
                f.write(b"old\n")
            os.chmod(final, 0o600)
            os.symlink(final, target)
            t.link_target = final
        elif kind == "loop":
            os.symlink(t.path, target)
        elif kind == "recording":
            shutil.copy(fixtures.demo_recording(), target)
            os.chmod(target, 0o600)
            t.link_target = target
            if t.cmd != "export":       # export -o names it: replacing it is what was asked
                t.keep_content(target)
        os.symlink(target, t.path)
        t.keep(t.path)
    return setup


def _other_users_link(dangling: bool):
    def setup(ctx, t):
        victim = ctx.path("victim-missing") if dangling else _victim(ctx)
        if dangling:
            t.absent.append(victim)
        else:
            t.keep_content(victim)
        os.symlink(victim, t.path)
        os.lchown(t.path, NOBODY, NOBODY)
        t.keep(t.path)
    return setup


def _dir(ctx, t):
    os.mkdir(t.path)
    t.keep(t.path)


def _no_parent(ctx, t):
    t.path = ctx.path("no", "such", "dir", "out")
    t.absent.append(ctx.path("no"))


def _parent_is_file(ctx, t):
    parent = _victim(ctx, "afile")
    t.keep_content(parent)
    t.path = os.path.join(parent, "out")


def _too_long(ctx, t):
    t.path = ctx.path("x" * 300)


def _escape_name(ctx, t):
    t.path = ctx.path("out\x1b[2J\x07.x")


def _newline_name(ctx, t):
    t.path = ctx.path("out\nname.x")


def _readonly_mount(ctx, t):
    mnt = ctx.mount_tmpfs("ro", "1m", "ro")
    if mnt is None:
        t.skip = "cannot mount a tmpfs"
        return
    t.path = os.path.join(mnt, "out")
    t.absent.append(t.path)


def _full_mount(existing: bool):
    def setup(ctx, t):
        mnt = ctx.mount_tmpfs("full", "16k")
        if mnt is None:
            t.skip = "cannot mount a tmpfs"
            return
        t.path = os.path.join(mnt, "out")
        if existing:
            with open(t.path, "wb") as f:
                f.write(b"the old export\n")
            t.keep_content(t.path)
        # fill what is left
        try:
            with open(os.path.join(mnt, "filler"), "wb") as f:
                f.write(b"\0" * (1 << 20))
        except OSError:
            pass
        t.allowed = {"out", "filler"} if existing else {"filler"}
        t.full_dir = mnt
    return setup


def _unwritable_dir(ctx, t):
    d = ctx.path("rootonly")
    os.mkdir(d, 0o755)
    t.path = os.path.join(d, "out")
    t.absent.append(t.path)
    t.uid = NOBODY


def _sticky_other(ctx, t):
    d = ctx.path("sticky")
    os.mkdir(d)
    os.chmod(d, 0o1777)
    t.path = os.path.join(d, "out")
    with open(t.path, "wb") as f:
        f.write(b"root's file\n")
    os.chmod(t.path, 0o644)
    t.keep(t.path)
    t.keep_content(t.path)
    t.uid = NOBODY


def _own_readonly(ctx, t):
    d = ctx.path("mine")
    os.mkdir(d)
    os.chown(d, NOBODY, NOBODY)
    t.path = os.path.join(d, "out")
    with open(t.path, "wb") as f:
        f.write(b"old\n")
    os.chown(t.path, NOBODY, NOBODY)
    os.chmod(t.path, 0o444)
    t.mode = 0o444
    t.uid = NOBODY


def _socket(ctx, t):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(t.path)
    s.listen(1)
    t.sock = s
    t.keep(t.path)


def _recording_itself(how):
    def setup(ctx, t):
        rec = ctx.path("rec.gdtrec")
        shutil.copy(fixtures.demo_recording(), rec)
        t.recording = rec
        t.keep_content(rec)
        if how == "same":
            t.path = rec
        elif how == "dotdot":
            os.mkdir(ctx.path("sub"))
            t.path = ctx.path("sub", "..", "rec.gdtrec")
        elif how == "hardlink":
            t.path = ctx.path("hard.gdtrec")
            os.link(rec, t.path)
        elif how == "symlink":
            t.path = ctx.path("link.gdtrec")
            os.symlink(rec, t.path)
    return setup


def _existing_recording(mode):
    def setup(ctx, t):
        shutil.copy(fixtures.demo_recording(), t.path)
        os.chmod(t.path, mode)
        t.mode = mode
        t.prior = _walls(t.path)
    return setup


def _text_file(ctx, t):
    with open(t.path, "wb") as f:
        f.write(b"my notes, not a recording\n")
    t.keep_content(t.path)


def _empty_file(ctx, t):
    open(t.path, "wb").close()
    os.chmod(t.path, 0o604)
    t.mode = 0o604


def _walls(path) -> list[float] | None:
    from gpudisk_top.record import Recording

    try:
        with Recording.open(path) as rec:
            return [rec.wall_s(i) for i in range(len(rec))]
    except Exception:  # noqa: BLE001 - an oracle: unreadable is a finding
        return None


# (name, setup, export: right outcome, record: right outcome); "write": must be handled,
# "refuse": must be a clean error, "either"
TARGETS = [
    ("new", _new, "write", "write"),
    ("existing-0600", _existing(0o600), "write", "refuse"),
    ("existing-0755", _existing(0o755), "write", "refuse"),
    ("existing-0444", _existing(0o444), "write", "refuse"),
    ("existing-0000", _existing(0o000), "write", "refuse"),
    ("empty-file", _empty_file, "write", "either"),
    ("chr-null", _chr(1, 3), "write", "refuse"),
    ("chr-zero", _chr(1, 5), "write", "refuse"),
    ("chr-full", _chr(1, 7), "refuse", "refuse"),
    ("chr-no-driver", _nodriver("c"), "refuse", "refuse"),
    ("blk-no-driver", _nodriver("b"), "refuse", "refuse"),
    ("fifo-reader", _fifo("reader"), "write", "refuse"),
    ("fifo-late-reader", _fifo("late"), "write", "refuse"),
    ("fifo-reader-leaves", _fifo("early-close"), "either", "refuse"),
    ("fifo-no-reader", _fifo("none"), "wait", "refuse"),
    ("link-own-regular", _link_to("regular"), "write", "refuse"),
    ("link-own-chain", _link_to("chain"), "write", "refuse"),
    ("link-own-null", _link_to("null"), "write", "refuse"),
    ("link-own-fifo", _link_to("fifo"), "write", "refuse"),
    ("link-own-dir", _link_to("dir"), "refuse", "refuse"),
    ("link-own-loop", _link_to("loop"), "refuse", "refuse"),
    ("link-dangling", _link_to("dangling"), "refuse", "refuse"),
    ("link-dev-stdout", _link_to("stdout"), "write", "refuse"),
    ("link-own-recording", _link_to("recording"), "write", "refuse"),
    ("link-other-user", _other_users_link(False), "refuse", "refuse"),
    ("link-other-user-dangling", _other_users_link(True), "refuse", "refuse"),
    ("directory", _dir, "refuse", "refuse"),
    ("no-parent", _no_parent, "refuse", "refuse"),
    ("parent-is-file", _parent_is_file, "refuse", "refuse"),
    ("name-too-long", _too_long, "refuse", "refuse"),
    ("name-with-escapes", _escape_name, "write", "write"),
    ("name-with-newline", _newline_name, "write", "write"),
    ("readonly-mount", _readonly_mount, "refuse", "refuse"),
    ("full-disk-new", _full_mount(False), "refuse", "either"),
    ("full-disk-existing", _full_mount(True), "refuse", "refuse"),
    ("unwritable-dir-as-nobody", _unwritable_dir, "refuse", "refuse"),
    ("sticky-dir-roots-file-as-nobody", _sticky_other, "refuse", "refuse"),
    ("own-readonly-file-as-nobody", _own_readonly, "write", "refuse"),
    ("unix-socket", _socket, "refuse", "refuse"),
    ("the-recording-itself", _recording_itself("same"), "refuse", None),
    ("the-recording-via-dotdot", _recording_itself("dotdot"), "refuse", None),
    ("the-recording-via-hardlink", _recording_itself("hardlink"), "refuse", None),
    ("the-recording-via-symlink", _recording_itself("symlink"), "refuse", None),
    ("dash-stdout", None, "write", None),
    ("dev-stdout", None, "write", None),
    ("existing-recording", _existing_recording(0o640), None, "write"),
    ("existing-recording-0644", _existing_recording(0o644), None, "write"),
    ("hardlink-to-recording", None, None, "write"),
    ("text-file", _text_file, None, "refuse"),
]


def _prepare(ctx: Ctx, name: str, setup, cmd: str) -> Target:
    t = Target(ctx, ctx.path("out"))
    t.cmd = cmd
    t.skip = None
    t.mode = None
    t.prior = None
    t.link_target = None
    t.recording = None
    if name == "dash-stdout":
        t.path, t.in_place = "-", True
    elif name == "dev-stdout":
        t.path, t.in_place = "/dev/stdout", True
    elif name == "hardlink-to-recording":
        rec = ctx.path("orig.gdtrec")
        shutil.copy(fixtures.demo_recording(), rec)
        os.link(rec, t.path)
        t.prior = _walls(t.path)
    elif setup is not None:
        setup(ctx, t)
    return t


# --------------------------------------------------------------------------- export
def export_case(name, setup, right, fmt, umask=None, rec_mode=None):
    def fn(ctx: Ctx) -> Result:
        want, wrote = fixtures.export_baseline(fmt)
        rec = fixtures.demo_recording()
        if rec_mode is not None:
            rec = ctx.path("rec.gdtrec")
            shutil.copy(fixtures.demo_recording(), rec)
            os.chmod(rec, rec_mode)
        t = _prepare(ctx, name, setup, "export")
        if t.skip:
            return Result("unjudged", t.skip)
        if t.recording:
            rec = t.recording
        elif t.uid is not None:         # another user must be able to read the recording
            rec = ctx.path("rec.gdtrec")
            shutil.copy(fixtures.demo_recording(), rec)
            os.chmod(rec, 0o644)
        argv = gdt_argv("export", rec, "-f", fmt, "-o", t.path, as_uid=t.uid)
        if right == "wait":
            return _export_waits(ctx, t, argv)
        run = ctx.run(argv, timeout=20, umask=umask)
        if t.reader is not None:
            t.reader.join(5)
        if hasattr(t, "sock"):
            t.sock.close()

        def ok():
            p = []
            stdout_target = t.path in ("-", "/dev/stdout") or name == "link-dev-stdout"
            if stdout_target:
                got = run.out_bytes
            elif t.reader is not None:
                if not t.got:
                    return ["the FIFO's reader got nothing"]
                got = t.got[0]
            elif t.in_place:
                got = None              # a device: what it swallowed cannot be read back
                if wrote and f"wrote {wrote}" not in run.err:
                    p.append(f"did not say it wrote {wrote}: {run.err.strip()[:200]}")
            else:
                dest = t.link_target or t.path
                try:
                    with open(dest, "rb") as f:
                        got = f.read()
                except OSError as err:
                    return [f"the output cannot be read: {err.strerror}"]
                if not stat.S_ISREG(os.lstat(dest).st_mode):
                    p.append("the output is not a regular file")
                if t.link_target and not os.path.islink(t.path):
                    p.append("the link was replaced")
                src_mode = rec_mode or (0o644 if t.uid is not None else 0o640)
                want_mode = t.mode if t.mode is not None else (
                    src_mode & ~(umask if umask is not None else 0o022))
                if t.link_target:
                    want_mode = 0o600
                if mode_of(dest) != want_mode:
                    p.append(f"mode {oct(mode_of(dest) or 0)}, expected {oct(want_mode)}")
                d = os.path.dirname(dest)
                names = {os.path.basename(dest), os.path.basename(t.path), "xdg", "target",
                         "final", "rec.gdtrec", "sub"}
                p += [x for x in leftovers(d, names)]
            if got is not None and t.check_content:
                if fmt == "perfetto":
                    a, b = parse_json(got.decode("utf-8", "replace")), parse_json(want.decode())
                    if a is None or b is None or a.get("traceEvents") != b.get("traceEvents"):
                        p.append("the trace differs from `export -o -`")
                elif got != want:
                    p.append(f"wrote {len(got)} bytes, `export -o -` writes {len(want)}")
            if name == "fifo-late-reader" and "waiting for a reader" not in run.err:
                p.append("did not say it waited for a reader")
            return p

        def harm():
            out = t.harm()
            if getattr(t, "full_dir", None) and t.allowed is not None:
                out += leftovers(t.full_dir, t.allowed)
            return out

        return judge(run, ok, harm)
    return fn


def _export_waits(ctx: Ctx, t: Target, argv) -> Result:
    """A FIFO nobody reads: it must say it waits, and stop at once on SIGTERM."""
    t0 = time.monotonic()
    proc = ctx.spawn(argv)
    time.sleep(2.5)
    if proc.poll() is not None:
        run = finish(proc, t0)
        return judge(run, lambda: ["ended without a reader"], t.harm)
    took, prompt = stop(proc, 3.0)
    run = finish(proc, t0)
    if not prompt:
        return Result("hang", f"SIGTERM while waiting for a reader: not stopped in {took:.1f} s",
                      run.took_s, run.rc, run.err[-400:])
    problems = t.harm()
    if "waiting for a reader" not in run.err:
        problems.append("never said it waits for a reader")
    if "Traceback" in run.err or "internal error" in run.err:
        return Result("crash", run.err.splitlines()[-1][:300], run.took_s, run.rc, run.err[-400:])
    if problems:
        return Result("silent-wrong", "; ".join(problems), run.took_s, run.rc, run.err[-400:])
    return Result("handled", f"waited, said so, stopped {took:.2f} s after SIGTERM",
                  run.took_s, run.rc, run.err[-400:])


# --------------------------------------------------------------------------- record
def record_case(name, setup, right, umask=None):
    def fn(ctx: Ctx) -> Result:
        t = _prepare(ctx, name, setup, "record")
        if t.skip:
            return Result("unjudged", t.skip)
        argv = gdt_argv("record", "-o", t.path, "--demo", "--duration", "0.6", "-i", "0.1",
                        as_uid=t.uid)
        run = ctx.run(argv, timeout=20, umask=umask)
        if t.reader is not None and t.reader.is_alive():
            # nothing came: let the reader go
            try:
                fd = os.open(t.path, os.O_WRONLY | os.O_NONBLOCK)
                os.close(fd)
            except OSError:
                pass
        if hasattr(t, "sock"):
            t.sock.close()

        def ok():
            p = []
            if not os.path.isfile(t.path) or os.path.islink(t.path):
                return [f"exit 0 but {t.path!r} is not a regular file: {run.err.strip()[:200]}"]
            refused = "No space left on device" in run.err and "dropped" in run.err
            if name.startswith("full-disk") and refused and os.path.getsize(t.path) == 0:
                return []           # started on a full disk: waited, said so
            walls = _walls(t.path)
            if walls is None:
                return ["the recording cannot be read back"]
            prior = t.prior or []
            if walls[:len(prior)] != prior:
                p.append("samples recorded before were lost or changed")
            if len(walls) - len(prior) < 3 and not (name.startswith("full-disk") and refused):
                p.append(f"only {len(walls) - len(prior)} new samples in 0.6 s at 0.1 s")
            want_mode = t.mode if t.mode is not None else (
                0o640 & ~(umask if umask is not None else 0o022))
            if mode_of(t.path) != want_mode:
                p.append(f"mode {oct(mode_of(t.path) or 0)}, expected {oct(want_mode)}")
            m = [x for x in run.err.splitlines() if "recorded" in x]
            if not m:
                p.append("no closing line")
            return p

        return judge(run, ok, t.harm)
    return fn


# --------------------------------------------------------------------------- --record
def dashboard_case(name, setup, right):
    def fn(ctx: Ctx) -> Result:
        t = _prepare(ctx, name, setup, "record")
        if t.skip:
            return Result("unjudged", t.skip)
        argv = gdt_argv("--demo", "-i", "0.2", "--record", t.path)
        run, screen, arrivals = run_pty(ctx, argv, quit_after_s=4.0)
        if t.reader is not None and t.reader.is_alive():
            try:
                fd = os.open(t.path, os.O_WRONLY | os.O_NONBLOCK)
                os.close(fd)
            except OSError:
                pass

        def ok():
            p = []
            if not arrivals or len(screen) < 1000:
                p.append(f"the dashboard drew {len(screen)} bytes")
            walls = _walls(t.path) if os.path.isfile(t.path) else None
            if walls is None:
                return p + ["no readable recording"]
            if len(walls) < 5:
                p.append(f"{len(walls)} samples recorded in ~4 s at 0.2 s")
            return p

        return judge(run, ok, t.harm)
    return fn


# --------------------------------------------------------------------------- the cases
def cases() -> list[Case]:
    out = Cases(CAT)
    few = {"new", "existing-0600", "chr-null", "fifo-reader", "link-dev-stdout", "link-dangling",
           "link-other-user", "the-recording-itself", "dash-stdout", "full-disk-existing",
           "directory"}
    for name, setup, exp, rec in TARGETS:
        if exp is not None:
            for fmt in ("csv", "jsonl", "perfetto"):
                if fmt != "csv" and name not in few:
                    continue
                out.add(f"export-{fmt}/{name}", f"export -f {fmt} -o <{name}>",
                        export_case(name, setup, exp, fmt), timeout_s=30,
                        right=exp)
        if rec is not None:
            out.add(f"record/{name}", f"record -o <{name}> --demo",
                    record_case(name, setup, rec), timeout_s=30, right=rec)
    for umask in (0o000, 0o022, 0o027, 0o077):
        out.add(f"export-csv/new-umask-{umask:03o}", f"export to a new file, umask {umask:03o}",
                export_case("new", _new, "write", "csv", umask=umask), expect=HANDLED)
        out.add(f"record/new-umask-{umask:03o}", f"record to a new file, umask {umask:03o}",
                record_case("new", _new, "write", umask=umask), expect=HANDLED)
    for mode in (0o600, 0o644):
        out.add(f"export-csv/from-recording-{mode:o}",
                f"export of a {mode:o} recording to a new file",
                export_case("new", _new, "write", "csv", rec_mode=mode), expect=HANDLED)
    for name, setup, right in (("new", _new, "write"), ("chr-null", _chr(1, 3), "refuse"),
                               ("fifo-reader", _fifo("reader"), "refuse"),
                               ("link-dangling", _link_to("dangling"), "refuse"),
                               ("directory", _dir, "refuse"), ("text-file", _text_file, "refuse"),
                               ("link-own-recording", _link_to("recording"), "refuse")):
        out.add(f"dashboard-record/{name}", f"--demo --record <{name}> (on a pty)",
                dashboard_case(name, setup, right), timeout_s=40, right=right,
                solo=True)
    return out
