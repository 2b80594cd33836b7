#!/usr/bin/env python3
"""The fault matrix of issue 9: a few hundred hostile inputs and faults against the real
command line, each run under a hard timeout and classified automatically.

    python tests/faults/matrix.py                    # everything (about 20-30 minutes)
    python tests/faults/matrix.py --quick            # a sample of each category
    python tests/faults/matrix.py --quick --per-category 3 --category 1   # a smaller one
    python tests/faults/matrix.py --category 3 --category 8 --jobs 2 --json out.json
    python tests/faults/matrix.py --list             # the cases, without running them
    python tests/faults/matrix.py --case '1/export-csv/chr-null'   # one case (a glob)

Outcomes (harness.MEANING): clean-error, handled, hang, silent-wrong, crash, bad-error,
unjudged.  The table gives, per category of the issue, the inputs tried and how many of
each; the cases whose outcome is not one their input allows (a refusal where the input
must be handled, say) are listed under "unexpected" with the reason.  Needs root (mknod,
tmpfs mounts, another uid) for most of category 1, 4 and 9; without root those cases are
"unjudged".
"""

from __future__ import annotations

import argparse
import concurrent.futures
import fnmatch
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import fixtures  # noqa: E402
from harness import MEANING, OUTCOMES, ROOT, Case, Ctx, Result  # noqa: E402

CATEGORIES = {
    1: "outputs the user names",
    2: "alert actions",
    3: "hung NVML",
    4: "full disk",
    5: "report on clock steps",
    6: "sessions mixing, header damage",
    7: "impossible rates",
    8: "--procfs files",
    9: "config paths",
    10: "smaller argument faults",
    11: "hostile input (issue 25)",
    12: "reliability round (issue 35)",
}
MODULES = {1: "cases_outputs", 2: "cases_alerts", 3: "cases_nvml", 4: "cases_diskfull",
           5: "cases_clocks", 6: "cases_sessions", 7: "cases_rates", 8: "cases_procfs",
           9: "cases_config", 10: "cases_args", 11: "cases_hostile",
           12: "cases_reliability"}


def all_cases(categories) -> list[Case]:
    import importlib

    out = []
    for n in categories:
        try:
            module = importlib.import_module(MODULES[n])
        except ModuleNotFoundError as err:
            if err.name == MODULES[n]:
                continue
            raise
        out += module.cases()
    ids = [c.id for c in out]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise SystemExit(f"duplicate case ids: {sorted(dup)}")
    return out


def quick_sample(cases: list[Case], per_category: int = 12) -> list[Case]:
    out = []
    for n in sorted({c.category for c in cases}):
        these = [c for c in cases if c.category == n]
        if len(these) <= per_category:
            out += these
            continue
        step = len(these) / per_category
        out += [these[int(i * step)] for i in range(per_category)]
    return out


def run_case(case: Case, base: str, keep: bool) -> Result:
    ctx = Ctx(base, case)
    t0 = time.monotonic()
    try:
        result = case.fn(ctx)
    except Exception as err:  # noqa: BLE001 - a harness failure is reported, not counted
        result = Result("unjudged", f"the harness failed: {type(err).__name__}: {err}; "
                        + traceback.format_exc().splitlines()[-2].strip()[:200])
    finally:
        ctx.cleanup(keep=keep)
    if not result.took_s:
        result.took_s = round(time.monotonic() - t0, 3)
    result.expected = result.outcome in case.expect
    return result


