#!/usr/bin/env python3
"""The dashboard's UI thread alone: what drawing the screen costs, apart from sampling.

bench/bench_dashboard.sh measures the whole process tree (the sampling thread, Textual's
input and writer threads, the UI thread).  This bench runs the same dashboard (this
machine's disks, 8 stand-in GPUs whose GPU 0 runs a job of --workers sleeping workers,
a 120x40 tmux pane) and reads the CPU time of its main thread, where Textual's event loop,
the panels and the compositor run (time.thread_time), and of the whole process
(time.process_time), over --seconds from 5 s after the app is mounted.  Several checkouts
(LABEL=CHECKOUT, e.g. base=/tmp/base new=.) are interleaved in the same runs; medians
printed.

usage: python bench/bench_ui_thread.py [--seconds 30] [--runs 3] LABEL=CHECKOUT...
needs: tmux
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import standin  # noqa: E402

# the stand-in's code, but the app reports its threads' CPU time over METER_S and exits
TAIL = 'from gpudisk_top.cli import main\nsys.exit(main(cfg["argv"]))\n'
METER = '''
import json as _json, time as _time
from gpudisk_top.ui.app import GpuDiskApp
_mount, _t0 = GpuDiskApp.on_mount, {}
def on_mount(self):
    _mount(self)
    secs = float(os.environ["METER_S"])
    def start():
        _t0["t"] = (_time.thread_time(), _time.process_time(), _time.monotonic())
    def stop():
        ui, proc, wall = (a - b for a, b in zip(
            (_time.thread_time(), _time.process_time(), _time.monotonic()), _t0["t"]))
        with open(os.environ["METER_OUT"], "a") as f:
            f.write(_json.dumps({"label": os.environ["METER_LABEL"], "ui_pct": 100 * ui / wall,
                                 "proc_pct": 100 * proc / wall}) + "\\n")
        self.exit()
    self.set_timer(5, start)
    self.set_timer(5 + secs, stop)
GpuDiskApp.on_mount = on_mount
from gpudisk_top.cli import main
main(cfg["argv"])
'''


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("checkouts", nargs="+", metavar="LABEL=CHECKOUT")
    a = ap.parse_args()
    targets = []
    for arg in a.checkouts:
        label, sep, path = arg.partition("=")
        if not sep or not os.path.isdir(os.path.join(path, "gpudisk_top")):
            print(f"bench_ui_thread: not LABEL=CHECKOUT: {arg!r}", file=sys.stderr)
            return 2
        targets.append((label, os.path.abspath(path)))
    job = subprocess.Popen(["sh", "-c", f"for i in $(seq {a.workers}); do sleep 100000 & done; wait"])
    tmp = tempfile.mkdtemp(prefix="gdt-ui-thread-")
    out = os.path.join(tmp, "results.jsonl")
    code = os.path.join(tmp, "runner.py")
    with open(code, "w") as f:
        f.write(standin._CODE.replace(TAIL, METER))
    _, env = standin.command([], gpus=8, util_pct=95.0, processes={0: [job.pid]})
    try:
        for _ in range(a.runs):
            for label, path in targets:
                session = f"gdtui{os.getpid()}"
                run_env = dict(env, PYTHONPATH=path, METER_S=str(a.seconds), METER_OUT=out,
                               METER_LABEL=label)
                exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in run_env.items()
                                   if k in ("GDT_STANDIN", "PYTHONPATH", "METER_S", "METER_OUT",
                                            "METER_LABEL"))
                subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "40",
                                f"cd {path} && {exports} exec {sys.executable} {code}"], check=True)
                deadline = time.monotonic() + a.seconds + 60
                while time.monotonic() < deadline and subprocess.run(
                        ["tmux", "has-session", "-t", session], capture_output=True).returncode == 0:
                    time.sleep(1)
                subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    finally:
        subprocess.run(["pkill", "-P", str(job.pid)])
        job.terminate()
        job.wait()
    with open(out) as f:
        results = [json.loads(line) for line in f]
    for label, _ in targets:
        ui = [r["ui_pct"] for r in results if r["label"] == label]
        proc = [r["proc_pct"] for r in results if r["label"] == label]
        if ui:
            print(f"{label:>8}: UI thread {statistics.median(ui):.2f} % of a core, whole process "
                  f"{statistics.median(proc):.2f} % (median of {len(ui)} x {a.seconds} s; "
                  f"UI runs {[round(v, 2) for v in ui]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
