#!/usr/bin/env python3
"""What watching costs, at the scale of a large training node, in one run (issue 27).

Prints, beside `iostat -x 1` over the same diskstats in the same runs:
  1. one sample + step (Sampler.sample, then the Stepper) in ms, in this process: at
     bench_scale.py's node (8 stand-in GPUs, 128 devices, 2,000 processes, 64 workers)
     and at this machine's own /proc with the same GPUs; CPU time of this process
     (time.process_time: the NVML thread included), median of --samples at 1 Hz;
     and the floor beside it: the least a sample at that scale can do in CPython (read
     the same diskstats and the followed processes' stat, io and schedstat, split them,
     the interval's formulas; no model, no detector), which no caching goes below;
  2. `record -i 1` and `serve -i 1` at that scale (through --procfs/--sysfs roots, as in
     a container given the host's /proc), and `record -i 1` on this machine's /proc with
     a 64-process job: % of one core in steady state (utime + stime from /proc/PID/stat,
     after --warmup s), each run --seconds, median of --runs.  The steady window
     (--seconds less --warmup) is whole minutes: `record` derives its summaries (the
     model and the detector over every sample) a minute at a time, so a shorter window
     leaves them out (the figures of issue 41's stops two to six, at 25 s windows, did);
  3. `record`'s block (every 600 samples: the columns coded and compressed), which no
     window of a few minutes holds: one block's CPU at that scale, measured in this
     process on 600 samples of the scaled node, and its share of a core at 1 Hz, added
     to `record`'s figures in the line after them.

The dashboard's own figures (a Textual screen in tmux) are bench_scale.py's and
bench_dashboard.sh's.  The machine should be idle; on a busy one, read the ratios to
iostat measured in the same runs.

--against CHECKOUT (another checkout of gpudisk-top, `git worktree add /tmp/base COMMIT`)
runs that checkout's code beside this one's in the same runs, each figure twice: what
the change between them saves, on a machine whose load moves both alike.

--split also splits one sample's CPU at scale by part (the node's scans, the job's
processes, device identity, the step).

--rounds N measures sample + step one checkout at a time, their order reversed each
round, N rounds (the medians of the rounds' medians and means), not side by side: two
children side by side sample in the same moments on a 2-CPU machine, which moves both.

--state: the stand-in GPUs busy (healthy: 95 %, the processes read every 5 s and the node
scanned every 15 s, issue 41) or not (starved: 30 %, every process read every sample, the
node scanned every 5 s), or both one after the other (the
default); each figure is given per state, the floor beside it.  A checkout without the
slow cadence (--against one from before it) reads every process in both.

--cgroups: where the node's processes live.  `node` (the default), as on a node with
systemd and containers: the 1,928 sleepers spread over 39 cgroups of their own
(system.slice/svcN.service, a user session, kubepods.slice/podN/ctrN), the trainers and
their workers in one (kubepods.slice/job/trainer), the 64-process job in another: the
node's scans then read only the processes of cgroups that ran (collect/cgscan.py).
`one`: all of them in one cgroup, which the job's workers keep running: the worst case,
every process read at every scan.  The cgroups are made under the cgroup v2 tree
(gdt-bench-PID/) and removed after; the monitors themselves stay where they are.

usage: python bench/bench_cost.py [--samples 30] [--seconds 65] [--runs 3] [--warmup 5]
                                  [--against CHECKOUT] [--rounds N] [--split]
                                  [--cgroups node|one]
                                  [--state healthy|starved|both] [--json OUT]
needs: root (the iostat peer reads the scaled diskstats in a private mount namespace;
the cgroups),
sysstat's iostat, prometheus_client (serve).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
# the code measured: this checkout's, or --against's in the child that measures it
sys.path.insert(0, os.environ.get("GDT_BENCH_CODE", ROOT))

import bench_scale as scale  # noqa: E402
from gpudisk_top.collect.cgscan import cgroup2_root  # noqa: E402
from gpudisk_top.collect.roots import Roots  # noqa: E402
from gpudisk_top.collect.sampler import Sampler  # noqa: E402
from gpudisk_top.verdict.step import Stepper  # noqa: E402
from gpudisk_top.sim.fake_nvml import FakeNvml  # noqa: E402
from timing import recorder_window_error  # noqa: E402

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")

# record or serve, as a user runs them, with 8 stand-in GPUs whose compute processes are
# GDT_BENCH_PIDS, reading GDT_BENCH_PROCFS / GDT_BENCH_SYSFS
RUNNER = """
import os, sys, time
from gpudisk_top.collect.roots import Roots
from gpudisk_top.collect.sampler import Sampler
from gpudisk_top.collect.source import live_source
from gpudisk_top.commands import record, serve
try:
    from gpudisk_top.probe.store import ProbeCeilings
    CEILINGS = ProbeCeilings(lambda line: None)
