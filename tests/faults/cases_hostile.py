"""Category 11: hostile input of issue 25, each named by the kind of fault it provokes.

- hang: a FIFO at `--procfs .../pressure/io` under `record` (--once is 8/json/pressure/io/fifo);
  a FIFO at the probe results path under `--once`, `record` (which must also stop on
  SIGTERM) and `probe`;
- harm: `probe` with a root-owned link at probes.json (what it points to must stay whole);
- silent-wrong: `probe` (fio) of a file that shrinks while it is read (a ceiling of 0 was
  kept, exit 0);
- unbounded memory: a smartctl that writes for ever under `--once` and `serve` (peak RSS);
- injection: verdict text with ESC and BEL into an alert log; an alert rule running
  `sh -c` with a placeholder;
- unbounded descriptors: `serve` under 2,000 idle connections and slow clients while a
  scraper asks every second;
- silent-wrong: NFS and FUSE counters that reset or jump to impossible values.

Every case runs the real command line in a directory of its own; FIFOs, links and fake
executables are made there, never elsewhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

from harness import (Case, Cases, Ctx, Result, finish, gdt_argv, judge, parse_json, stop)
from fakeprocfs import FakeProcfs

CAT = 11
RSS_KB = 200 * 1024


def _state(ctx: Ctx) -> tuple[dict, str]:
    d = ctx.path("state", "gpudisk-top")
    os.makedirs(d)
    return ctx.env(XDG_STATE_HOME=ctx.path("state")), os.path.join(d, "probes.json")


def _term(ctx: Ctx, argv, env, after_s: float = 3.0):
    """Run argv; once it has run after_s, SIGTERM it (it must stop within 3 s)."""
    t0 = time.monotonic()
    proc = ctx.spawn(argv, env=env)
    try:
        proc.wait(after_s)
        return finish(proc, t0)
    except subprocess.TimeoutExpired:
        pass
    took, prompt = stop(proc, 3.0)
    return finish(proc, t0, timed_out=not prompt,
                  note=f"SIGTERM stopped it in {took:.2f} s" if prompt
                  else "SIGTERM not honoured within 3 s")


def _recording_has_samples(path: str) -> list[str]:
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return ["no recording written"]
    return []


# ------------------------------------------------------------------ pressure/io a FIFO
def psi_fifo_record(ctx: Ctx) -> Result:
    from cases_procfs import make_procfs

    root = make_procfs(ctx)
    os.unlink(os.path.join(root, "pressure", "io"))
    os.mkfifo(os.path.join(root, "pressure", "io"))
    out = ctx.path("r.gdtrec")
    run = _term(ctx, gdt_argv("record", "-o", out, "-i", "0.2", "--procfs", root), ctx.env())
    return judge(run, lambda: _recording_has_samples(out))


# ------------------------------------------------------------------ probes.json a FIFO
def results_fifo(which: str):
    def fn(ctx: Ctx) -> Result:
        env, path = _state(ctx)
        os.mkfifo(path)
        if which == "once":
            run = ctx.gdt("--once", "--json", "-i", "0.2", env=env, timeout=30)
            return judge(run, lambda: [] if parse_json(run.out) else ["stdout is not JSON"],
                         bound_s=8.0, bound_what="--once answered")
        if which == "record":
            out = ctx.path("r.gdtrec")
            run = _term(ctx, gdt_argv("record", "-o", out, "-i", "0.2"), env)
            return judge(run, lambda: _recording_has_samples(out))
        run = ctx.gdt("probe", "--engine", "builtin", "--seconds", "1.5", "/var/tmp", env=env,
                      timeout=30)
        return judge(run, lambda: ["probe kept results in a FIFO"])
    return fn


def results_root_link(ctx: Ctx) -> Result:
    env, path = _state(ctx)
    victim = ctx.path("victim.conf")
    with open(victim, "w") as f:
        f.write("precious\n")
    os.symlink(victim, path)
    run = ctx.gdt("probe", "--engine", "builtin", "--seconds", "1.5", "/var/tmp", env=env,
                  timeout=60)

    def harm():
        with open(victim) as f:
            return [] if f.read() == "precious\n" else ["the link's target was overwritten"]
    return judge(run, lambda: ["probe wrote through the link"], harm=harm)


def probe_file_shrinks(ctx: Ctx) -> Result:
    if not shutil.which("fio"):
        return Result("unjudged", "fio is not installed")
    env, path = _state(ctx)
    data = f"/var/tmp/gdt-matrix-shrink-{os.getpid()}-{os.path.basename(ctx.dir)}.bin"
    try:
        with open(data, "wb") as f:
            os.posix_fallocate(f.fileno(), 0, 256 * 2**20)
        t0 = time.monotonic()
        proc = ctx.spawn(gdt_argv("probe", "--engine", "fio", "--seconds", "6", data), env=env)
        from proctree import children
        while proc.poll() is None and not children(proc.pid) and time.monotonic() - t0 < 30:
            time.sleep(0.02)
        time.sleep(0.3)
        os.truncate(data, 1 << 20)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            return judge(finish(proc, t0, timed_out=True))
        run = finish(proc, t0)
    finally:
        if os.path.exists(data):
            os.unlink(data)

    def harm():
        return ["a ceiling was kept from a cut-short test"] if os.path.exists(path) else []
    return judge(run, lambda: ["exit 0: a file that shrank gave a ceiling"], harm=harm)


# ------------------------------------------------------------------ smartctl floods
def _flooding_smartctl(ctx: Ctx) -> dict:
    bindir = ctx.path("bin")
    os.mkdir(bindir)
    script = os.path.join(bindir, "smartctl")
    with open(script, "w") as f:
        f.write('#!/bin/sh\nexec yes \'{"json_format_version": [1, 0], "x": "'
                + "x" * 200 + '"}\'\n')
    os.chmod(script, 0o755)
    return ctx.env(PATH=f"{bindir}:{os.environ.get('PATH', '')}")


def smartctl_flood(which: str):
    def fn(ctx: Ctx) -> Result:
        from pathlib import Path

        from harness import kill_group, peak_rss_kb
        from test_health_live import host_sysfs

        env = _flooding_smartctl(ctx)
        sysfs = str(host_sysfs(Path(ctx.dir)))
        if which == "once":
            proc_argv = gdt_argv("--once", "--json", "-i", "1.5", "--sysfs", sysfs)
            t0 = time.monotonic()
            proc = ctx.spawn(proc_argv, env=env)
            peak = 0
            while proc.poll() is None and time.monotonic() - t0 < 30:
                peak = max(peak, peak_rss_kb(proc.pid))
                time.sleep(0.05)
            if proc.poll() is None:
                kill_group(proc)
                run = finish(proc, t0, timed_out=True)
            else:
                run = finish(proc, t0)
        else:
            t0 = time.monotonic()
            proc = ctx.spawn(gdt_argv("serve", "--listen", "127.0.0.1:0", "-i", "0.5",
                                      "--health-interval", "1", "--sysfs", sysfs), env=env)
            peak = 0
            while proc.poll() is None and time.monotonic() - t0 < 10:
                peak = max(peak, peak_rss_kb(proc.pid))
                time.sleep(0.05)
            took, prompt = stop(proc, 3.0)
            run = finish(proc, t0, timed_out=not prompt)
        run.note = f"peak RSS {peak // 1024} MB"

        def ok():
            p = [f"peak RSS {peak // 1024} MB (bound {RSS_KB // 1024} MB)"] if peak > RSS_KB else []
            if which == "once" and not parse_json(run.out):
                p.append("stdout is not JSON")
            return p
        return judge(run, ok)
    return fn


# ------------------------------------------------------------------ alert text and shells
def alert_log_escapes(ctx: Ctx) -> Result:
    from cases_procfs import make_procfs

    root = make_procfs(ctx)
    name = "sd\x1b]2;pwned\x07\x1b[2J"
    with open(os.path.join(root, "diskstats"), "w") as f:
        f.write(f"   8       0 {name} 1000 0 8000 10 0 0 0 0 0 10 10 0 0 0 0 0 0\n")
    log = ctx.path("alerts.log")
    cfg = ctx.path("config.toml")
    with open(cfg, "w") as f:
        f.write('[[alerts]]\nname = "any"\nmetric = "disk_util_pct"\nop = ">="\n'
                f'value = 0\ncooldown_s = 0\nlog = "{log}"\n')
    run = ctx.gdt("serve", "--listen", "127.0.0.1:0", "-i", "0.2", "--count", "4", "-a",
                  "--procfs", root, "--config", cfg, timeout=40)

    def ok():
        if not os.path.exists(log):
            return ["no alert was logged"]
        with open(log, "rb") as f:
            data = f.read()
        p = []
        if b"\x1b" in data or b"\x07" in data:
            p.append("raw ESC or BEL in the alert log")
        if b"\\x1b" not in data:
            p.append("the device name is not shown escaped in the log")
        return p
    return judge(run, ok)


def alert_shell(ctx: Ctx) -> Result:
    marker = ctx.path("ran")
    cfg = ctx.path("config.toml")
    with open(cfg, "w") as f:
        f.write('[[alerts]]\nname = "sh"\nverdict = ["healthy", "idle", "starved"]\n'
                f'cooldown_s = 0\ncommand = ["/bin/sh", "-c", "echo {{message}} > {marker}"]\n')
    run = ctx.gdt("serve", "--listen", "127.0.0.1:0", "-i", "0.2", "--count", "3",
                  "--config", cfg, timeout=40)

    def harm():
        return ["the shell ran with the machine's text in its script"] if os.path.exists(marker) else []
    return judge(run, lambda: ["a shell rule with a placeholder in its script was accepted"],
                 harm=harm)


# ------------------------------------------------------------------ connection floods
def connection_flood(idle: int, slow: int):
    def fn(ctx: Ctx) -> Result:
        import re
        import resource
        import socket
        import urllib.request

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = idle * 2 + slow + 256
        if soft < want:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
            except (OSError, ValueError):
                return Result("unjudged", f"cannot hold {want} descriptors here")
        t0 = time.monotonic()
        # the descriptors the old systemd unit gave it
        proc = ctx.spawn(["prlimit", "--nofile=1024:1024", "--"]
                         + gdt_argv("serve", "--listen", "127.0.0.1:0", "-i", "0.5"))
        port = None
        while time.monotonic() - t0 < 30 and port is None:
            line = proc.stderr.readline().decode(errors="replace")
            if not line:
                break
            m = re.search(r"serving http://127\.0\.0\.1:(\d+)/metrics", line)
            port = int(m.group(1)) if m else None
        if port is None:
            took, prompt = stop(proc, 3.0)
            return judge(finish(proc, t0, timed_out=not prompt))
        held, failures, ok_scrapes = [], [], 0
        url = f"http://127.0.0.1:{port}/metrics"
        try:
            def connect():
                s = socket.socket()
                s.setblocking(False)
                s.connect_ex(("127.0.0.1", port))
                return s
            held += [connect() for _ in range(idle)]
            slows = [connect() for _ in range(slow)]
            held += slows
            for i in range(6):
                for s in slows:
                    try:
                        s.send(b"GET /metrics HTTP/1.1\r\n"[i:i + 1])
                    except OSError:
                        pass
                held += [connect() for _ in range(idle // 6)]
                t1 = time.monotonic()
                try:
                    with urllib.request.urlopen(url, timeout=10) as r:
                        ok_scrapes += r.status == 200 and b"gpudisk_top_" in r.read()
                except OSError as err:
                    failures.append(f"scrape {i}: {err}")
                time.sleep(max(0.0, 1.0 - (time.monotonic() - t1)))
        finally:
            for s in held:
                s.close()
        took, prompt = stop(proc, 3.0)
        run = finish(proc, t0, timed_out=not prompt)
        run.note = f"{ok_scrapes}/6 scrapes succeeded"

        def ok():
            p = failures[:3]
            if "Too many open files" in run.err:
                p.append("serve ran out of descriptors")
            return p
        return judge(run, ok)
    return fn


# ------------------------------------------------------------------ NFS, Lustre, FUSE values
# No command-line path reaches a mount's numbers without a GPU job reading from a network
# mount, so these drive what the sampler hands the model (MountRaw counters, as
# collect/mounts.py and the recordings give them) through model.mounts.mount_views, in a
# fresh interpreter, from the published mountstats and Lustre samples.
NETFS_CODE = r"""
import dataclasses, json, math, os, sys
from gpudisk_top.collect import lustre, nfsstats
from gpudisk_top.collect.sample import MountRaw
from gpudisk_top.model.mounts import mount_views
fx = sys.argv[1]; which = sys.argv[2]
def read(name):
    return open(os.path.join(fx, name), "rb").read().decode("utf-8", "replace")
