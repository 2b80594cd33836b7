#!/usr/bin/env python3
"""What the cgroup first costs (issue 41), in one run:

  1. a job's cgroup totals (collect/cgjob.py: cpu.stat, io.stat, three pressure files,
     memory.stat, kept open, pread) per job per sample, in us, for --jobs job cgroups;
     beside it, in the same run, what the sampler reads of the same job's processes today
     (each one's stat, io and schedstat, kept open: collect/roots.py FileCache);
  2. the node's I/O scan (collect/ioscan.py) at 2,000 processes in 41 cgroups: 39 service
     cgroups of 49 sleepers and an agent that wakes 5 times a second (reads nothing), the
     job's (a reader doing 4 KiB O_DIRECT reads and 39 sleepers) and a neighbour's (a reader
     and 9 sleepers): processes read per scan and ms per scan (CPU of this thread), under
     the cpu rule (the code before: a cgroup's processes read again when it ran) and the io
     rule (when its io.stat moved), the two scans one after the other each round, medians.

Where the host's cgroup v2 tree has no io.stat (the io controller on v1, as on a hybrid
host), the io rule falls back to the cpu rule in every cgroup: the figures then say what
that fallback costs, and the line "io-ruled cgroups" says 0.

usage: python bench/bench_cgjob.py [--rounds 15] [--samples 300] [--jobs 8] [--json OUT]
needs: root (makes cgroups under the cgroup v2 tree, gdt-bench-cgjob-PID/, removed after).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from gpudisk_top.collect import diskstats  # noqa: E402
from gpudisk_top.collect.cgjob import CgJobReader, device_names  # noqa: E402
from gpudisk_top.collect.cgscan import ChangedScan, cgroup2_root  # noqa: E402
from gpudisk_top.collect.ioscan import IoScan  # noqa: E402
from gpudisk_top.collect.roots import FileCache, Roots  # noqa: E402

READER = r"""
import mmap, os, random, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
blocks = os.fstat(fd).st_size // 4096
buf = mmap.mmap(-1, 4096)
while True:
    os.preadv(fd, [buf], random.randrange(blocks) * 4096)
