#!/usr/bin/env python3
"""What judging every job apart costs (issue 37): `record -i 1` on a node of eight
single-GPU jobs against a node of one 8-GPU job made of the same processes, in one run.

The processes: eight trainers (one a GPU, stand-in GPUs through tests/standin.py), each
with 8 worker processes under it (64 workers), asleep as a job's processes mostly are
between batches.  "one job": the eight trainers share SLURM_JOB_ID (one Slurm job of 8
GPUs); "eight jobs": each has its own.  Everything else is equal: the same processes,
the same GPUs, the same recorder.  Each run is `record -i 1 --duration --seconds`; its
CPU is utime + stime from /proc/PID/stat after --warmup s, in % of one core; the two
configurations alternate, --runs each, and the medians and their difference are printed
(the budget: 0.1 % of a core).

usage: python bench/bench_jobs.py [--seconds 30] [--warmup 5] [--runs 3] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import standin  # noqa: E402

TRAINER = ("import subprocess, sys, time\n"
           "kids = [subprocess.Popen(['sleep', '100000']) for _ in range(8)]\n"
           "print('up', flush=True)\n"
           "try:\n    time.sleep(100000)\nfinally:\n    [k.kill() for k in kids]\n")


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_trainers(shared: bool, tmp: str) -> list[subprocess.Popen]:
    script = os.path.join(tmp, "train.py")
    with open(script, "w") as f:
        f.write(TRAINER)
    procs = []
    for i in range(8):
        env = dict(os.environ, SLURM_JOB_ID=str(9000 if shared else 9000 + i))
        p = subprocess.Popen([sys.executable, script], env=env, stdout=subprocess.PIPE)
        p.stdout.readline()
        procs.append(p)
    return procs


def one_run(shared: bool, seconds: float, warmup: float, tmp: str) -> float:
    trainers = start_trainers(shared, tmp)
    try:
        rec = os.path.join(tmp, f"run-{shared}-{time.monotonic_ns()}.gdtrec")
        p = standin.popen(["record", "-o", rec, "-i", "1", "--duration", str(seconds + warmup + 5)],
                          gpus=8, processes={i: [t.pid] for i, t in enumerate(trainers)})
        time.sleep(warmup)
        c0, t0 = _cpu_s(p.pid), time.monotonic()
        time.sleep(seconds)
        c1, t1 = _cpu_s(p.pid), time.monotonic()
        p.kill()
        p.wait()
        os.unlink(rec) if os.path.exists(rec) else None
        return (c1 - c0) / (t1 - t0) * 100
    finally:
        for t in trainers:
            t.kill()
            t.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--warmup", type=float, default=5)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    got: dict[str, list[float]] = {"one 8-GPU job": [], "eight 1-GPU jobs": []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(a.runs):
            got["one 8-GPU job"].append(one_run(True, a.seconds, a.warmup, tmp))
            got["eight 1-GPU jobs"].append(one_run(False, a.seconds, a.warmup, tmp))
    med = {k: statistics.median(v) for k, v in got.items()}
    for k, v in got.items():
        print(f"{k:18}  record -i 1: {med[k]:.2f} % of a core (runs: "
              f"{', '.join(f'{x:.2f}' for x in v)})")
    diff = med["eight 1-GPU jobs"] - med["one 8-GPU job"]
    print(f"difference: {diff:+.2f} % of a core (budget +0.10)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": got, "median_pct": med, "difference_pct": diff}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