MP = "/mnt/nfs1/docs"
if which.startswith(("nfs", "recorded")):
    text = read("mountstats_nfsmountstats_mixed.next")
    if which == "nfs-digits":
        text = text.replace("READ: 584 ", "READ: " + "9" * 5000 + " ")
    prev = nfsstats.parse(read("mountstats_nfsmountstats_mixed"))[MP]
    cur = nfsstats.parse(text)[MP]
    rd = cur.ops.get("READ")
    if which == "nfs-bytes":
        cur.ops["READ"] = dataclasses.replace(rd, bytes_recv=rd.bytes_recv + 2**63)
    elif which == "nfs-ops":
        cur.ops["READ"] = dataclasses.replace(rd, ops=rd.ops + 10**13, trans=rd.trans + 10**13)
    elif which == "nfs-rtt":
        cur.ops["READ"] = dataclasses.replace(rd, rtt_ms=rd.rtt_ms + 10**18)
    elif which == "nfs-backlog":
        cur.xprt = dataclasses.replace(cur.xprt, bklog_u=cur.xprt.bklog_u + 10**16)
    before, after = nfsstats.mount_counters(prev), nfsstats.mount_counters(cur)
    if which == "recorded-1e40":
        after["read_bytes_recv"] = 10**40
    kind, fstype, source = "nfs", cur.fstype, cur.source
