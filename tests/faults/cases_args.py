"""Category 10: smaller argument faults, a full stdout, and a crowd of scrapers.

--from/--to (absurd, malformed and valid values), --interval, --duration, --max-size,
--retain, --push URLs (malformed, refused, a black hole, a gateway that never answers or
answers 500), --listen values, --seed, -d globs, --count, the detector's thresholds,
--push-interval, --demo and --demo-start, report -j; stdout on a full device (our own
mknod of 1:7), closed, or a pipe whose reader leaves; 20 and 50 concurrent scrapers of
`serve`, with a client that connects and says nothing.

Commands that would run on (a long --duration, an interval of years) get SIGTERM after a
few seconds and must stop within 3 s; that is not a hang.  A value that is out of the
documented range must be refused in one line; one that is accepted must give output that
is right for it (a window's samples within it, every listed device matching the globs,
--max-size never exceeded, the same seed giving the same numbers).
"""

from __future__ import annotations

import fnmatch
import http.server
import os
import socket
import stat
import subprocess
import threading
import time
import urllib.request

import fixtures
from harness import (EITHER, HANDLED, REFUSED, Case, Cases, Ctx, Result, finish, gdt_argv, judge,
                     parse_json, stop)

CAT = 10


def run_term(ctx: Ctx, argv: list[str], after_s: float = 4.0, **kw):
    """Run argv; if it still runs after after_s, SIGTERM it (it must stop within 3 s)."""
    t0 = time.monotonic()
    proc = ctx.spawn(argv, **kw)
    try:
        proc.wait(after_s)
        return finish(proc, t0)
    except subprocess.TimeoutExpired:
        pass
    took, prompt = stop(proc, 3.0)
    run = finish(proc, t0, timed_out=not prompt,
                 note=f"still running after {after_s:.0f} s; SIGTERM stopped it in {took:.2f} s"
                 if prompt else "SIGTERM not honoured within 3 s")
    return run


# ------------------------------------------------------------------------ --from / --to
WINDOW_VALUES = {
    # value: "bad" (must be refused) or "ok" (a valid time: handled, or a one-line
    # "no samples in the window")
    "@1e20": "bad", "@-1e20": "bad", "@nan": "bad", "@inf": "bad", "@-inf": "bad",
    "99999-01-01T00:00": "bad", "0001-01-01": "bad", "100000000000d ago": "bad",
    "+99999999999999999999d": "bad", "@1e15": "bad", "": "bad", "garbage": "bad",
    "25:99": "bad", "2026-13-45": "bad", "+-5m": "bad", "@": "bad", "@1e308": "bad",
    "1e400": "bad", "\x1b[2J": "bad", "@0x10": "bad", "+5 m": "either",
    "-5m": "ok", "+5s": "ok", "start": "ok", "end": "ok", "10m ago": "ok", "00:00": "ok",
    "2026-01-01T00:00:05": "ok", "2026-01-01T00:00:05+14:00": "ok", "@1767225605": "ok",
    "1h30m": "either",
}
WINDOW_VALUES["x" * 10000] = "bad"


def window_case(cmd: str, opt: str, value: str, right: str):
    def fn(ctx: Ctx) -> Result:
        rec = fixtures.demo_recording()
        args = [cmd, rec, opt, value] + (["--json"] if cmd == "report" else ["-f", "jsonl", "-o", "-"])
        run = ctx.gdt(*args, timeout=30)

        def ok():
            p = []
            if right == "bad":
                p.append(f"{opt} {value[:40]!r} was accepted")
            if cmd == "report":
                d = parse_json(run.out)
                if d is None:
                    return p + ["not JSON"]
                if not 1 <= d["samples"] <= 12:
                    p.append(f"{d['samples']} samples in a 12-sample recording")
            else:
                lines = run.out.splitlines()
                if not 0 < len(lines) <= 11:
                    p.append(f"{len(lines)} intervals from a 12-sample recording")
                if any(parse_json(x) is None for x in lines):
                    p.append("a line is not JSON")
            return p

        return judge(run, ok, bound_s=20)
    return fn


def window_order_case():
    def fn(ctx: Ctx) -> Result:
        run = ctx.gdt("report", fixtures.demo_recording(), "--from", "end", "--to", "start",
                      "--json", timeout=30)
        return judge(run, lambda: ["--from after --to was accepted"])
    return fn