except ImportError:      # a checkout from before ProbeCeilings (--against an older one)
    from gpudisk_top.commands.common import probed_ceilings as CEILINGS
from gpudisk_top.sim.fake_nvml import FakeNvml

pids = [int(p) for p in os.environ["GDT_BENCH_PIDS"].split(",")]
util = float(os.environ.get("GDT_BENCH_UTIL", "95"))
roots = Roots(procfs=os.environ.get("GDT_BENCH_PROCFS", "/proc"),
              sysfs=os.environ.get("GDT_BENCH_SYSFS", "/sys"))


class Source:
    def __init__(self):
        self.nvml = FakeNvml.with_gpus(8)
        for i in range(8):
            self.nvml.set_state(i, util_pct=util, mem_util_pct=40.0, power_mw=550_000,
                                power_limit_mw=700_000,
                                processes=[(pids[i % len(pids)], 30 * 2**30)])
        self.sampler = Sampler(roots, nvml=self.nvml, ceilings=CEILINGS)

    def sample(self):
        self.nvml.advance_to(time.time())
        return self.sampler.sample()

    @property
    def detail(self):       # the slow cadence the command sets (session/detail.py)
        return self.sampler.detail

    @detail.setter
    def detail(self, value):
        self.sampler.detail = value

    def close(self):
        self.sampler.close()

    def drain_notes(self):      # a SampleSource's (collect/sample_source.py)
        return self.sampler.drain_notes()


