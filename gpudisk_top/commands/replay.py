"""`gpudisk-top replay FILE`: the dashboard driven by a recording."""

from __future__ import annotations

import dataclasses
import sys

from gpudisk_top.commands.common import (Parser, add_detector_options, device_filter, load_config,
                                         thresholds_from)
from gpudisk_top.collect.source import SIMULATED, UNKNOWN, Source
from gpudisk_top.errors import UsageError, warn


def build_parser(prog: str) -> Parser:
    p = Parser(prog=prog, description="Replay a recording in the dashboard: space play/pause, "
               ", and . step, f speed (x1/x10/x60), g go to a time, n/N next/previous episode.")
    p.add_argument("file", help="a recording made by `gpudisk-top record` or `--record`")
    p.add_argument("--from", dest="start", metavar="T",
                   help="start at T (ISO 8601, 03:12, +5m, -5m, 10m ago; default: the start)")
    p.add_argument("-a", "--all-devices", action="store_true", help="every block device")
    p.add_argument("-d", "--devices", metavar="GLOBS", help="only devices matching these globs")
    p.add_argument("--no-mouse", action="store_true", help="leave the mouse to the terminal")
    from gpudisk_top.commands.window import add_source_option

    add_source_option(p)
    add_detector_options(p)
    return p


def replay_origin(rec, path: str) -> Source:
    """Where a replay of `rec` comes from: the recording's own Source (its kind: the
    dashboard flags DEMO for a simulated one, ReplayApp SOURCE? for an unknown one, so a
    damaged session header never makes a replay look live), labelled as a replay of
    `path`, with the host and kernel the recording names ("?" where it names none)."""
    header = rec.header
    source = rec.source
    label = {SIMULATED: " (simulated)", UNKNOWN: " (source unknown: session header damaged)"}
    return dataclasses.replace(source, label=f"replay of {path}" + label.get(source.kind, ""),
                               host_name=source.host_name or header.get("host_name") or "?",
                               kernel=header.get("kernel") or "?")


def run(args) -> int:
    from gpudisk_top.commands.window import open_recording
    from gpudisk_top.timeparse import Span, TimeParseError, parse_time

    thresholds = thresholds_from(args, load_config(args))
    rec = open_recording(args)
    for warning in rec.warnings:
        warn(warning)
    if len(rec) < 2:
        raise UsageError(f"{args.file}: fewer than two samples, nothing to replay")
    start = 0
    if args.start:
        try:
            start = rec.index_at(parse_time(args.start, Span(rec.start_s, rec.end_s)))
        except TimeParseError as err:
            raise UsageError(f"--from: {err}") from None
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("replay needs a terminal; without one use "
                         f"`gpudisk-top report {args.file}` or `gpudisk-top export`")
    origin = replay_origin(rec, args.file)
    from gpudisk_top.ui.replay_app import ReplayApp  # only the dashboard loads Textual
    from gpudisk_top.ui.terminal import screen_on_terminal

    app = ReplayApp(rec, origin, thresholds=thresholds, dev_filter=device_filter(args),
                    start_index=start)
    try:
        with screen_on_terminal():
            app.run(mouse=not args.no_mouse)
    finally:
        rec.close()
    return 0
