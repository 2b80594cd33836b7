"""Make a 24-hour recording of the simulator's demo scenario, as fast as the CPU allows.

    python bench/make_day.py [-o /tmp/day.gdtrec] [--hours 24] [--scenario demo] [--no-summaries]
                             [--health 600]

Samples carry the simulator's virtual clock (1 Hz from 2026-01-01T00:00:00Z), so a day
takes minutes to write, not a day.  Prints the file size, the size per day, where the
bytes go (sample blocks, their wall times, summaries, frame headers), and the recorder's
CPU per sample beside the simulator's (in a tight loop: a recorder at 1 Hz pays more per
sample for cold caches; bench/bench_record.py measures that).

--health S gives every disk a health reading every S seconds of the simulated clock, the
simulator's own (gpudisk_top/sim/health.py: a drive of each disk's class, its
temperature following the disk's load, the virtual disks unreadable); without it the
samples carry none.  Run it with and without to see what health readings cost a
recording.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpudisk_top.collect.source import simulated_source  # noqa: E402
from gpudisk_top.record import Recorder, frames, make_header  # noqa: E402
from gpudisk_top.record import v2  # noqa: E402
from gpudisk_top.sim import Simulator, builtin  # noqa: E402


def where_the_bytes_go(path: str) -> dict[str, int]:
    data = open(path, "rb").read()
    found, _ = frames.scan(data, frames.PREAMBLE.size)
    parts = {"frame headers and preamble": frames.PREAMBLE.size + frames.HEADER_SIZE * len(found)}
    for f in found:
        size = f.end - f.start
        if f.kind == frames.BLOCK:
            _, _, walls, raw, summ = v2.BLOCK_HEAD.unpack_from(data, f.start)
            parts["samples (block columns, LZMA)"] = parts.get("samples (block columns, LZMA)", 0) + raw
            parts["wall times (index)"] = parts.get("wall times (index)", 0) + walls + v2.BLOCK_HEAD.size
            parts["summaries (derived)"] = parts.get("summaries (derived)", 0) + summ
        else:
            name = {frames.SESSION: "session headers", frames.END: "end frames",
                    frames.ROW: "rows (a tail not yet in a block)",
                    frames.SUMMARY: "summaries of the tail"}.get(f.kind, "other")
            parts[name] = parts.get(name, 0) + size
    return parts


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--output", default="/tmp/gpudisk-top-day.gdtrec")
    p.add_argument("--hours", type=float, default=24.0)
    p.add_argument("--scenario", default="demo")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-summaries", action="store_true", help="raw samples only")
    p.add_argument("--health", type=float, default=0.0, metavar="S",
                   help="a health reading of every disk every S simulated seconds "
                        "(default 0: none)")
    args = p.parse_args()
    if os.path.exists(args.output):
        os.remove(args.output)
    n = int(args.hours * 3600)
    sim = Simulator(builtin(args.scenario), seed=args.seed, health_interval_s=args.health)
    origin = simulated_source(args.scenario, args.seed)
    t0 = time.process_time()
    sample_s = 0.0
    with Recorder(args.output, make_header(origin, 1.0), sync_interval_s=None,
                  summaries=not args.no_summaries) as rec:
        for i in range(n):
            a = time.process_time()
            s = sim.sample()
            sample_s += time.process_time() - a
            rec.append(s)
            if i % 3600 == 0:
                print(f"  {i / 3600:.0f} h ...", file=sys.stderr, flush=True)
    took = time.process_time() - t0
    size = os.path.getsize(args.output)
    print(f"{args.output}: {n} samples ({args.hours:g} h of scenario {args.scenario}), "
          f"{size / 1e6:.2f} MB, {size / n:.0f} bytes/sample, "
          f"{size / 1e6 * 86400 / n:.1f} MB/day at 1 Hz; "
          f"CPU {(took - sample_s) / n * 1e6:.0f} us/sample in the recorder"
          f"{'' if args.no_summaries else ' (summaries included)'}, "
          f"{sample_s / n * 1e6:.0f} us in the simulator")
    if sim.health is not None:
        print(f"  health: {sim.health.polls} polls of {len(sim.health.latest.readings)} disks")
    for name, b in sorted(where_the_bytes_go(args.output).items(), key=lambda x: -x[1]):
        print(f"  {name:<36} {b / n:7.1f} bytes/sample  {b / 1e6 * 86400 / n:6.2f} MB/day")
    return 0


if __name__ == "__main__":
    sys.exit(main())
