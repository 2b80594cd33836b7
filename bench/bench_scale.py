#!/usr/bin/env python3
"""Cost at the scale of a large training node: 8 GPUs, 128 block devices (NVMe namespaces,
partitions, dm) and 2,000 processes of which 64 are DataLoader workers.

The processes are real: 8 trainers (the stand-in GPUs' compute processes), each with 8
workers that read a file and sleep, as DataLoader workers do, and 1,928 `sleep`
processes.  The 128 devices cannot be made on this VM, so gpudisk-top reads a procfs
root (DIR/proc: a link to every entry of /proc, kept as /proc has them every second, but
`diskstats`, a file rewritten every second with 128 devices whose counters advance) and
a sysfs root (DIR/sys: the devices' classes, partitions, dm names and slaves, and a link
to the real cgroup tree), through --procfs/--sysfs as in a container given the host's
/proc.  Today's scale, beside it in the same run: this machine's own
/proc and /sys (its disks) with the same 8 stand-in GPUs and no extra processes.

Measured:
  1. one sample (Sampler.sample, then the Stepper: Model.new and the detector), in this
     process, median ms over --samples samples at 1 Hz (the GPU fake's own time included:
     it is small);
  2. the dashboard at 1 Hz (../shared/tools/measure-overhead.sh: % of one core and RSS
     over --seconds in a 120x40 tmux pane), median of --runs, at both scales, and
     `iostat -x 1` over the same 128-device diskstats (bind-mounted in a private mount
     namespace) as the peer.

usage: python bench/bench_scale.py [--samples 60] [--seconds 60] [--runs 3] [--json OUT]
needs: root (unshare -m, for the iostat peer), tmux, sysstat; run it on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the code measured: this checkout's, or bench_cost.py --against's in the child that
# measures it (inserting ROOT alone here measured this checkout under both names)
sys.path.insert(0, os.environ.get("GDT_BENCH_CODE", ROOT))
sys.path.insert(0, os.path.join(ROOT, "tests"))

import standin  # noqa: E402
from gpudisk_top.collect.roots import Roots  # noqa: E402
from gpudisk_top.collect.sampler import Sampler  # noqa: E402
from gpudisk_top.verdict.step import Stepper  # noqa: E402
from gpudisk_top.sim.fake_nvml import FakeNvml  # noqa: E402

GPUS = 8
WORKERS_PER_GPU = 8
PROCESSES = 2000
NVME, PARTS, DMS, LOOPS = 16, 4, 32, 16          # 16 + 64 + 32 + 16 = 128 devices
MEASURE = os.path.join(ROOT, "..", "shared", "tools", "measure-overhead.sh")

TRAINER = r"""
import os, sys, time
data = sys.argv[1]
for _ in range(int(sys.argv[2])):
    if os.fork() == 0:                      # a DataLoader-like worker
        fd = os.open(data, os.O_RDONLY)
        while True:
            os.pread(fd, 65536, 0)
            time.sleep(0.05)
while True:
    time.sleep(1)
