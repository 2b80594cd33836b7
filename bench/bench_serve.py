#!/usr/bin/env python3
"""CPU cost of serving Prometheus metrics: `gpudisk-top serve --demo` (8 GPUs, 16 disks,
sampling every second) with and without scrapes.

Three measures, each of the serve process's own CPU over the measured window (user +
system of all its threads, exited ones included, from /proc/PID/stat), in phases of one process after a 5 s warm-up:
  idle      no scrape for --duration seconds (--repeat times, alternating, and once at the end)
  every-15s a scrape every 15 s (Prometheus's default interval) for --duration seconds
  burst     a scrape every 0.25 s for --burst seconds: the cost of one scrape, precisely
The figure that matters is the added share of one core at a 15 s scrape interval:
  per-scrape CPU / 15 s (from the burst), and (every-15s - idle) / duration directly (the
  direct difference is a few scrapes' worth, so it is noisier).
Scrapes send Prometheus 2.42's own headers (it prefers OpenMetrics and gzip; serve answers
with the text format, uncompressed, which is cheaper to produce).

With --record the process measured is `gpudisk-top record --demo --listen` instead (the
recorder writing to a temporary file while it serves): the issue's budget is for that one.

usage: python bench/bench_serve.py [--record] [--duration S] [--burst S] [--repeat N] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SERVE = ("import sys\n"
         "from gpudisk_top.commands import serve\n"
         "sys.exit(serve.run(serve.build_parser('gpudisk-top serve').parse_args(sys.argv[1:])))\n")
PROMETHEUS_HEADERS = {
    "Accept": "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
              "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    "Accept-Encoding": "gzip",
    "User-Agent": "Prometheus/2.42.0",
    "X-Prometheus-Scrape-Timeout-Seconds": "10",
}
WARMUP_S = 5.0
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_cpu_s(pid: int) -> float:
    """utime + stime of a live process (all its threads, dead ones included), seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_S


def scrape(url: str) -> int:
    req = urllib.request.Request(url, headers=PROMETHEUS_HEADERS)
    with urllib.request.urlopen(req, timeout=10) as r:
        return len(r.read())


RECORD = ("import sys\n"
          "from gpudisk_top.commands import record\n"
          "sys.exit(record.run(record.build_parser('gpudisk-top record').parse_args(sys.argv[1:])))\n")