elif which.startswith("lustre"):
    prev = lustre.parse(read("lustre/llite_2.14_read_latency_stats"), name="a", kind="llite")
    cur = lustre.parse(read("lustre/llite_2.14_read_latency_stats.next"), name="a", kind="llite")
    rb = cur.counters["read_bytes"]
    cur.counters["read_bytes"] = rb._replace(sum=rb.sum + 10**19)
    before, after = lustre.mount_counters(prev), lustre.mount_counters(cur)
    kind, fstype, source = "lustre", "lustre", "mgs@tcp:/fs"
else:
    value = {"fuse-waiting-huge": 10**40, "fuse-waiting-negative": -3}[which]
    before, after = {"waiting": 1}, {"waiting": value}
    kind, fstype, source = "fuse", "fuse.x", "x"
views = mount_views({MP: MountRaw(MP, fstype, source, kind, counters=after)},
                    {MP: MountRaw(MP, fstype, source, kind, counters=before)}, {}, 1.0)
v = views[MP]
out = {f.name: getattr(v, f.name) for f in dataclasses.fields(v)}
out.setdefault("dropped", None)
print(json.dumps(out, default=str))
"""


def netfs_case(which: str):
    def fn(ctx: Ctx) -> Result:
        from harness import PY, TESTS

        fx = os.path.join(TESTS, "fixtures", "netfs")
        run = ctx.run([PY, "-c", NETFS_CODE, fx, which], timeout=30)

        def ok():
            doc = parse_json(run.out)
            if doc is None:
                return ["no JSON"]
            p = []
            for k in ("read_ops_s", "read_kb_s", "rtt_ms", "exec_ms", "queue_ms",
                      "retrans_s", "backlog", "waiting"):
                v = doc.get(k)
                if v is None:
                    continue
                if not isinstance(v, (int, float)) or not 0 <= v <= 1e9:
                    p.append(f"{k} = {v:.3g}" if isinstance(v, (int, float)) else f"{k} = {v!r}")
            if not doc.get("dropped"):
                p.append("nothing says why a number is missing or impossible")
            return p
        return judge(run, ok)
    return fn


# ------------------------------------------------------------------ the fleet (item 1)
def _fleet_body(kind: str) -> tuple[bytes, dict]:
    """(answer, AnswerServer options) of a hostile kind: a node's impossible numbers beside
    a good node, or an answer that is not Prometheus's."""
    from fleet_harness import node_series, table_answer

    now = time.time()
    bad = {"since-1e18": dict(since=1e18), "gpus-superscript": dict(gpus="²", gpu0="²"),
           "util-1e308": dict(util0=1e308), "gpu-minus-500": dict(util0=-5, util1=-5),
           "await-negative": dict(await_s=-1)}
    if kind in bad:
        return table_answer(node_series("good:9425", now),
                            node_series("bad:9425", now, **bad[kind])), {}
    if kind == "html":
        return b"<html><body><h1>502 Bad Gateway</h1></body></html>", {"content_type": "text/html"}
    if kind == "truncated":
        return table_answer(node_series("good:9425", now)), {"truncate_to": 500}
    if kind == "nested":
        return b'{"status":"success","data":' + b"[" * 300_000, {}
    if kind == "64mib":
        one = ('{"metric":{"__name__":"gpudisk_top_gpu_utilization_ratio","instance":'
               '"node-%07d:9425","job":"gpudisk-top","gpu":"0"},"value":[1796200000.5,"0.5"]}')
        n = (64 * 2**20 - 200) // len(one % 0 + ",")
        return ('{"status":"success","data":{"resultType":"vector","result":['
                + ",".join(one % i for i in range(n)) + "]}}").encode(), {}
    raise ValueError(kind)


