"""`gpudisk-top record -o FILE`: record raw samples, headless, until stopped.

No terminal and no Textual: this module imports only the collectors (or the simulator for
--demo), the recorder and, for the summaries it writes beside the samples, the model and
the detector.  SIGINT, SIGTERM, SIGHUP (every signal that ends a process but SIGKILL) stop
it cleanly: the sample being written is finished, the session is closed with an end frame,
the file is synced, and what --delayacct switched on is switched off.  One ignored at
start (`nohup` ignores SIGHUP) stays ignored.

With --listen or --push (or [[alerts]] / [watch] in the config file) each sample also goes
through the model and the detector at once and on to the exporter and the alert rules,
as in `serve`; prometheus_client is loaded only then.
"""

from __future__ import annotations

import argparse
import os
import sys

from gpudisk_top.commands.common import (Parser, add_detector_options, add_interval_option,
                                         add_source_options, alert_options, close_source,
                                         device_filter, export_options, load_config,
                                         number_type, open_source, thresholds_from)
from gpudisk_top.errors import RuntimeFailure, UsageError, note, warn
from gpudisk_top.session import gcpolicy
from gpudisk_top.session.detail import after_step, slow_detail
from gpudisk_top.session.ticker import StopSignals, Ticker


MIN_MAX_SIZE_MB = 1.0   # ten parts of 100 kB: less holds a header and a sample a file

_megabytes = number_type(
    float, "number of megabytes",
    (lambda v: v > 0, "must be a positive number of megabytes: {text!r}"),
    (lambda v: v >= MIN_MAX_SIZE_MB,
     f"{{text!r}} is too small for a recording: at least {MIN_MAX_SIZE_MB:g} MB"))
_days = number_type(float, "number of days",
                    (lambda v: v > 0, "must be a positive number of days: {text!r}"))


def _duration(text: str) -> float:
    from gpudisk_top.timeparse import TimeParseError, parse_duration

    try:
        value = parse_duration(text)
    except TimeParseError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def build_parser(prog: str) -> argparse.ArgumentParser:
    p = Parser(prog=prog, description=(
        "Record raw samples to FILE, headless (no terminal needed), until SIGINT, SIGTERM or "
        "SIGHUP, or --duration.  An existing recording is appended to.  Every device is recorded: "
        "-a and -d choose what report and export show, not what is recorded."))
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the recording (e.g. node17.gdtrec); appended to if it exists")
    add_interval_option(p)
    p.add_argument("--duration", type=_duration, metavar="S",
                   help="stop after this long (90, 90s, 15m, 2h, 1d); default: until stopped")
    keep = p.add_mutually_exclusive_group()
    keep.add_argument("--max-size", type=_megabytes, metavar="MB",
                      help="keep FILE and its rotated generations FILE.1, FILE.2, ... under MB "
                           "in all: FILE rotates at MB/10, the oldest generations are deleted")
    keep.add_argument("--retain", type=_days, metavar="DAYS",
                      help="rotate FILE at local midnight (FILE.1 is yesterday) and delete "
                           "generations older than DAYS days")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary line when stopping")
    p.add_argument("--no-summaries", action="store_true",
                   help="record raw samples only, not what the detector made of them (report "
                        "then replays the samples: slower on long recordings)")
    add_source_options(p)
    add_detector_options(p)
    from gpudisk_top.commands.common import add_export_options

    add_export_options(p)
    return p


class _Live:
    """The step (model.step.Stepper) and the hooks (--listen, --push, alerts), fed one
    sample at a time; only when something asks for them."""

    def __init__(self, hooks, thresholds, cadence_s: float) -> None:
        from gpudisk_top.verdict.step import Stepper

        self.hooks = hooks
        self.stepper = Stepper(thresholds, cadence_s=cadence_s)   # verdict/gaps.py

    def feed(self, sample):
        """Step the sample and hand it to the hooks; its verdict."""
        model, verdict, loss = self.stepper.step(sample)
        self.hooks.on_sample(model, verdict, self.stepper.episodes, loss)
        return verdict