# ------------------------------------------------------------------------ numbers
NUMBER_VALUES = ["0", "-1", "nan", "inf", "-inf", "1e-9", "1e9", "abc", "1e308", "0x10", "",
                 "1e-300", "0.001", "1e400"]


def interval_case(which: str, value: str):
    def fn(ctx: Ctx) -> Result:
        if which == "once":
            argv = gdt_argv("--once", "--demo", "--json", "-i", value)
        elif which == "record":
            argv = gdt_argv("record", "-o", ctx.path("r.gdtrec"), "--demo", "-i", value,
                            "--duration", "1")
        else:
            argv = gdt_argv("serve", "--demo", "--count", "2", "--listen", "127.0.0.1:0", "-i", value)
        run = run_term(ctx, argv, after_s=4.0)

        def ok():
            p = []
            v = _float(value)
            if v is None or not (v > 0) or v == float("inf"):
                p.append(f"-i {value!r} was accepted")
            if which == "once" and parse_json(run.out) is None:
                p.append("not JSON")
            if which == "record":
                p += _recording_ok(ctx.path("r.gdtrec"))
            return p

        return judge(run, ok, bound_s=12)
    return fn


def _float(v: str):
    try:
        return float(v)
    except ValueError:
        return None


def _recording_ok(path: str, min_samples: int = 1) -> list[str]:
    from gpudisk_top.record import Recording

    try:
        with Recording.open(path) as rec:
            n, warnings = len(rec), rec.warnings
    except Exception as err:  # noqa: BLE001
        return [f"the recording cannot be read: {err}"]
    p = []
    if n < min_samples:
        p.append(f"{n} samples recorded")
    if warnings:
        p.append(f"the recording warns: {warnings[0][:120]}")
    return p


DURATIONS = {"0": "either", "-1": "bad", "nan": "bad", "inf": "either", "1x": "bad",
             "99999999d": "ok", "1e400": "bad", "": "bad", "1h30m": "ok", "0.1": "ok",
             "1e-9": "either", "999999999999999999999d": "either", "2s": "ok", "-5s": "bad"}


def duration_case(value: str, right: str):
    def fn(ctx: Ctx) -> Result:
        path = ctx.path("r.gdtrec")
        run = run_term(ctx, gdt_argv("record", "-o", path, "--demo", "-i", "0.1", "--duration", value),
                       after_s=4.0)

        def ok():
            p = []
            if right == "bad":
                p.append(f"--duration {value!r} was accepted")
            if os.path.exists(path):
                p += _recording_ok(path, min_samples=0)
            return p

        return judge(run, ok, bound_s=12)
    return fn


def max_size_case(value: str, right: str):
    def fn(ctx: Ctx) -> Result:
        d = ctx.path("recs")
        os.mkdir(d)
        path = os.path.join(d, "r.gdtrec")
        peak = [0]
        done = threading.Event()

        def watch():
            while not done.is_set():
                try:
                    peak[0] = max(peak[0], sum(os.stat(os.path.join(d, n)).st_size for n in os.listdir(d)))
                except OSError:
                    pass
                time.sleep(0.02)
        t = threading.Thread(target=watch, daemon=True)
        t.start()
        run = run_term(ctx, gdt_argv("record", "-o", path, "--demo", "-i", "0.005", "--duration", "3",
                                     "--max-size", value), after_s=8.0)
        done.set()
        t.join(2)

        def ok():
            p = []
            v = _float(value)
            if right == "bad":
                p.append(f"--max-size {value!r} was accepted")
            elif v is not None and v > 0 and v != float("inf") and peak[0] > v * 2**20:
                p.append(f"peak {peak[0]} bytes over the budget of {v * 2**20:.0f}")
            run.note = f"peak {peak[0]} bytes"
            return p

        return judge(run, ok, bound_s=20)
    return fn


RETAIN = {"0": "bad", "-1": "bad", "nan": "bad", "1e9": "either", "abc": "bad", "1": "ok"}


def retain_case(value: str, right: str):
    def fn(ctx: Ctx) -> Result:
        run = run_term(ctx, gdt_argv("record", "-o", ctx.path("r.gdtrec"), "--demo", "-i", "0.1",
                                     "--duration", "1", "--retain", value), after_s=6.0)

        def ok():
            p = [f"--retain {value!r} was accepted"] if right == "bad" else []
            return p + _recording_ok(ctx.path("r.gdtrec"))

        return judge(run, ok, bound_s=12)
    return fn