def _fleet_ok(kind: str, out: str, json_out: bool) -> list[str]:
    """The oracle of a node's impossible numbers: the good node whole, the bad one's
    number not shown as given and its row saying so."""
    if json_out:
        doc = parse_json(out)
        if doc is None:
            return ["stdout is not JSON"]
        rows = {n.get("node"): n for n in doc.get("nodes", [])}
        good, bad = rows.get("good:9425"), rows.get("bad:9425")
        if good is None or bad is None:
            return [f"nodes {sorted(rows)}"]
        p = []
        if good.get("bad_series") or good.get("gpu_util_pct") is None:
            p.append("the good node's row is touched")
        if not bad.get("bad_series"):
            p.append("the bad node's row does not say bad data")
        for k in ("gpu_util_pct", "since_s"):
            v = bad.get(k)
            if v is not None and not (0 <= v <= 100 or (k == "since_s" and abs(v - time.time()) < 3e8)):
                p.append(f"{k} = {v} shown as given")
        for e in bad.get("evidence") or []:
            if (e.get("read_await_ms") or 0) < 0:
                p.append("a negative await shown")
        return p
    lines = out.splitlines()
    good = [x for x in lines if x.startswith("good:9425")]
    bad = [x for x in lines if x.startswith("bad:9425")]
    if not good or not bad:
        return ["a node's row is missing"]
    return [] if "bad data from its exporter" in bad[0] else ["the bad row does not say so"]