command = {"record": record, "serve": serve}[sys.argv[1]]
command.open_source = lambda args, cfg, **kw: (Source(), False, live_source())
sys.exit(command.run(command.build_parser("gpudisk-top " + sys.argv[1]).parse_args(sys.argv[2:])))
"""


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_S


WARM_SAMPLES = 3   # a new sampler's first samples fill its caches and read every process


STATES = {"healthy": 95.0, "starved": 30.0}   # the stand-in GPUs' utilization in each


def stand_in_gpus(pids: list[int], util_pct: float) -> FakeNvml:
    """The large node's GPUs through the NVML fake: GPU i busy util_pct with pids[i]'s
    30 GiB (the RUNNER's Source sets the same in the commands it runs)."""
    nvml = FakeNvml.with_gpus(scale.GPUS)
    for i, pid in enumerate(pids):
        nvml.set_state(i, util_pct=util_pct, mem_util_pct=40.0, power_mw=550_000,
                       power_limit_mw=700_000, processes=[(pid, 30 * 2**30)])
    return nvml


def sample_cost(roots: Roots, pids: list[int], samples: int, warm=None, util_pct: float = 95.0
                ) -> tuple[float, float, int, int, float]:
    """(median and mean CPU ms of one sample + step, disks, processes, the ms a sample
    the cyclic garbage collector's collections took, gc.callbacks' count), the first
    WARM_SAMPLES left out (then `warm()` is called, if given).  The mean counts what comes
    every few seconds (the node's scans, device identity, the processes every 5 s while
    healthy): a median hides it.  The sampler has the cadence the commands give it
    (session/detail.py), and the process the collector's setting they give theirs
    (session/gcpolicy.py), where the checkout has them."""
    nvml = stand_in_gpus(pids, util_pct)
    sampler, stepper = Sampler(roots, nvml=nvml), Stepper()
    try:
        from gpudisk_top.session.detail import after_step, slow_detail
        slow_detail(sampler)
    except ImportError:     # a checkout from before the slow cadence: every sample reads all
        after_step = None
    try:
        from gpudisk_top.session import gcpolicy
        gcpolicy.steady()
    except ImportError:     # a checkout from before it: CPython's default
        pass
    took = []
    collecting = [0.0, 0.0]          # when the collection running began; their sum

    def collection(phase: str, _info) -> None:
        if phase == "start":
            collecting[0] = time.thread_time()
        elif len(took) >= WARM_SAMPLES:
            collecting[1] += time.thread_time() - collecting[0]

    gc.callbacks.append(collection)
    try:
        for k in range(samples + WARM_SAMPLES):
            if k == WARM_SAMPLES and warm is not None:
                warm()
            nvml.advance_to(time.time())
            w0, t0 = time.monotonic(), time.process_time()
            step = stepper.step(sampler.sample())
            if after_step is not None:
                after_step(sampler, step.verdict)
            model = step.model
            took.append((time.process_time() - t0) * 1000)
            time.sleep(max(0.0, 1.0 - (time.monotonic() - w0)))
    finally:
        gc.callbacks.remove(collection)
        sampler.close()
    return (statistics.median(took[WARM_SAMPLES:]), statistics.fmean(took[WARM_SAMPLES:]),
            len(model.disks), len(model.procs), collecting[1] * 1000 / samples)


def sample_costs(code: dict[str, str], roots: Roots, pids: list[int], samples: int,
                 util_pct: float, rounds: int = 0) -> dict:
    """sample_cost() of each checkout in `code` ({label: path}), in child processes
    side by side: {label: (ms, mean ms, disks, processes)}.  rounds: instead one child
    at a time, the checkouts' order reversed each round, that many rounds; each figure
    the median of the rounds' (two children side by side sample in the same moments on
    a 2-CPU machine, and which of them wakes first moves both)."""
    def child(path: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--child", roots.procfs, roots.sysfs,
             ",".join(map(str, pids)), str(samples), str(util_pct)],
            env=dict(os.environ, GDT_BENCH_CODE=path), stdout=subprocess.PIPE, text=True)

    if not rounds:
        children = {label: child(path) for label, path in code.items()}
        return {label: json.loads(c.communicate()[0]) for label, c in children.items()}
    got: dict[str, list] = {label: [] for label in code}
    for r in range(rounds):
        for label in (list(code) if r % 2 == 0 else list(code)[::-1]):
            got[label].append(json.loads(child(code[label]).communicate()[0]))
    return {label: (statistics.median(x[0] for x in runs), statistics.median(x[1] for x in runs),
                    runs[-1][2], runs[-1][3], statistics.median(x[4] for x in runs))
            for label, runs in got.items()}


def floor_cost(procfs: str, pids: list[int], samples: int) -> tuple[float, int, int]:
    """(median CPU ms, devices, processes) of the least a sample can do at `procfs` in
    CPython: read its diskstats and take each device's interval by iostat's formulas, and
    read each followed process's stat, io and schedstat (preads on files kept open) and
    split them into fields; no NVML, no model, no detector, no scans, no identity.  What
    sample + step cannot go below, whatever it caches (this thread's CPU time)."""
    followed = [*pids, *(c for p in pids for c in scale._children(p))]
    files = [[os.open(f"/proc/{p}/{name}", os.O_RDONLY) for name in ("stat", "io", "schedstat")]
             for p in followed]
    last: dict[str, list[int]] = {}
    took = []
    try:
        for _sample in range(samples + WARM_SAMPLES):
            w0, t0 = time.monotonic(), time.thread_time()
            with open(os.path.join(procfs, "diskstats"), "rb") as f:
                text = f.read().decode()
            now = {}
            for line in text.splitlines():
                fields = line.split()
                v = now[fields[2]] = [int(x) for x in fields[3:]]
                w = last.get(fields[2])
                if w is not None:
                    d = [a - b for a, b in zip(v, w)]
                    r_s, w_s = d[0], d[4]
                    _ = (r_s, w_s, d[1], d[5], d[2] / 2, d[6] / 2, d[3] / r_s if r_s else 0.0,
                         d[7] / w_s if w_s else 0.0, d[2] / 2 / r_s if r_s else 0.0,
                         d[6] / 2 / w_s if w_s else 0.0, d[10] / 1000, d[9] / 10)
            last = now
            for stat, io, sched in files:
                s = os.pread(stat, 4096, 0).decode()
                _ = (s[s.rindex(")") + 2:].split(), os.pread(io, 4096, 0).decode().split(),
                     os.pread(sched, 4096, 0).decode().split())
            took.append((time.thread_time() - t0) * 1000)
            time.sleep(max(0.0, 1.0 - (time.monotonic() - w0)))
    finally:
        for fds in files:
            for fd in fds:
                os.close(fd)
    return statistics.median(took[WARM_SAMPLES:]), len(last), len(followed)


