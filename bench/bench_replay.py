"""Time what a postmortem costs on a 24-hour recording: open + seek, and a full report.

    python bench/make_day.py -o /tmp/day.gdtrec      # once: 24 h of the demo scenario
    python bench/bench_replay.py /tmp/day.gdtrec [--seeks 50] [--no-report] [--no-recompute]

Open + seek: a fresh interpreter, as a user's command would be (import, open and index
the file, bisect to a random time, decode that sample); the median and worst of --seeks
runs.  Report: `report FILE --json` over the whole recording, in a fresh interpreter too:
once as it runs by default (from the recorded summaries when they fit: the JSON's
"derived" says), then with --recompute (replaying every sample through the model and the
detector, in one process); CPU time is printed beside the wall time, since wall time on a
busy machine says little.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SEEK = """
import sys, time
t0 = time.perf_counter()
from gpudisk_top.record import Recording
rec = Recording.open(sys.argv[1])
t1 = time.perf_counter()
i = rec.seek(rec.start_s + float(sys.argv[2]) * rec.duration_s)
sample = rec.sample(min(i, len(rec) - 1))
t2 = time.perf_counter()
print(f"{t1 - t0:.4f} {t2 - t1:.4f} {len(rec)}")
"""


def report_argv(path: str) -> list[str]:
    sys.path.insert(0, ROOT)
    from gpudisk_top.commands import COMMANDS

    if "report" in COMMANDS:
        return [sys.executable, "-m", "gpudisk_top", "report", path, "--json"]
    runner = ("import sys; from gpudisk_top.commands import report as r; "
              "sys.exit(r.run(r.build_parser('gpudisk-top report').parse_args(sys.argv[1:])))")
    return [sys.executable, "-c", runner, path, "--json"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("file")
    p.add_argument("--seeks", type=int, default=50)
    p.add_argument("--no-report", action="store_true")
    p.add_argument("--no-recompute", action="store_true", help="only the default report")
    args = p.parse_args()
    rng = random.Random(1)
    opens, seeks, totals = [], [], []
    n = 0
    for _ in range(args.seeks):
        out = subprocess.run([sys.executable, "-c", SEEK, args.file, repr(rng.random())],
                             capture_output=True, text=True, cwd=ROOT, check=True)
        o, s, n = out.stdout.split()
        opens.append(float(o))
        seeks.append(float(s))
        totals.append(float(o) + float(s))
    size = os.path.getsize(args.file)
    print(f"{args.file}: {int(n)} samples, {size / 1e6:.1f} MB")
    print(f"open+seek+decode (import included), {args.seeks} runs: median {statistics.median(totals):.3f} s, "
          f"worst {max(totals):.3f} s (open worst {max(opens):.3f} s, seek+decode worst {max(seeks):.3f} s)")
    if not args.no_report:
        runs = [[]] + ([] if args.no_recompute else [["--recompute"]])
        for extra in runs:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            out = subprocess.run(report_argv(args.file) + extra,
                                 capture_output=True, text=True, cwd=ROOT)
            took = time.perf_counter() - t0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if out.returncode != 0:
                print(out.stderr, file=sys.stderr)
                return 1
            how = json.loads(out.stdout).get("derived", "recomputed")
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            print(f"report --json {' '.join(extra)} over the whole recording ({how}): "
                  f"{took:.2f} s wall, {cpu:.2f} s CPU in all processes "
                  f"({cpu / int(n) * 1e6:.0f} us of CPU per sample)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
