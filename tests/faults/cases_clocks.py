"""Category 5: report and export on recordings whose wall clock steps: sessions months or
years apart, files concatenated whose clock goes back, steps inside a session, zig-zags.

Each recording is made with the test helpers (tests/fault_helpers.py) from simulated
samples whose every wall time is known, so the oracle computes what must come out: the
samples counted, the time their intervals cover (never end minus start across a step),
the stretches of a clock that never went back, the intervals exported, every Perfetto
track's ts increasing, a --from/--to window taking its samples from every stretch; and
the command must finish within a bound set by the samples (a few hundred), not the span.
"""

from __future__ import annotations

import csv
import io
import os
import threading

import fixtures
from harness import HANDLED, Case, Cases, Ctx, Result, judge, parse_json

CAT = 5
T0 = 1767225600.0          # the simulator's 2026-01-01
DAY = 86400.0
YEAR = 365.25 * DAY
BOUND_S = 20.0             # a few hundred samples: seconds, whatever the span


def _sessions_months(gap_days: float):
    from fault_helpers import sim
    return [sim(120, seed=0), sim(150, seed=1, start_wall_s=T0 + gap_days * DAY)]


def _build(name: str):
    """(path, walls in recorded order, number of sessions)"""
    from fault_helpers import concat, record, shifted, sim

    d = fixtures.fpath(f"clocks-{name}")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "r.gdtrec")
    kind, _, arg = name.partition(":")
    if kind == "months":
        sessions = _sessions_months(float(arg))
        for s in sessions:
            record(path, s)
        return path, [x.wall_s for s in sessions for x in s], len(sessions)
    if kind == "back":
        back = float(arg)
        a = sim(200, seed=0, start_wall_s=T0 + back)
        b = sim(200, seed=1, start_wall_s=T0)
        pa, pb = record(os.path.join(d, "a.gdtrec"), a), record(os.path.join(d, "b.gdtrec"), b)
        concat(path, pa, pb, keep_preambles=True)
        return path, [x.wall_s for x in a + b], 2
    if kind == "step":
        back, fwd = (float(x) for x in arg.split(","))
        s = sim(300, seed=2)
        steps = s[:100] + shifted(s[100:200], -back) + shifted(s[200:], fwd - back)
        record(path, steps)
        return path, [x.wall_s for x in steps], 1
    if kind == "cat":
        n, keep = int(arg.split(",")[0]), arg.split(",")[1] == "keep"
        parts, walls = [], []
        for k in range(n):
            s = sim(60, seed=k, start_wall_s=T0 + (n - k) * DAY)
            parts.append(record(os.path.join(d, f"{k}.gdtrec"), s))
            walls += [x.wall_s for x in s]
        concat(path, *parts, keep_preambles=keep)
        return path, walls, n
    if kind == "zigzag":
        walls, parts = [], []
        for k in range(10):
            start = T0 + (k % 2) * 30 * DAY + k * 100
            s = sim(40, seed=k, start_wall_s=start)
            parts.append(record(os.path.join(d, f"{k}.gdtrec"), s))
            walls += [x.wall_s for x in s]
        concat(path, *parts)
        return path, walls, 10
    raise ValueError(name)


_built: dict = {}
_lock = threading.RLock()


def _cached(name: str):
    with _lock:
        if name not in _built:
            _built[name] = _build(name)
        return _built[name]


def stretches(walls: list[float]) -> int:
    return 1 + sum(1 for a, b in zip(walls, walls[1:]) if b < a)


RECORDINGS = ["months:30", "months:150", "months:3650", "months:36500",
              "back:3600", "back:86400", f"back:{YEAR:g}", f"back:{30 * YEAR:g}",
              "step:3600,3456000", "step:1,0", f"step:0,{100 * YEAR}",
              "cat:5,keep", "cat:5,drop", "zigzag:"]
COMMANDS = ["report-json", "report-json-recompute", "report-text", "export-csv", "export-jsonl",
            "export-perfetto"]


