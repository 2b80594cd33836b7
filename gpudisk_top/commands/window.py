"""What report and export share: the recording to open, its source, the --from/--to
window, -a/-d."""

from __future__ import annotations

import argparse

from gpudisk_top.commands.common import Parser
from gpudisk_top.errors import UsageError
from gpudisk_top.errors import warn as warn_line

_TIME_OPTIONS = ("--from", "--to")


class WindowParser(Parser):
    """Lets `--to -5m` mean five minutes before the end: argparse would take "-5m" for an
    option, so a time option's value that starts with "-" is joined to it first."""

    def parse_known_args(self, args=None, namespace=None):
        if args is not None:
            args = list(args)
            joined = []
            i = 0
            while i < len(args):
                if args[i] in _TIME_OPTIONS and i + 1 < len(args) and args[i + 1].startswith("-"):
                    joined.append(f"{args[i]}={args[i + 1]}")
                    i += 2
                    continue
                joined.append(args[i])
                i += 1
            args = joined
        return super().parse_known_args(args, namespace)


def add_window_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="a recording made by `gpudisk-top record`")
    p.add_argument("--from", dest="time_from", metavar="T",
                   help="start of the window: ISO 8601 (2026-01-01T03:00, local time without a "
                        "zone), HH:MM, '2h ago', '+5m' after the recording's start, '-5m' "
                        "before its end, @EPOCH; default: the start")
    p.add_argument("--to", dest="time_to", metavar="T", help="end of the window, same forms; "
                   "default: the end")
    p.add_argument("-a", "--all-devices", action="store_true",
                   help="every block device: partitions, loop, idle devices too")
    p.add_argument("-d", "--devices", metavar="GLOBS",
                   help="only devices whose name matches one of these comma-separated globs")
    add_source_option(p)


def add_source_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--source", metavar="WHICH",
                   help="a recording that mixes sources (live and simulated sessions, or two "
                        "hosts) is read one source at a time: live, simulated, unknown (a "
                        "session whose header is damaged) or a host name; default: the live "
                        "sessions (of the first host recorded), with a warning")


def open_recording(args):
    """args.file opened and narrowed to one source (--source; Recording.choose_source).
    Raises UsageError (one line) for a file that is not a readable recording or a
    --source that matches no session."""
    from gpudisk_top.record import Recording

    rec = Recording.open(args.file)
    try:
        return rec.choose_source(getattr(args, "source", None))
    except UsageError:
        rec.close()
        raise


def open_window(args, warn=True):
    """(recording, start_s, end_s) for args.file, --source and --from/--to.  Raises
    UsageError (one line) for a file that is not a readable recording, a --source that
    matches nothing, a recording without samples, a time that cannot be read, or a window
    with no sample in it.  The recording's warnings (a torn tail, damage, sources left
    out) go to stderr when warn is set."""
    from gpudisk_top.record.header import iso
    from gpudisk_top.timeparse import Span, TimeParseError, parse_time

    rec = open_recording(args)
    if warn:
        for w in rec.warnings:
            warn_line(w)
    if not len(rec):
        rec.close()
        raise UsageError(f"{args.file}: the recording holds no samples")
    span = Span(rec.start_s, rec.end_s)
    times = []
    for option, text in (("--from", args.time_from), ("--to", args.time_to)):
        try:
            # "" is a time nobody meant, not "the whole recording": parse_time refuses it
            times.append(parse_time(text, span) if text is not None else None)
        except TimeParseError as err:
            rec.close()
            raise UsageError(f"{option}: {err}") from None
    start, end = times
    if start is not None and end is not None and end < start:
        rec.close()
        raise UsageError(f"--to {args.time_to} is before --from {args.time_from}")
    if not rec.ranges(start, end):
        rec.close()
        raise UsageError(f"no samples between {iso(start) if start is not None else 'the start'} "
                         f"and {iso(end) if end is not None else 'the end'}; the recording spans "
                         f"{iso(rec.start_s)} to {iso(rec.end_s)}")
    return rec, start, end