def table(cases: list[Case], results: dict[str, Result]) -> str:
    cols = ("inputs", "clean err", "handled", "hangs", "silent wrong", "crashes", "bad err",
            "unjudged", "unexpected")
    keys = ("clean-error", "handled", "hang", "silent-wrong", "crash", "bad-error", "unjudged")
    rows = []
    total = [0] * len(cols)
    for n, title in CATEGORIES.items():
        these = [c for c in cases if c.category == n and c.id in results]
        if not these:
            continue
        counts = [len(these)] + [sum(results[c.id].outcome == k for c in these) for k in keys]
        counts.append(sum(not results[c.id].expected for c in these))
        total = [a + b for a, b in zip(total, counts)]
        rows.append((f"{n:>2}. {title}", counts))
    width = max(len(r[0]) for r in rows + [("total", [])]) + 1
    head = "category".ljust(width) + "".join(f"{c:>13}" for c in cols)
    lines = [head, "-" * len(head)]
    for label, counts in rows:
        lines.append(label.ljust(width) + "".join(f"{x:>13}" for x in counts))
    lines.append("-" * len(head))
    lines.append("total".ljust(width) + "".join(f"{x:>13}" for x in total))
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="outcomes:\n" + "\n".join(f"  {k:<13} {v}" for k, v in MEANING.items()))
    p.add_argument("--category", type=int, action="append", choices=sorted(CATEGORIES),
                   help="run only this category (repeatable)")
    p.add_argument("--case", action="append", metavar="GLOB", help="run only cases whose id matches")
    p.add_argument("--quick", action="store_true", help="a sample of each category (a few minutes)")
    p.add_argument("--per-category", type=int, default=12, metavar="N",
                   help="with --quick: cases a category (default 12)")
    p.add_argument("--jobs", type=int, default=2, help="cases run at once (default 2)")
    p.add_argument("--solo", choices=("with", "only", "without"), default="with",
                   help="the timing-sensitive cases (solo: run when nothing else runs) with "
                        "the others (default), only them, or none of them")
    p.add_argument("--json", metavar="FILE", help="write every case's result as JSON")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    p.add_argument("--keep", action="store_true", help="keep each case's directory")
    p.add_argument("--base", help="directory for the cases' files (default: a new one in /tmp)")
    p.add_argument("-v", "--verbose", action="store_true", help="a line per case as it ends")
    args = p.parse_args(argv)

    cats = args.category or sorted(CATEGORIES)
    cases = all_cases(cats)
    if args.case:
        cases = [c for c in cases if any(fnmatch.fnmatchcase(c.id, g) for g in args.case)]
    if args.quick:
        cases = quick_sample(cases, args.per_category)
    if args.solo != "with":
        cases = [c for c in cases if c.solo == (args.solo == "only")]
    if args.list:
        for c in cases:
            print(f"{c.id:<60} {c.desc}")
        print(f"{len(cases)} cases")
        return 0
    if os.geteuid() != 0:
        print("matrix: not root: the cases that need mknod, mount or another uid will be "
              "unjudged", file=sys.stderr)
    base = args.base or tempfile.mkdtemp(prefix="gdt-matrix-")
    os.makedirs(base, exist_ok=True)
    os.chmod(base, 0o755)
    fixtures.set_base(base)
    results: dict[str, Result] = {}
    lock = threading.Lock()
    started = time.monotonic()
    done = [0]

    def one(case: Case) -> None:
        r = run_case(case, base, args.keep)
        with lock:
            results[case.id] = r
            done[0] += 1
            if args.verbose or r.outcome not in ("clean-error", "handled") or not r.expected:
                mark = "" if r.expected else "  (unexpected)"
                print(f"[{done[0]:>4}/{len(cases)} {time.monotonic() - started:6.0f}s] "
                      f"{r.outcome:<12} {case.id}  {r.detail[:160]}{mark}", flush=True)

    parallel = [c for c in cases if not c.solo]
    solo = [c for c in cases if c.solo]
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        list(pool.map(one, parallel))
    for c in solo:
        one(c)
    elapsed = time.monotonic() - started

    print()
    print(table(cases, results))
    print(f"\n{len(cases)} cases in {elapsed:.0f} s (--jobs {args.jobs}"
          f"{', --quick' if args.quick else ''})")
    odd = [c for c in cases if results[c.id].outcome not in ("clean-error", "handled")
           or not results[c.id].expected]
    if odd:
        print("\nnot clean or not as expected:")
        for c in odd:
            r = results[c.id]
            print(f"  {r.outcome:<12} {c.id}: {r.detail[:300]}"
                  + ("" if r.expected else f" (expected {' or '.join(c.expect)})"))
    if args.json:
        doc = {
            "tool": "tests/faults/matrix.py",
            "commit": _git("rev-parse", "HEAD"),
            "python": platform.python_version(), "kernel": platform.release(),
            "argv": sys.argv[1:], "elapsed_s": round(elapsed, 1),
            "outcomes": MEANING,
            "categories": {str(n): t for n, t in CATEGORIES.items()},
            "totals": {k: sum(r.outcome == k for r in results.values()) for k in OUTCOMES},
            "cases": [dict(id=c.id, category=c.category, desc=c.desc, expect=list(c.expect),
                           timeout_s=c.timeout_s, repro=c.repro, **results[c.id].as_dict())
                      for c in cases],
        }
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"\nper-case results: {args.json}")
    if not args.keep and not args.base:
        subprocess.run(["rm", "-rf", base])
    return 0


def _git(*args) -> str | None:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT,
                              timeout=10).stdout.strip() or None
    except OSError:
        return None


if __name__ == "__main__":
    sys.exit(main())
