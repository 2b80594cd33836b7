"""`gpudisk-top report FILE`: the postmortem of a recording, as text or JSON.

Verdicts come from the summaries the recorder wrote (format v2) when this version's model
and detector made them with the same thresholds, else they are recomputed from the raw
counters by this version's model and detector; "derived" in the JSON (and the text's
header) says which.  The JSON layout is an API (README, "Report JSON"): keys are added,
never renamed.  Every job that ran is listed ("jobs"); --job ID reports one of them
(report/jobs.py says which IDs it takes).
"""

from __future__ import annotations

import argparse
import json
import sys

from gpudisk_top.commands.common import (add_detector_options, count_type, device_filter,
                                         load_config, thresholds_from)


def build_parser(prog: str) -> argparse.ArgumentParser:
    from gpudisk_top.commands.window import WindowParser, add_window_options

    p = WindowParser(prog=prog, description=(
        "The postmortem of a recording: its span, each GPU's time in each state, the "
        "starvation episodes with their evidence, the devices with the worst await, and "
        "charts of GPU utilization and disk latency with the episodes marked."))
    add_window_options(p)
    p.add_argument("--json", action="store_true", help="one JSON object (schema in README)")
    p.add_argument("--no-charts", action="store_true", help="text report without the charts")
    p.add_argument("--job", metavar="ID",
                   help="the report of one job: its episodes, GPUs, GPU time lost and chart "
                        "(ID: a job's id as the report lists it, e.g. slurm:1001 or pid:4121; "
                        "its name exactly; or a prefix of one job's id)")
    # the replay is one pass in one process: -j is still accepted (scripts pass it), unused
    p.add_argument("-j", "--jobs", type=count_type, metavar="N", help=argparse.SUPPRESS)
    p.add_argument("--recompute", action="store_true",
                   help="replay the raw samples through this version's model and detector even "
                        "when the recording holds summaries they made")
    add_detector_options(p)
    return p


def run(args) -> int:
    from gpudisk_top.report import summary, text
    from gpudisk_top.commands.window import open_window

    cfg = load_config(args)
    thresholds = thresholds_from(args, cfg)
    price = cfg.sections["ledger"]
    rec, start, end = open_window(args)
    try:
        result = summary.build(rec, start, end, thresholds, device_filter(args),
                               recompute=args.recompute, price=price, job=args.job)
    finally:
        rec.close()
    if args.json:
        sys.stdout.write(json.dumps(result.data, indent=2, allow_nan=False, default=str) + "\n")
    else:
        sys.stdout.write(text.render(result, charts=not args.no_charts, price=price))
    return 0
