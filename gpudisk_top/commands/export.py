"""`gpudisk-top export FILE --format csv|jsonl|perfetto -o OUT`: per-interval rates.

perfetto writes Chrome trace-event JSON that the Perfetto UI (and chrome://tracing) opens:
a counter track per GPU, per disk and for the host, a slice per starvation episode, with
wall-clock microsecond timestamps like the PyTorch profiler's.
"""

from __future__ import annotations

import argparse
import os
import sys

from gpudisk_top.commands.common import (add_detector_options, device_filter, load_config,
                                         thresholds_from)
from gpudisk_top.errors import RuntimeFailure, UsageError, note


def build_parser(prog: str) -> argparse.ArgumentParser:
    from gpudisk_top.report.export import FORMATS
    from gpudisk_top.commands.window import WindowParser, add_window_options

    p = WindowParser(prog=prog, description=(
        "Write a recording's per-interval rates: csv (one row per interval and GPU, disk "
        "and host), jsonl (one object per interval), or perfetto (Chrome trace-event JSON "
        "for ui.perfetto.dev, beside a PyTorch profiler trace)."))
    add_window_options(p)
    p.add_argument("--format", "-f", required=True, choices=FORMATS, help="output format")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="output file ('-': stdout)")
    add_detector_options(p)
    return p


def run(args) -> int:
    from gpudisk_top import outfile
    from gpudisk_top.report.export import WRITERS
    from gpudisk_top.commands.window import open_window

    thresholds = thresholds_from(args, load_config(args))
    if args.output != "-" and _same_file(args.output, args.file):
        raise UsageError("-o would overwrite the recording itself")
    rec, start, end = open_window(args)
    try:
        if args.output == "-":
            WRITERS[args.format](sys.stdout, rec, start, end, thresholds, device_filter(args))
            return 0
        try:
            # as private as the recording it comes from (command lines are in jsonl)
            mode = os.stat(args.file).st_mode & 0o666
            with outfile.replaced(args.output, mode=mode) as out:
                n = WRITERS[args.format](out, rec, start, end, thresholds, device_filter(args))
        except outfile.OutputError as err:
            raise RuntimeFailure(str(err)) from None
    finally:
        rec.close()
    what = {"csv": "rows", "jsonl": "lines"}.get(args.format, "events")
    note(f"wrote {n} {what} to {args.output}")
    return 0


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)
