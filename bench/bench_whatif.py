"""What the live what-if (gpudisk_top/verdict/whatif/) costs: predict() per starved
interval, and the share of a core it adds to `record -i 1` with a job of 64 processes.

    python bench/bench_whatif.py [--repeat 15] [--rounds 3] [--against CHECKOUT]

1. predict() per call, the median of --repeat timings (each of enough calls to take
   ~50 ms), at 4, 16 and 64 DataLoader workers (tests/whatif_inputs.py's latency-bound
   loaders, their buffered dataset fitting in the page cache, others' CPU beside: every
   solver of the model runs), and on the frozen corpus's 64-process job (8 trainers x 7
   workers, tests/fixtures/whatif/corpus.json "job-of-64-processes").
2. What `record -i 1` adds: record runs the detector over every sample (its summaries),
   and the detector's what-if step (Classifier._whatif: the interval's figures, then
   predict(), then the second cause) runs for every starved interval.  Measured here as
   that step's CPU time per interval it runs for, the median of --repeat passes of the
   detector over a simulated node whose job has 64 processes (the corpus scenarios
   disk-starved-hdd and cpu-starved-host at 7 workers a rank: 8 ranks x (1 + 7)).  At
   1 Hz, every interval starved (the worst case), 1 ms an interval is 0.1 % of a core.
   That share is COMPUTED from the per-interval cost, not measured on a running
   `record`: bench/bench_record.py --job-procs 64 --against CHECKOUT measures a whole
   recorder, but on a shared 2-vCPU machine its runs spread by about +-0.04 % of a core
   (docs/performance.md), as much as the what-if's 0.05 % budget itself.

CPU time (time.thread_time), not wall time: on a shared machine the others' load
stretches wall time but not much the CPU time a call takes.

--against CHECKOUT (e.g. `git worktree add --detach /tmp/base COMMIT`): the same figures
for that checkout, each in a fresh interpreter with the checkout first on sys.path, the
two alternated --rounds times; each figure is the median over its rounds, with the ratio.
The inputs are always this checkout's (its tests/ and fixtures), so both see the same.
Quote the figures with the machine's load: they are medians on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import timeit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(ROOT, "tests")
LOADERS = (4, 16, 64)
# the 64-process job: 8 ranks (one a GPU) x (the rank + 7 DataLoader workers)
SCENARIOS = ("disk-starved-hdd", "cpu-starved-host")
WORKERS_A_RANK = 7


def _median_s(fn, repeat: int) -> float:
    """The median CPU time (this thread's: what the machine's other load does not add) of
    one call of fn, over `repeat` timings of ~50 ms each."""
    fn()                                                    # warm (imports, caches)
    t0 = time.thread_time()
    fn()
    number = max(1, int(0.05 / max(1e-6, time.thread_time() - t0)))
    return statistics.median(timeit.timeit(fn, number=number, timer=time.thread_time) / number
                             for _ in range(repeat))


def predict_inputs() -> dict:
    """{label: (Pipeline, state, kind)}: the inputs of part 1."""
    sys.path.insert(0, TESTS)
    from whatif_inputs import latency_bound

    from gpudisk_top.verdict.whatif import Pipeline

    out = {f"{n} loaders": (latency_bound(n, direct=False, data_kb=2 << 20,
                                          mem_available_kb=8 << 20, others_cpu=0.3,
                                          io_cpu=0.1), "disk-starved", "latency-bound")
           for n in LOADERS}
    with open(os.path.join(TESTS, "fixtures", "whatif", "corpus.json"), encoding="utf-8") as f:
        case = next(c for c in json.load(f)["cases"] if c["name"] == "job-of-64-processes")
    p = Pipeline(**case["pipeline"])
    out["64-process job (56 loaders)"] = (p, case["state"], case["kind"])
    return out


def scenario_models(name: str) -> list:
    """The Models of one pass of a corpus scenario, its job at 7 workers a rank."""
    from gpudisk_top.model.snapshot import Model
    from gpudisk_top.sim import Simulator
    from gpudisk_top.sim.scenario_toml import loads_toml

    with open(os.path.join(TESTS, "corpus", f"{name}.toml"), encoding="utf-8") as f:
        text = f.read()
    lines = [f"workers = {WORKERS_A_RANK}" if line.startswith("workers = ") else line
             for line in text.splitlines()]
    sim = Simulator(loads_toml("\n".join(lines), name), seed=0)
    models, last = [], sim.sample()
    for _ in range(len(sim.labels())):
        sample = sim.sample()
        models.append(Model.new(sample, last))
        last = sample
    return models


def detector_cost(name: str, repeat: int) -> dict:
    """The CPU time of the detector's what-if step (Classifier._whatif: the interval's
    figures, predict(), the second cause) per interval it runs for, over a scenario."""
    from gpudisk_top.verdict.detect import Detector, classify

    models = scenario_models(name)
    job_procs = {pid for m in models for pid, v in m.procs.items() if v.root_pid is not None}
    real_predict, real_whatif = classify.predict, classify.Classifier._whatif
    spent, calls, predicted = [0.0], [0], [0]

    def timed(self, *args):
        t0 = time.thread_time()
        try:
            return real_whatif(self, *args)
        finally:
            spent[0] += time.thread_time() - t0
            calls[0] += 1

    def counting(p, state, kind):
        predicted[0] += 1
        return real_predict(p, state, kind)

    per_interval_ms = []
    classify.Classifier._whatif, classify.predict = timed, counting
    try:
        for _ in range(repeat):
            spent[0] = calls[0] = predicted[0] = 0
            det = Detector()
            for m in models:
                det.feed(m)
            per_interval_ms.append(spent[0] / max(1, calls[0]) * 1000)
    finally:
        classify.Classifier._whatif, classify.predict = real_whatif, real_predict
    ms = statistics.median(per_interval_ms)
    return {"intervals": len(models), "whatif_runs": calls[0], "predicted": predicted[0],
            "job_procs": len(job_procs), "per_interval_ms": ms, "core_pct_at_1hz": ms / 10}


def measure(repeat: int) -> dict:
    import gpudisk_top
    from gpudisk_top.verdict.whatif import predict

    out = {"checkout": os.path.dirname(os.path.dirname(os.path.abspath(gpudisk_top.__file__))),
           "predict_ms": {}, "record": {}}
    for label, (p, state, kind) in predict_inputs().items():
        out["predict_ms"][label] = _median_s(lambda: predict(p, state, kind), repeat) * 1000
    for name in SCENARIOS:
        out["record"][name] = detector_cost(name, repeat)
    return out


def _print(runs: dict[str, list[dict]]) -> None:
    names = list(runs)
    print("predict() per call, median ms of CPU" + "".join(f" | {n}" for n in names)
          + (" | against / this" if len(names) == 2 else ""))
    for label in runs[names[0]][0]["predict_ms"]:
        vals = [statistics.median(r["predict_ms"][label] for r in runs[n]) for n in names]
        ratio = f" | {vals[0] / vals[1]:.1f}" if len(vals) == 2 and vals[1] else ""
        print(f"  {label}: " + " | ".join(f"{v:.3f}" for v in vals) + ratio)
    print("record -i 1: the what-if step's CPU per starved interval (ms) and, every interval "
          "starved, at 1 Hz (% of a core, computed)")
    for sc in SCENARIOS:
        first = runs[names[0]][0]["record"][sc]
        parts = []
        for n in names:
            ms = statistics.median(r["record"][sc]["per_interval_ms"] for r in runs[n])
            parts.append(f"{n}: {ms:.3f} ms, {ms / 10:.4f} %")
        print(f"  {sc} ({first['job_procs']} job processes; of {first['intervals']} intervals "
              f"{first['whatif_runs']} starved, {first['predicted']} predicted): "
              + " | ".join(parts))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--against", metavar="CHECKOUT")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.repeat < 1 or args.rounds < 1:
        sys.exit("bench_whatif: --repeat and --rounds must be at least 1")
    if args.json:
        print(json.dumps(measure(args.repeat)))
        return 0
    if not args.against:
        _print({"this checkout": [measure(args.repeat)]})
        return 0
    against = os.path.abspath(args.against)
    if not os.path.isdir(os.path.join(against, "gpudisk_top")):
        sys.exit(f"bench_whatif: {against!r} is not a checkout of gpudisk-top")
    runs: dict[str, list[dict]] = {"this checkout": [], "against": []}
    for _ in range(args.rounds):
        for label, path in (("against", against), ("this checkout", ROOT)):
            env = dict(os.environ, PYTHONPATH=path)
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--json",
                                   "--repeat", str(args.repeat)],
                                  capture_output=True, text=True, env=env, cwd=ROOT)
            if proc.returncode != 0:
                sys.exit(f"bench_whatif: the run for {path} failed: "
                         f"{proc.stderr.strip().splitlines()[-1:]}")
            doc = json.loads(proc.stdout)
            if os.path.realpath(doc["checkout"]) != os.path.realpath(path):
                sys.exit(f"bench_whatif: {path} imported gpudisk_top from {doc['checkout']}")
            runs[label].append(doc)
    runs = {f"{k} ({os.path.basename(v[0]['checkout'])})": v for k, v in
            (("against", runs["against"]), ("this checkout", runs["this checkout"]))}
    _print(runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
