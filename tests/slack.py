"""The one rule for a wall-clock bound in a test: scale it with the load measured now.

A bound that holds on an idle machine (say "stops within 5 s") fails where other work
loads the CPUs or the suite runs under `nice`, though nothing is wrong. `slack()` is how
many times longer this process should expect to wait for a CPU: each runnable task of the
1-minute load average competes with it, weighted as the scheduler weighs a nice-0 task
against this process's niceness (CFS: a weight 1.25 times smaller a nice level)."""

from __future__ import annotations

import os


def slack() -> float:
    """1.0 on an idle machine, more when the CPUs are loaded or this process is niced."""
    cpus = len(os.sched_getaffinity(0)) or 1
    load_per_cpu = os.getloadavg()[0] / cpus
    return 1.0 + load_per_cpu * 1.25 ** max(0, os.nice(0))
