#!/usr/bin/env python3
"""Score the starvation detector on the labelled corpus.

For every scenario (two passes, several seeds) it feeds the simulator's samples through
Model.new and one Detector, then compares with the labels:
  - precision and recall per state, per interval, of the live (hysteresis) state and of
    the episode timeline (episodes are backdated to their onset, as replay and report
    show them);
  - detection latency: intervals from the onset of a labelled starved stretch until the
    live state says so;
  - per scenario: every labelled starved stretch detected with the right state within 3
    intervals, and no episode of a state the labels never ask for (a false alarm).

The real half of the corpus (tests/fixtures/real/, made by record_real.py): recordings of
real jobs on a real disk and CPUs, labelled from what the job itself logged.  Each is
replayed through the same Model.new and Detector (record.replay.Replay, as report and
replay do), scored the same way, and also checked for naming the job's process (and, for
storage, its device) in every starved episode.  Scores are given separately: simulated,
then real.

usage: python tests/corpus/score.py [--seeds N] [--real-only | --simulated-only]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
# run as a script, this folder comes first on sys.path and "corpus" would be corpus.py
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.path.insert(0, os.path.dirname(HERE))                    # tests/
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))   # the checkout

from corpus.corpus import real_recordings, scenarios  # noqa: E402
from gpudisk_top.verdict.detect import STARVED_STATES, STATES, Detector  # noqa: E402
from gpudisk_top.model.snapshot import Model  # noqa: E402
from gpudisk_top.sim import Simulator  # noqa: E402

MAX_LATENCY = 3


@dataclass
class Run:
    name: str
    seed: int
    labels: list[str] = field(default_factory=list)
    live: list[str] = field(default_factory=list)
    timeline: list[str] = field(default_factory=list)
    episodes: list = field(default_factory=list)
    latencies: list[tuple[str, int | None]] = field(default_factory=list)  # (state, intervals)
    problems: list[str] = field(default_factory=list)


def run_scenario(name: str, scenario, seed: int, passes: int = 2) -> Run:
    sim = Simulator(scenario, seed=seed)
    n = len(sim.labels()) * passes
    det = Detector()
    run = Run(name, seed)
    walls = []
    last = sim.sample()
    for i in range(1, n + 1):
        sample = sim.sample()
        model = Model.new(sample, last)
        v = det.feed(model)
        run.labels.append(sim.label_at(i))
        run.live.append(v.state)
        walls.append((model.wall_s - model.interval_s, model.wall_s))
        last = sample
    det.close(walls[-1][1])
    run.episodes = list(det.episodes)
    # the episode timeline: each interval takes the state of the episode covering its
    # midpoint, else the calm live state
    for (start, end), live in zip(walls, run.live):
        mid = (start + end) / 2
        ep = next((e for e in run.episodes if e.start_wall_s <= mid < e.end_wall_s), None)
        run.timeline.append(ep.state if ep is not None else
                            (live if live not in STARVED_STATES else "healthy"))
    _judge(run, walls)
    return run


def run_real(name: str, recording: str, truth: dict) -> Run:
    """Replay a real recording and compare with the job's own labels (the label of the
    second each interval ends in)."""
    from gpudisk_top.record import Recording
    from gpudisk_top.session.replay import Replay

    labels = truth["labels"]
    walls_labels = [w for w, _ in labels]
    run = Run(name, 0)
    walls = []
    with Recording.open(recording) as rec:
        replay = Replay(rec)
        for model, v in replay.models():
            if model.interval_s <= 0:
                continue
            i = min(range(len(labels)), key=lambda k: abs(walls_labels[k] - model.wall_s))
            if abs(walls_labels[i] - model.wall_s) > 1.0:
                continue                    # before the job's log starts, or after it ends
            run.labels.append(labels[i][1])
            run.live.append(v.state)
            walls.append((model.wall_s - model.interval_s, model.wall_s))
        run.episodes = list(replay.episodes)
    for (start, end), live in zip(walls, run.live):
        mid = (start + end) / 2
        ep = next((e for e in run.episodes if e.start_wall_s <= mid
                   and (e.end_wall_s is None or mid < e.end_wall_s)), None)
        run.timeline.append(ep.state if ep is not None else
                            (live if live not in STARVED_STATES else "healthy"))
    _judge(run, walls)
    for ep in run.episodes:
        if ep.state not in STARVED_STATES:
            continue
        if truth.get("job_pid") and truth["job_pid"] not in ep.processes:
            run.problems.append(f"{ep.state} episode {ep.id} does not name the job's pid "
                                f"{truth['job_pid']}: {ep.processes}")
        if ep.state == "disk-starved" and truth.get("device") and truth["device"] not in ep.devices:
            run.problems.append(f"disk-starved episode {ep.id} does not name {truth['device']}: "
                                f"{ep.devices}")
    return run


def score_real() -> list[Run]:
    return [run_real(name, rec, truth) for name, rec, truth in real_recordings()]


def _stretches(labels: list[str]) -> list[tuple[str, int, int]]:
    """(label, first index, last index) of each run of one label."""
    out, start = [], 0
    for i in range(1, len(labels) + 1):
        if i == len(labels) or labels[i] != labels[start]:
            out.append((labels[start], start, i - 1))
            start = i
    return out


def _judge(run: Run, walls) -> None:
    asked = {lab for lab in run.labels if lab in STARVED_STATES}
    for state, first, last in _stretches(run.labels):
        if state not in STARVED_STATES:
            continue
        hit = next((i for i in range(first, last + 1) if run.live[i] == state), None)
        latency = None if hit is None else hit - first + 1
        run.latencies.append((state, latency))
        if last - first + 1 < 3:
            continue  # too short to confirm by design (enter_intervals)
        if latency is None or latency > MAX_LATENCY:
            run.problems.append(f"{state} at interval {first}: detected "
                                f"{'never' if latency is None else f'after {latency}'}")
    for ep in run.episodes:
        if ep.state not in asked:
            run.problems.append(f"false alarm: {ep.state} episode {ep.id} "
                                f"({ep.duration_s():.0f} s): {ep.reason}")


def precision_recall(pairs: list[tuple[str, str]]) -> dict[str, tuple[float | None, float | None, int]]:
    tp, fp, fn = Counter(), Counter(), Counter()
    for label, got in pairs:
        if label == got:
            tp[label] += 1
        else:
            fp[got] += 1
            fn[label] += 1
    out = {}
    for s in STATES:
        p = tp[s] / (tp[s] + fp[s]) if tp[s] + fp[s] else None
        r = tp[s] / (tp[s] + fn[s]) if tp[s] + fn[s] else None
        out[s] = (p, r, tp[s] + fn[s])
    return out


def score(seeds: int = 3) -> list[Run]:
    return [run_scenario(name, sc, seed) for name, sc in scenarios() for seed in range(seeds)]


def report(runs: list[Run]) -> str:
    lines = []
    for kind in ("live", "timeline"):
        pairs = [(lab, got) for r in runs for lab, got in zip(r.labels, getattr(r, kind))]
        lines.append(f"{'state':<18} {'precision':>9} {'recall':>7} {'intervals':>9}   ({kind})")
        for s, (p, r, n) in precision_recall(pairs).items():
            fmt = lambda x: "   -" if x is None else f"{x:.3f}"  # noqa: E731
            lines.append(f"{s:<18} {fmt(p):>9} {fmt(r):>7} {n:>9}")
        lines.append("")
    by_state: dict[str, list[int | None]] = {}
    for r in runs:
        for state, lat in r.latencies:
            by_state.setdefault(state, []).append(lat)
    lines.append(f"{'detection latency':<18} {'onsets':>6} {'mean':>5} {'max':>4}  (intervals)")
    for state, lats in sorted(by_state.items()):
        seen = [x for x in lats if x is not None]
        mean = f"{sum(seen) / len(seen):.1f}" if seen else "-"
        worst = "never" if len(seen) < len(lats) else str(max(seen))
        lines.append(f"{state:<18} {len(lats):>6} {mean:>5} {worst:>4}")
    lines.append("")
    bad = [r for r in runs if r.problems]
    names = sorted({r.name for r in runs})
    lines.append(f"scenarios right: {len(names) - len({r.name for r in bad})} of {len(names)} "
                 f"({len(runs)} runs over {len(runs) // max(1, len(names))} seeds)")
    for r in bad:
        for p in r.problems:
            lines.append(f"  {r.name} seed {r.seed}: {p}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    only = ap.add_mutually_exclusive_group()
    only.add_argument("--real-only", action="store_true")
    only.add_argument("--simulated-only", action="store_true")
    a = ap.parse_args()
    failed = False
    if not a.real_only:
        runs = score(a.seeds)
        print("simulated scenarios\n" + report(runs))
        failed |= any(r.problems for r in runs)
    if not a.simulated_only:
        runs = score_real()
        print(("\n" if not a.real_only else "") + "real recordings\n" + report(runs))
        failed |= any(r.problems for r in runs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
