"""Make a 24-hour recording of a simulated node, as fast as the CPU allows.

    python bench/make_day.py [-o /tmp/day.gdtrec] [--hours 24] [--scenario demo|FILE.toml]
                             [--no-summaries] [--health 600] [--groups]
                             [--cadence live|every] [--phase NAME]

--scenario takes a built-in's name or a scenario file: bench/scenarios/busy-day.toml is
the issue-41 day (8 GPUs, 16 disks every one of which moves every second, an 8-worker
job through healthy, starved and idle phases: the ledger and what-if fields a starved
day has).  --groups adds where the sample blocks' bytes go by field group (each group's
columns compressed alone, block by block: the parts add up to about the whole).

--cadence live (the default) takes the processes as `record` on a live node does (issue
41): every sample while the job may be starved, every 5 s while it is healthy, carried
with their age between reads; the rule is the live one (collect/detail.py's DetailCadence
with verdict/detail.py's figures and a Stepper's verdicts, as session/detail.py wires it
into the Sampler).  --cadence every: every sample reads them (the simulator's own, as
--demo shows them; a recording of `record` from before issue 41).

--phase NAME plays only the scenario's phase of that name, over and over (`--scenario
bench/scenarios/busy-day.toml --phase healthy`: a healthy day at the busy day's scale).

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
import dataclasses
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpudisk_top.collect.source import simulated_source  # noqa: E402
from gpudisk_top.record import Recorder, frames, make_header  # noqa: E402
from gpudisk_top.record import v2  # noqa: E402
from gpudisk_top.sim import Simulator, builtin, load_toml  # noqa: E402

# field groups of a block's column keys (record/v2/flatten.py's layout), by key prefix
GROUPS = (("d/", "disks (diskstats counters)"), ("v/", "device identity"),
          ("g/", "GPUs"), ("h/cg", "the job's cgroup"), ("h/", "host (cpu, psi, meminfo)"),
          ("p/", "processes"), ("T/", "process trees' I/O"), ("m/", "mounts"),
          ("H", "disk health"), ("t/", "times"), ("", "other (status, warnings, px)"))


def group_of(key: str) -> str:
    return next(name for prefix, name in GROUPS if key.startswith(prefix))


def bytes_by_group(path: str) -> dict[str, int]:
    """Each field group's columns of every sample block, encoded and compressed alone."""
    from gpudisk_top.record.v2 import blocks
    data = open(path, "rb").read()
    found, _ = frames.scan(data, frames.PREAMBLE.size)
    out: dict[str, int] = {}
    for f in found:
        if f.kind != frames.BLOCK:
            continue
        blk = v2.decode_block(memoryview(data)[f.start:f.end])
        for name in {group_of(k) for lay in blk.layouts for k in lay}:
            layouts, rows, ids = [], [], {}
            for j in range(len(blk.rows)):
                lay, vals = blk.values(j)
                keep = [i for i, k in enumerate(lay) if group_of(k) == name]
                sub = tuple(lay[i] for i in keep)
                lid = ids.setdefault(sub, len(layouts))
                if lid == len(layouts):
                    layouts.append(sub)
                rows.append((lid, [vals[i] for i in keep]))
            state = blk.state if name == "processes" else {}
            raw = blocks.encode_block(blk.first, rows, layouts, state, predict_cols=True)
            _, _, wl, rl, _ = v2.BLOCK_HEAD.unpack_from(raw)
            out[name] = out.get(name, 0) + wl + rl
    return out


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


