"""What `gpudisk-top record` costs, beside `iostat -x 1` in the same run.

    python bench/bench_record.py [--seconds 65] [--source live|demo] [--scenario demo]
                                 [--warmup 5] [--no-summaries] [--job-procs N]
                                 [--against CHECKOUT]
    python bench/bench_record.py --breakdown [--seconds 120]

--source live (the default): `record -i 1` as a user runs it on a GPU node, reading this
machine's /proc and /sys (every disk, the host, process I/O) through the real collectors,
with 8 simulated GPUs (the NVML fake, in place of the driver this machine lacks) whose
compute process is a job of --job-procs processes (default 4: a trainer's workers;
64 for the time accounting's budget).  --against CHECKOUT runs a second recorder from
another checkout of gpudisk-top (`git worktree add /tmp/base COMMIT`) beside this one,
on the same job in the same run: the difference between the two is what the change
between them costs.  --source demo: `record --demo SCENARIO`
(the simulator stands in for the collectors too: 16 disks, 57 processes; it costs more
than the collectors it replaces).
Starts the recorder and `iostat -x 1` at the same moment, lets both run --seconds, and compares
their CPU time from /proc/PID/stat (utime + stime, in clock ticks): over the whole run
(interpreter start-up included) and in steady state (from --warmup seconds on: whole
minutes of it, which hold the summaries the recorder derives a minute at a time,
timing.py; a block, every 600 samples, is in none: bench_cost.py measures it apart).  iostat
must be installed (Debian: sysstat); without it only the recorder is measured.
With --no-summaries the recorder writes raw samples only (no model, no detector).

--breakdown runs what `record` runs (the simulator, then Recorder.append, once a second)
in this process instead, and splits the CPU time: the simulator (which stands in for the
collectors), the rows written as each sample is taken, the summaries (model and detector,
derived a minute at a time), and the blocks (every 10 minutes).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from timing import recorder_window_error

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


LIVE_RUNNER = """
import os, sys, time
from gpudisk_top.collect.roots import Roots
from gpudisk_top.collect.sampler import Sampler
from gpudisk_top.commands import record
try:
    from gpudisk_top.probe.store import ProbeCeilings
    CEILINGS = {"ceilings": ProbeCeilings(lambda line: None)}
except ImportError:
    try:                 # a checkout from before ProbeCeilings
        from gpudisk_top.commands.common import probed_ceilings
        CEILINGS = {"ceilings": probed_ceilings}
    except ImportError:  # a checkout from before Sampler took them (it read them itself)
        CEILINGS = {}
from gpudisk_top.collect.source import live_source
from gpudisk_top.sim.fake_nvml import FakeNvml

job = int(os.environ["GDT_BENCH_JOB_PID"])


class LiveWithFakeGpus:
    def __init__(self):
        self.nvml = FakeNvml.with_gpus(8)
        for i in range(8):
            self.nvml.set_state(i, util_pct=95.0, mem_util_pct=40.0, power_mw=550_000,
                                power_limit_mw=700_000, processes=[(job, 30 * 2**30)])
        self.sampler = Sampler(Roots(), nvml=self.nvml, **CEILINGS)

    def sample(self):
        self.nvml.advance_to(time.time())
        return self.sampler.sample()

    def close(self):
        self.sampler.close()

    def drain_notes(self):      # a SampleSource's (collect/sample_source.py)
        return self.sampler.drain_notes()


