"""Category 12, part "recordings" (issue 35 item 5): a recording's absurd gap, a frozen
sampler, and utilizations that are not percentages, through the real `report` (text,
JSON, `--recompute`), `export` (csv, jsonl, Perfetto), `--once` and `serve`.

The inputs (each recording made with the project's real recorder, tests/fault_helpers.py,
from simulated samples of the demo node while its disk starves; 30 samples, 1 s apart, 8
GPUs):

- gap-mono: the monotonic clock jumps 1e9 s between two samples, the wall clock does not
  (a damaged or hostile recording: "222222.23 GPU-h lost" today);
- gap-both: both clocks jump 1e9 s (a session 31 years long with 29 intervals of 1 s);
- gap-20s: both clocks jump 20 s (a recorder stopped for 20 s, then resumed);
- util-nan, util-inf, util-neg (-50 %), util-huge (1e308 %): one sample's every GPU; the
  NaN, inf and 1e308 recordings are made with `--no-summaries`' recorder (raw samples only).

The oracles restate what the README and docs/ledger.md promise, not what the code does:
the GPU time a window counts (the ledger's GPU-seconds, `duration_s`) cannot exceed the
GPUs times the intervals' cadence (8 x 30 s here); a gap is said with its length (the
ledger's "gaps"); `report` and `report --recompute` give the same ledger; no output holds
NaN, an infinity or a negative utilization, and a utilization is a percentage (0-100).

Live: `serve` (stand-in GPUs, tests/standin.py) stopped with SIGSTOP for 8 s at
`-i 0.5`, then SIGCONT, scraped before and after: the GPU-seconds counted
(gpudisk_top_gpu_seconds_total and gpudisk_top_gpu_idle_seconds_total) grow by at most the wall time the
sampler ran (never by the frozen span) and the gap is exported and warned about; `--once`
and `record` with stand-in GPUs whose driver returns a utilization a uint32 wraps (-50 %:
4294967246) never show it.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import os
import re
import signal
import threading
import time
import urllib.request

import fixtures
from harness import HANDLED, Case, Cases, Ctx, Result, Run, finish, judge, stop

CAT = 12
GPUS = 8
N = 30
GAP_AT = 15                 # the gap is between samples GAP_AT - 1 and GAP_AT
BOUND_GPU_S = GPUS * N * 1.0  # every GPU, every interval of 1 s: the most a window counts
BOUND_S = 30.0              # seconds a command may take on 30 samples, whatever the span

RECORDINGS = {
    "gap-mono": "a 1e9 s jump of the monotonic clock, the wall clock steady",
    "gap-both": "both clocks jump 1e9 s between two samples",
    "gap-20s": "both clocks jump 20 s (a recorder stopped 20 s)",
    "util-nan": "one sample's GPUs at NaN %",
    "util-inf": "one sample's GPUs at inf %",
    "util-neg": "one sample's GPUs at -50 %",
    "util-huge": "one sample's GPUs at 1e308 %",
}
GAP_S = {"gap-mono": 1e9, "gap-both": 1e9, "gap-20s": 20.0}
COMMANDS = ("report-text", "report-json", "report-recompute", "report-agree", "export-csv",
            "export-jsonl", "export-perfetto")


# ------------------------------------------------------------------------ the recordings
def _with_util(sample, value: float):
    gpus = [dataclasses.replace(g, util_samples=None, util_now_pct=value) for g in sample.gpu.gpus]
    return dataclasses.replace(sample, gpu=dataclasses.replace(sample.gpu, gpus=gpus))


def _build(name: str) -> str:
    from fault_helpers import record, sim

    d = fixtures.fpath(f"r35-rec-{name}")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "r.gdtrec")
    # the demo node's first disk starvation begins near 60 s: its GPUs lose time there
    s = sim(120)[88:88 + N]
    kw = {}
    if name.startswith("gap-"):
        jump = GAP_S[name]
        wall = jump if name != "gap-mono" else 0.0
        s = s[:GAP_AT] + [dataclasses.replace(x, mono_s=x.mono_s + jump, wall_s=x.wall_s + wall)
                          for x in s[GAP_AT:]]
    else:
        value = {"util-nan": math.nan, "util-inf": math.inf, "util-neg": -50.0,
                 "util-huge": 1e308}[name]
        s[10] = _with_util(s[10], value)
        if name in ("util-nan", "util-inf", "util-huge"):
            kw["summaries"] = False
    return record(path, s, **kw)


_built: dict = {}
_lock = threading.RLock()


def _cached(name: str) -> str:
    with _lock:
        if name not in _built:
            _built[name] = _build(name)
        return _built[name]


# ------------------------------------------------------------------------ oracles
def _strict_json(text: str):
    """JSON that holds no NaN or infinity (Python's json reads them; JSON has none)."""
    def refuse(c):
        raise ValueError(f"{c} in the JSON")
    return json.loads(text, parse_constant=refuse)


def _bad_numbers(obj, path: str = "") -> list[str]:
    """Utilizations that are not percentages, anywhere in a JSON value."""
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _bad_numbers(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for k, v in enumerate(obj[:2000]):
            out += _bad_numbers(v, f"{path}[{k}]")
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        if not math.isfinite(obj):
            out.append(f"{path} = {obj}")
        elif "util" in path.rsplit(".", 1)[-1] and not 0 <= obj <= 100:
            out.append(f"{path} = {obj}")
    return out[:3]


def _ledger_problems(d: dict, name: str) -> list[str]:
    p = []
    led = d.get("ledger") or {}
    if not led.get("counted"):
        return [f"ledger not counted: {led.get('why_not')}"]
    for key in ("lost_gpu_s", "unused_gpu_s", "idle_gpu_s", "job_gpu_s", "gpu_s"):
        v = led.get(key)
        if not isinstance(v, (int, float)) or not 0 <= v <= BOUND_GPU_S:
            p.append(f"ledger {key} {v}: beyond {BOUND_GPU_S:g} GPU-s ({GPUS} GPUs x {N} s)")
    if not 0 <= d.get("duration_s", -1) <= N:
        p.append(f"duration_s {d.get('duration_s')} for {N} samples 1 s apart")
    if name in GAP_S:
        gaps = led.get("gaps")
        listed = (gaps or {}).get("listed") or []
        if not gaps or gaps.get("count") != 1 or not any(
                abs(g.get("gap_s", 0) - GAP_S[name]) <= max(2.0, 1e-6 * GAP_S[name])
                for g in listed):
            p.append(f"the {GAP_S[name]:g} s gap is not said with its length in the ledger: "
                     f"{json.dumps(gaps)[:200]}")
    return p


def _report(ctx: Ctx, path: str, *extra: str) -> Run:
    return ctx.gdt("report", path, "--json", *extra, timeout=60)


def command_case(name: str, command: str):
    def fn(ctx: Ctx) -> Result:
        path = _cached(name)
        if command == "report-text":
            run = ctx.gdt("report", path, timeout=60)
        elif command in ("report-json", "report-agree"):
            run = _report(ctx, path)
        elif command == "report-recompute":
            run = _report(ctx, path, "--recompute")
        else:
            run = ctx.gdt("export", path, "-f", command.split("-")[1], "-o", "-", timeout=60)
        other: list = []

        def ok():
            p = []
            if command == "report-text":
                out = run.out
                if re.search(r"\bnan\b|\binf\b|infinity", out.replace(path, ""), re.I):
                    p.append("NaN or inf in the text report")
                if re.search(r"-\d+(\.\d+)?%", out):
                    p.append("a negative percentage in the text report")
                m = re.search(r"GPU time lost: ([\d.]+) GPU-h of ([\d.]+)", out)
                if not m:
                    p.append("no 'GPU time lost' line")
                elif float(m.group(2)) * 3600 > BOUND_GPU_S + 1:
                    p.append(f"GPU time counted {m.group(2)} GPU-h, beyond {GPUS} GPUs x {N} s")
                if name in GAP_S and not re.search(r"\bgaps?\b", out.split("GPU time lost")[-1]):
                    p.append("the ledger section does not say the gap")
                return p
            if command.startswith("report"):
                try:
                    d = _strict_json(run.out)
                except ValueError as err:
                    return [f"not strict JSON: {err}"]
                p += _bad_numbers(d)
                p += _ledger_problems(d, name)
                if command == "report-agree":
                    other.append(_report(ctx, path, "--recompute"))
                    r = other[0]
                    if r.rc != 0:
                        return p + [f"--recompute exit {r.rc}: {r.err[-200:]}"]
                    try:
                        e = _strict_json(r.out)
                    except ValueError as err:
                        return p + [f"--recompute: not strict JSON: {err}"]
                    a, b = d.get("ledger") or {}, e.get("ledger") or {}
                    for key in ("lost_gpu_s", "unused_gpu_s", "idle_gpu_s", "job_gpu_s"):
                        x, y = a.get(key), b.get(key)
                        if not (isinstance(x, (int, float)) and isinstance(y, (int, float))
                                and abs(x - y) <= 1e-6 * max(1.0, abs(x))):
                            p.append(f"ledger {key}: report {x}, --recompute {y}")
                    if (a.get("gaps") or {}).get("count") != (b.get("gaps") or {}).get("count"):
                        p.append("report and --recompute count different gaps")
                    if d.get("duration_s") != e.get("duration_s"):
                        p.append(f"duration_s: report {d.get('duration_s')}, --recompute "
                                 f"{e.get('duration_s')}")
                return p
            fmt = command.split("-")[1]
            if fmt == "csv":
                rows = list(csv.DictReader(io.StringIO(run.out)))
                for r in rows:
                    for k, v in r.items():
                        if v and re.fullmatch(r"-?(nan|inf)", v, re.I):
                            return [f"{k} = {v} in the CSV"]
                    if r.get("kind") == "gpu" and r.get("gpu_util_pct"):
                        u = float(r["gpu_util_pct"])
                        if not 0 <= u <= 100:
                            return [f"gpu_util_pct {u} in the CSV"]
                    if float(r.get("interval_s") or 0) > 2:
                        return [f"an interval of {r['interval_s']} s exported (cadence 1 s)"]
                return p
            lines = run.out.splitlines()
            if fmt == "jsonl":
                for line in lines:
                    try:
                        obj = _strict_json(line)
                    except ValueError as err:
                        return [f"a line that is not strict JSON: {err}"]
                    p += _bad_numbers(obj)
                    if obj.get("interval_s", 0) > 2:
                        p.append(f"an interval of {obj['interval_s']} s exported (cadence 1 s)")
                    if p:
                        return p[:3]
                return p
            try:
                d = _strict_json(run.out)
            except ValueError as err:
                return [f"not strict JSON: {err}"]
            p += _bad_numbers(d)
            ledger = [e for e in d["traceEvents"] if e.get("name") == "GPU time lost (GPU-s)"]
            if ledger and sum(ledger[-1]["args"].values()) > BOUND_GPU_S:
                p.append(f"the ledger track ends at {sum(ledger[-1]['args'].values()):g} "
                         f"GPU-s, beyond {BOUND_GPU_S:g}")
            return p[:3]

        result = judge(run, ok, bound_s=BOUND_S, bound_what=f"{command} finished")
        if other and other[0].took_s > BOUND_S and result.outcome == "handled":
            result.outcome, result.detail = "hang", f"--recompute in {other[0].took_s:.1f} s"
        return result
    return fn


# ------------------------------------------------------------------------ serve frozen
def _scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        key, _, value = line.rpartition(" ")
        try:
            out[key] = float(value)
        except ValueError:
            pass
    return out


def _counted_gpu_s(m: dict[str, float]) -> float:
    """Every GPU-second the ledger counted: unused by cause (healthy's too) and idle."""
    return sum(v for k, v in m.items()
               if k.startswith(("gpudisk_top_gpu_seconds_total{", "gpudisk_top_gpu_idle_seconds_total")))


def _gaps(m: dict[str, float]) -> float:
    return sum(v for k, v in m.items() if k.startswith("gpudisk_top_sample_gap_seconds_total"))


def serve_frozen(ctx: Ctx) -> Result:
    import standin

    freeze_s = 8.0
    port_file = ctx.path("port")
    argv = ["serve", "--listen", "127.0.0.1:0", "-i", "0.5"]
    command, env = standin.command(argv, gpus=2, processes={0: [os.getpid()], 1: [os.getpid()]},
                                   util_pct=40.0)
    t0 = time.monotonic()
    proc = ctx.spawn(command, env=ctx.env(GDT_STANDIN=env["GDT_STANDIN"]))
    problems: list[str] = []
    url = None
    # the URL is on stderr ("serving http://127.0.0.1:PORT/metrics ..."): read it as it comes
    buf = b""
    import select
    while time.monotonic() - t0 < 20 and url is None and proc.poll() is None:
        r, _, _ = select.select([proc.stderr], [], [], 0.5)
        if r:
            chunk = os.read(proc.stderr.fileno(), 4096)
            buf += chunk
            m = re.search(rb"serving (http://[^\s)]+)", buf)
            if m:
                url = m.group(1).decode()
                if not url.endswith("/metrics"):
                    url = url.rstrip("/") + "/metrics"
    if url is None:
        stop(proc)
        run = finish(proc, t0)
        run.err = buf.decode(errors="replace") + run.err
        return judge(run, lambda: ["serve never said its URL"])
    open(port_file, "w").write(url)
    time.sleep(3.0)
    before = _scrape(url)
    w0 = time.monotonic()
    os.kill(proc.pid, signal.SIGSTOP)
    time.sleep(freeze_s)
    os.kill(proc.pid, signal.SIGCONT)
    time.sleep(2.5)
    after = _scrape(url)
    ran_s = time.monotonic() - w0 - freeze_s     # the wall time it was running between
    took, prompt = stop(proc)
    run = finish(proc, t0, timed_out=not prompt)
    run.err = buf.decode(errors="replace") + run.err
    grown = _counted_gpu_s(after) - _counted_gpu_s(before)
    # 2 GPUs x the time it ran, with a sample's slack either side
    bound = 2 * (ran_s + 2 * 0.5 + 0.5)
    if grown > bound:
        problems.append(f"GPU-seconds counted grew by {grown:.1f} over {ran_s:.1f} s of "
                        f"sampling (+ {freeze_s:g} s frozen): bound {bound:.1f}")
    if _gaps(after) < freeze_s - 1.0:
        problems.append(f"the frozen span is not exported as a gap "
                        f"(gpudisk_top_sample_gap_seconds_total {_gaps(after):g})")
    if "gap" not in run.err:
        problems.append("no warning says the gap")
    run.note = f"counted +{grown:.1f} GPU-s in {ran_s:.1f} s sampled, gap {_gaps(after):.1f} s"
    return judge(run, lambda: problems)


# ------------------------------------------------------------------------ live utilizations
def live_case(what: str):
    def fn(ctx: Ctx) -> Result:
        import standin

        if what == "once":
            argv = ["--once", "--json", "-i", "0.5"]
        else:
            rec = ctx.path("r.gdtrec")
            argv = ["record", "-o", rec, "-i", "0.25", "--duration", "1.5", "-q"]
        command, env = standin.command(argv, gpus=2, processes={0: [os.getpid()]}, util_pct=-50.0)
        run = ctx.run(command, env=ctx.env(GDT_STANDIN=env["GDT_STANDIN"]), timeout=40)

        def ok():
            if what == "once":
                try:
                    d = _strict_json(run.out)
                except ValueError as err:
                    return [f"not strict JSON: {err}"]
                return _bad_numbers(d)
            r = ctx.gdt("export", ctx.path("r.gdtrec"), "-f", "jsonl", "-o", "-", timeout=40)
            if r.rc != 0:
                return [f"export of the recording: exit {r.rc}: {r.err[-200:]}"]
            for line in r.out.splitlines():
                try:
                    bad = _bad_numbers(_strict_json(line))
                except ValueError as err:
                    return [f"export: not strict JSON: {err}"]
                if bad:
                    return bad
            return []
        return judge(run, ok, bound_s=30, bound_what=f"{what} finished")
    return fn


def cases() -> list[Case]:
    out = Cases(CAT)
    for name, what in RECORDINGS.items():
        for command in COMMANDS:
            out.add(f"recordings/{name}/{command}", f"{command} of a recording: {what}",
                    command_case(name, command), timeout_s=130, expect=HANDLED)
    out.add("recordings/serve-sigstop-8s", "serve (stand-in GPUs, -i 0.5) stopped 8 s by "
            "SIGSTOP, scraped before and after", serve_frozen, timeout_s=60, expect=HANDLED,
            solo=True)
    out.add("recordings/live-util-wrapped/once", "--once --json, a driver's utilization of -50 "
            "(a uint32: 4294967246)", live_case("once"), timeout_s=45, expect=HANDLED)
    out.add("recordings/live-util-wrapped/record", "record then export, a driver's "
            "utilization of -50 (a uint32: 4294967246)", live_case("record"), timeout_s=90,
            expect=HANDLED)
    return out
