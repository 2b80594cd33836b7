"""Make a 24-hour recording of the simulator's demo scenario, as fast as the CPU allows.

    python bench/make_day.py [-o /tmp/day.gdtrec] [--hours 24] [--scenario demo]

Samples carry the simulator's virtual clock (1 Hz from 2026-01-01T00:00:00Z), so a day
takes a few minutes to write, not a day.  Prints the file size and the size per day.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpudisk_top.record import Recorder, make_header  # noqa: E402
from gpudisk_top.sim import Simulator, builtin  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--output", default="/tmp/gpudisk-top-day.gdtrec")
    p.add_argument("--hours", type=float, default=24.0)
    p.add_argument("--scenario", default="demo")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if os.path.exists(args.output):
        os.remove(args.output)
    n = int(args.hours * 3600)
    sim = Simulator(builtin(args.scenario), seed=args.seed)
    origin = {"source": f"simulated, scenario {args.scenario}, seed {args.seed}",
              "host_name": "demo-node", "kernel": "simulated"}
    t0 = time.perf_counter()
    sample_s = 0.0
    with Recorder(args.output, make_header(origin, 1.0), sync_interval_s=None) as rec:
        for i in range(n):
            a = time.perf_counter()
            s = sim.sample()
            sample_s += time.perf_counter() - a
            rec.append(s)
            if i % 3600 == 0:
                print(f"  {i / 3600:.0f} h ...", file=sys.stderr, flush=True)
    took = time.perf_counter() - t0
    size = os.path.getsize(args.output)
    print(f"{args.output}: {n} samples ({args.hours:g} h of scenario {args.scenario}), "
          f"{size / 1e6:.2f} MB, {size / n:.0f} bytes/sample, "
          f"{size / 1e6 * 86400 / n:.1f} MB/day at 1 Hz; "
          f"written in {took:.0f} s ({(took - sample_s) / n * 1e6:.0f} us/sample in the recorder, "
          f"{sample_s / n * 1e6:.0f} us in the simulator)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
