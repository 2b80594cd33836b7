"""The command-line options of the exporter, for `serve`, `record` and the dashboard.

Light on purpose: building a parser must not load prometheus_client (`record --help`
and `--once` never pay for it); gpudisk_top.exporter.hooks does the work.
"""

from __future__ import annotations

import argparse

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9425
DEFAULT_LISTEN = f"{DEFAULT_HOST}:{DEFAULT_PORT}"
DEFAULT_JOB = "gpudisk-top"
DEFAULT_PUSH_INTERVAL_S = 15.0


MIN_PUSH_INTERVAL_S = 1.0   # a gateway is not to be flooded: Prometheus scrapes at 15 s


def _push_interval(text: str) -> float:
    from gpudisk_top.commands.common import interval_s

    value = interval_s(text)
    if value < MIN_PUSH_INTERVAL_S:
        raise argparse.ArgumentTypeError(f"at least {MIN_PUSH_INTERVAL_S:g} s between pushes: "
                                         f"{text!r}")
    return value


def add_export_options(p: argparse.ArgumentParser, serve: bool = False) -> None:
    """--listen, --push, --push-interval, --push-job.  For `serve`, --listen defaults to
    127.0.0.1:9425 and --no-listen turns the endpoint off; elsewhere there is no endpoint
    unless --listen asks for one."""
    g = p.add_argument_group("Prometheus")
    if serve:
        g.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
                       help=f"serve metrics at http://HOST:PORT/metrics (default "
                            f"{DEFAULT_LISTEN}, this node only; 0.0.0.0:PORT for every "
                            "interface)")
        g.add_argument("--no-listen", action="store_true",
                       help="no HTTP endpoint (for --push from a node that cannot be scraped)")
    else:
        g.add_argument("--listen", metavar="HOST:PORT",
                       help="also serve Prometheus metrics at http://HOST:PORT/metrics "
                            f"({DEFAULT_LISTEN} for this node only)")
    g.add_argument("--push", metavar="URL",
                   help="push metrics to this Prometheus Pushgateway (e.g. "
                        "http://pushgateway:9091) every --push-interval, and at exit")
    g.add_argument("--push-interval", type=_push_interval, metavar="S",
                   help=f"seconds between pushes (default {DEFAULT_PUSH_INTERVAL_S:g})")
    g.add_argument("--push-job", default=DEFAULT_JOB, metavar="NAME",
                   help=f"the Pushgateway's job label (default {DEFAULT_JOB})")


def wants_hooks(args, cfg) -> bool:
    """Whether anything after sampling is asked for: an endpoint, a push, alert rules or
    watched paths.  The recorder builds Models only then."""
    sections = getattr(cfg, "sections", {}) or {}
    watch = sections.get("watch")
    return bool(getattr(args, "listen", None) or getattr(args, "push", None)
                or sections.get("alerts") or (watch is not None and watch.paths))
