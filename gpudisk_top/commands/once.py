"""`gpudisk-top --once [--json]`: two samples --interval apart, one report, exit.

No terminal needed and no Textual; the verdict is the detector's on that one interval
(model.detect.one_interval: no hysteresis to wait for).

With --demo --demo-start S the simulated node has a past: it runs from its start to S
through the one step (model.step.Stepper), as the dashboard started with --demo-start S
does, and the report is the interval from S to S + --interval, judged by that detector:
device baselines learned from the history, and the reported state with its hysteresis
(an episode opens after enter_intervals starved intervals and says how long it has
lasted), what the dashboard shows at that moment.
"""

from __future__ import annotations

import sys

from gpudisk_top.commands.common import (close_source, device_filter, load_config, open_source,
                                         thresholds_from)
from gpudisk_top.errors import RuntimeFailure, warn
from gpudisk_top.session.ticker import StopSignals

# how long the report waits, after its interval, for the disks' health: smartctl reads
# them on the poller's threads from the start, a few disks at a time, so the interval
# has run for it already.  An NVMe or SATA SSD answers in a tenth of a second, an awake
# HDD in about one (its logs), a wedged USB bridge never: a disk not read by then is in
# the report as "not read yet" rather than holding it up
HEALTH_WAIT_S = 3.0


def run(args) -> int:
    """One report.  Raises UsageError (bad options or config) and RuntimeFailure (nothing
    could be read; stopped by a signal before the report was made), each one line."""
    from gpudisk_top.output import once

    dev_filter = device_filter(args)
    cfg = load_config(args)
    thresholds = thresholds_from(args, cfg)
    from gpudisk_top.collect.gpu_deadline import INIT_TIMEOUT_S

    # before the source opens (--delayacct switches a node-wide setting there): a signal
    # from then on ends the run through sampler.close(), which puts the setting back
    stop = StopSignals()
    try:
        # one report: worth waiting for a driver that loads slowly (no persistence mode)
        sampler, virtual, origin = open_source(args, cfg, gpu_init_wait_s=INIT_TIMEOUT_S)
        try:
            if stop.reason is None and args.demo_start:
                model, verdict, ledger, ledgers = _after_history(sampler, args.demo_start,
                                                                 thresholds)
            elif stop.reason is None:
                model, verdict = _one_interval(sampler, virtual, args.interval, thresholds, stop)
                ledger = ledgers = None    # the interval's own (output/once.py)
        finally:
            close_source(sampler)
    finally:
        stop.restore()
    if stop.reason is not None:
        raise RuntimeFailure(f"stopped by {stop.reason} before the report was made")
    if not model.sample.disks and model.sample.host.cpu is None:
        raise RuntimeFailure(f"nothing could be read under {args.procfs}: "
                             + "; ".join(model.sample.warnings or ["no diskstats, no stat"]))
    for warning in [*model.sample.warnings, *model.warnings]:
        warn(warning)
    price = cfg.sections["ledger"]
    if args.json:
        sys.stdout.write(once.render_json(model, dev_filter, origin, verdict, ledger, price,
                                          ledgers) + "\n")
    else:
        sys.stdout.write(once.render_text(model, dev_filter, origin, verdict, ledger, price, ledgers))
    return 0


def _one_interval(sampler, virtual: bool, interval_s: float, thresholds, stop: StopSignals):
    """Two samples interval_s apart; the verdict on that interval alone.  (None, None)
    once a stop signal has come."""
    from gpudisk_top.verdict.jobs import once_verdict
    from gpudisk_top.model.snapshot import Model

    sampler.cover_next_interval()   # the interval names everyone who loaded a disk in it
    first = sampler.sample()
    if not virtual:
        stop.wait(interval_s)
    if stop.reason is not None:
        return None, None
    sampler.wait_health(HEALTH_WAIT_S)    # the disks not read by then say "not read yet"
    second = sampler.sample()
    model = Model.new(second, first)
    return model, once_verdict(model, thresholds)


def _after_history(sim, start_s: float, thresholds):
    """The simulator's history up to start_s (at least its first sample, which has no
    interval) through a Stepper, then the interval after it, and the stall ledger of the
    whole history (what the dashboard's would say then)."""
    from gpudisk_top.verdict.step import Stepper

    stepper = Stepper(thresholds)
    for _ in range(max(1, sim.samples_until(start_s))):
        stepper.step(sim.sample())
    model, verdict, _loss = stepper.step(sim.sample())
    return model, verdict, stepper.ledger, {t.info.id: t.ledger for t in stepper.tracks}