def command_case(name: str, command: str, window: tuple[float, float] | None = None):
    def fn(ctx: Ctx) -> Result:
        path, walls, sessions = _cached(name)
        n = len(walls)
        intervals = n - sessions
        win = []
        if window is not None:
            lo, hi = window
            win = ["--from", f"@{lo}", "--to", f"@{hi}"]
        if command.startswith("report"):
            args = ["report", path, *win]
            if command != "report-text":
                args.append("--json")
            if command == "report-json-recompute":
                args += ["--recompute", "-j", "2"]
        else:
            args = ["export", path, "-f", command.split("-")[1], "-o", "-", *win]
        run = ctx.gdt(*args, timeout=60)

        def ok():
            p = []
            if window is not None:
                inside = [w for w in walls if window[0] <= w <= window[1]]
                if command.startswith("report"):
                    d = parse_json(run.out)
                    if d is None:
                        return ["not JSON"]
                    if d["samples"] != len(inside):
                        p.append(f"window: {d['samples']} samples, {len(inside)} recorded in it")
                else:
                    lines = run.out.splitlines()
                    parts = stretches(inside) + sessions
                    if not len(inside) - parts <= len(lines) <= len(inside):
                        p.append(f"window: {len(lines)} intervals exported for {len(inside)} "
                                 f"samples in it")
                return p
            if command in ("report-json", "report-json-recompute"):
                d = parse_json(run.out)
                if d is None:
                    return ["not JSON"]
                if d["samples"] != n:
                    p.append(f"samples {d['samples']}, recorded {n}")
                if abs(d["duration_s"] - intervals) > 1e-6:
                    p.append(f"duration_s {d['duration_s']}, the intervals add up to {intervals}")
                for gpu, per in d["states"].items():
                    if abs(sum(per.values()) - d["duration_s"]) > 1e-6:
                        p.append(f"GPU {gpu}'s states add up to {sum(per.values())}, not the duration")
                        break
                if d["start_s"] != min(walls) or d["end_s"] != max(walls):
                    p.append("start_s/end_s are not the earliest and latest samples")
                if len(d["segments"]) != stretches(walls):
                    p.append(f"{len(d['segments'])} segments, the clock has {stretches(walls)} stretches")
                if sum(g["samples"] for g in d["segments"]) != n:
                    p.append("the segments do not hold every sample")
                longest = max(_runs(walls))
                if any(e["duration_s"] > longest for e in d["episodes"]):
                    p.append("an episode spans a clock step")
            elif command == "report-text":
                if "GPU utilization" not in run.out:
                    p.append("no GPU utilization chart")
                if stretches(walls) > 1 and "a gap or a clock step" not in run.out:
                    p.append("the chart does not mark the clock step")
            elif command == "export-jsonl":
                lines = run.out.splitlines()
                if len(lines) != intervals:
                    p.append(f"{len(lines)} intervals exported, {intervals} recorded")
            elif command == "export-csv":
                rows = list(csv.DictReader(io.StringIO(run.out)))
                host = [r for r in rows if r["kind"] == "host"]
                if len(host) != intervals:
                    p.append(f"{len(host)} host rows, {intervals} intervals recorded")
            elif command == "export-perfetto":
                d = parse_json(run.out)
                if d is None:
                    return ["not JSON"]
                events = d["traceEvents"]
                host = [e for e in events if e.get("ph") == "C" and e.get("name") == "host"]
                if len(host) != intervals:
                    p.append(f"{len(host)} host counters, {intervals} intervals recorded")
                last: dict = {}
                for e in events:
                    if e.get("ph") in ("C", "X"):
                        track = (e["pid"], e["tid"], e["name"] if e["ph"] == "C" else "")
                        if e["ts"] <= last.get(track, -1):
                            p.append(f"track {track} goes back in ts")
                            break
                        last[track] = e["ts"]
            return p

        return judge(run, ok, bound_s=BOUND_S, bound_what=f"{command} finished")
    return fn


def _runs(walls: list[float]) -> list[float]:
    """The span of each stretch of a clock that never went back."""
    out, start = [], walls[0]
    for a, b in zip(walls, walls[1:]):
        if b < a or b - a > 10:
            out.append(a - start)
            start = b
    out.append(walls[-1] - start)
    return out


def cases() -> list[Case]:
    out = Cases(CAT)
    for name in RECORDINGS:
        for command in COMMANDS:
            out.add(f"{name}/{command}", f"{command} of a recording ({name})",
                    command_case(name, command), timeout_s=70, expect=HANDLED)
    # windows across the steps back: from every stretch
    for back in (3600.0, 86400.0, YEAR):
        for k, (lo, hi) in enumerate(((T0 + 100, T0 + back + 50), (T0 + 50, T0 + 150),
                                      (T0 + back + 20, T0 + back + 199))):
            for command in ("report-json", "export-jsonl"):
                out.add(f"back:{back:g}/window{k}/{command}",
                        f"{command} --from/--to across a step back of {back:.0f} s",
                        command_case(f"back:{back:g}", command, (lo, hi)), timeout_s=70,
                        expect=HANDLED)
    for k, (lo, hi) in enumerate(((T0 + 50, T0 + 150 * DAY + 30), (T0 + 100 * DAY, T0 + 200 * DAY))):
        for command in ("report-json", "export-jsonl"):
            out.add(f"months:150/window{k}/{command}",
                    f"{command} --from/--to over sessions 150 days apart",
                    command_case("months:150", command, (lo, hi)), timeout_s=70,
                    expect=HANDLED)
    return out
