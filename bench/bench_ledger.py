#!/usr/bin/env python3
"""CPU of the stall ledger (verdict/ledger.py) a sample: what the one step (verdict/step.py)
adds to count an interval, and what the exporter adds to hand its counters over.

Measured on the demo recording's 8-GPU node, in its disk-starved episode with the job's
healthy level known (the dearest path: the median's reference read), each the median of
--repeat calls:
  account     Accountant.account(model, verdict) + Ledger.add(loss): the step's part
  frame       Ledger.copy(): what MetricsServer.update hands each frame
  render      the three ledger families of a scrape (Renderer._ledger)
  peer        Model.new(sample, last) of the same interval, for the ratio (the machine
              this runs on may be loaded: the ratio holds, the µs move)

usage: python bench/bench_ledger.py [--repeat N] [--json OUT]
It prints each figure and the share of a core at 1 Hz (the issue's budget: 0.02 %).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from timing import median_us  # noqa: E402
from gpudisk_top.exporter.families import Frame, Renderer  # noqa: E402
from gpudisk_top.model.snapshot import Model  # noqa: E402
from gpudisk_top.record.reader import Recording  # noqa: E402
from gpudisk_top.session.replay import Replay  # noqa: E402

DEMO = os.path.join(ROOT, "examples", "demo-simulated.gdtrec")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20000)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    rec = Recording.open(DEMO)
    replay = Replay(rec, warmup_s=None)
    picked = None
    last = None
    for _i, model, verdict, loss in replay.run(rec.ranges()):
        if verdict.state == "disk-starved" and loss.reference_pct is not None:
            picked = (model, verdict, last)
            break
        last = model.sample
    if picked is None:
        print("no disk-starved interval with a known healthy level in the demo", file=sys.stderr)
        return 1
    model, verdict, last = picked
    acc = replay.stepper.accountant
    ledger = replay.stepper.ledger.copy()

    def account():
        ledger.add(acc.account(model, verdict))

    renderer = Renderer()
    frame = Frame(model=model, verdict=verdict, ledger=ledger.copy())
    figures = {
        "account_us": median_us(account, a.repeat),
        "frame_us": median_us(ledger.copy, a.repeat),
        "render_us": median_us(lambda: renderer._ledger(frame), a.repeat // 4),
        "peer_model_new_us": median_us(lambda: Model.new(model.sample, last), a.repeat // 20),
        "gpus": len(model.gpus),
        "repeat": a.repeat,
    }
    per_sample = figures["account_us"] + figures["frame_us"]
    figures["core_pct_at_1hz"] = per_sample / 1e6 * 100
    for k, v in figures.items():
        print(f"{k:22} {v:.3f}" if isinstance(v, float) else f"{k:22} {v}")
    print(f"account / Model.new    {figures['account_us'] / figures['peer_model_new_us']:.4f}")
    print(f"a sample (account + frame) at 1 Hz: {figures['core_pct_at_1hz']:.5f}% of a core "
          "(budget 0.02%)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(figures, f, indent=2)
    rec.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
