"""`gpudisk-top serve`: headless; samples every interval, runs the alert rules, and serves
Prometheus metrics (and/or pushes them to a Pushgateway) until SIGTERM or Ctrl-C.

    gpudisk-top serve [--listen 127.0.0.1:9425] [--push URL [--push-interval S]]
                      [-i S] [--count N] [sources] [--config PATH] [detector options]

Output is an API: one line on stderr when serving starts ("gpudisk-top: serving
http://127.0.0.1:9425/metrics"), alert log lines and warnings on stderr, nothing on
stdout.  Exit status 0 when stopped by SIGTERM, SIGINT or --count; 1 when the port is in
use or nothing can be read; 2 for bad usage or a bad config file.
"""

from __future__ import annotations

import argparse

from gpudisk_top.commands.common import (Parser, add_detector_options, add_interval_option,
                                         add_source_options, device_filter, load_config,
                                         number_type, open_source, thresholds_from)
from gpudisk_top.errors import note, warn
from gpudisk_top.session.ticker import StopSignals, Ticker


_count = number_type(int, "whole number", (lambda v: v >= 1, "must be at least 1: {text!r}"))


def build_parser(prog: str) -> argparse.ArgumentParser:
    from gpudisk_top.commands.common import add_export_options

    p = Parser(prog=prog, description="Serve Prometheus metrics and run the config file's "
                                      "alert rules, headless (no terminal needed).")
    add_export_options(p, serve=True)
    add_interval_option(p)
    p.add_argument("--count", type=_count, metavar="N",
                   help="stop after N samples (default: run until SIGTERM or Ctrl-C)")
    add_source_options(p)
    add_detector_options(p)
    return p


def run(args) -> int:
    """Serve until stopped.  Raises UsageError (bad options or config) and RuntimeFailure
    (the port is in use, nothing can be read), each one line."""
    from gpudisk_top.exporter.hooks import SampleHooks
    from gpudisk_top.model.step import Stepper

    cfg = load_config(args)
    thresholds = thresholds_from(args, cfg)
    dev_filter = device_filter(args)
    source, _virtual, origin = open_source(args)
    try:
        hooks = SampleHooks.from_args(args, cfg, origin, dev_filter, serve=True).start()
    except BaseException:
        source.close()
        raise
    stop = StopSignals()
    try:
        if hooks.server is not None and hooks.server.url is not None:
            note(f"serving {hooks.server.url} ({origin['source']})")
        if hooks.pusher is not None:
            note(f"pushing to {hooks.pusher.url} every {hooks.pusher.interval_s:g} s")
        stepper = Stepper(thresholds)
        ticker = Ticker(args.interval)
        taken = 0
        warned: set[str] = set()
        while stop.reason is None:
            sample = source.sample()
            taken += 1
            for warning in sample.warnings:
                if warning not in warned:      # a warning a second is noise; say it once
                    warned.add(warning)
                    warn(warning)
            model, verdict = stepper.step(sample)
            hooks.on_sample(model, verdict, stepper.episodes)
            if args.count is not None and taken >= args.count:
                break
            stop.wait(ticker.advance())
    finally:
        stop.restore()
        hooks.close()
        source.close()
    return 0
