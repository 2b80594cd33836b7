#!/usr/bin/env python3
"""A job whose own processes hold every CPU behind wrappers, as launchers (torchrun's
agent, `timeout`, a shell) wrap the processes they start: the trainer (the stand-in
GPU's process) starts --children busy loops, each under `timeout`, and makes STEPS_S
steps a second (its GPU at STEPS_S / 50) while they run.  Writes --progress as
tests/jobs/loader_job.py does.

usage: wrapped_job.py --progress FILE [--children N] [--seconds S]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

STEPS_S = 10.0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--progress", required=True)
    ap.add_argument("--children", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--seconds", type=float, default=30.0)
    a = ap.parse_args()
    kids = [subprocess.Popen(["timeout", str(int(a.seconds) + 5), sys.executable, "-c",
                              "while True: pass"]) for _ in range(a.children)]
    t0, steps = time.time(), 0
    try:
        while time.time() - t0 < a.seconds:
            time.sleep(1.0 / STEPS_S)
            steps += 1
            tmp = a.progress + ".tmp"
            with open(tmp, "w") as f:
                f.write(f"{steps} {time.time():.3f}\n")
            os.replace(tmp, a.progress)
    finally:
        for k in kids:
            k.terminate()
        for k in kids:
            k.wait(5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