def _make_parent(path: str) -> None:
    """The recording's directory, made as `mkdir -p` makes it (0755) where it is missing:
    README's `-o /var/log/gpudisk-top/node.gdtrec` on a fresh node (issue 38).  Raises
    RuntimeFailure, one line, where it cannot be made."""
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(parent):
        return
    try:
        os.makedirs(parent, mode=0o755, exist_ok=True)
    except OSError as err:
        raise RuntimeFailure(f"-o {path}: cannot make its directory {parent}: "
                             f"{err.strerror or err}") from None
    note(f"made {parent}")


def run(args) -> int:
    from gpudisk_top.exporter.options import wants_hooks
    from gpudisk_top.record import Recorder, make_header
    from gpudisk_top.record.queued import QueuedRecorder

    if os.path.isdir(args.output):
        raise UsageError(f"-o {args.output}: is a directory")
    _make_parent(args.output)
    cfg = load_config(args)          # [detector], and [[alerts]], [devices.*], [watch]
    thresholds = thresholds_from(args, cfg)
    export = export_options(args)
    live_wanted = wants_hooks(export, cfg.sections)
    # before the source opens (--delayacct switches a node-wide setting there): from then
    # on every stop signal ends the loop, and sampler.close() puts the setting back
    stop = StopSignals()
    try:
        sampler, _virtual, origin = open_source(args, cfg)
    except BaseException:
        stop.restore()
        raise
    live = None
    # the processes every 5 s while every job is healthy (session/detail.py)
    slow_detail(sampler, thresholds)
    try:
        if live_wanted:
            from gpudisk_top.exporter.hooks import SampleHooks

            hooks = SampleHooks(cfg.sections, export, origin, device_filter(args),
                                alert_options(args)).start()
            live = _Live(hooks, thresholds, args.interval)
            if hooks.server is not None and hooks.server.url is not None:
                note(f"serving {hooks.server.url}")
        header = make_header(origin, args.interval, argv=sys.argv[1:] or None)
        # written from a thread of its own: a stalled output never stops the sampling,
        # the exporter or the alerts, and the time it cost is marked as a gap
        recorder = QueuedRecorder(Recorder(args.output, header, max_size_mb=args.max_size,
                                           retain_days=args.retain,
                                           thresholds=None if args.no_summaries else thresholds,
                                           summaries=not args.no_summaries, warn=warn),
                                  warn=warn)
    except BaseException:
        if live is not None:
            live.hooks.close()
        close_source(sampler)
        stop.restore()
        raise
    for warning in recorder.warnings:
        warn(warning)
    reason = "duration reached" if args.duration is not None else "stopped"
    gcpolicy.steady()       # hours of samples: no collection in the middle of each
    ticker = Ticker(args.interval)
    try:
        while stop.reason is None:
            sample = sampler.sample()
            recorder.append(sample)      # first: nothing recorded waits on the exporter
            if live is not None:
                # a job starved: every process read at the next sample (issue 41)
                after_step(sampler, live.feed(sample))
            wait_s = ticker.advance()
            if args.duration is not None and ticker.ticks * args.interval > args.duration + 1e-9:
                break
            stop.wait(wait_s)
        if stop.reason is not None:
            reason = stop.reason
    finally:
        # the handlers stay until the sampler is closed: a second signal must not end the
        # process before the node's setting is put back
        recorder.close(reason)
        if live is not None:
            live.hooks.close()
        close_source(sampler)
        stop.restore()
    if recorder.removed_empty and not recorder.samples:
        # not even a session's header and first sample ever fitted, so there is no
        # recording: exit 0 would tell a script or systemd that there is one
        raise RuntimeFailure(f"recorded nothing to {args.output}: the disk refused all "
                             f"{recorder.dropped} samples (see the warning above); no file "
                             "left behind")
    if not args.quiet:
        dropped = f", {recorder.dropped} dropped (the disk refused them)" if recorder.dropped else ""
        if recorder.lost:
            dropped += f", {recorder.lost} not recorded (the output stalled; marked as a gap)"
        note(f"recorded {recorder.samples} samples to {args.output} "
             f"({recorder.bytes_written / 1024:.0f} KiB{dropped}); {reason}")
        if recorder.removed:
            note(f"retention removed {len(recorder.removed)} old generation"
                 f"{'s' * (len(recorder.removed) != 1)}: {', '.join(recorder.removed[-3:])}"
                 + (", ..." if len(recorder.removed) > 3 else ""))
    return 0
