"""Category 8: hostile files under --procfs, for --once (JSON, and text for some).

The procfs is a directory of copies of this machine's files (diskstats, stat, meminfo,
pressure/*, 1/mountinfo, self/cgroup, self/mountinfo); one of them is replaced by a FIFO
nobody writes, a link to a zero device (our own mknod, never the machine's /dev/zero), a
file over 16 MiB (sparse) or just under (real text), binary garbage, NUL bytes, random
text, one endless line, invalid UTF-8, nothing, an empty file, a directory, a link loop,
a file only root may read (run as uid 65534), or a file replaced by rename between the
two reads.  Device and process names carry control characters.

Oracles: --once answers within 8 s with peak RSS under 300 MB; what the broken file
feeds is absent (null / no disks) with a warning, never made up; every other part of
the report is there; numbers that came from garbage are finite and in bounds; the text
report holds no raw control character; JSON keeps the exact name.
"""

from __future__ import annotations

import os
import random
import re
import stat
import threading
import time
import zlib

from harness import (HANDLED, NOBODY, PY, Case, Cases, Ctx, Result, Run, _text, gdt_argv, judge,
                     kill_group, parse_json, peak_rss_kb)
from fakeprocfs import FakeProcfs

CAT = 8
FILES = ("diskstats", "stat", "meminfo", "pressure/io", "pressure/cpu", "1/mountinfo",
         "self/cgroup")
BOUND_S = 8.0
RSS_KB = 300 * 1024


def make_procfs(ctx: Ctx) -> str:
    root = str(FakeProcfs(ctx.path("proc")).copy(
        "diskstats", "stat", "meminfo", "pressure/io", "pressure/cpu", "pressure/memory",
        "1/mountinfo", "self/mountinfo", "self/cgroup", "cmdline", mode=0o444))
    for d, _, _ in os.walk(root):
        os.chmod(d, 0o755)
    return root


