"""`gpudisk-top fleet`: many nodes' exporters read back through Prometheus.

    gpudisk-top fleet --prometheus URL [--by LABEL] [--job-label LABEL]
                      [--match LABEL=VALUE ...] [--job NAME] [--exporter-job NAME]
                      [-i S] [--timeout S] [--once [--json]]

One row per node (the --by label's value, default instance): its state, GPUs starved,
the device blamed and its evidence, since when, a sparkline of the last hour; the nodes
that stopped reporting as stale; a row a node and job where the node's exporter names its
jobs (a node of two jobs: two rows); the nodes of each training job side by side with
their straggler, a job found by its own id (a Slurm job, a torch elastic run) or, for
older exporters, by the label --job-label names.  The screen refreshes every -i seconds with one instant query
(fleet/queries.py says what each costs).

Output is an API: --once prints the table, --once --json one object (README, "Fleet").
Exit status 0; 1 when Prometheus cannot be read (one line on stderr: why); 2 for bad
usage (a URL that is not one, a bad --match, a value that is not UTF-8).
"""

from __future__ import annotations

import argparse
import sys

from gpudisk_top.commands.common import Parser, number_type
from gpudisk_top.errors import RuntimeFailure, UsageError, warn
from gpudisk_top.session import gcpolicy

_interval = number_type(float, "number of seconds",
                        (lambda v: 1 <= v <= 3600, "must be between 1 and 3600 seconds: {text!r}"))
_timeout = number_type(float, "number of seconds",
                       (lambda v: 0 < v <= 300, "must be above 0 and at most 300 seconds: {text!r}"))


def build_parser(prog: str) -> argparse.ArgumentParser:
    p = Parser(prog=prog, description="The fleet through Prometheus: one row per node (its "
                                      "state, GPUs starved, the device blamed and its "
                                      "evidence, since when, the last hour), stale nodes, "
                                      "and each training job's straggler.")
    p.add_argument("--prometheus", required=True, metavar="URL",
                   help="the Prometheus server that scrapes the nodes' `gpudisk-top serve` "
                        "(e.g. http://prometheus:9090)")
    p.add_argument("--by", default="instance", metavar="LABEL",
                   help="the label that names a node: one row per value (default instance)")
    p.add_argument("--job-label", default="training_job", metavar="LABEL",
                   help="the label that names a training job, put on the targets by "
                        "Prometheus's config (default training_job): the jobs of nodes "
                        "whose exporter names none (older ones); a job the exporters name "
                        "(a Slurm job id, a torch elastic run) is found by its id")
    p.add_argument("--match", action="append", default=[], metavar="LABEL=VALUE",
                   help="only the nodes with this label value (repeat: all must match)")
    p.add_argument("--job", metavar="NAME",
                   help="the job view: only the nodes of this training job (its id, e.g. "
                        "slurm:1001, its name, or the job label's value), side by side, "
                        "its straggler called out")
    p.add_argument("--exporter-job", default="gpudisk-top", metavar="NAME",
                   help="the Prometheus job that scrapes the nodes' exporters: its failing "
                        "targets are shown down even when none was ever seen (default "
                        "gpudisk-top, as the alert rules expect)")
    p.add_argument("-i", "--interval", type=_interval, default=5.0, metavar="S",
                   help="seconds between refreshes of the screen (default 5)")
    p.add_argument("--timeout", type=_timeout, default=3.0, metavar="S",
                   help="the most one query may take, in seconds, its answer read whole "
                        "(default 3)")
    p.add_argument("--once", action="store_true",
                   help="query once, print the table and exit (no terminal needed)")
    p.add_argument("--json", action="store_true", help="with --once: print one JSON object")
    return p


def parse_matches(items: list[str]) -> dict[str, str]:
    """['a=b', ...] -> {'a': 'b'} (fleet/labels.py's syntax, the screen filter's); raises
    UsageError for one that is not LABEL=VALUE, or not UTF-8."""
    from gpudisk_top.fleet.labels import parse_pairs

    try:
        return parse_pairs(items, "--match")
    except ValueError as err:
        raise UsageError(str(err)) from None


def make_source(args):
    """A FleetSource for the options.  Raises UsageError for a bad URL, label or value."""
    from gpudisk_top.fleet.labels import check_value
    from gpudisk_top.fleet.promapi import PromClient
    from gpudisk_top.fleet.source import FleetSource

    filters = parse_matches(args.match)
    if args.job is not None:
        if not args.job:
            raise UsageError("--job: give the training job's name")
        try:
            check_value(args.job, "--job")
        except ValueError as err:
            raise UsageError(str(err)) from None
        if filters.get(args.job_label, args.job) != args.job:
            raise UsageError(f"--job {args.job} and --match {args.job_label}="
                             f"{filters[args.job_label]} ask for different jobs")
    client = PromClient(args.prometheus, timeout_s=args.timeout)
    try:
        return FleetSource(client, group_by=args.by, job_label=args.job_label, filters=filters,
                           exporter_job=args.exporter_job, job=args.job)
    except ValueError as err:
        raise UsageError(str(err)) from None


def run(args) -> int:
    if args.json and not args.once:
        raise UsageError("--json needs --once")
    source = make_source(args)
    if args.once:
        return _once(source, args)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("the fleet screen needs a terminal; without one use "
                         "`gpudisk-top fleet --once` (or --once --json)")
    from gpudisk_top.ui.fleet_app import FleetApp   # the only path that loads Textual
    from gpudisk_top.ui.terminal import screen_on_terminal

    app = FleetApp(source, args.interval, job=args.job)
    gcpolicy.steady()   # hours of scrapes and frames: no collection in each
    with screen_on_terminal():
        app.run()
    # a bug that ended the screen: its one line is printed, the status says so
    return app.return_code or 0


def _once(source, args) -> int:
    from gpudisk_top.fleet import text
    from gpudisk_top.textsafe import printable

    view = source.refresh(spark=True)
    if view.error and view.data_wall_s is None:
        raise RuntimeFailure(view.error)
    if args.json:
        sys.stdout.write(text.render_json(view) + "\n")
    else:
        sys.stdout.write(text.render_text(view, job=args.job))
    if args.job is not None and not view.rows:
        warn(f"no node of job {printable(args.job)} (by its id, its name or "
             f"{source.job_label}=) reported in the last hour")
    return 0