class LiveCadence:
    """The simulator's samples as the live Sampler takes them under the slow cadence
    (collect/sampler.py _read_procs/_carried): a sample the cadence does not read carries
    the last read's processes (the same dict) and their age; a new Sample each time, the
    simulator's left as it made it."""

    def __init__(self, sim) -> None:
        from gpudisk_top.collect.detail import DetailCadence
        from gpudisk_top.verdict.detail import DetailWatch
        from gpudisk_top.verdict.step import Stepper

        self.sim = sim
        self.detail = DetailCadence(DetailWatch())
        self.stepper = Stepper()
        self.last = self.read = None
        self.read_gpu_pids: dict | None = None
        self.carried = 0

    def sample(self):
        from gpudisk_top.session.detail import after_step

        s = self.sim.sample()
        gpu_pids = s.gpu.local_pids()
        why = self.detail.due(s, self.last, self.sim.interval_s, gpu_pids != self.read_gpu_pids,
                              False)
        if why is None:
            self.carried += 1
            s = dataclasses.replace(s, procs=self.read.procs, procs_base=None,
                                    procs_age_s=self.detail.carried_age_s(s.mono_s))
        else:
            self.read_gpu_pids = gpu_pids
            s = dataclasses.replace(s, procs_age_s=self.detail.read_age_s(why))
            self.read = s
        self.last = s
        after_step(self, self.stepper.step(s).verdict)
        return s


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--output", default="/tmp/gpudisk-top-day.gdtrec")
    p.add_argument("--hours", type=float, default=24.0)
    p.add_argument("--scenario", default="demo", help="a built-in's name or a .toml file")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-summaries", action="store_true", help="raw samples only")
    p.add_argument("--health", type=float, default=0.0, metavar="S",
                   help="a health reading of every disk every S simulated seconds "
                        "(default 0: none)")
    p.add_argument("--groups", action="store_true",
                   help="where the sample blocks' bytes go, by field group")
    p.add_argument("--cadence", choices=("live", "every"), default="live",
                   help="the processes read as record does live (default), or every sample")
    p.add_argument("--phase", metavar="NAME", help="play only the scenario's phase NAME")
    args = p.parse_args()
    if os.path.exists(args.output):
        os.remove(args.output)
    n = int(args.hours * 3600)
    scenario = (load_toml(args.scenario) if args.scenario.endswith(".toml")
                else builtin(args.scenario))
    if args.phase is not None:
        phases = [ph for ph in scenario.phases if ph.name == args.phase]
        if not phases:
            p.error(f"--phase {args.phase}: the scenario has "
                    f"{', '.join(ph.name for ph in scenario.phases)}")
        scenario = dataclasses.replace(scenario, phases=phases)
    sim = Simulator(scenario, seed=args.seed, health_interval_s=args.health)
    source = LiveCadence(sim) if args.cadence == "live" else sim
    origin = simulated_source(scenario.name, args.seed)
    t0 = time.process_time()
    sample_s = 0.0
    with Recorder(args.output, make_header(origin, 1.0), sync_interval_s=None,
                  summaries=not args.no_summaries) as rec:
        for i in range(n):
            a = time.process_time()
            s = source.sample()
            sample_s += time.process_time() - a
            rec.append(s)
            if i % 3600 == 0:
                print(f"  {i / 3600:.0f} h ...", file=sys.stderr, flush=True)
    took = time.process_time() - t0
    size = os.path.getsize(args.output)
    print(f"{args.output}: {n} samples ({args.hours:g} h of scenario {scenario.name}), "
          f"{size / 1e6:.2f} MB, {size / n:.0f} bytes/sample, "
          f"{size / 1e6 * 86400 / n:.1f} MB/day at 1 Hz; "
          f"CPU {(took - sample_s) / n * 1e6:.0f} us/sample in the recorder"
          f"{'' if args.no_summaries else ' (summaries included)'}, "
          f"{sample_s / n * 1e6:.0f} us in the simulator"
          f"{' and the live cadence' if args.cadence == 'live' else ''}")
    if args.cadence == "live":
        print(f"  processes read at the live cadence: {n - source.carried} of {n} samples "
              f"read them, {source.carried} carried the read before")
    if sim.health is not None:
        print(f"  health: {sim.health.polls} polls of {len(sim.health.latest.readings)} disks")
    for name, b in sorted(where_the_bytes_go(args.output).items(), key=lambda x: -x[1]):
        print(f"  {name:<36} {b / n:7.1f} bytes/sample  {b / 1e6 * 86400 / n:6.2f} MB/day")
    if args.groups:
        print("  the sample blocks by field group (each compressed alone):")
        for name, b in sorted(bytes_by_group(args.output).items(), key=lambda x: -x[1]):
            print(f"    {name:<34} {b / n:7.1f} bytes/sample  {b / 1e6 * 86400 / n:6.2f} MB/day")
    return 0


if __name__ == "__main__":
    sys.exit(main())