def fleet_once(kind: str, json_out: bool):
    def fn(ctx: Ctx) -> Result:
        from fleet_harness import AnswerServer

        body, kw = _fleet_body(kind)
        with AnswerServer(body, lifetime_s=ctx.remaining(), **kw) as srv:
            run = ctx.gdt("fleet", "--prometheus", srv.url, "--once",
                          *(["--json"] if json_out else []), timeout=60)
        return judge(run, lambda: _fleet_ok(kind, run.out, json_out))
    return fn


def fleet_memory(ctx: Ctx) -> Result:
    from fleet_harness import AnswerServer
    from harness import kill_group, peak_rss_kb

    body, _ = _fleet_body("64mib")
    with AnswerServer(body, lifetime_s=ctx.remaining()) as srv:
        t0 = time.monotonic()
        proc = ctx.spawn(gdt_argv("fleet", "--prometheus", srv.url, "--once", "--timeout", "60"))
        peak = 0
        err = []
        import threading
        threading.Thread(target=lambda: err.append(proc.communicate()), daemon=True).start()
        while proc.poll() is None and time.monotonic() - t0 < 60:
            peak = max(peak, peak_rss_kb(proc.pid))
            time.sleep(0.02)
        if proc.poll() is None:
            kill_group(proc)
        proc.wait(10)
        time.sleep(0.2)
        out, errb = err[0] if err else (b"", b"")
        from harness import Run
        run = Run(proc.args, proc.returncode, out.decode(errors="replace"),
                  errb.decode(errors="replace"), time.monotonic() - t0, False,
                  note=f"peak RSS {peak // 1024} MB")
    return judge(run, lambda: [], harm=lambda: (
        [f"peak RSS {peak // 1024} MB (bound 400 MB)"] if peak > 400 * 1024 else []),
        bound_s=30, bound_what="answered")


