"""Category 4: a full disk under the recorder (real tmpfs mounts of several sizes).

`record --demo` fills small filesystems; oracles read the recording back: whole frames only
(no warning when read), every sample in order, the session closed, the problem said once
(not a line a sample), samples kept well beyond what rows alone fit (compaction), a
restart on the full file keeping all of it, --max-size a budget the files never exceed
(sampled every 20 ms while recording), recording resuming once there is room again."""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time

from harness import HANDLED, REFUSED, Case, Cases, Ctx, Result, finish, gdt_argv, judge, run_pty

CAT = 4
ROW_BYTES = 3000          # the demo node's rows are about 3 KB a sample before compaction,
FIRST_ROW_BYTES = 45000   # but the first of a session carries every record (about 49 KB)


def read_back(path: str):
    """(samples, walls, warnings, closed) or an error string."""
    from gpudisk_top.record import Recording

    try:
        with Recording.open(path) as rec:
            walls = [rec.wall_s(i) for i in range(len(rec))]
            return len(rec), walls, list(rec.warnings), rec.sessions[-1].end is not None
    except Exception as err:  # noqa: BLE001 - an oracle: unreadable is a finding
        return f"{type(err).__name__}: {err}"


def fill(mnt: str, leave: int = 0) -> str:
    filler = os.path.join(mnt, "filler")
    st = os.statvfs(mnt)
    size = max(0, st.f_bavail * st.f_frsize - leave)
    with open(filler, "wb") as f:
        try:
            f.write(b"\0" * (size + (0 if leave else 1 << 20)))
        except OSError:
            pass
    return filler


def record(ctx: Ctx, path: str, *extra: str, duration: str = "5", interval: str = "0.01"):
    return ctx.gdt("record", "-o", path, "--demo", "-i", interval, "--duration", duration,
                   *extra, timeout=60)


def _said_once(err: str) -> list[str]:
    full = [x for x in err.splitlines() if "No space left on device" in x
            and x.startswith("gpudisk-top: warning:")]
    return [f"the full disk was said {len(full)} times in under a minute"] if len(full) > 1 else []


def _whole(path: str, min_samples: int = 1, closed: bool = True):
    got = read_back(path)
    if isinstance(got, str):
        return None, [f"the recording cannot be read: {got}"]
    n, walls, warnings, ended = got
    p = []
    if warnings:
        p.append(f"reading it back warns: {warnings[0][:150]}")
    if n < min_samples:
        p.append(f"{n} samples kept, expected at least {min_samples}")
    if walls != sorted(walls):
        p.append("samples out of order")
    if closed and not ended:
        p.append("the last session was not closed")
    return walls, p


# the closing line: "recorded N samples to F (K KiB[, D dropped (the disk refused them)]
# [, L not recorded (the output stalled; marked as a gap)]); why"
CLOSING_RE = re.compile(r"recorded (\d+) samples to .*? \(\d+ KiB"
                        r"(?:, (\d+) dropped \(the disk refused them\))?"
                        r"(?:, \d+ not recorded \([^)]*\))?\);")


def closing(err: str) -> tuple[int, int] | None:
    for line in reversed(err.splitlines()):
        m = CLOSING_RE.search(line)
        if m:
            return int(m.group(1)), int(m.group(2) or 0)
    return None


def fills_case(size_k: int, restarts: int, leave_k: int | None = None):
    """record fills a tmpfs of size_k (another file taking all but leave_k of it first)."""
    def fn(ctx: Ctx) -> Result:
        mnt = ctx.mount_tmpfs("fs", f"{size_k}k")
        if mnt is None:
            return Result("unjudged", "cannot mount a tmpfs")
        if leave_k is not None:
            fill(mnt, leave=leave_k * 1024)
        path = os.path.join(mnt, "node.gdtrec")
        run = record(ctx, path)
        first: dict = {}

        def ok():
            walls, p = _whole(path, min_samples=1)
            p += _said_once(run.err)
            c = closing(run.err)
            if c is None:
                return p + ["no closing line saying what was recorded"]
            recorded, dropped = c
            if walls is not None:
                first["walls"] = walls
                if len(walls) != recorded:
                    p.append(f"the closing line says {recorded} samples recorded, "
                             f"{len(walls)} can be read back")
                size = os.path.getsize(path)
                # rows alone: the session's first row, then what changed
                if dropped and walls and FIRST_ROW_BYTES + (len(walls) - 1) * ROW_BYTES <= size:
                    p.append(f"no compaction: {len(walls)} samples in {size} bytes")
                run.note = f"{len(walls)} samples kept, {dropped} dropped, {size} bytes"
            if "No space left" in run.err and not dropped:
                p.append("the disk was full, yet the closing line counts no dropped sample")
            return p

        res = judge(run, ok)
        if res.outcome != "handled" or not restarts:
            return res
        for k in range(restarts):
            again = record(ctx, path, duration="1")

            def ok2():
                got = read_back(path)
                if isinstance(got, str):
                    return [f"the recording cannot be read: {got}"]
                n, walls, warnings, ended = got
                p = [f"reading it back warns: {w[:150]}" for w in warnings
                     if "went back" not in w]       # each --demo run starts at the same clock
                if walls[:len(first["walls"])] != first["walls"]:
                    p.append(f"restart {k + 1}: samples recorded before were lost")
                c = closing(again.err)
                if c is None:
                    p.append("no closing line")
                elif n != len(first["walls"]) + c[0]:
                    p.append(f"restart {k + 1}: {n} samples readable, expected "
                             f"{len(first['walls'])} + {c[0]}")
                else:
                    first["walls"] = walls
                if not ended:
                    p.append("the last session was not closed")
                return p

            res = judge(again, ok2)
            if res.outcome != "handled":
                res.detail = f"restart {k + 1} on the full file: " + res.detail
                return res
        res.detail = f"{restarts} restarts on the full file kept everything"
        return res
    return fn