# ------------------------------------------------------------------------ --push
class Gateway:
    """A local Pushgateway stand-in: counts pushes; mode "ok", "500" or "silent" (accepts
    and never answers)."""

    def __init__(self, mode: str) -> None:
        self.mode, self.pushes = mode, 0
        if mode == "silent":
            self.sock = socket.socket()
            self.sock.bind(("127.0.0.1", 0))
            self.sock.listen(16)
            self.port = self.sock.getsockname()[1]
            self.held = []
            threading.Thread(target=self._hold, daemon=True).start()
            return
        gw = self

        class H(http.server.BaseHTTPRequestHandler):
            def _any(self):
                n = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(n)
                gw.pushes += 1
                self.send_response(500 if gw.mode == "500" else 200)
                self.end_headers()
            do_PUT = do_POST = do_DELETE = _any

            def log_message(self, *a):
                pass
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _hold(self):
        while True:
            try:
                c, _ = self.sock.accept()
                self.pushes += 1
                self.held.append(c)
            except OSError:
                return

    def close(self):
        if self.mode == "silent":
            self.sock.close()
        else:
            self.server.shutdown()
            self.server.server_close()


PUSH_URLS = {
    "http://[::1": "bad", "http://127.0.0.1:99999": "bad", "http://127.0.0.1:0": "bad",
    "ftp://gateway:9091": "bad", "http://": "bad", "http://:9091": "bad",
    "http://host:0x10": "bad", "http://[::1]:99999": "bad", "unix:///tmp/x": "bad",
    "http://a b:9091": "bad", "http://" + "a" * 300 + ":9091": "either",
    "http://127.0.0.1:9091/\x1b[2J": "either", "http://127.0.0.1:1": "runs",
    "http://user:pass@127.0.0.1:1": "runs", "https://127.0.0.1:1": "runs",
    "http://192.0.2.1:9091": "runs",
}


def push_case(url: str, right: str, gateway: str | None = None, interval: str | None = None):
    def fn(ctx: Ctx) -> Result:
        gw = Gateway(gateway) if gateway else None
        u = url.format(port=gw.port) if gw else url
        extra = ["--push-interval", interval] if interval is not None else []
        try:
            run = run_term(ctx, gdt_argv("serve", "--demo", "--no-listen", "--count", "5", "-i", "0.2",
                                         "--push", u, *extra), after_s=15.0)
        finally:
            if gw:
                gw.close()

        def ok():
            p = []
            if right == "bad":
                p.append(f"--push {url[:50]!r} was accepted")
            if right == "runs" and "warning" not in run.err:
                p.append("pushes that cannot succeed were not warned about")
            if gw and gateway == "ok" and gw.pushes < 1:
                p.append("nothing pushed")
            if gw and gateway == "ok" and gw.pushes > 20:
                p.append(f"{gw.pushes} pushes for 5 samples")
            if gw and gateway == "500" and "500" not in run.err:
                p.append("the gateway's 500 was not said")
            return p

        bound = 12.0
        return judge(run, ok, bound_s=bound, bound_what="serve --count 5 -i 0.2 finished")
    return fn


def push_blocks_case():
    """A gateway that accepts and never answers must not stall sampling: /metrics stays
    fresh while a push waits for its timeout."""
    def fn(ctx: Ctx) -> Result:
        gw = Gateway("silent")
        proc = ctx.spawn(gdt_argv("serve", "--demo", "-i", "0.2", "--listen", "127.0.0.1:0",
                                  "--push", f"http://127.0.0.1:{gw.port}", "--push-interval", "1"))
        t0 = time.monotonic()
        url, lines = None, []
        while time.monotonic() - t0 < 20 and proc.poll() is None:
            line = proc.stderr.readline().decode("utf-8", "replace")
            lines.append(line)
            if "serving http" in line:
                url = line.split("serving ")[1].split()[0]
                break
        ages = []
        if url:
            for _ in range(4):
                time.sleep(1.0)
                try:
                    body = urllib.request.urlopen(url, timeout=5).read().decode()
                    m = [x for x in body.splitlines() if x.startswith("gpudisk_top_sample_age_seconds ")]
                    ages.append(float(m[0].split()[1]) if m else None)
                except OSError as err:
                    ages.append(str(err))
        took, prompt = stop(proc, 15.0)
        gw.close()
        run = finish(proc, t0, timed_out=not prompt)
        run.err = "".join(lines) + run.err
        run.note = f"sample ages {ages}; stopped {took:.1f} s after SIGTERM"

        def ok():
            p = []
            if not url:
                return ["never served"]
            bad = [a for a in ages if not isinstance(a, float) or a > 1.0]
            if bad:
                p.append(f"sampling stalled while a push hung: ages {ages}")
            if took > 3.0:
                p.append(f"SIGTERM took {took:.1f} s (the last push waits for its timeout)")
            return p

        return judge(run, ok)
    return fn