def fleet_screen(kind: str):
    def fn(ctx: Ctx) -> Result:
        from fleet_harness import AnswerServer
        from harness import run_pty

        body, kw = _fleet_body(kind)
        with AnswerServer(body, lifetime_s=ctx.remaining(), **kw) as srv:
            run, screen, _ = run_pty(ctx, gdt_argv("fleet", "--prometheus", srv.url),
                                     quit_after_s=6.0, cols=120, rows=30)

        def ok():
            if kind == "html":
                return [] if b"not Prometheus" in screen else ["the screen does not say why"]
            return [] if b"bad data" in screen else ["the screen does not show the bad row"]
        return judge(run, ok)
    return fn


# ------------------------------------------------------------------ a stalled output (item 6)
def stalled_output(which: str):
    def fn(ctx: Ctx) -> Result:
        import signal

        import slowfs
        from harness import Run

        src = ctx.path("src")
        os.makedirs(src)
        try:
            mounting = slowfs.mounted(src, writable=True)
            mnt, daemon = mounting.__enter__()
        except BaseException as err:  # noqa: BLE001 - pytest.skip too
            from harness import unjudged
            return unjudged(f"no FUSE here: {err}")
        rec = os.path.join(mnt, "node.gdtrec")
        lines: list[str] = []
        try:
            t0 = time.monotonic()
            proc = ctx.spawn(gdt_argv("record", "-o", rec, "-i", "0.1"))
            import threading

            def read():
                for line in proc.stderr:
                    lines.append(line.decode(errors="replace"))
            threading.Thread(target=read, daemon=True).start()
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not (
                    os.path.exists(os.path.join(src, "node.gdtrec"))
                    and os.path.getsize(os.path.join(src, "node.gdtrec")) > 0):
                time.sleep(0.1)
            time.sleep(1.0)
            os.kill(daemon.pid, signal.SIGSTOP)
            note = ""
            if which == "gap":
                time.sleep(10.0)
                os.kill(daemon.pid, signal.SIGCONT)
                time.sleep(2.0)
            else:
                time.sleep(1.0)
            t_term = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            while time.monotonic() - t_term < 8 and not any("; SIGTERM" in x for x in lines):
                time.sleep(0.05)
            said_s = time.monotonic() - t_term
            os.kill(daemon.pid, signal.SIGCONT)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                kill_group = __import__("harness").kill_group
                kill_group(proc)
                proc.wait(10)
            time.sleep(0.2)
            hung = said_s >= 8
            note = f"its last line {said_s:.1f} s after SIGTERM"
            run = Run(proc.args, proc.returncode, "", "".join(lines), time.monotonic() - t0,
                      hung, note=note)
            report = ctx.gdt("report", rec, timeout=60) if which == "gap" else None
        finally:
            with __import__("contextlib").suppress(OSError):
                os.kill(daemon.pid, signal.SIGCONT)
            mounting.__exit__(None, None, None)

        def ok():
            p = []
            if which == "gap":
                if not any("not recording" in x for x in lines):
                    p.append("nothing said it was not recording")
                if report is None or "NOT RECORDED " not in report.out:
                    p.append("report shows no gap")
            return p
        return judge(run, ok)
    return fn