"""


# ---------------------------------------------------------------------------- the node
def devices() -> list[tuple[int, int, str]]:
    """(major, minor, name) of the 128 devices."""
    out = []
    for n in range(NVME):
        out.append((259, n * 8, f"nvme{n}n1"))
        out += [(259, n * 8 + p, f"nvme{n}n1p{p}") for p in range(1, PARTS + 1)]
    out += [(253, i, f"dm-{i}") for i in range(DMS)]
    out += [(7, i, f"loop{i}") for i in range(LOOPS)]
    return out


def diskstats_text(step: int) -> str:
    """A /proc/diskstats of the 128 devices after `step` seconds of steady reads."""
    lines = []
    for k, (major, minor, name) in enumerate(devices()):
        ios = (k + 1) * 1000 + step * (200 + k)
        ticks = ios // 10
        lines.append(f"{major:4d} {minor:7d} {name} {ios} {step} {ios * 8} {ticks} "
                     f"{ios // 4} 0 {ios * 2} {ticks // 4} 0 {ticks} {ticks + ticks // 4} "
                     "0 0 0 0 0 0\n")
    return "".join(lines)


def make_sysfs(sys_root: str) -> None:
    block = os.path.join(sys_root, "block")
    cls = os.path.join(sys_root, "class", "block")
    os.makedirs(cls)
    # the real cgroup tree, as a node's /sys has it (the node's scans narrow by it:
    # collect/cgscan.py)
    os.makedirs(os.path.join(sys_root, "fs"))
    os.symlink("/sys/fs/cgroup", os.path.join(sys_root, "fs", "cgroup"))

    def write(path: str, text: str) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text + "\n")

    for n in range(NVME):
        disk = os.path.join(block, f"nvme{n}n1")
        write(os.path.join(disk, "queue", "rotational"), "0")
        write(os.path.join(disk, "device", "model"), "SAMSUNG MZWLR3T8HBLS-00007")
        write(os.path.join(disk, "wwid"), f"eui.0025388b01a0{n:04x}")
        os.symlink(disk, os.path.join(cls, f"nvme{n}n1"))
        for p in range(1, PARTS + 1):
            part = os.path.join(disk, f"nvme{n}n1p{p}")
            write(os.path.join(part, "partition"), str(p))
            os.symlink(part, os.path.join(cls, f"nvme{n}n1p{p}"))
    for i in range(DMS):
        dm = os.path.join(block, f"dm-{i}")
        write(os.path.join(dm, "dm", "name"), f"vg{i // 8}-data{i % 8}")
        write(os.path.join(dm, "queue", "rotational"), "0")
        slave = f"nvme{i // 2}n1p{1 + i % 2}"
        os.makedirs(os.path.join(dm, "slaves"))
        os.symlink(os.path.join(cls, slave), os.path.join(dm, "slaves", slave))
        os.symlink(dm, os.path.join(cls, f"dm-{i}"))
    for i in range(LOOPS):
        loop = os.path.join(block, f"loop{i}")
        write(os.path.join(loop, "queue", "rotational"), "0")
        os.symlink(loop, os.path.join(cls, f"loop{i}"))


def make_procfs(proc_root: str) -> None:
    """Every entry of /proc as a link, but diskstats (written by DiskstatsWriter)."""
    os.makedirs(proc_root)
    sync_procfs(proc_root)


def sync_procfs(proc_root: str) -> None:
    """The links again as /proc has them now: a process that exited leaves, a new one
    comes (a real procfs lists no dead process: a dangling link would make every scan
    of the node look for it).  DiskstatsWriter calls it every second."""
    now = set(os.listdir("/proc")) - {"diskstats"}
    have = set(os.listdir(proc_root)) - {"diskstats", "diskstats.tmp"}
    for name in have - now:
        os.unlink(os.path.join(proc_root, name))
    for name in now - have:
        try:
            os.symlink(os.path.join("/proc", name), os.path.join(proc_root, name))
        except FileExistsError:
            pass


class DiskstatsWriter(threading.Thread):
    """Rewrites DIR/proc/diskstats once a second (a rename: readers see whole files)."""

    def __init__(self, proc_root: str) -> None:
        super().__init__(daemon=True)
        self.path = os.path.join(proc_root, "diskstats")
        self.stop = threading.Event()
        self.write(0)

    def write(self, step: int) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            f.write(diskstats_text(step))
        os.replace(tmp, self.path)

    def run(self) -> None:
        step = 0
        while not self.stop.wait(1.0):
            step += 1
            self.write(step)
            sync_procfs(os.path.dirname(self.path))


class Node:
    """The processes of the node: trainers with workers, and sleepers."""

    def __init__(self, tmp: str) -> None:
        data = os.path.join(tmp, "data.bin")
        with open(data, "wb") as f:
            f.write(os.urandom(1 << 20))
        self.trainers = [subprocess.Popen([sys.executable, "-c", TRAINER, data,
                                           str(WORKERS_PER_GPU)]) for _ in range(GPUS)]
        others = PROCESSES - GPUS * (1 + WORKERS_PER_GPU)
        self.sleepers = [subprocess.Popen(["sleep", "3600"]) for _ in range(others)]
        time.sleep(2)   # the workers are forked

    def close(self) -> None:
        for p in self.trainers:
            for child in _children(p.pid):
                _kill(child)
            _kill(p.pid)
        for p in self.sleepers:
            _kill(p.pid)
        for p in self.trainers + self.sleepers:
            p.wait()


def _children(pid: int) -> list[int]:
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return found


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# ---------------------------------------------------------------------------- measuring
def sample_cost(roots: Roots, pids: list[int], samples: int) -> dict:
    nvml = FakeNvml.with_gpus(GPUS)
    for i, pid in enumerate(pids):
        nvml.set_state(i, util_pct=95.0, mem_util_pct=40.0, power_mw=550_000,
                       power_limit_mw=700_000, processes=[(pid, 30 * 2**30)])
    sampler = Sampler(roots, nvml=nvml)
    stepper = Stepper()
    took_ms, step_ms = [], []
    try:
        for _ in range(samples + 2):
            nvml.advance_to(time.time())
            t0 = time.perf_counter()
            sample = sampler.sample()
            t1 = time.perf_counter()
            model = stepper.step(sample).model
            t2 = time.perf_counter()
            took_ms.append((t1 - t0) * 1000)
            step_ms.append((t2 - t1) * 1000)
            time.sleep(max(0.0, 1.0 - (t2 - t0)))
    finally:
        sampler.close()
    took_ms, step_ms = took_ms[2:], step_ms[2:]   # the first two fill caches
    return {"disks": len(model.disks), "processes": len(model.procs),
            "sample_ms": statistics.median(took_ms), "step_ms": statistics.median(step_ms)}


def overhead(seconds: int, command: str) -> tuple[float, float]:
    out = subprocess.run(["bash", MEASURE, str(seconds), command], capture_output=True,
                         text=True, timeout=seconds + 60).stdout
    fields = dict(x.split("=") for x in out.split())
    return float(fields["cpu_pct"]), float(fields["rss_mb"])


def dashboard_command(tmp: str, label: str, argv: list[str], pids: list[int]) -> str:
    cmd, env = standin.command(argv, gpus=GPUS, processes={i: [p] for i, p in enumerate(pids)},
                               util_pct=95.0)
    code = os.path.join(tmp, f"{label}.py")
    with open(code, "w") as f:
        f.write(cmd[2])
    cfg = os.path.join(tmp, f"{label}.json")
    with open(cfg, "w") as f:
        f.write(env["GDT_STANDIN"])
    return (f"cd {ROOT} && GDT_STANDIN=\"$(cat {cfg})\" exec {sys.executable} {code}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=60)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-dashboard", action="store_true")
    ap.add_argument("--json", metavar="OUT")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="gdt-scale-")
    node = Node(tmp)
    writer = None
    result: dict = {}
    try:
        proc_root, sys_root = os.path.join(tmp, "proc"), os.path.join(tmp, "sys")
        make_sysfs(sys_root)
        make_procfs(proc_root)          # after the processes exist: their links too
        writer = DiskstatsWriter(proc_root)
        writer.start()
        pids = [p.pid for p in node.trainers]
        scaled = Roots(procfs=proc_root, sysfs=sys_root)
        result["today"] = sample_cost(Roots(), pids, a.samples)
        result["scaled"] = sample_cost(scaled, pids, a.samples)
        for k in ("today", "scaled"):
            r = result[k]
            print(f"{k:>6}: {r['disks']} disks in the model, {r['processes']} processes "
                  f"followed; sample {r['sample_ms']:.2f} ms, step {r['step_ms']:.2f} ms "
                  f"(medians of {a.samples})")
        if not a.no_dashboard:
            runs: dict[str, list] = {"today": [], "scaled": [], "iostat": []}
            commands = {
                "today": dashboard_command(tmp, "today", [], pids),
                "scaled": dashboard_command(tmp, "scaled", ["--procfs", proc_root,
                                                            "--sysfs", sys_root], pids),
                "iostat": (f"unshare -m sh -c 'mount --bind {proc_root}/diskstats "
                           f"/proc/diskstats && exec iostat -x 1'"),
            }
            for _ in range(a.runs):
                for k, command in commands.items():
                    runs[k].append(overhead(a.seconds, command))
            for k, values in runs.items():
                cpu = statistics.median(v[0] for v in values)
                rss = statistics.median(v[1] for v in values)
                result[f"cpu_{k}"] = {"cpu_pct": cpu, "rss_mb": rss,
                                      "runs": [v[0] for v in values]}
                print(f"{k:>6}: {cpu:.2f} % of a core, RSS {rss:.0f} MB "
                      f"(median of {a.runs} x {a.seconds} s; runs {[v[0] for v in values]})")
            print(f"dashboard scaled / today: "
                  f"{result['cpu_scaled']['cpu_pct'] / result['cpu_today']['cpu_pct']:.2f}; "
                  f"scaled / iostat -x 1: "
                  f"{result['cpu_scaled']['cpu_pct'] / result['cpu_iostat']['cpu_pct']:.2f}")
    finally:
        if writer is not None:
            writer.stop.set()
        node.close()
        shutil.rmtree(tmp, ignore_errors=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
