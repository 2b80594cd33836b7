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
(the budget: 0.1 % of a core).  Then, finer than a recorder's CPU ticks can say: the
step alone (Model.new, every job's detector and ledger: verdict/step.py) in this process,
over the same samples of each configuration (Sampler with the NVML fake, --samples taken
0.2 s apart), in ms of CPU a step, median of 7 passes.

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


def step_ms(shared: bool, n: int, tmp: str) -> float:
    """CPU ms of one Stepper.step over n samples of the configuration, median of 7."""
    from gpudisk_top.collect.roots import Roots
    from gpudisk_top.collect.sampler import Sampler
    from gpudisk_top.sim.fake_nvml import FakeNvml
    from gpudisk_top.verdict.step import Stepper

    trainers = start_trainers(shared, tmp)
    try:
        nvml = FakeNvml.with_gpus(8)
        for i, t in enumerate(trainers):
            nvml.set_state(i, util_pct=90.0, processes=[(t.pid, 2**30)])
        sampler = Sampler(Roots(), nvml=nvml)
        samples = []
        for _ in range(n):
            nvml.advance_to(time.time())
            samples.append(sampler.sample())
            time.sleep(0.2)
        sampler.close()
    finally:
        for t in trainers:
            t.kill()
            t.wait()
    passes = []
    for _ in range(7):
        stepper = Stepper()
        t0 = time.process_time()
        for sample in samples:
            stepper.step(sample)
        passes.append((time.process_time() - t0) / n * 1000)
    return statistics.median(passes)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--warmup", type=float, default=5)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--samples", type=int, default=30)
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
    with tempfile.TemporaryDirectory() as tmp:
        steps = {"one 8-GPU job": step_ms(True, a.samples, tmp),
                 "eight 1-GPU jobs": step_ms(False, a.samples, tmp)}
    for k, v in steps.items():
        print(f"{k:18}  one step: {v:.3f} ms of CPU")
    step_diff = (steps["eight 1-GPU jobs"] - steps["one 8-GPU job"]) / 10   # ms a second at -i 1 -> % of a core
    print(f"the step's difference at -i 1: {step_diff:+.3f} % of a core")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": got, "median_pct": med, "difference_pct": diff,
                       "step_ms": steps, "step_difference_pct": step_diff}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
