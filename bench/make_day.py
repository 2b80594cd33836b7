"""Make a 24-hour recording of the simulator's demo scenario, as fast as the CPU allows.

    python bench/make_day.py [-o /tmp/day.gdtrec] [--hours 24] [--scenario demo] [--no-summaries]
                             [--health 600]

Samples carry the simulator's virtual clock (1 Hz from 2026-01-01T00:00:00Z), so a day
takes minutes to write, not a day.  Prints the file size, the size per day, where the
bytes go (sample blocks, their wall times, summaries, frame headers), and the recorder's
CPU per sample beside the simulator's (in a tight loop: a recorder at 1 Hz pays more per
sample for cold caches; bench/bench_record.py measures that).

--health S gives every physical disk a health reading every S seconds, as the health
poller would (the simulator gives none): real drives' smartctl JSON
(tests/fixtures/health/) read by the collector's parser, one drive per disk in turn, the
temperature moving and the counters a drive adds to growing from one poll to the next.
Run it with and without to see what health readings cost a recording.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

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


class HealthPoller:
    """Snapshots as collect/health.py's poller hands them over, every interval_s of the
    simulator's clock: readings of real drives for `disks`."""

    def __init__(self, disks: list[str], interval_s: float) -> None:
        import dataclasses
        import glob
        import json

        from gpudisk_top.collect.health import parse_smartctl

        self.replace = dataclasses.replace
        files = sorted(glob.glob(os.path.join(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))), "tests", "fixtures", "health", "*.json")))
        drives = []
        for f in files:
            text = open(f).read()
            drives.append(parse_smartctl(text, "x", json.loads(text)["smartctl"]["exit_status"]))
        self.drives = {d: drives[k % len(drives)] for k, d in enumerate(disks)}
        self.interval_s = interval_s
        self.snapshot = None
        self.next_s = None
        self.polls = 0

    def _read(self, h, dev: str, t: float, k: int):
        def grown(value, by):
            return None if value is None else value + by
        return self.replace(h, device=dev, read_wall_s=t, read_cpu_s=0.003 + 0.001 * (k % 5),
                            temperature_c=grown(h.temperature_c, (k * 7 + len(dev)) % 9),
                            power_on_hours=grown(h.power_on_hours, k // 6),
                            error_log_entries=grown(h.error_log_entries, k // 12),
                            warning_temp_time_min=grown(h.warning_temp_time_min, k % 3))

    def snapshot_at(self, wall_s: float):
        from gpudisk_top.collect.sample import HealthSnapshot

        if self.next_s is None or wall_s >= self.next_s:
            self.next_s = wall_s + self.interval_s
            readings = {d: self._read(h, d, wall_s, self.polls) for d, h in self.drives.items()}
            first = self.snapshot.first if self.snapshot is not None else readings
            self.polls += 1
            self.snapshot = HealthSnapshot(readings, first, wall_s, self.polls)
        return self.snapshot


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--output", default="/tmp/gpudisk-top-day.gdtrec")
    p.add_argument("--hours", type=float, default=24.0)
    p.add_argument("--scenario", default="demo")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-summaries", action="store_true", help="raw samples only")
    p.add_argument("--health", type=float, metavar="S",
                   help="a health reading of every physical disk every S seconds")
    args = p.parse_args()
    if os.path.exists(args.output):
        os.remove(args.output)
    n = int(args.hours * 3600)
    sim = Simulator(builtin(args.scenario), seed=args.seed)
    origin = {"source": f"simulated, scenario {args.scenario}, seed {args.seed}",
              "host_name": "demo-node", "kernel": "simulated"}
    t0 = time.process_time()
    sample_s = 0.0
    poller = None
    with Recorder(args.output, make_header(origin, 1.0), sync_interval_s=None,
                  summaries=not args.no_summaries) as rec:
        for i in range(n):
            a = time.process_time()
            s = sim.sample()
            if args.health:
                if poller is None:
                    poller = HealthPoller([d for d, info in s.devices.items()
                                           if info.kind == "disk"], args.health)
                s.health = poller.snapshot_at(s.wall_s)
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
    if poller is not None:
        print(f"  health: {poller.polls} polls of {len(poller.drives)} disks")
    for name, b in sorted(where_the_bytes_go(args.output).items(), key=lambda x: -x[1]):
        print(f"  {name:<36} {b / n:7.1f} bytes/sample  {b / 1e6 * 86400 / n:6.2f} MB/day")
    return 0


if __name__ == "__main__":
    sys.exit(main())