# ------------------------------------------------------------------ text is data (item 7)
MOUNT_NL = r"/mnt/a\012verdict:\040healthy" + "\x1b]0;owned\x07"
EVIL_DEV = "vd\x1b]0;owned\x07x"


def _procfs_with_evil_text(ctx: Ctx) -> str:
    procfs = FakeProcfs(ctx.path("proc")).copy(
        "stat", "meminfo", "pressure/io", "pressure/cpu", "pressure/memory", "self/cgroup",
        "cmdline")
    with open("/proc/diskstats") as f:
        disk = next(x for x in f if int(x.split()[3]) > 0
                    and not x.split()[2].startswith(("loop", "ram")))
    major, minor, name = disk.split()[:3]
    procfs.write("diskstats", disk + f"   7       9 {EVIL_DEV} 1 0 8 1 0 0 0 0 0 1 1 0 0 0 0 0 0\n")
    with open("/proc/self/mountinfo") as f:
        mountinfo = f.read() + f"99 1 {major}:{minor} / {MOUNT_NL} rw - ext4 /dev/{name} rw\n"
    for d in ("self", "1"):
        procfs.write(f"{d}/mountinfo", mountinfo)
    return str(procfs)


def _no_injected_lines(text: str) -> list[str]:
    p = []
    if "\x1b" in text or "\x07" in text:
        p.append("a raw escape in the output")
    if any(x.startswith("verdict: healthy") for x in text.splitlines()):
        p.append("a line 'verdict: healthy' made of a mountpoint")
    return p


def text_injection(which: str):
    def fn(ctx: Ctx) -> Result:
        procfs = _procfs_with_evil_text(ctx)
        if which == "once":
            run = ctx.gdt("--once", "--procfs", procfs, "-a", timeout=30)
            return judge(run, lambda: _no_injected_lines(run.out))
        rec = ctx.path("r.gdtrec")
        made = ctx.gdt("record", "--procfs", procfs, "-a", "-o", rec, "--duration", "2",
                       "-i", "0.5", timeout=30)
        if made.rc != 0:
            return judge(made)
        run = (ctx.gdt("report", rec, timeout=30) if which == "report"
               else ctx.gdt("export", rec, "-f", "csv", "-o", "-", timeout=30))
        return judge(run, lambda: _no_injected_lines(run.out))
    return fn


