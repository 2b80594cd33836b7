#!/usr/bin/env python3
"""CPU of a device health read (collect/health.py), and what the sampling thread pays.

Measured, each as the median of --repeat runs:
  smartctl    `smartctl --json=co -x -n standby /dev/X` on each disk of this machine that
              has a node (run even where sysfs says it has no SMART, virtio: the process
              is the cost), CPU of the child (rusage) plus our parse, and wall time
  parse       parse_smartctl() of the largest real -x output in tests/fixtures/health
              (a SATA SSD with SCT and device statistics, 38 kB), CPU
  text        what --json=o costs: parse_smartctl() of smartctl 7.3's NVMe -x document
              with its text (smartctl.output, read for WCTEMP/CCTEMP and the thermal
              management times) and of the same document without it (--json=c), size
              and CPU
  sysfs       read_sysfs() of an NVMe controller's hwmon (a tree laid out as the kernel
              does: this machine has no disk with a hwmon), CPU
  per sample  what Sampler.sample() adds (one attribute read) and Model.new adds
              (health_views(): one identity test while the snapshot is the same), µs

usage: python bench/bench_health.py [--repeat N] [--interval S] [--json OUT]
It prints each figure and the share of a core one disk's read takes at --interval
(default 600 s, the default --health-interval).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from timing import median_us  # noqa: E402
from gpudisk_top.collect.health import read_device  # noqa: E402
from gpudisk_top.collect.health_smartctl import (SMARTCTL_ARGS, find_smartctl,  # noqa: E402
                                                 parse_smartctl)
from gpudisk_top.collect.health_sysfs import physical_disks, read_sysfs  # noqa: E402
from gpudisk_top.collect.roots import Roots  # noqa: E402
from gpudisk_top.collect.sample import DiskHealth, HealthSnapshot  # noqa: E402
from gpudisk_top.model.health import health_views  # noqa: E402

FIXTURE = os.path.join(ROOT, "tests", "fixtures", "health", "sata-ssd-7.0-x-sct.json")
TEXT_FIXTURE = os.path.join(ROOT, "tests", "fixtures", "health", "nvme-7.3-shim-text.json")


def cpu_s() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def per_call(fn, repeat: int) -> tuple[float, float]:
    """(median CPU s, median wall s) of fn over repeat calls."""
    cpu, wall = [], []
    for _ in range(repeat):
        c0, w0 = cpu_s(), time.perf_counter()
        fn()
        cpu.append(cpu_s() - c0)
        wall.append(time.perf_counter() - w0)
    return statistics.median(cpu), statistics.median(wall)


def nvme_sysfs(tmp: str) -> Roots:
    ctrl = os.path.join(tmp, "sys", "devices", "pci0000:00", "0000:3d:00.0", "nvme", "nvme0")
    os.makedirs(os.path.join(ctrl, "nvme0n1"))
    os.symlink("../../nvme0", os.path.join(ctrl, "nvme0n1", "device"))
    os.makedirs(os.path.join(ctrl, "hwmon2"))
    for name, text in (("model", "Samsung SSD 980 PRO 2TB"), ("serial", "S6B0"),
                       ("firmware_rev", "5B2QGXA7"), ("hwmon2/temp1_input", "41850"),
                       ("hwmon2/temp1_max", "81850"), ("hwmon2/temp1_crit", "84850")):
        with open(os.path.join(ctrl, name), "w") as f:
            f.write(text + "\n")
    os.makedirs(os.path.join(tmp, "sys", "block"))
    os.symlink(os.path.relpath(os.path.join(ctrl, "nvme0n1"), os.path.join(tmp, "sys", "block")),
               os.path.join(tmp, "sys", "block", "nvme0n1"))
    return Roots(sysfs=os.path.join(tmp, "sys"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--interval", type=float, default=600.0)
    ap.add_argument("--json", metavar="OUT")
    args = ap.parse_args()
    out: dict = {"repeat": args.repeat, "interval_s": args.interval, "smartctl": {}}

    smartctl = find_smartctl()
    disks = physical_disks(Roots())
    print(f"smartctl: {smartctl or 'not installed'}; disks: {sorted(disks)}")
    if smartctl:
        for dev in sorted(disks):
            if not os.path.exists(f"/dev/{dev}"):
                continue
            h = read_device(Roots(), dev, smartctl, why_not=None)
            cpu, wall = per_call(lambda: read_device(Roots(), dev, smartctl, why_not=None),
                                 args.repeat)
            share = cpu / args.interval * 100
            out["smartctl"][dev] = {"cpu_ms": cpu * 1e3, "wall_ms": wall * 1e3,
                                    "core_pct_at_interval": share, "readable": h.readable,
                                    "reason": h.unreadable_reason}
            print(f"smartctl {' '.join(SMARTCTL_ARGS)} /dev/{dev}: CPU {cpu * 1e3:.2f} ms, "
                  f"wall {wall * 1e3:.2f} ms ({'read' if h.readable else h.unreadable_reason}); "
                  f"{share:.6f} % of a core every {args.interval:g} s")

    with open(FIXTURE) as f:
        text = f.read()
    parse_us = median_us(lambda: parse_smartctl(text, "sda", 0), args.repeat * 20)
    out["parse_us"] = parse_us
    print(f"parse_smartctl of a {len(text) // 1000} kB -x output: {parse_us:.0f} µs")

    with open(TEXT_FIXTURE) as f:
        with_text = f.read()
    doc = json.loads(with_text)
    doc["smartctl"].pop("output")
    doc["smartctl"]["argv"] = [a.replace("--json=co", "--json=c") for a in doc["smartctl"]["argv"]]
    without = json.dumps(doc, separators=(",", ":"))
    text_us = median_us(lambda: parse_smartctl(with_text, "nvme0n1", 0), args.repeat * 20)
    plain_us = median_us(lambda: parse_smartctl(without, "nvme0n1", 0), args.repeat * 20)
    out["text"] = {"bytes_c": len(without), "bytes_co": len(with_text), "parse_c_us": plain_us,
                   "parse_co_us": text_us}
    print(f"parse_smartctl of smartctl 7.3's NVMe -x: --json=c {len(without)} B {plain_us:.0f} µs, "
          f"--json=co {len(with_text)} B {text_us:.0f} µs (its text read)")

    with tempfile.TemporaryDirectory() as tmp:
        roots = nvme_sysfs(tmp)
        sysfs_us = median_us(lambda: read_sysfs(roots, "nvme0n1"), args.repeat * 20)
        out["sysfs_us"] = sysfs_us
        print(f"read_sysfs of an NVMe controller's hwmon: {sysfs_us:.0f} µs")

    snap = HealthSnapshot(readings={f"nvme{i}n1": DiskHealth(f"nvme{i}n1", readable=True,
                                                             temperature_c=40.0)
                                    for i in range(16)})
    health_views(snap)

    class Poller:
        latest = snap

    poller = Poller()
    attach_us = median_us(lambda: poller.latest, args.repeat * 200)
    views_us = median_us(lambda: health_views(snap), args.repeat * 200)
    out.update(attach_us=attach_us, views_us=views_us)
    print(f"per sample: taking the snapshot {attach_us:.3f} µs, Model.health of 16 disks "
          f"(same snapshot) {views_us:.3f} µs")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