def block_cost(sys_root: str, pids: list[int], util_pct: float = 95.0) -> tuple[float, int]:
    """(CPU ms, samples) of `record` writing one block at the scaled node: a Recorder as
    `record` makes it (summaries on) fed SEGMENT_SAMPLES samples of a procfs of its own
    whose diskstats advances a second each sample (taken 20 ms apart, so that a block
    takes seconds, not ten minutes), every followed process read each sample (a starved
    block: the dearer kind); the CPU of the commit that turns the rows into the block
    (its columns coded and LZMA'd, the summaries' frame).  Each figure of a `record`
    window leaves this out: it comes once every SEGMENT_SAMPLES seconds."""
    from gpudisk_top.record import Recorder, make_header
    from gpudisk_top.record.header import SEGMENT_SAMPLES

    tmp = tempfile.mkdtemp(prefix="gdt-block-")
    proc_root = os.path.join(tmp, "proc")
    scale.make_procfs(proc_root)
    diskstats = scale.DiskstatsWriter(proc_root)        # not started: advanced by hand
    nvml = stand_in_gpus(pids, util_pct)
    sampler = Sampler(Roots(procfs=proc_root, sysfs=sys_root), nvml=nvml)
    rec = Recorder(os.path.join(tmp, "block.gdtrec"), make_header(None, 1.0),
                   sync_interval_s=None)
    took: list[float] = []
    commit = rec._commit

    def timed(*args, **kw):
        t = time.thread_time()
        try:
            return commit(*args, **kw)
        finally:
            took.append(time.thread_time() - t)
    rec._commit = timed
    try:
        for k in range(SEGMENT_SAMPLES):
            diskstats.write(k + 1)
            nvml.advance_to(time.time())
            rec.append(sampler.sample())
            time.sleep(0.02)
    finally:
        rec._commit = commit
        rec.close("stopped")
        sampler.close()
        shutil.rmtree(tmp, ignore_errors=True)
    if len(took) != 1:
        raise RuntimeError(f"block_cost: {len(took)} blocks written of {SEGMENT_SAMPLES} "
                           "samples, not one")
    return took[0] * 1000, SEGMENT_SAMPLES