def cases() -> list[Case]:
    out = Cases(CAT)
    out.add("hang/procfs-pressure-io-fifo/record", "record with --procfs whose pressure/io "
            "is a FIFO nobody writes; then SIGTERM", psi_fifo_record, right="ok", timeout_s=30)
    for which, right in (("once", "ok"), ("record", "ok"), ("probe", "refuse")):
        out.add(f"hang/probe-results-fifo/{which}", f"{which} with a FIFO at probes.json",
                results_fifo(which), right=right, timeout_s=30)
    out.add("harm/probe-results-root-link", "probe with a root-owned link at probes.json "
            "to another file", results_root_link, right="refuse", timeout_s=60)
    out.add("silent-wrong/probe-file-shrinks-fio", "probe --engine fio of a file cut to "
            "1 MiB while it is read", probe_file_shrinks, right="refuse", timeout_s=90,
            solo=True)
    for which in ("once", "serve"):
        out.add(f"memory/smartctl-writes-for-ever/{which}", f"{which} with a smartctl on PATH "
                "that writes for ever (peak RSS under 200 MB)", smartctl_flood(which),
                right="ok", timeout_s=40)
    out.add("injection/alert-log-escapes", "serve with an alert logging to a file about a "
            "device named with ESC and BEL", alert_log_escapes, right="ok", timeout_s=45)
    out.add("injection/alert-shell-placeholder", 'serve with an alert command ["/bin/sh", '
            '"-c", "echo {message} > FILE"]', alert_shell, right="refuse", timeout_s=45)
    for idle, slow in ((2000, 20), (1100, 0)):
        out.add(f"descriptors/serve-{idle}-idle-{slow}-slow", f"serve (RLIMIT_NOFILE 1024) "
                f"holding {idle} idle and {slow} slow connections, scraped every second",
                connection_flood(idle, slow), right="ok", timeout_s=60, solo=True)
    for which, desc in (("nfs-bytes", "NFS READ bytes up by 2^63 in a second"),
                        ("nfs-ops", "NFS READs up by 1e13 in a second"),
                        ("nfs-rtt", "NFS READ RTT up by 1e18 ms"),
                        ("nfs-backlog", "NFS transport backlog up by 1e16"),
                        ("nfs-digits", "an NFS READ counter of 5,000 digits"),
                        ("recorded-1e40", "a recorded NFS counter of 1e40"),
                        ("lustre-sum", "Lustre read_bytes sum up by 1e19 in a second"),
                        ("fuse-waiting-huge", "FUSE waiting of 1e40"),
                        ("fuse-waiting-negative", "FUSE waiting of -3")):
        out.add(f"silent-wrong/netfs/{which}", desc + " (model, from MountRaw counters)",
                netfs_case(which), right="ok", timeout_s=30)
    # issue 25 items 1, 6 and 7 (hostile2)
    for kind in ("since-1e18", "gpus-superscript", "util-1e308", "gpu-minus-500",
                 "await-negative"):
        for json_out in (False, True):
            fmt = "json" if json_out else "text"
            out.add(f"crash/fleet-{kind}/once-{fmt}", f"fleet --once ({fmt}) with one node's "
                    f"exporter giving {kind}", fleet_once(kind, json_out), right="ok",
                    timeout_s=60)
    for kind in ("html", "truncated", "nested"):
        out.add(f"crash/fleet-answer-{kind}/once", f"fleet --once when the answer is "
                f"{kind}", fleet_once(kind, False), right="refuse", timeout_s=60)
    for kind in ("since-1e18", "html"):
        out.add(f"crash/fleet-screen-{kind}", f"the fleet screen with {kind} (q after 6 s)",
                fleet_screen(kind), right="ok", timeout_s=60, solo=True)
    out.add("memory/fleet-64mib-answer", "fleet --once on a 64 MiB answer of tiny series "
            "(peak RSS under 400 MB, answered within 30 s)", fleet_memory, right="either",
            timeout_s=120, solo=True)
    out.add("hang/record-output-stalled-gap", "record on a FUSE mount whose daemon stops "
            "for 10 s: says so, goes on, report shows the gap", stalled_output("gap"),
            right="ok", timeout_s=90, solo=True)
    out.add("hang/record-output-stalled-sigterm", "record on a stopped FUSE mount, SIGTERM: "
            "its last line within 8 s", stalled_output("sigterm"), right="ok", timeout_s=60,
            solo=True)
    for which in ("once", "report", "csv"):
        out.add(f"injection/mount-newline/{which}", f"{which} of a mountpoint with "
                "'\\nverdict: healthy' and ESC, a device named with ESC", text_injection(which),
                right="ok", timeout_s=60)
    return out