record.open_source = lambda args, cfg: (LiveWithFakeGpus(), False, live_source())
sys.exit(record.run(record.build_parser("gpudisk-top record").parse_args(sys.argv[1:])))
"""


def live_argv(out: str, extra=()) -> list[str]:
    return [sys.executable, "-c", LIVE_RUNNER, "-o", out, "-i", "1", "-q", *extra]


def record_argv(out: str, scenario: str, extra=()) -> list[str]:
    sys.path.insert(0, ROOT)
    from gpudisk_top.commands import COMMANDS

    args = ["-o", out, "--demo", scenario, "-i", "1", "-q", *extra]
    if "record" in COMMANDS:
        return [sys.executable, "-m", "gpudisk_top", "record", *args]
    runner = ("import sys; from gpudisk_top.commands import record as r; "
              "sys.exit(r.run(r.build_parser('gpudisk-top record').parse_args(sys.argv[1:])))")
    return [sys.executable, "-c", runner, *args]


def cpu_s(pid: int) -> float:
    """utime + stime of pid so far, in seconds (fields 14 and 15 of /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_S


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=65.0,
                   help="the run's length; less --warmup, whole minutes (timing.py); with "
                        "--breakdown, the samples")
    p.add_argument("--warmup", type=float, default=5.0)
    p.add_argument("--source", choices=("live", "demo"), default="live")
    p.add_argument("--scenario", default="demo")
    p.add_argument("--no-summaries", action="store_true")
    p.add_argument("--breakdown", action="store_true")
    p.add_argument("--job-procs", type=int, default=4,
                   help="processes under the GPU job's process (live source)")
    p.add_argument("--against", metavar="CHECKOUT",
                   help="also run the recorder of another checkout, side by side")
    args = p.parse_args()
    if args.breakdown:
        return breakdown(args)
    sys.path.insert(0, ROOT)
    why = recorder_window_error(args.seconds, args.warmup)
    if why is not None:
        print(f"bench_record: {why}", file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix="gpudisk-top-bench-")
    out = os.path.join(tmp, "bench.gdtrec")
    extra = ["--no-summaries"] if args.no_summaries else []
    job = None
    if args.source == "live":
        # the GPU job: a parent and its DataLoader-like workers
        job = subprocess.Popen(["sh", "-c", f"for i in $(seq {args.job_procs}); do "
                                "sleep 100000 & done; wait"])
        env = dict(os.environ, GDT_BENCH_JOB_PID=str(job.pid), PYTHONPATH=ROOT)
        argv = live_argv(out, extra)
    else:
        env, argv = None, record_argv(out, args.scenario, extra)
    procs = {"record": subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)}
    if args.against:
        other_env = dict(env or os.environ, PYTHONPATH=os.path.abspath(args.against))
        other_argv = (live_argv(os.path.join(tmp, "against.gdtrec"), extra)
                      if args.source == "live" else
                      record_argv(os.path.join(tmp, "against.gdtrec"), args.scenario, extra))
        procs["record (against)"] = subprocess.Popen(other_argv, cwd=args.against,
                                                     env=other_env, stdout=subprocess.DEVNULL)
    iostat = shutil.which("iostat")
    if iostat:
        procs["iostat -x 1"] = subprocess.Popen([iostat, "-x", "1"], stdout=subprocess.DEVNULL)
    else:
        print("iostat not found (install sysstat): measuring the recorder alone", file=sys.stderr)
    t0 = time.monotonic()
    time.sleep(args.warmup)
    warm = {name: cpu_s(pr.pid) for name, pr in procs.items()}
    t_warm = time.monotonic()
    time.sleep(max(0.0, args.seconds - args.warmup))
    end = {name: cpu_s(pr.pid) for name, pr in procs.items()}
    t_end = time.monotonic()
    for pr in procs.values():
        pr.send_signal(signal.SIGTERM)
    for pr in procs.values():
        pr.wait(timeout=30)
    if job is not None:
        subprocess.run(["pkill", "-P", str(job.pid)])
        job.terminate()
        job.wait()
    from gpudisk_top.record import Recording

    with Recording.open(out) as rec:
        samples = len(rec)
    size = os.path.getsize(out)
    shutil.rmtree(tmp, ignore_errors=True)
    total_s, steady_s = t_end - t0, t_end - t_warm
    what = ("record -i 1: this machine's disks, host and processes, 8 simulated GPUs"
            if args.source == "live" else f"record --demo {args.scenario} -i 1")
    print(what)
    print(f"{args.seconds:.0f} s side by side, CPU time from /proc/PID/stat "
          f"(resolution {TICK_S * 1000:.0f} ms); record wrote {samples} samples, {size / 1024:.0f} KiB")
    print(f"{'process':<18} {'whole run':>22} {'steady state':>22}")
    rows = {}
    for name in procs:
        whole = end[name] / total_s * 100
        steady = (end[name] - warm[name]) / steady_s * 100
        rows[name] = (whole, steady)
        print(f"{name:<18} {end[name]:>7.2f} s = {whole:>6.3f} % {end[name] - warm[name]:>7.2f} s = "
              f"{steady:>6.3f} %   (% of one core)")
    if "record (against)" in rows:
        print(f"record - record (against), steady state: "
              f"{rows['record'][1] - rows['record (against)'][1]:+.3f} % of a core")
    if "iostat -x 1" in rows:
        rw, rs = rows["record"]
        iw, is_ = rows["iostat -x 1"]
        print(f"ratio record / iostat: whole run {rw / iw if iw else float('inf'):.1f}x, "
              f"steady state {rs / is_ if is_ else float('inf'):.1f}x")
    return 0


def breakdown(args) -> int:
    sys.path.insert(0, ROOT)
    from gpudisk_top.record import Recorder, derived, make_header, v2, writer
    from gpudisk_top.sim import Simulator, builtin

    spent: dict[str, float] = {}

    def measure(cls, name: str, label: str) -> None:
        real = getattr(cls, name)

        def timed(*a, **kw):
            t = time.thread_time()
            try:
                return real(*a, **kw)
            finally:
                spent[label] = spent.get(label, 0.0) + time.thread_time() - t
        setattr(cls, name, timed)

    measure(v2.Flattener, "flatten", "rows: flatten")
    measure(v2.RowCoder, "encode", "rows: encode")
    measure(writer.Recorder, "_write", "rows: write")
    measure(derived.Deriver, "_derive", "summaries (model + detector)")
    measure(writer.Recorder, "_commit", "blocks (columns, LZMA, sync)")
    tmp = tempfile.mkdtemp(prefix="gpudisk-top-bench-")
    sim = Simulator(builtin(args.scenario), seed=0)
    rec = Recorder(os.path.join(tmp, "b.gdtrec"), make_header(None, 1.0))
    n = int(args.seconds)
    sim_s = append_s = 0.0
    t0 = time.monotonic()
    for k in range(n):
        a = time.thread_time()
        s = sim.sample()
        b = time.thread_time()
        rec.append(s)
        c = time.thread_time()
        sim_s += b - a
        append_s += c - b
        time.sleep(max(0.0, t0 + k + 1 - time.monotonic()))
    rec.close()
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{n} samples at 1 Hz, thread CPU time (blocks come every 600 samples: run "
          f"--seconds 600 or more to see them)")
    print(f"  {'simulator (stands in for the collectors)':<40} {sim_s / n * 1e6:8.0f} us/sample "
          f"{sim_s / n * 100:7.3f} % of a core")
    print(f"  {'Recorder.append, all of it':<40} {append_s / n * 1e6:8.0f} us/sample "
          f"{append_s / n * 100:7.3f} % of a core")
    for label, v in spent.items():
        print(f"    {label:<38} {v / n * 1e6:8.0f} us/sample {v / n * 100:7.3f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