def split_cost(roots: Roots, pids: list[int], samples: int, util_pct: float = 95.0
               ) -> dict[str, float]:
    """Where one sample's CPU goes at `roots`, by part, in ms per sample on average (the
    node's scans come every few seconds, so they count as what they cost a second)."""
    from gpudisk_top.collect import blockdev, cgscan, ioscan, procio

    spent: dict[str, float] = {}
    calls: dict[str, list[float]] = {}
    undo = []

    def measure(cls, name: str, label: str) -> None:
        real = getattr(cls, name)

        def timed(*args, **kw):
            t = time.thread_time()
            try:
                return real(*args, **kw)
            finally:
                spent[label] = spent.get(label, 0.0) + time.thread_time() - t
                calls.setdefault(label, []).append(time.thread_time() - t)
        setattr(cls, name, timed)
        undo.append((cls, name, real))

    measure(Sampler, "sample", "the whole sample")
    measure(procio.ProcIoCollector, "_find_others",
            "the others' search (/proc/*/stat, every 5 s or 15 s, CPUs contended)")
    measure(ioscan.IoScan, "run", "the I/O scan (/proc/*/io, every 5 s, or 15 s healthy)")
    measure(procio.ProcIoCollector, "collect", "the job's processes")
    measure(blockdev.BlockDevices, "describe", "device identity (sysfs, every 10 s)")
    measure(Stepper, "step", "the step (model, detector)")
    scans: list[tuple[int, int]] = []     # (processes read, processes found) per scan
    real_scan = cgscan.ChangedScan.scan

    def counted(self, *args, **kw):
        out = real_scan(self, *args, **kw)
        scans.append((self.read_last, len(out)))
        return out
    cgscan.ChangedScan.scan = counted
    undo.append((cgscan.ChangedScan, "scan", real_scan))
    def warm() -> None:        # the caches filled: counted from here, on the same sampler
        spent.clear()
        calls.clear()
        scans.clear()
    try:
        sample_cost(roots, pids, samples, warm, util_pct)
    finally:
        for cls, name, real in undo:
            setattr(cls, name, real)
    out = {label: v / samples * 1000 for label, v in spent.items()}
    for label in ("the others' search", "the I/O scan"):
        # a scan during the warm-up reads every process (nothing to carry over yet); the
        # median is the steady state's
        took = next((v for k, v in calls.items() if k.startswith(label)), None)
        if took:
            out[f"  {label}: one scan, median of {len(took)}"] = statistics.median(took) * 1000
    if scans:
        out["processes read per node scan (median; of the processes found)"] = \
            statistics.median(r for r, _ in scans)
        out["processes found per node scan (median)"] = statistics.median(n for _, n in scans)
    return out


SERVICES = ([f"system.slice/svc{i}.service" for i in range(30)]
            + ["user.slice/user-1000.slice/session-1.scope"]
            + [f"kubepods.slice/pod{i}/ctr{j}" for i in range(4) for j in range(2)])


def place_in_cgroups(layout: str, node: "scale.Node", job_pids: list[int]) -> str | None:
    """Move the node's processes into cgroups as `layout` says (see the docstring);
    the base cgroup made (remove_cgroups removes it), None without a v2 tree."""
    root = cgroup2_root(Roots())
    if root is None:
        print("bench_cost: no cgroup v2 tree: every process stays where it is",
              file=sys.stderr)
        return None
    base = os.path.join(root, f"gdt-bench-{os.getpid()}")
    trainers = [p.pid for p in node.trainers]
    trainers += [c for pid in trainers for c in scale._children(pid)]
    sleepers = [p.pid for p in node.sleepers]
    if layout == "one":
        where = {pid: "all" for pid in trainers + sleepers + job_pids}
    else:
        where = {pid: SERVICES[i % len(SERVICES)] for i, pid in enumerate(sleepers)}
        where.update({pid: "kubepods.slice/job/trainer" for pid in trainers})
        where.update({pid: "job64.scope" for pid in job_pids})
    for pid, rel in where.items():
        path = os.path.join(base, rel)
        os.makedirs(path, exist_ok=True)
        try:
            with open(os.path.join(path, "cgroup.procs"), "w") as f:
                f.write(str(pid))
        except ProcessLookupError:
            pass
    return base