def break_file(ctx: Ctx, path: str, kind: str) -> None:
    """Replace path by a hostile kind of file."""
    if os.path.lexists(path):
        os.unlink(path)
    rng = random.Random(zlib.crc32(f"{os.path.basename(path)}/{kind}".encode()))
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero-link":
        node = ctx.path("zero")
        if not os.path.exists(node):
            os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 5))
        os.symlink(node, path)
    elif kind == "huge-sparse":
        with open(path, "wb") as f:
            f.truncate(17 * 2**20)
    elif kind == "huge-text":
        with open(f"/proc/{os.path.relpath(path, ctx.path('proc'))}", "rb") as f:
            unit = f.read() or b"x 1 2 3\n"
        with open(path, "wb") as f:
            f.write(unit * (15 * 2**20 // len(unit)))
    elif kind == "binary":
        with open(path, "wb") as f:
            f.write(bytes(rng.randrange(256) for _ in range(65536)))
    elif kind == "nul":
        with open(path, "wb") as f:
            f.write(b"\0" * 4096)
    elif kind == "random-text":
        words = ["8", "0", "sda", "-1", "1e400", "nan", "inf", "cpu", "some", "avg10=",
                 "total=99999999999999999999999", "MemTotal:", "kB", "0x10", "\t", "é"]
        with open(path, "w") as f:
            for _ in range(200):
                f.write(" ".join(rng.choice(words) for _ in range(rng.randrange(1, 25))) + "\n")
    elif kind == "endless-line":
        with open(path, "wb") as f:
            f.write(b"1 " * (2**20))
    elif kind == "bad-utf8":
        with open(f"/proc/{os.path.relpath(path, ctx.path('proc'))}", "rb") as f:
            data = f.read()
        with open(path, "wb") as f:
            f.write(b"\xff\xfe\xc3(" + data.replace(b" ", b" \xc3\x28", 5))
    elif kind == "missing":
        pass
    elif kind == "empty":
        open(path, "wb").close()
    elif kind == "directory":
        os.mkdir(path)
    elif kind == "link-loop":
        os.symlink(path + ".b", path)
        os.symlink(path, path + ".b")
    elif kind == "root-only":
        with open(f"/proc/{os.path.relpath(path, ctx.path('proc'))}", "rb") as f:
            data = f.read()
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, 0o000)
    else:
        raise ValueError(kind)


KINDS = ("fifo", "zero-link", "huge-sparse", "huge-text", "binary", "nul", "random-text",
         "endless-line", "bad-utf8", "missing", "empty", "directory", "link-loop", "root-only")


def run_watched(ctx: Ctx, argv: list[str], timeout: float = 30.0):
    """Run argv, sampling its peak RSS; (Run, peak RSS in kB)."""
    t0 = time.monotonic()
    proc = ctx.spawn(argv)
    peak = [0]
    out_chunks: dict = {}

    def drain(name, stream):
        out_chunks[name] = stream.read()
    threads = [threading.Thread(target=drain, args=(n, s), daemon=True)
               for n, s in (("out", proc.stdout), ("err", proc.stderr))]
    for t in threads:
        t.start()
    timed_out = False
    while proc.poll() is None:
        peak[0] = max(peak[0], peak_rss_kb(proc.pid))
        if time.monotonic() - t0 > timeout:
            timed_out = True
            kill_group(proc)
            break
        time.sleep(0.05)
    for t in threads:
        t.join(10)
    run = Run(argv, proc.returncode, _text(out_chunks.get("out")), _text(out_chunks.get("err")),
              time.monotonic() - t0, timed_out, out_bytes=out_chunks.get("out") or b"")
    return run, peak[0]


RAW_CTRL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")


def feeds(rel: str, doc: dict) -> list[str]:
    """What the report must not make up when `rel` is broken: problems."""
    host = doc.get("host", {})
    p = []
    if rel != "diskstats" and not doc.get("disks"):
        p.append("no disks, though diskstats is fine")
    if rel != "stat" and host.get("cpu_idle_pct") is None:
        p.append("no CPU, though stat is fine")
    if rel != "meminfo" and host.get("mem_total_kb") is None:
        p.append("no memory, though meminfo is fine")
    for k, v in host.items():
        if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf")) or v < 0):
            p.append(f"host {k} = {v}")
    for k in ("cpu_user_pct", "cpu_system_pct", "cpu_idle_pct", "cpu_iowait_pct",
              "psi_io_some_pct", "psi_cpu_some_pct"):
        v = host.get(k)
        if v is not None and v > 100.0 + 1e-6:
            p.append(f"host {k} = {v} (over 100 %)")
    return p


def file_case(rel: str, kind: str, text: bool):
    def fn(ctx: Ctx) -> Result:
        root = make_procfs(ctx)
        break_file(ctx, os.path.join(root, rel), kind)
        args = ["--once", "-i", "0.2", "--procfs", root, "-a"] + ([] if text else ["--json"])
        argv = gdt_argv(*args, as_uid=NOBODY if kind == "root-only" else None)
        run, peak = run_watched(ctx, argv)
        run.note = f"peak RSS {peak // 1024} MB"

        def ok():
            p = []
            if peak > RSS_KB:
                p.append(f"peak RSS {peak // 1024} MB")
            if text:
                if RAW_CTRL.search(run.out):
                    p.append("raw control characters in the text report")
                if "avg-cpu" not in run.out and rel != "stat":
                    p.append("the text report lacks its CPU section")
                return p
            doc = parse_json(run.out)
            if doc is None:
                return p + ["stdout is not JSON"]
            p += feeds(rel, doc)
            if kind in ("fifo", "zero-link", "huge-sparse", "directory", "root-only", "link-loop") \
                    and not [w for w in run.err.splitlines() if "warning" in w]:
                p.append(f"the unreadable {rel} was not warned about")
            if rel == "diskstats":
                from cases_rates import within_bounds
                for d in doc.get("disks", []):
                    if d.get("dropped") is None:
                        p += within_bounds(d, doc["interval_s"])
            return p

        return judge(run, ok, bound_s=BOUND_S, bound_what="--once answered")
    return fn


EVIL_NAMES = {
    "osc-title": "sd\x1b]2;pwned\x07\x1b[2J",
    "csi-red": "sd\x1b[31mred",
    "bell": "sd\x07\x07",
    "c1-csi": "sd\u009b2J",
    "backspace": "sd\x08\x08x",
    "carriage-return": "sd\rfake",
    "rtl-override": "sd\u202etxt.exe",
    "del": "sd\x7f",
    "long": "sd" + "x" * 300,
    "unicode": "ディスク0",
}


def name_case(label: str, text: bool):
    name = EVIL_NAMES[label]

    def fn(ctx: Ctx) -> Result:
        root = make_procfs(ctx)
        with open(os.path.join(root, "diskstats"), "w") as f:
            f.write(f"   8       0 {name} 1000 0 8000 10 0 0 0 0 0 10 10 0 0 0 0 0 0\n")
        args = ["--once", "-i", "0.2", "--procfs", root, "-a"] + ([] if text else ["--json"])
        run = ctx.gdt(*args, timeout=30)

        def ok():
            if text:
                p = []
                if RAW_CTRL.search(run.out):
                    p.append("raw control characters in the text report")
                if label in ("osc-title", "csi-red", "bell") and "\\x1b" not in run.out and "\\x07" not in run.out:
                    p.append("the control characters are not shown escaped")
                if label == "unicode" and name not in run.out:
                    p.append("a printable Unicode name was mangled")
                return p
            doc = parse_json(run.out)
            if doc is None:
                return ["stdout is not JSON"]
            names = [d["name"] for d in doc["disks"]]
            if name in names:
                return []
            # a line the kernel's format cannot hold (a name with a line break in it, a line
            # of 255 characters or more) may be skipped or cut, if a warning says so
            said = [w for w in doc["warnings"] if "diskstats line" in w]
            if said:
                run.note = f"not listed; said: {said[0][:100]}"
                return []
            return [f"JSON names {names!r}, not the exact name, and no warning"]

        return judge(run, ok, bound_s=BOUND_S)
    return fn


def rename_case(rel: str):
    """The file is replaced by rename between the two reads: the second read must see the
    new file (the old code read the first inode for ever)."""
    def fn(ctx: Ctx) -> Result:
        root = make_procfs(ctx)
        target = os.path.join(root, rel)
        if rel == "diskstats":
            first = "   8       0 sdz 1000 0 8000 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
            second = "   8       0 sdz 1600 0 12800 0 0 0 0 0 0 600 600 0 0 0 0 0 0\n"
        else:
            first = "cpu  100 0 100 1000 0 0 0 0 0 0\n"
            second = "cpu  200 0 150 1050 0 0 0 0 0 0\n"      # +100 user +50 sys +50 idle
        with open(target, "w") as f:
            f.write(first)

        def replace_later():
            time.sleep(1.0)
            tmp = target + ".new"
            with open(tmp, "w") as f:
                f.write(second)
            os.replace(tmp, target)
        t = threading.Thread(target=replace_later)
        t.start()
        run = ctx.gdt("--once", "--json", "-i", "2", "--procfs", root, "-a", timeout=30)
        t.join()

        def ok():
            doc = parse_json(run.out)
            if doc is None:
                return ["not JSON"]
            if rel == "diskstats":
                d = next((x for x in doc["disks"] if x["name"] == "sdz"), None)
                if d is None or d["r_s"] is None or abs(d["r_s"] - 600 / doc["interval_s"]) > 30:
                    return [f"sdz r_s {d and d['r_s']}, expected about {600 / doc['interval_s']:.0f}"]
                return []
            h = doc["host"]
            if h.get("cpu_user_pct") is None or abs(h["cpu_user_pct"] - 50.0) > 0.5:
                return [f"cpu_user_pct {h.get('cpu_user_pct')}, expected 50 (the new file)"]
            return []

        return judge(run, ok, bound_s=BOUND_S)
    return fn


def process_name_case(text: bool):
    """A GPU process (ours, on stand-in GPUs) whose comm and command line hold escapes."""
    def fn(ctx: Ctx) -> Result:
        import standin
        evil = ctx.path("evil.py")
        with open(evil, "w") as f:
            f.write("import ctypes, sys, time\n"
                    "ctypes.CDLL(None).prctl(15, b'\\x1b]2;pwn\\x07x', 0, 0, 0)\n"
                    "open(sys.argv[1], 'w').write('ok')\n"
                    "time.sleep(60)\n")
        ready = ctx.path("ready")
        proc = ctx.spawn([PY, evil, ready, "\x1b[2Jarg\x07"])
        deadline = time.monotonic() + 10
        while not os.path.exists(ready) and time.monotonic() < deadline:
            time.sleep(0.02)
        args = ["--once", "-i", "0.3"] + ([] if text else ["--json"])
        cmd, env = standin.command(args, gpus=1, processes={0: [proc.pid]})
        run = ctx.run(cmd, env=ctx.env(GDT_STANDIN=env["GDT_STANDIN"]), timeout=30)

        def ok():
            if text:
                p = []
                if RAW_CTRL.search(run.out):
                    p.append("raw control characters in the text report")
                if str(proc.pid) not in run.out:
                    p.append("the GPU process is not listed")
                return p
            doc = parse_json(run.out)
            if doc is None:
                return ["not JSON"]
            procs = [x for g in doc["gpus"] for x in g["processes"]]
            if not procs:
                return ["the GPU process is not listed"]
            if procs[0]["name"] != "\x1b]2;pwn\x07x":
                return [f"name {procs[0]['name']!r}, not the exact comm"]
            return []

        return judge(run, ok, bound_s=BOUND_S)
    return fn


def cases() -> list[Case]:
    out = Cases(CAT)
    for rel in FILES:
        for kind in KINDS:
            out.add(f"json/{rel}/{kind}", f"--once --json with {rel} {kind}",
                    file_case(rel, kind, False), timeout_s=40, expect=HANDLED)
    for rel in ("diskstats", "stat"):
        for kind in KINDS:
            out.add(f"text/{rel}/{kind}", f"--once (text) with {rel} {kind}",
                    file_case(rel, kind, True), timeout_s=40, expect=HANDLED)
    for label in EVIL_NAMES:
        for text in (True, False):
            out.add(f"{'text' if text else 'json'}/device-name/{label}",
                    f"a device named with {label}", name_case(label, text), timeout_s=30,
                    expect=HANDLED)
    for rel in ("diskstats", "stat"):
        out.add(f"json/{rel}/replaced-by-rename", f"{rel} replaced by rename between "
                "the reads", rename_case(rel), timeout_s=30, expect=HANDLED)
    for text in (True, False):
        out.add(f"{'text' if text else 'json'}/process-name/escapes",
                "a GPU process whose comm and cmdline hold escapes",
                process_name_case(text), timeout_s=30, expect=HANDLED)
    return out