def start_full_case(size_k: int, free_after_s: float | None):
    """Started on a disk with no room: it must start, say so, and record once there is room."""
    def fn(ctx: Ctx) -> Result:
        mnt = ctx.mount_tmpfs("fs", f"{size_k}k")
        if mnt is None:
            return Result("unjudged", "cannot mount a tmpfs")
        filler = fill(mnt)
        path = os.path.join(mnt, "late.gdtrec")
        t0 = time.monotonic()
        proc = ctx.spawn(gdt_argv("record", "-o", path, "-i", "0.05", "--duration", "4"))
        freed_at = None
        if free_after_s is not None:
            time.sleep(free_after_s)
            os.unlink(filler)
            freed_at = time.time()
        try:
            proc.wait(30)
            run = finish(proc, t0)
        except subprocess.TimeoutExpired:
            run = finish(proc, t0, timed_out=True)

        def ok():
            p = _said_once(run.err)
            if freed_at is None:
                if "No space left" not in run.err:
                    p.append("never said the disk is full")
                if os.path.exists(path) and os.path.getsize(path):
                    walls, q = _whole(path, min_samples=0)
                    p += q
                return p
            walls, q = _whole(path, min_samples=5)
            p += q
            if walls is not None and not [w for w in walls if w > freed_at + 0.5]:
                p.append("nothing recorded after the disk had room again")
            return p

        def harm():
            # whatever the exit: a file left behind is a recording that can be read
            if os.path.exists(path):
                got = read_back(path)
                if isinstance(got, str):
                    return [f"left a file that cannot be read: {got}"]
            return []

        return judge(run, ok, harm)
    return fn


def max_size_case(mb: float, fs_k: int | None = None, inodes: int | None = None):
    def fn(ctx: Ctx) -> Result:
        d = ctx.dir
        if fs_k is not None:
            opts = (f"nr_inodes={inodes}",) if inodes else ()
            d = ctx.mount_tmpfs("fs", f"{fs_k}k", *opts)
            if d is None:
                return Result("unjudged", "cannot mount a tmpfs")
        rec_dir = os.path.join(d, "recs")
        os.mkdir(rec_dir)
        path = os.path.join(rec_dir, "node.gdtrec")
        budget = int(mb * 2**20)
        peak = [0]
        stop_ev = threading.Event()

        def sizes():
            while not stop_ev.is_set():
                total = 0
                try:
                    for name in os.listdir(rec_dir):
                        try:
                            total += os.stat(os.path.join(rec_dir, name)).st_size
                        except OSError:
                            pass
                except OSError:
                    pass
                peak[0] = max(peak[0], total)
                time.sleep(0.02)
        watcher = threading.Thread(target=sizes, daemon=True)
        watcher.start()
        run = record(ctx, path, "--max-size", str(mb), duration="6", interval="0.005")
        stop_ev.set()
        watcher.join(2)

        def ok():
            p = []
            if peak[0] > budget:
                p.append(f"the files took {peak[0]} bytes at their peak, budget {budget} "
                         f"({100 * (peak[0] / budget - 1):.0f}% over)")
            kept, empty = 0, []
            for name in sorted(os.listdir(rec_dir)):
                f = os.path.join(rec_dir, name)
                if os.path.getsize(f) == 0:
                    empty.append(name)
                    continue
                got = read_back(f)
                if isinstance(got, str):
                    p.append(f"{name} cannot be read: {got}")
                    continue
                kept += got[0]
                if got[2]:
                    p.append(f"{name} warns: {got[2][0][:120]}")
            if kept < 1:
                p.append("no sample kept at all")
            c = closing(run.err)
            notes = [f"peak {peak[0]} of {budget} bytes", f"{kept} samples kept"
                     + (f" of {c[0]} recorded" if c else ""),
                     f"{len(os.listdir(rec_dir))} files"]
            removed = sum("retention removed" in x for x in run.err.splitlines())
            if removed:
                notes.append(f"{removed} 'retention removed' lines")
            if empty:
                notes.append(f"empty file(s) left: {empty}")
            run.note = "; ".join(notes)
            return p

        return judge(run, ok)
    return fn