# ------------------------------------------------------------------------ --listen
LISTEN = {"0.0.0.0:0": "warn", "127.0.0.1:99999": "bad", "127.0.0.1:-1": "bad", ":0": "either",
          "[::1]:0": "either", "localhost:0": "ok", "nohost.invalid:0": "bad", "127.0.0.1": "bad",
          "127.0.0.1:abc": "bad", "192.0.2.1:0": "bad", "[::1": "bad", "": "bad",
          "127.0.0.1:0:0": "bad", "999.1.1.1:0": "bad", "in-use": "bad"}


def listen_case(value: str, right: str):
    def fn(ctx: Ctx) -> Result:
        hold = None
        v = value
        if value == "in-use":
            hold = socket.socket()
            hold.bind(("127.0.0.1", 0))
            hold.listen(1)
            v = f"127.0.0.1:{hold.getsockname()[1]}"
        try:
            run = run_term(ctx, gdt_argv("serve", "--demo", "--count", "3", "-i", "0.1", "--listen", v),
                           after_s=10.0)
        finally:
            if hold:
                hold.close()

        def ok():
            p = []
            if right == "bad":
                p.append(f"--listen {value!r} was accepted")
            if right == "warn" and "every host that can reach" not in run.err:
                p.append("listening on every interface without a warning")
            if "serving http" not in run.err:
                p.append("did not say where it serves")
            return p

        return judge(run, ok, bound_s=12)
    return fn


# ------------------------------------------------------------------------ others
def seed_case(value: str, right: str):
    def fn(ctx: Ctx) -> Result:
        a = ctx.gdt("--once", "--demo", "--json", "--seed", value, timeout=20)
        b = ctx.gdt("--once", "--demo", "--json", "--seed", value, timeout=20) if a.rc == 0 else None

        def ok():
            p = [f"--seed {value!r} was accepted"] if right == "bad" else []
            da, db = parse_json(a.out), parse_json(b.out) if b else None
            if da is None or db is None:
                return p + ["not JSON"]
            strip = lambda d: {k: v for k, v in d.items() if k not in ("warnings",)}  # noqa: E731
            if strip(da) != strip(db):
                p.append("the same seed gave different numbers")
            return p

        return judge(a, ok, bound_s=15)
    return fn


GLOBS = ["", "[", "***", "[!a-", "\x1b[2J", ",,,", "x" * 10000, "?" * 1000, "[[[[[[",
         "nvme*,sd*", "*", "NVME*", "sd[a-c]", "nvme0n1p1", "/dev/sda"]


def glob_case(glob: str):
    def fn(ctx: Ctx) -> Result:
        run = ctx.gdt("--once", "--demo", "--json", "-a", "-d", glob, timeout=20)

        def ok():
            d = parse_json(run.out)
            if d is None:
                return ["not JSON"]
            # a /dev/ or /dev/mapper/ prefix names the same device (README: -d takes kernel
            # and /dev/mapper names)
            pats = [g.strip().removeprefix("/dev/mapper/").removeprefix("/dev/")
                    for g in glob.split(",") if g.strip()]
            bad = [x["name"] for x in d["disks"]
                   if pats and not any(fnmatch.fnmatchcase(x["name"], g) or
                                       fnmatch.fnmatchcase(x.get("display_name") or "", g) for g in pats)]
            return [f"listed {bad[:3]}, which match none of {glob[:40]!r}"] if bad else []

        return judge(run, ok, bound_s=15)
    return fn


COUNTS = {"0": "bad", "-1": "bad", "abc": "bad", "1e400": "bad", "1.5": "bad",
          str(2**64): "either", "3": "ok"}