def run_phases(phases: list[tuple[str, float, float | None]], recorder: bool = False) -> list[dict]:
    """One serve process through (name, seconds, scrape every N s or None) phases, back to
    back, after a warm-up: the CPU of each phase, so every comparison is within one
    process (no start-up cost, no difference between processes)."""
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="gpudisk-top-bench-")
    argv = ([sys.executable, "-c", RECORD, "-o", os.path.join(tmp, "b.gdtrec"), "-q"]
            if recorder else [sys.executable, "-c", SERVE])
    proc = subprocess.Popen(argv + ["--demo", "--listen", f"127.0.0.1:{port}"], cwd=ROOT,
                            stderr=subprocess.PIPE, text=True)
    proc.stderr.readline()   # "serving ..."
    url = f"http://127.0.0.1:{port}/metrics"
    time.sleep(WARMUP_S)
    scrape(url)              # the first scrape's one-time costs (imports): not measured
    time.sleep(1.0)
    out = []
    try:
        for name, duration_s, every_s in phases:
            cpu0, t0 = proc_cpu_s(proc.pid), time.monotonic()
            scrapes, size = 0, 0
            if every_s:
                next_at = t0
                while time.monotonic() - t0 < duration_s:
                    size = scrape(url)
                    scrapes += 1
                    next_at += every_s
                    time.sleep(max(0.0, min(next_at, t0 + duration_s) - time.monotonic()))
            else:
                time.sleep(duration_s)
            out.append({"phase": name, "seconds": time.monotonic() - t0,
                        "cpu_s": proc_cpu_s(proc.pid) - cpu0, "scrapes": scrapes,
                        "scrape_bytes": size})
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def render_cost_us(repeat: int = 200) -> dict:
    """In-process: one exposition of the demo node (what a scrape renders), microseconds."""
    from prometheus_client import generate_latest

    from gpudisk_top.exporter import MetricsServer
    from gpudisk_top.verdict.detect import Detector
    from gpudisk_top.model.snapshot import Model
    from gpudisk_top.sim import Simulator, builtin

    sim = Simulator(builtin("demo"), seed=0)
    det, last = Detector(), None
    server = MetricsServer(None)
    for _ in range(3):
        s = sim.sample()
        m = Model.new(s, last)
        last = s
        server.update(m, det.feed(m), det.episodes)
    encoder = generate_latest          # what /metrics serves (the text format)
    fresh, cached = [], []
    for _ in range(repeat):
        server.update(m, det.feed(m), det.episodes)      # a new frame: render from scratch
        t0 = time.perf_counter_ns()
        text = encoder(server.registry)
        fresh.append(time.perf_counter_ns() - t0)
        t0 = time.perf_counter_ns()
        encoder(server.registry)                          # the same frame again
        cached.append(time.perf_counter_ns() - t0)
    t0 = time.perf_counter_ns()
    for _ in range(repeat):
        server.update(m, None, det.episodes)
    update_us = (time.perf_counter_ns() - t0) / repeat / 1000
    return {"render_us": statistics.median(fresh) / 1000,
            "render_same_frame_us": statistics.median(cached) / 1000,
            "update_us": update_us, "bytes": len(text),
            "series": sum(1 for line in text.decode().splitlines() if line and line[0] != "#")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=60.0, help="seconds per idle/every-15s run")
    ap.add_argument("--burst", type=float, default=30.0, help="seconds of the 4/s scrape run")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each of idle and every-15s")
    ap.add_argument("--json", metavar="OUT")
    ap.add_argument("--record", action="store_true",
                    help="measure `record --listen` (the recorder) instead of `serve`")
    args = ap.parse_args()
    what = "record --demo --listen" if args.record else "serve --demo"

    inproc = render_cost_us()
    print(f"in-process: render one scrape {inproc['render_us']:.0f} us "
          f"({inproc['series']} series, {inproc['bytes']} bytes); same frame again "
          f"{inproc['render_same_frame_us']:.0f} us; update() {inproc['update_us']:.1f} us")
    plan = []
    for _ in range(args.repeat):
        plan += [("idle", args.duration, None), ("every-15s", args.duration, 15.0)]
    plan += [("burst", args.burst, 0.25), ("idle", args.duration, None)]
    results = run_phases(plan, recorder=args.record)
    idle = [r for r in results if r["phase"] == "idle"]
    every = [r for r in results if r["phase"] == "every-15s"]
    (burst,) = [r for r in results if r["phase"] == "burst"]

    def core_pct(r):
        return r["cpu_s"] / r["seconds"] * 100

    idle_pct = statistics.mean(core_pct(r) for r in idle)
    every_pct = statistics.mean(core_pct(r) for r in every)
    burst_extra_s = burst["cpu_s"] - idle_pct / 100 * burst["seconds"]
    per_scrape_ms = burst_extra_s / burst["scrapes"] * 1000
    added_15s_pct = per_scrape_ms / 1000 / 15 * 100
    for r in results:
        print(f"{r['phase']:10} {r['seconds']:6.1f} s  cpu {r['cpu_s'] * 1000:7.0f} ms  "
              f"= {core_pct(r):.3f}% of a core  scrapes {r['scrapes']}")
    print(f"{what} without scrapes: {idle_pct:.3f}% of a core")
    print(f"{what}, a scrape every 15 s: {every_pct:.3f}% of a core "
          f"(direct difference {every_pct - idle_pct:+.3f} points; +/- {TICK_S * 2 / args.duration * 100:.3f} "
          "from clock-tick accounting)")
    print(f"one scrape (burst of {burst['scrapes']}):           {per_scrape_ms:.2f} ms CPU, "
          f"{burst['scrape_bytes']} bytes")
    print(f"added by scraping every 15 s:         {added_15s_pct:.4f}% of a core "
          f"(budget 0.1%)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"in_process": inproc, "phases": results,
                       "idle_core_pct": idle_pct, "every_15s_core_pct": every_pct,
                       "per_scrape_cpu_ms": per_scrape_ms,
                       "added_core_pct_at_15s": added_15s_pct}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