def remove_cgroups(base: str | None) -> None:
    """rmdir every cgroup under base, deepest first (their processes are gone)."""
    if base is None:
        return
    dirs = [d for d, _, _ in os.walk(base)]
    for path in sorted(dirs, key=len, reverse=True):
        for _ in range(100):
            try:
                os.rmdir(path)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)   # a process still exiting


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def side_by_side(argvs: dict[str, tuple[list[str], dict | None]], seconds: float,
                 warmup: float) -> dict[str, float]:
    """Start every command at once; % of a core of each in steady state."""
    # `python -c` puts its working directory first on sys.path: the checkout measured
    procs = {name: subprocess.Popen(argv, cwd=(env or {}).get("PYTHONPATH", ROOT), env=env,
                                    stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
             for name, (argv, env) in argvs.items()}
    try:
        time.sleep(warmup)
        warm = {name: cpu_s(p.pid) for name, p in procs.items()}
        t0 = time.monotonic()
        time.sleep(max(0.0, seconds - warmup))
        end = {name: cpu_s(p.pid) for name, p in procs.items()}
        elapsed = time.monotonic() - t0
    finally:
        for p in procs.values():
            p.send_signal(signal.SIGTERM)
        for p in procs.values():
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
    return {name: (end[name] - warm[name]) / elapsed * 100 for name in procs}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--seconds", type=float, default=65.0,
                    help="each run's length; less --warmup, whole minutes (timing.py)")
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", metavar="OUT")
    ap.add_argument("--against", metavar="CHECKOUT")
    ap.add_argument("--split", action="store_true",
                    help="also split one sample's CPU at scale by part")
    ap.add_argument("--cgroups", choices=("node", "one"), default="node",
                    help="the node's processes in cgroups of their own (node) or in one")
    ap.add_argument("--state", choices=("healthy", "starved", "both"), default="both",
                    help="the stand-in GPUs busy (healthy), or not (starved), or each in turn")
    ap.add_argument("--rounds", type=int, default=0,
                    help="sample + step one checkout at a time, alternating, this many "
                         "rounds (default: side by side, once)")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    a = ap.parse_args()
    why = None if a.child else recorder_window_error(a.seconds, a.warmup)
    if why is not None:
        print(f"bench_cost: {why}", file=sys.stderr)
        return 2
    if a.child:
        procfs, sysfs, pids, samples, util_pct = a.child
        import gpudisk_top
        code = os.path.realpath(os.environ.get("GDT_BENCH_CODE", ROOT))
        if not os.path.realpath(gpudisk_top.__file__).startswith(code + os.sep):
            print(f"bench_cost: measuring {gpudisk_top.__file__}, not the code of {code}",
                  file=sys.stderr)
            return 2
        print(json.dumps(sample_cost(Roots(procfs=procfs, sysfs=sysfs),
                                     [int(p) for p in pids.split(",")], int(samples),
                                     util_pct=float(util_pct))))
        return 0
    code = {"": ROOT}
    if a.against:
        code[" (against)"] = os.path.abspath(a.against)
    if not shutil.which("iostat"):
        print("bench_cost: iostat not found (install sysstat)", file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix="gdt-cost-")
    node = scale.Node(tmp)
    job = subprocess.Popen(["sh", "-c", "for i in $(seq 64); do sleep 100000 & done; wait"])
    writer = None
    cgroups = None
    result: dict = {}
    try:
        time.sleep(1)   # the job's sleeps are started
        cgroups = place_in_cgroups(a.cgroups, node, [job.pid, *scale._children(job.pid)])
        proc_root, sys_root = os.path.join(tmp, "proc"), os.path.join(tmp, "sys")
        scale.make_sysfs(sys_root)
        scale.make_procfs(proc_root)
        writer = scale.DiskstatsWriter(proc_root)
        writer.start()
        pids = [p.pid for p in node.trainers]
        scaled = Roots(procfs=proc_root, sysfs=sys_root)
        # the floor first: every figure below is printed beside it
        floor_ms, disks, nprocs = floor_cost(proc_root, pids, a.samples)
        result["floor_ms scale"] = floor_ms
        floor = f"floor {floor_ms:.2f} ms"
        print(f"the floor, scale ({disks} disks, {nprocs} processes): {floor_ms:.2f} ms CPU "
              "median (reading the same diskstats and processes' stat, io, schedstat, split "
              "into fields, the interval's formulas; nothing else): "
              f"{floor_ms / 10:.3f} % of a core at 1 Hz", flush=True)
        block_ms, block_n = block_cost(sys_root, pids)
        block_pct = block_ms / block_n / 10      # ms a block over block_n s, in % of a core
        result["block_ms scale"] = block_ms
        print(f"record's block at scale (every {block_n} samples, the processes read each "
              f"sample): {block_ms:.0f} ms CPU, {block_pct:.3f} % of a core at 1 Hz, which no "
              "window below holds", flush=True)
        states = list(STATES) if a.state == "both" else [a.state]
        rounds = (f", medians of {a.rounds} rounds one checkout at a time" if a.rounds else "")
        for state in states:
            util = STATES[state]
            for label, roots in (("scale", scaled), ("this machine", Roots())):
                costs = sample_costs(code, roots, pids, a.samples, util, a.rounds)
                for which, (ms, mean_ms, disks, nprocs, gc_ms) in costs.items():
                    result[f"sample_step_ms {state} {label}{which}"] = ms
                    result[f"sample_step_mean_ms {state} {label}{which}"] = mean_ms
                    result[f"collector_ms {state} {label}{which}"] = gc_ms
                    print(f"sample + step, {state}, {label}{which} ({disks} disks, {nprocs} "
                          f"processes followed): {ms:.2f} ms CPU median, {mean_ms:.2f} mean "
                          f"(of {a.samples}{rounds}; {floor}: x{mean_ms / floor_ms:.2f} the mean; "
                          f"the collector {gc_ms:.2f} ms a sample)",
                          flush=True)
            if a.split:
                print(f"where a sample's CPU goes at scale, {state}, ms per sample on average "
                      f"({floor}):")
                for label, ms in split_cost(scaled, pids, a.samples, util).items():
                    result[f"split {state} {label}"] = ms
                    print(f"  {label:<72} {ms:7.0f}" if label.startswith("processes")
                          else f"  {label:<72} {ms:7.2f}", flush=True)
            runs: dict[str, list[float]] = {}
            for run in range(a.runs):
                argvs = {
                    "iostat -x 1, scale": (["unshare", "-m", "sh", "-c",
                                            f"mount --bind {proc_root}/diskstats /proc/diskstats "
                                            "&& exec iostat -x 1"], None),
                    "iostat -x 1": (["iostat", "-x", "1"], None),
                }
                for which, path in code.items():
                    scaled_env = dict(os.environ, PYTHONPATH=path, GDT_BENCH_PROCFS=proc_root,
                                      GDT_BENCH_SYSFS=sys_root, GDT_BENCH_UTIL=str(util),
                                      GDT_BENCH_PIDS=",".join(map(str, pids)))
                    job_env = dict(os.environ, PYTHONPATH=path, GDT_BENCH_PIDS=str(job.pid),
                                   GDT_BENCH_UTIL=str(util))
                    out = os.path.join(tmp, f"{state}{run}{bool(which)}")
                    argvs.update({
                        f"record -i 1, scale{which}": (
                            [sys.executable, "-c", RUNNER, "record", "-o", out + "s.gdtrec",
                             "-i", "1", "-q"], scaled_env),
                        f"serve -i 1, scale{which}": (
                            [sys.executable, "-c", RUNNER, "serve", "--listen",
                             f"127.0.0.1:{_free_port()}", "-i", "1"], scaled_env),
                        f"record -i 1, 64-process job{which}": (
                            [sys.executable, "-c", RUNNER, "record", "-o", out + "j.gdtrec",
                             "-i", "1", "-q"], job_env),
                    })
                for name, pct in side_by_side(argvs, a.seconds, a.warmup).items():
                    runs.setdefault(name, []).append(pct)
            print(f"% of one core in steady state, {state}, median of {a.runs} x "
                  f"{a.seconds - a.warmup:.0f} s after {a.warmup:.0f} s (whole minutes: "
                  "record's summaries in; all side by side; the floor at 1 Hz "
                  f"{floor_ms / 10:.3f} %):")
            for name, values in runs.items():
                result[f"{state} {name}"] = statistics.median(values)
                print(f"  {name:<40} {statistics.median(values):6.3f} %   runs "
                      f"{[round(v, 3) for v in values]}   (floor {floor_ms / 10:.3f} %)")
            name = "record -i 1, scale"
            with_blocks = statistics.median(runs[name]) + block_pct
            result[f"{state} {name}, with its blocks"] = with_blocks
            print(f"  {name + ', with its blocks':<40} {with_blocks:6.3f} %   (this checkout's "
                  "block, above)")
    finally:
        if writer is not None:
            writer.stop.set()
        subprocess.run(["pkill", "-P", str(job.pid)])
        job.terminate()
        job.wait()
        node.close()
        remove_cgroups(cgroups)
        shutil.rmtree(tmp, ignore_errors=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