"""
AGENT = "import time\nwhile True: time.sleep(0.2)"
SERVICES, PER_SERVICE = 39, 49
JOB_SLEEPERS, NEIGHBOUR_SLEEPERS = 39, 9


class Layout:
    """The node's processes in their cgroups (module docstring); close() ends them and
    removes the cgroups."""

    def __init__(self, base: str, data: str) -> None:
        self.base = base
        self.procs: list[subprocess.Popen] = []
        self.dirs: list[str] = []
        for i in range(SERVICES):
            self._start(f"system.slice/svc{i}.service", [[sys.executable, "-c", AGENT]]
                        + [["sleep", "3600"]] * PER_SERVICE)
        self.job = self._start("slurmstepd.scope/job_1/step_0",
                               [[sys.executable, "-c", READER, data]] + [["sleep", "3600"]] * JOB_SLEEPERS)
        self._start("kubepods.slice/pod1/ctr1",
                    [[sys.executable, "-c", READER, data]] + [["sleep", "3600"]] * NEIGHBOUR_SLEEPERS)

    def _start(self, rel: str, argvs) -> list[int]:
        path = os.path.join(self.base, rel)
        os.makedirs(path, exist_ok=True)
        self.dirs.append(path)
        pids = []
        for argv in argvs:
            p = subprocess.Popen(argv)
            self.procs.append(p)
            with open(os.path.join(path, "cgroup.procs"), "w") as f:
                f.write(str(p.pid))
            pids.append(p.pid)
        return pids

    def close(self) -> None:
        for p in self.procs:
            p.send_signal(signal.SIGKILL)
        for p in self.procs:
            p.wait()
        dirs = [d for d, _, _ in os.walk(self.base)]
        for path in sorted(dirs, key=len, reverse=True):
            for _ in range(100):
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)


def job_totals_cost(paths: list[str], job_pids: list[int], samples: int) -> dict:
    """us per job per sample: the cgroup totals of `paths` (the job's first), read
    together as the sampler would, over their count; and the job's processes' stat, io,
    schedstat."""
    roots = Roots()
    reader = CgJobReader(roots)
    jobs = len(paths)
    devices = device_names(diskstats.read(roots)[0])
    cg_us, proc_us = [], []
    files = FileCache(max_files=4 * len(job_pids))
    names = [f"/proc/{pid}/{f}" for pid in job_pids for f in ("stat", "io", "schedstat")]
    for _ in range(5):
        reader.read(paths, devices)
        for n in names:
            files.read(n)
    for _ in range(samples):
        t0 = time.thread_time_ns()
        reader.read(paths, devices)
        t1 = time.thread_time_ns()
        for n in names:
            files.read(n)
        t2 = time.thread_time_ns()
        cg_us.append((t1 - t0) / 1000 / jobs)
        proc_us.append((t2 - t1) / 1000)
    raw = reader.read(paths, devices)[paths[0]]
    reader.close()
    files.close()
    return {"cgroup_us_per_job": statistics.median(cg_us),
            "processes_us_per_job": statistics.median(proc_us),
            "job_processes": len(job_pids),
            "files": sorted(k for k, v in (("cpu.stat", raw.cpu), ("io.stat", raw.io),
                                           ("memory.stat", raw.memory)) if v)
                     + sorted(f"{r}.pressure" for r in raw.psi)}


def scan_cost(rounds: int) -> dict:
    """The node's I/O scan under each rule, one after the other each round, a second apart."""
    roots = Roots()
    before, after = IoScan(roots), IoScan(roots)
    before._files = ChangedScan(roots, before._read, rule="cpu")
    figures = {"cpu": ([], []), "io": ([], [])}
    io_ruled = []
    for r in range(rounds + 1):
        time.sleep(1.0)
        for name, scan in (("cpu", before), ("io", after)):
            t0 = time.thread_time_ns()
            scan.run(float(r))
            ms = (time.thread_time_ns() - t0) / 1e6
            if r:        # the first scan reads everything under either rule
                figures[name][0].append(ms)
                figures[name][1].append(scan._files.read_last)
        io_ruled.append(after._files.io_ruled_last)
    return {name: {"ms_per_scan": statistics.median(ms), "processes_read": statistics.median(n)}
            for name, (ms, n) in figures.items()} | {"io_ruled_cgroups": max(io_ruled),
                                                      "narrowed": after._files.narrowed}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--json")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_cgjob: error: needs root (makes cgroups)", file=sys.stderr)
        return 2
    root = cgroup2_root(Roots())
    if root is None:
        print("bench_cgjob: error: no cgroup v2 tree here", file=sys.stderr)
        return 2
    base = os.path.join(root, f"gdt-bench-cgjob-{os.getpid()}")
    data = os.path.join("/var/tmp", f"gdt-bench-cgjob-{os.getpid()}.bin")
    with open(data, "wb") as f:
        for _ in range(64):
            f.write(os.urandom(1 << 20))
        os.fsync(f.fileno())
    layout = None
    try:
        layout = Layout(base, data)
        time.sleep(2)
        total = len(layout.procs)
        rel = ["/" + os.path.relpath(d, root) for d in layout.dirs]
        job_rel = "/" + os.path.relpath(os.path.join(base, "slurmstepd.scope/job_1/step_0"), root)
        paths = [job_rel] + [r for r in rel if r != job_rel][:a.jobs - 1]
        out = {"processes": total, "cgroups": len(layout.dirs),
               "job": job_totals_cost(paths, layout.job, a.samples),
               "scan": scan_cost(a.rounds)}
    finally:
        if layout is not None:
            layout.close()
        os.unlink(data)
    j, s = out["job"], out["scan"]
    print(f"node: {out['processes']} processes in {out['cgroups']} cgroups")
    print(f"a job's cgroup totals ({', '.join(j['files'])}), {a.jobs} jobs: "
          f"{j['cgroup_us_per_job']:.1f} us a job a sample; its {j['job_processes']} processes' stat, io, schedstat: "
          f"{j['processes_us_per_job']:.1f} us (ratio {j['cgroup_us_per_job'] / j['processes_us_per_job']:.3f})")
    for name in ("cpu", "io"):
        print(f"I/O scan, {name} rule: {s[name]['ms_per_scan']:.2f} ms, "
              f"{s[name]['processes_read']:.0f} processes read (medians of {a.rounds})")
    print(f"io-ruled cgroups: {s['io_ruled_cgroups']} of {out['cgroups']}"
          + ("" if s["io_ruled_cgroups"] else " (no io.stat in this host's cgroup v2 tree: "
             "the io rule fell back to the cpu rule)"))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