def grows_case(size_k: int):
    """Another writer fills the disk mid-recording, then frees it: recording resumes."""
    def fn(ctx: Ctx) -> Result:
        mnt = ctx.mount_tmpfs("fs", f"{size_k}k")
        if mnt is None:
            return Result("unjudged", "cannot mount a tmpfs")
        path = os.path.join(mnt, "node.gdtrec")
        t0 = time.monotonic()
        proc = ctx.spawn(gdt_argv("record", "-o", path, "-i", "0.05", "--duration", "6"))
        time.sleep(1.5)
        filler = fill(mnt)
        time.sleep(2.0)
        os.unlink(filler)
        freed_at = time.time()
        try:
            proc.wait(30)
            run = finish(proc, t0)
        except subprocess.TimeoutExpired:
            run = finish(proc, t0, timed_out=True)

        def ok():
            walls, p = _whole(path, min_samples=20)
            p += _said_once(run.err)
            if walls is not None and not [w for w in walls if w > freed_at + 0.5]:
                p.append("nothing recorded after the disk had room again")
            return p

        return judge(run, ok)
    return fn


def dashboard_case(size_k: int):
    def fn(ctx: Ctx) -> Result:
        mnt = ctx.mount_tmpfs("fs", f"{size_k}k")
        if mnt is None:
            return Result("unjudged", "cannot mount a tmpfs")
        path = os.path.join(mnt, "dash.gdtrec")
        run, screen, arrivals = run_pty(ctx, gdt_argv("--demo", "-i", "0.05", "--record", path),
                                        quit_after_s=8.0)

        def ok():
            p = []
            late = [t for t in arrivals if t > 5.0]
            if not late:
                p.append("the screen stopped changing (nothing drawn after 5 s)")
            walls, q = _whole(path, min_samples=10)
            return p + q

        return judge(run, ok)
    return fn


def cases() -> list[Case]:
    out = Cases(CAT)
    for k, leave in ((64, None), (128, None), (256, 96), (512, 64), (1024, 128), (4096, 48)):
        what = f"a {k} KiB tmpfs" + (f" with {leave} KiB free" if leave else "")
        tag = f"{k}k" + (f"-{leave}k-free" if leave else "")
        out.add(f"fills/{tag}", f"record --demo -i 0.01 fills {what}",
                fills_case(k, 0, leave), timeout_s=60, expect=HANDLED)
        out.add(f"fills-restart/{tag}", f"record fills {what}, then 2 restarts on "
                "the full file", fills_case(k, 2, leave), timeout_s=90, expect=HANDLED)
    for k in (64, 256, 1024):
        # nothing ever fits: no file is left, and record exits 1 saying so
        out.add(f"start-full/{k}k", f"record (live) started on a full {k} KiB tmpfs",
                start_full_case(k, None), timeout_s=45, expect=REFUSED)
        out.add(f"start-full-then-room/{k}k", f"record (live) started on a full {k} KiB "
                "tmpfs, room made after 1.5 s", start_full_case(k, 1.5), timeout_s=45,
                expect=HANDLED)
    # budgets under 1 MB are refused on the command line (a recording's blocks need room)
    def budget(mb: float) -> tuple[str, ...]:
        return HANDLED if mb >= 1.0 else REFUSED

    for mb in (0.05, 0.1, 0.25, 1.0):
        out.add(f"max-size/{mb}MB", f"record --max-size {mb} (-i 0.005, 6 s)",
                max_size_case(mb), timeout_s=60, expect=budget(mb))
    out.add("max-size/1MB-on-256k-fs", "--max-size 1 on a 256 KiB tmpfs",
            max_size_case(1.0, 256), timeout_s=60, expect=HANDLED)
    out.add("max-size/1MB-on-64k-fs", "--max-size 1 on a 64 KiB tmpfs",
            max_size_case(1.0, 64), timeout_s=60, expect=HANDLED)
    out.add("max-size/0.1MB-on-64k-fs", "--max-size 0.1 on a 64 KiB tmpfs",
            max_size_case(0.1, 64), timeout_s=60, expect=budget(0.1))
    out.add("max-size/0.1MB-3-inodes", "--max-size 0.1 where no new file can be "
            "made (nr_inodes=3)", max_size_case(0.1, 1024, inodes=3), timeout_s=60,
            expect=budget(0.1))
    out.add("max-size/0.05MB-4-inodes", "--max-size 0.05 with room for one rotation "
            "file (nr_inodes=4)", max_size_case(0.05, 1024, inodes=4), timeout_s=60,
            expect=budget(0.05))
    for k in (256, 1024):
        out.add(f"filled-by-another/{k}k", f"another writer fills a {k} KiB tmpfs "
                "for 2 s mid-recording", grows_case(k), timeout_s=45, expect=HANDLED)
    for k in (128, 1024):
        out.add(f"dashboard-record/{k}k", f"the dashboard with --record on a {k} KiB "
                "tmpfs (pty, 8 s)", dashboard_case(k), timeout_s=45, expect=HANDLED,
                solo=True)
    return out
