#!/usr/bin/env python3
"""Cost of parsing /proc/self/mountstats for a node with 8 NFS mounts, and of their rates.

The text is the first NFSv4.2 mount of tests/fixtures/netfs/mountstats_nfsmountstats_mixed
(69 per-op lines, RPC iostats 1.1) repeated 8 times under different mountpoints, after the
25 non-NFS mounts of the same file, which a real node lists too.  Reading the file is not
timed: the kernel's cost of generating it is not ours to spend.

usage: python bench/bench_netfs.py [--repeat N] [--json OUT]
Prints the median microseconds per full parse (and per 8 nfs_rates calls), and of what a
sample costs when the job reads all 8 mounts (READ of those mounts only, as counters, and
their views), with the share of one CPU core each takes at one sample a second.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from timing import median_us  # noqa: E402
from gpudisk_top.collect.nfsstats import parse, quick_counters  # noqa: E402
from gpudisk_top.collect.sample import MountRaw  # noqa: E402
from gpudisk_top.model.mounts import mount_views  # noqa: E402
from gpudisk_top.model.nfs import nfs_rates  # noqa: E402

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "tests", "fixtures", "netfs", "mountstats_nfsmountstats_mixed")
NMOUNTS = 8


def mountstats_text(nmounts: int = NMOUNTS) -> str:
    with open(FIXTURE, encoding="utf-8") as f:
        blocks = re.split(r"(?m)^(?=device )", f.read())
    others = "".join(b for b in blocks if "statvers=" not in b.split("\n", 1)[0])
    nfs = next(b for b in blocks if " with fstype nfs4 statvers=" in b.split("\n", 1)[0])
    head, rest = nfs.split("\n", 1)
    copies = [head.replace(" mounted on /mnt/nfs1/docs ", f" mounted on /mnt/data{i} ")
              + "\n" + rest.rstrip("\n") + "\n" for i in range(nmounts)]
    return others + "".join(copies)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=1000)
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()

    text = mountstats_text()
    mounts = parse(text)
    assert len(mounts) == NMOUNTS and all(len(m.ops) == 69 for m in mounts.values())
    parse_us = median_us(lambda: parse(text), args.repeat)
    rates_us = median_us(lambda: [nfs_rates(m, m, 1.0) for m in mounts.values()], args.repeat)
    # what the sampler and the model do every second when the job reads all 8 mounts:
    # READ of those mounts only, as flat counters (collect/nfsstats.py read_counters), and
    # their MountViews (model/mounts.py)
    wanted = set(mounts)

    def sample_path():
        return {mp: MountRaw(mp, "nfs4", mounts[mp].source, "nfs", counters=counters)
                for mp, counters in quick_counters(text, wanted).items()}
    raws = sample_path()
    sample_us = median_us(sample_path, args.repeat)
    views_us = median_us(lambda: mount_views(raws, raws, {}, 1.0), args.repeat)
    # a floor to judge the machine by: only splitting the text into words
    split_us = median_us(lambda: [line.split() for line in text.split("\n")], args.repeat)
    # at 1 Hz, one parse a second: the share of one core is the time of one parse
    cpu_pct = parse_us / 1e6 * 1.0 * 100
    figures = {"mounts": NMOUNTS, "bytes": len(text), "repeat": args.repeat,
               "parse_median_us": round(parse_us, 1),
               "rates_median_us": round(rates_us, 1),
               "split_only_median_us": round(split_us, 1),
               "parse_cpu_pct_of_one_core_at_1hz": round(cpu_pct, 4),
               "sample_path_median_us": round(sample_us, 1),
               "views_median_us": round(views_us, 1),
               "sample_cpu_pct_of_one_core_at_1hz": round((sample_us + views_us) / 1e4, 4)}
    print(f"mountstats with {NMOUNTS} NFS mounts ({len(text)} bytes), "
          f"median of {args.repeat}:")
    print(f"  parse        {parse_us:9.1f} us   = {cpu_pct:.3f}% of one core at 1 Hz")
    print(f"  nfs_rates x{NMOUNTS} {rates_us:9.1f} us")
    print(f"  a sample's  {sample_us:9.1f} us (READ of the 8 mounts, as counters) + "
          f"{views_us:.1f} us (their MountViews) = "
          f"{(sample_us + views_us) / 1e4:.3f}% of one core at 1 Hz")
    print(f"  (floor: str.split of every line {split_us:.1f} us on this machine)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(figures, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