def count_case(value: str, right: str):
    def fn(ctx: Ctx) -> Result:
        run = run_term(ctx, gdt_argv("serve", "--demo", "--listen", "127.0.0.1:0", "-i", "0.1",
                                     "--count", value), after_s=4.0)

        def ok():
            return [f"--count {value!r} was accepted"] if right == "bad" else []

        return judge(run, ok, bound_s=12)
    return fn


THRESHOLDS = [("--gpu-low-pct", "-1", "bad"), ("--gpu-low-pct", "101", "bad"),
              ("--gpu-low-pct", "nan", "bad"), ("--gpu-low-pct", "1e9", "bad"),
              ("--gpu-low-pct", "0", "either"), ("--enter", "0", "bad"), ("--enter", "-1", "bad"),
              ("--enter", "1e9", "bad"), ("--enter", str(2**70), "either"), ("--leave", "0", "bad"),
              ("--leave", "abc", "bad")]


def threshold_case(opt: str, value: str, right: str):
    def fn(ctx: Ctx) -> Result:
        run = ctx.gdt("--once", "--demo", "--json", opt, value, timeout=20)

        def ok():
            p = [f"{opt} {value!r} was accepted"] if right == "bad" else []
            return p + ([] if parse_json(run.out) else ["not JSON"])

        return judge(run, ok, bound_s=15)
    return fn


def demo_case(args: list[str], right: str):
    def fn(ctx: Ctx) -> Result:
        run = ctx.gdt("--once", "--json", *args, timeout=20)

        def ok():
            p = [f"{' '.join(args)} was accepted"] if right == "bad" else []
            return p + ([] if parse_json(run.out) else ["not JSON"])

        return judge(run, ok, bound_s=15)
    return fn


def jobs_case(value: str, right: str):
    def fn(ctx: Ctx) -> Result:
        run = ctx.gdt("report", fixtures.demo_recording(), "--json", "--recompute", "-j", value,
                      timeout=60)

        def ok():
            p = [f"-j {value!r} was accepted"] if right == "bad" else []
            d = parse_json(run.out)
            if d is None or d["samples"] != 12:
                p.append("not the 12 samples")
            return p

        return judge(run, ok, bound_s=30)
    return fn


# ------------------------------------------------------------------------ stdout
STDOUT_CMDS = {
    "once-text": ["--once", "--demo"], "once-json": ["--once", "--demo", "--json"],
    "report-text": ["report", "{rec}"], "report-json": ["report", "{rec}", "--json"],
    "export-csv": ["export", "{rec}", "-f", "csv", "-o", "-"],
    "export-dev-stdout": ["export", "{rec}", "-f", "csv", "-o", "/dev/stdout"],
    "help": ["--help"], "version": ["--version"], "list-scenarios": ["--list-scenarios"],
    "record-help": ["record", "--help"],
}


def stdout_case(label: str, how: str):
    def fn(ctx: Ctx) -> Result:
        argv = gdt_argv(*[a.format(rec=fixtures.demo_recording()) for a in STDOUT_CMDS[label]])
        if how == "full":
            node = ctx.path("full")
            os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 7))
            with open(node, "w") as out:
                run = ctx.run(argv, stdout=out, timeout=20)
            return judge(run, lambda: ["exit 0 though nothing could be written"])
        if how == "closed":
            run = ctx.run(["/bin/sh", "-c", 'exec "$@" >&-', "sh", *argv], timeout=20)
            return judge(run, lambda: [] if "Traceback" not in run.err else ["traceback"])
        # a reader that leaves after 10 bytes
        proc = ctx.spawn(argv)
        t0 = time.monotonic()
        proc.stdout.read(10)
        proc.stdout.close()
        try:
            proc.wait(20)
            err = proc.stderr.read().decode("utf-8", "replace")
            from harness import Run
            run = Run(argv, proc.returncode, "", err, time.monotonic() - t0, False)
        except subprocess.TimeoutExpired:
            run = finish(proc, t0, timed_out=True)
        return judge(run, lambda: [])
    return fn


