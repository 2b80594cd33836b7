"""`gpudisk-top serve`: headless; samples every interval, runs the alert rules, and serves
Prometheus metrics (and/or pushes them to a Pushgateway) until SIGTERM, SIGHUP or Ctrl-C.

    gpudisk-top serve [--listen 127.0.0.1:9425] [--push URL [--push-interval S]]
                      [-i S] [--count N] [--job-retention S] [sources] [--config PATH]
                      [detector options]
    gpudisk-top serve --demo SCENARIO[,SCENARIO...] --nodes N --listen HOST:PORT

With --nodes, N simulated nodes (a fleet to try `gpudisk-top fleet` on): node i serves on
PORT+i, runs the i-th scenario of the list (cycling) with seed SEED+i, its clock now.
With --demo-start S a simulated node has a past: its scenario started S seconds ago and
that history runs through its detector at once, so it serves the state of S seconds in
(a scenario's starvation some seconds in, without waiting for it) with its since then.

Output is an API: one line on stderr when serving starts ("gpudisk-top: serving
http://127.0.0.1:9425/metrics"), alert log lines and warnings on stderr, nothing on
stdout.  Exit status 0 when stopped by SIGTERM, SIGINT, SIGHUP (every signal that ends a
process but SIGKILL; one ignored at start stays ignored) or --count; 1 when the port is in
use or nothing can be read; 2 for bad usage or a bad config file.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

from gpudisk_top.commands.common import (DEMO_START_MAX_INTERVALS, Parser,
                                         add_detector_options, add_interval_option,
                                         add_source_options, alert_options, check_demo_start,
                                         close_source, device_filter, export_options, load_config,
                                         number_type, count_type, open_source, seconds_into,
                                         thresholds_from)
from gpudisk_top.errors import UsageError, note, warn
from gpudisk_top.exporter.options import DEFAULT_JOB_RETENTION_S
from gpudisk_top.session import gcpolicy
from gpudisk_top.session.detail import after_step, slow_detail
from gpudisk_top.session.ticker import StopSignals, Ticker


_nodes = number_type(int, "whole number",
                     (lambda v: 1 <= v <= 1024, "must be from 1 to 1024: {text!r}"))
# an ended job's series stay this long (exporter/jobseries.py); a day at most: past that a
# sweep of short runs would hold thousands of series for nothing
_retention = number_type(float, "number of seconds",
                         (lambda v: 0 <= v <= 86400, "must be from 0 to 86400 seconds: {text!r}"))


def build_parser(prog: str) -> argparse.ArgumentParser:
    from gpudisk_top.commands.common import add_export_options

    p = Parser(prog=prog, description="Serve Prometheus metrics and run the config file's "
                                      "alert rules, headless (no terminal needed).")
    add_export_options(p, serve=True)
    add_interval_option(p)
    p.add_argument("--count", type=count_type, metavar="N",
                   help="stop after N samples (default: run until SIGTERM or Ctrl-C)")
    p.add_argument("--nodes", type=_nodes, metavar="N",
                   help="with --demo: serve N simulated nodes, node i on the --listen port "
                        "+ i, scenarios from --demo's comma-separated list in turn, seed + i "
                        "(a fleet to try `gpudisk-top fleet` on)")
    p.add_argument("--demo-start", type=seconds_into, default=0.0, metavar="S",
                   help="with --demo: the scenario started S seconds ago; its history runs "
                        "through the detector at once, so serving starts S seconds in (at "
                        f"most {DEMO_START_MAX_INTERVALS} intervals)")
    p.add_argument("--job-retention", type=_retention, default=DEFAULT_JOB_RETENTION_S,
                   metavar="S", help="keep an ended job's series S seconds, so that its "
                   "counters' last increments are scraped (default: "
                   f"{DEFAULT_JOB_RETENTION_S:g}); its state goes at once")
    add_source_options(p)
    add_detector_options(p)
    return p


def run(args) -> int:
    """Serve until stopped.  Raises UsageError (bad options or config) and RuntimeFailure
    (the port is in use, nothing can be read), each one line."""
    from gpudisk_top.exporter.hooks import SampleHooks
    from gpudisk_top.verdict.step import Stepper

    cfg = load_config(args)
    thresholds = thresholds_from(args, cfg)
    dev_filter = device_filter(args)
    alerts = alert_options(args)
    nodes: list[tuple] = []            # (sampler, Stepper, SampleHooks) per node served
    # before any source opens (--delayacct switches a node-wide setting there): from then
    # on every stop signal ends the loop, and each sampler.close() puts the setting back
    stop = StopSignals()
    try:
        for export, source_kw in _node_plan(args):
            export = dataclasses.replace(export, job_retention_s=args.job_retention)
            sampler, _virtual, origin = open_source(args, cfg, **source_kw)
            try:
                hooks = SampleHooks(cfg.sections, export, origin, dev_filter, alerts).start()
            except BaseException:
                close_source(sampler)
                raise
            stepper = Stepper(thresholds, cadence_s=args.interval)   # verdict/gaps.py
            slow_detail(sampler, thresholds)
            if args.demo_start:
                # the past, through the detector only: nothing was served or alerted then
                for _ in range(sampler.samples_until(args.demo_start)):
                    stepper.step(sampler.sample())
            nodes.append((sampler, stepper, hooks))
            if hooks.server is not None and hooks.server.url is not None:
                note(f"serving {hooks.server.url} ({origin.label})")
            if hooks.pusher is not None:
                note(f"pushing to {hooks.pusher.url} every {hooks.pusher.interval_s:g} s")
        _loop(args, nodes, stop)
    finally:
        for sampler, _stepper, hooks in nodes:
            hooks.close()
            close_source(sampler)
        stop.restore()      # last: a second signal must not end us before the samplers close
    return 0


def _node_plan(args) -> list[tuple]:
    """(ExportOptions, open_source keywords) per node: this one, or --nodes simulated
    ones.  A simulated node served is one that runs now: its clock starts at this
    moment."""
    from gpudisk_top.exporter.server import parse_listen

    check_demo_start(args)
    # a node's clock: its scenario started --demo-start seconds ago
    now_s = time.time() - args.demo_start
    if args.nodes is None:
        if args.demo and "," in args.demo:
            raise UsageError("several --demo scenarios need --nodes N")
        return [(export_options(args, serve=True), {"start_wall_s": now_s} if args.demo else {})]
    if not args.demo:
        raise UsageError("--nodes needs --demo: it serves simulated nodes")
    if args.push or not args.listen:
        raise UsageError("--nodes serves each node on --listen's port + i; it does not push")
    export = export_options(args, serve=True)
    host, port = parse_listen(export.listen)
    if port == 0 or port + args.nodes - 1 > 65535:
        raise UsageError(f"--nodes {args.nodes} needs ports {port} to {port + args.nodes - 1}: "
                         "give a --listen port that leaves room")
    scenarios = [s.strip() for s in args.demo.split(",") if s.strip()]
    plan = []
    for i in range(args.nodes):
        bound = "[" + host + "]" if ":" in host else host
        plan.append((dataclasses.replace(export, listen=f"{bound}:{port + i}"),
                     {"scenario": scenarios[i % len(scenarios)], "seed_offset": i,
                      "start_wall_s": now_s, "host_name": f"demo-node-{i}"}))
    return plan


def _loop(args, nodes: list[tuple], stop: StopSignals) -> None:
    """Sample every node each interval until a stop signal or --count."""
    gcpolicy.steady()       # hours of samples: no collection in the middle of each
    ticker = Ticker(args.interval)
    taken = 0
    warned: set[str] = set()
    while stop.reason is None:
        taken += 1
        for sampler, stepper, hooks in nodes:
            sample = sampler.sample()
            for warning in sample.warnings:
                if warning not in warned:      # a warning a second is noise; say it once
                    warned.add(warning)
                    warn(warning)
            model, verdict, loss = stepper.step(sample)
            after_step(sampler, verdict)       # a job starved: every process read (issue 41)
            hooks.on_sample(model, verdict, stepper.episodes, loss)
        if args.count is not None and taken >= args.count:
            break
        stop.wait(ticker.advance())
