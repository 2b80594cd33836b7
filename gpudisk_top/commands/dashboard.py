"""`gpudisk-top`: the live dashboard (the only command that loads Textual), with alerts,
watched free space, --listen/--push and --record."""

from __future__ import annotations

import sys

from gpudisk_top.commands.common import (alert_options, close_source, device_filter,
                                         export_options, load_config, open_source, say_notes,
                                         thresholds_from)
from gpudisk_top.errors import UsageError
from gpudisk_top.session import gcpolicy
from gpudisk_top.session.ticker import StopSignals


def run(args) -> int:
    """The dashboard until q, or a signal that ends a process (SIGHUP: its terminal hung
    up).  Raises UsageError (no terminal, bad options) and RuntimeFailure, each one line."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("the dashboard needs a terminal; without one use "
                         "`gpudisk-top --once` (or --once --json) for a snapshot, or "
                         "`gpudisk-top record -o FILE` to record")
    cfg = load_config(args)
    thresholds = thresholds_from(args, cfg)
    export = export_options(args)
    # before the source opens (--delayacct switches a node-wide setting there): a signal
    # from then on ends the app (ui/app.py), whose unmount closes the sampler, which puts
    # the setting back
    stop = StopSignals()
    try:
        return _run(args, cfg, thresholds, export, stop)
    finally:
        stop.restore()


def _run(args, cfg, thresholds, export, stop: StopSignals) -> int:
    sampler, _virtual, origin = open_source(args, cfg)
    hooks = recorder = app = None
    try:
        from gpudisk_top.exporter.hooks import SampleHooks

        # alerts (banner, bell), watched free space, and --listen/--push; alert lines do
        # not go to stderr, which is the screen
        hooks = SampleHooks(cfg.sections, export, origin, device_filter(args),
                            alert_options(args), stderr=None).start()
        from gpudisk_top.ui.app import GpuDiskApp  # the only path that loads Textual
        from gpudisk_top.ui.terminal import screen_on_terminal

        if args.record:
            from gpudisk_top.record.header import make_header
            from gpudisk_top.record.queued import QueuedRecorder
            from gpudisk_top.record.writer import Recorder

            # its own writer thread: a stalled output shows NOT RECORDING, the screen goes on
            recorder = QueuedRecorder(Recorder(args.record, make_header(origin, args.interval)))
        app = GpuDiskApp(sampler, args.interval, origin, thresholds=thresholds,
                         dev_filter=device_filter(args),
                         prefill=sampler.samples_until(args.demo_start) if args.demo_start else 0,
                         on_sample=recorder.append if recorder else None, hooks=hooks,
                         record_path=args.record, price=cfg.sections["ledger"],
                         stop_signals=stop)
        gcpolicy.steady()   # hours of samples and frames: no collection in each
        with screen_on_terminal():
            app.run(mouse=not args.no_mouse)
    finally:
        if app is not None:
            app.close_feed()     # where the app never mounted, or never unmounted
            # what closing the source did (the feed closed it), said once the app has
            # let go of stderr
            say_notes(sampler)
        else:
            if hooks is not None:
                hooks.close()
            close_source(sampler)
        if recorder is not None:
            recorder.close("dashboard quit" if stop.reason is None else stop.reason)
    return 0