# ------------------------------------------------------------------------ scrapers
def scrape_case(clients: int, per_client: int, slowloris: bool = False, garbage: bool = False):
    def fn(ctx: Ctx) -> Result:
        proc = ctx.spawn(gdt_argv("serve", "--demo", "-i", "0.5", "--listen", "127.0.0.1:0"))
        t0 = time.monotonic()
        url = None
        lines = []
        while time.monotonic() - t0 < 20 and proc.poll() is None:
            line = proc.stderr.readline().decode("utf-8", "replace")
            lines.append(line)
            if "serving http" in line:
                url = line.split("serving ")[1].split()[0]
                break
        if url is None:
            return judge(finish(proc, t0), lambda: ["never served"])
        host, port = url.split("//")[1].split("/")[0].rsplit(":", 1)
        held = []
        if slowloris:
            for _ in range(10):
                s = socket.create_connection((host, int(port)))
                s.sendall(b"GET /metrics HTTP/1.1\r\n")    # and never the rest
                held.append(s)
        if garbage:
            for payload in (b"\x16\x03\x01\x02\x00" + os.urandom(300), b"GET " + b"A" * 100000 + b" HTTP/1.1\r\n\r\n",
                            b"GET /metrics HTTP/1.1\r\n" + b"X: " + b"y" * 70000 + b"\r\n\r\n"):
                try:
                    s = socket.create_connection((host, int(port)), timeout=5)
                    s.sendall(payload)
                    s.close()
                except OSError:
                    pass
        times, errors = [], []
        lock = threading.Lock()

        def client():
            for _ in range(per_client):
                t = time.monotonic()
                try:
                    body = urllib.request.urlopen(url, timeout=10).read()
                    ok = b"gpudisk_top_" in body
                except OSError as err:
                    ok, body = False, str(err).encode()
                with lock:
                    times.append(time.monotonic() - t)
                    if not ok:
                        errors.append(body[:100])
        threads = [threading.Thread(target=client) for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        for s in held:
            s.close()
        took, prompt = stop(proc, 3.0)
        run = finish(proc, t0, timed_out=not prompt)
        run.err = "".join(lines) + run.err
        times.sort()
        p99 = times[int(0.99 * (len(times) - 1))] if times else None
        run.note = f"{len(times)} scrapes, p50 {times[len(times) // 2]:.3f} s, p99 {p99:.3f} s" if times else ""

        def ok():
            p = []
            if errors:
                p.append(f"{len(errors)} of {clients * per_client} scrapes failed: {errors[0]!r}")
            if p99 is not None and p99 > 1.0:
                p.append(f"p99 scrape {p99:.2f} s under {clients} clients")
            return p

        return judge(run, ok)
    return fn


def cases() -> list[Case]:
    out = Cases(CAT)
    for cmd in ("report", "export"):
        # a valid time may still hold none of the recording's samples: a one-line refusal
        # is right for it too
        for value, right in WINDOW_VALUES.items():
            label = repr(value)[1:-1][:30] or "empty"
            out.add(f"window/{cmd}/from={label}", f"{cmd} --from {label}",
                    window_case(cmd, "--from", value, right), timeout_s=30,
                    right="either" if right == "ok" else right)
        for value in ("@1e20", "garbage", "end", "-5m"):
            right = WINDOW_VALUES[value]
            out.add(f"window/{cmd}/to={value}", f"{cmd} --to {value}",
                    window_case(cmd, "--to", value, right), timeout_s=30,
                    right="either" if right == "ok" else right)
    out.add("window/report/from-after-to", "report --from end --to start",
            window_order_case(), timeout_s=30, expect=REFUSED)
    for which in ("once", "record", "serve"):
        for value in NUMBER_VALUES:
            v = _float(value)
            valid = v is not None and v > 0 and v != float("inf")
            out.add(f"interval/{which}/{value or 'empty'}", f"{which} -i {value!r}",
                    interval_case(which, value), timeout_s=30,
                    expect=EITHER if valid else REFUSED)
    for value, right in DURATIONS.items():
        out.add(f"duration/{value or 'empty'}", f"record --duration {value!r}",
                duration_case(value, right), timeout_s=30, right=right)
    # under 1 MB is refused: not room for one segment of a large node's samples
    for value, right in (("0", "bad"), ("-1", "bad"), ("1e-9", "bad"), ("nan", "bad"),
                         ("inf", "bad"), ("1e400", "bad"), ("0.001", "bad"), ("abc", "bad"),
                         ("1", "ok"), ("0.2", "bad"), ("2.5", "ok")):
        out.add(f"max-size/{value}", f"record --max-size {value}",
                max_size_case(value, right), timeout_s=40, right=right)
    for value, right in RETAIN.items():
        out.add(f"retain/{value}", f"record --retain {value}", retain_case(value, right),
                timeout_s=30, right=right)
    for url, right in PUSH_URLS.items():
        label = repr(url)[1:-1][:40]
        out.add(f"push/{label}", f"serve --push {label}", push_case(url, right),
                timeout_s=40, right=right)
    for mode in ("ok", "500", "silent"):
        out.add(f"push/gateway-{mode}", f"serve --push to a gateway that answers {mode}",
                push_case("http://127.0.0.1:{port}", "runs" if mode != "ok" else "ok", mode),
                timeout_s=40, expect=HANDLED)
    out.add("push/gateway-silent-while-scraped", "serve --listen and --push to a "
            "gateway that never answers: sampling stays fresh, SIGTERM stops it",
            push_blocks_case(), timeout_s=60, expect=HANDLED)
    for value, right in (("0", "bad"), ("-1", "bad"), ("nan", "bad"), ("1e-9", "either")):
        out.add(f"push-interval/{value}", f"serve --push-interval {value}",
                push_case("http://127.0.0.1:{port}", right, "ok", interval=value),
                timeout_s=40, right=right)
    for value, right in LISTEN.items():
        out.add(f"listen/{value or 'empty'}", f"serve --listen {value!r}",
                listen_case(value, right), timeout_s=30, right=right)
    for value, right in (("-1", "either"), (str(2**70), "either"), ("abc", "bad"), ("nan", "bad"),
                         ("1e400", "bad"), ("0", "ok"), ("1.5", "bad")):
        out.add(f"seed/{value}", f"--once --demo --seed {value}", seed_case(value, right),
                timeout_s=40, right=right)
    for glob in GLOBS:
        label = repr(glob)[1:-1][:30] or "empty"
        out.add(f"devices/{label}", f"--once -d {label}", glob_case(glob),
                timeout_s=30)
    for value, right in COUNTS.items():
        out.add(f"count/{value}", f"serve --count {value}", count_case(value, right),
                timeout_s=30, right=right)
    for opt, value, right in THRESHOLDS:
        out.add(f"thresholds/{opt.strip('-')}={value}", f"--once {opt} {value}",
                threshold_case(opt, value, right), timeout_s=30, right=right)
    for args, right in ((["--demo", "nope"], "bad"), (["--demo", "../../etc/passwd"], "bad"),
                        (["--demo", "--demo-start", "-1"], "bad"), (["--demo", "--demo-start", "nan"], "bad"),
                        (["--demo", "--demo-start", "1e9"], "either"), (["--demo", "--demo-start", "inf"], "bad"),
                        (["--demo-actions"], "bad"), (["--seed", "3"], "bad")):
        out.add(f"demo/{'_'.join(a.strip('-./') for a in args)}", f"--once {' '.join(args)}",
                demo_case(args, right), timeout_s=30, right=right)
    for value, right in (("0", "bad"), ("-1", "bad"), ("10000", "either"), ("abc", "bad")):
        out.add(f"jobs/{value}", f"report --recompute -j {value}", jobs_case(value, right),
                timeout_s=70, right=right)
    for label in STDOUT_CMDS:
        out.add(f"stdout-full/{label}", f"{label} with stdout on a full device",
                stdout_case(label, "full"), timeout_s=30, expect=REFUSED)
    for label in ("once-json", "report-text"):
        out.add(f"stdout-closed/{label}", f"{label} with stdout closed",
                stdout_case(label, "closed"), timeout_s=30)
        out.add(f"stdout-reader-leaves/{label}", f"{label} | head -c 10",
                stdout_case(label, "leaves"), timeout_s=30, expect=HANDLED)
    for clients, per, slow, garbage in ((20, 10, False, False), (50, 4, False, False),
                                        (20, 10, True, False), (20, 5, False, True)):
        tag = f"{clients}x{per}" + ("-slowloris" if slow else "") + ("-garbage" if garbage else "")
        out.add(f"scrape/{tag}", f"{clients} concurrent scrapers x {per}"
                + (", 10 connections that never finish their request" if slow else "")
                + (", and malformed requests first" if garbage else ""),
                scrape_case(clients, per, slow, garbage), timeout_s=90, expect=HANDLED,
                solo=True)
    return out
