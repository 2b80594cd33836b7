"""How examples/demo-simulated.gdtrec was made: one pass (270 s) of the simulator's demo
scenario at 1 Hz, labelled as simulated in its header, its disks' simulated health read
every HEALTH_INTERVAL_S (`record --demo --health-interval 60`): at the default 600 s the
pass would hold one reading, and report no trend.

    python examples/make_demo.py
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from gpudisk_top.collect.source import simulated_source  # noqa: E402
from gpudisk_top.record import Recorder, make_header  # noqa: E402
from gpudisk_top.sim import Simulator, builtin  # noqa: E402

HEALTH_INTERVAL_S = 60.0


def main() -> None:
    path = os.path.join(HERE, "demo-simulated.gdtrec")
    if os.path.exists(path):
        os.remove(path)
    sim = Simulator(builtin("demo"), seed=0, health_interval_s=HEALTH_INTERVAL_S)
    origin = simulated_source("demo", 0)
    with Recorder(path, make_header(origin, 1.0, note="made by examples/make_demo.py"),
                  sync_interval_s=None) as rec:
        for _ in range(len(sim.labels()) + 1):
            rec.append(sim.sample())
    print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
