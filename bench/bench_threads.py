#!/usr/bin/env python3
"""What summing a process's threads' waits costs (issue 37, item 4): ProcIoCollector.collect()
of a real 64-process job, with this checkout's procio.py and an older one side by side in
the same run, each process of 1 thread and of --threads threads.

The job: one parent (the GPU process) and 64 children, each a Python process whose main
thread sleeps beside threads-1 others that are either asleep for good (--mode idle: their
schedstat never moves, so one read each a sample) or wake every 0.2 s (--mode waking: it
moves every sample, and with delay accounting on their stat is read too: the most reads).

Per sample, one collect() of each collector (alternating which goes first), at 1 Hz;
CPU time of this thread (time.thread_time), median of --samples after WARM samples.
--delayacct switches kernel.task_delayacct on for the run (root; the job is started
after, so that its tasks are accounted) and puts it back.

usage: python bench/bench_threads.py [--samples 30] [--threads 8] [--mode waking|idle]
                                     [--delayacct] [--against FILE|REV] [--json OUT]
--against: an older collect/procio.py, a file or a git revision whose file it is
(default: BEFORE, the commit before threads were summed); it is loaded beside this
checkout's, with this checkout's other modules.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from gpudisk_top.collect.delayacct import DelayAccounting  # noqa: E402
from gpudisk_top.collect.procio import ProcIoCollector  # noqa: E402
from gpudisk_top.collect.roots import Roots  # noqa: E402

PROCS = 64
BEFORE = "6675f91^"    # the commit before collect/threadtime.py
WARM = 3
CHILD = ("import sys, threading, time\n"
         "def idle():\n"
         "    threading.Event().wait()\n"
         "def waking():\n"
         "    while True:\n"
         "        time.sleep(0.2)\n"
         "for _ in range(int(sys.argv[1]) - 1):\n"
         "    threading.Thread(target={'idle': idle, 'waking': waking}[sys.argv[2]],\n"
         "                     daemon=True).start()\n"
         "time.sleep(100000)\n")
PARENT = ("import subprocess, sys, time\n"
          "kids = [subprocess.Popen([sys.executable, '-c', sys.argv[1], sys.argv[2], sys.argv[3]])\n"
          "        for _ in range(int(sys.argv[4]))]\n"
          "print('started', flush=True)\n"
          "for k in kids:\n"
          "    k.wait()\n")


def load_old(path: str):
    spec = importlib.util.spec_from_file_location("gdt_old_procio", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module           # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def start_job(threads: int, mode: str) -> subprocess.Popen:
    job = subprocess.Popen([sys.executable, "-c", PARENT, CHILD, str(threads), mode, str(PROCS)],
                           stdout=subprocess.PIPE, text=True, start_new_session=True)
    job.stdout.readline()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:     # every child up with all its threads
        try:
            kids = [int(p) for p in open(f"/proc/{job.pid}/task/{job.pid}/children").read().split()]
            counts = [len(os.listdir(f"/proc/{k}/task")) for k in kids]
        except OSError:
            counts = []
        if len(counts) == PROCS and all(c == threads for c in counts):
            break
        time.sleep(0.2)
    time.sleep(1.0)
    return job


def collectors(old_module) -> dict:
    """This checkout's collector and the old one, each having looked once (delay
    accounting seen on from now: a task forked after has its blocked time believed)."""
    out = {"new": ProcIoCollector(Roots()), "old": old_module.ProcIoCollector(Roots())}
    for c in out.values():
        c.collect({os.getpid(): os.getpid()})
    return out


def measure(job: subprocess.Popen, collectors: dict, samples: int) -> dict:
    """Median CPU ms of one collect() by each collector."""
    gpu = {job.pid: job.pid}
    took: dict[str, list[float]] = {name: [] for name in collectors}
    nprocs = 0
    for k in range(samples + WARM):
        w0 = time.monotonic()
        order = list(collectors) if k % 2 else list(reversed(collectors))
        for name in order:
            t0 = time.thread_time()
            out = collectors[name].collect(gpu)
            took[name].append((time.thread_time() - t0) * 1000)
            nprocs = len(out)
        time.sleep(max(0.0, 1.0 - (time.monotonic() - w0)))
    med = {name: statistics.median(v[WARM:]) for name, v in took.items()}
    return {"new_ms": med["new"], "old_ms": med["old"], "ratio": med["new"] / med["old"],
            "extra_pct_core_1hz": (med["new"] - med["old"]) / 10.0, "processes": nprocs}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--mode", choices=("waking", "idle"), default="waking")
    ap.add_argument("--delayacct", action="store_true")
    ap.add_argument("--against", metavar="FILE|REV", default=BEFORE)
    ap.add_argument("--json", metavar="OUT")
    a = ap.parse_args()
    tmp = None
    against = a.against
    if not os.path.isfile(against):
        tmp = tempfile.NamedTemporaryFile("w", suffix="_procio.py", delete=False)
        tmp.write(subprocess.run(["git", "-C", ROOT, "show", f"{against}:gpudisk_top/collect/procio.py"],
                                 capture_output=True, text=True, check=True).stdout)
        tmp.close()
        against = tmp.name
    old = load_old(against)
    acct = DelayAccounting() if a.delayacct else None
    result = {}
    try:
        if acct is not None:
            print(acct.enable() or "", file=sys.stderr)
            time.sleep(0.05)
        on = open("/proc/sys/kernel/task_delayacct").read().strip() == "1" \
            if os.path.exists("/proc/sys/kernel/task_delayacct") else None
        for threads in (1, a.threads):
            pair = collectors(old)
            time.sleep(0.05)                    # the job forked a clock tick after
            job = start_job(threads, a.mode)
            try:
                r = measure(job, pair, a.samples)
            finally:
                os.killpg(job.pid, signal.SIGKILL)    # the job's own group: its children
                job.wait()
            key = f"{PROCS} processes of {threads} thread{'s' * (threads > 1)}"
            result[key] = r
            print(f"{key} ({a.mode}, delay accounting {'on' if on else 'off'}; "
                  f"{r['processes']} followed): collect() {r['new_ms']:.3f} ms CPU median, "
                  f"against {r['old_ms']:.3f} ms ({a.against}): ratio {r['ratio']:.2f}, "
                  f"{r['extra_pct_core_1hz']:+.4f} % of a core at 1 Hz "
                  f"(median of {a.samples})", flush=True)
    finally:
        if acct is not None:
            acct.restore()
        if tmp is not None:
            os.unlink(tmp.name)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
