"""Command line: parse arguments, dispatch, and turn every failure into one line.

Exit status (an API): 0 success; 1 nothing at all could be read, or an internal error;
2 bad usage or bad input.  No traceback reaches the user unless GPUDISK_TOP_DEBUG=1.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

from gpudisk_top import __version__


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit status 2."""


class RuntimeFailure(Exception):
    """Nothing could be read or done: printed as one line, exit status 1."""


def _interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or value <= 0 or value > 3600:
        raise argparse.ArgumentTypeError(f"must be between 0 and 3600 seconds: {text!r}")
    return value


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not argparse's usage block
        raise UsageError(message)


def add_source_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sources")
    g.add_argument("--procfs", default="/proc", metavar="PATH",
                   help="procfs to read (default /proc; e.g. the host's /proc mounted in a container)")
    g.add_argument("--sysfs", default="/sys", metavar="PATH", help="sysfs to read (default /sys)")
    g.add_argument("-a", "--all-devices", action="store_true",
                   help="show every block device: partitions, loop, idle devices too")
    g.add_argument("-d", "--devices", metavar="GLOBS",
                   help="only devices whose name matches one of these comma-separated globs "
                        "(e.g. 'nvme*,sda')")
    g.add_argument("--demo", nargs="?", const="demo", metavar="SCENARIO",
                   help="read a simulated node instead of this one (default scenario: demo, "
                        "8 GPUs and 16 disks with starvation episodes); see --list-scenarios")
    g.add_argument("--seed", type=int, default=0, help="with --demo: the simulator's seed")
    g.add_argument("--list-scenarios", action="store_true",
                   help="list the simulator's built-in scenarios and exit")


def add_detector_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("starvation detector (defaults from the config file)")
    g.add_argument("--config", metavar="PATH",
                   help="config file (default $XDG_CONFIG_HOME/gpudisk-top/config.toml)")
    g.add_argument("--gpu-low-pct", type=float, metavar="PCT",
                   help="a job's GPU below this utilization is starved (default 70)")
    g.add_argument("--enter", type=int, metavar="N",
                   help="consecutive starved intervals that open an episode (default 3)")
    g.add_argument("--leave", type=int, metavar="M",
                   help="consecutive clear intervals that close it (default 3)")


def thresholds_from(args):
    """The detector's thresholds: defaults, then the config file, then the options."""
    from gpudisk_top import config

    try:
        cfg = config.load(args.config, required=args.config is not None)
    except config.ConfigError as err:
        raise UsageError(f"config: {err}") from None
    t = cfg.thresholds
    for opt, attr in (("gpu_low_pct", "gpu_low_util_pct"), ("enter", "enter_intervals"),
                      ("leave", "leave_intervals")):
        value = getattr(args, opt, None)
        if value is not None:
            setattr(t, attr, value)
    problems = t.validate()
    if problems:
        raise UsageError(problems[0])
    return t


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="gpudisk-top",
        description="GPUs and the disks that feed them on one timeline; "
                    "flags GPUs starved by storage.")
    p.add_argument("--version", action="version", version=f"gpudisk-top {__version__}")
    p.add_argument("--once", action="store_true",
                   help="take two samples --interval apart, print one report and exit (no TTY needed)")
    p.add_argument("--json", action="store_true", help="with --once: print one JSON object")
    p.add_argument("-i", "--interval", type=_interval, default=1.0, metavar="S",
                   help="seconds between samples (default 1)")
    add_source_options(p)
    add_detector_options(p)
    return p


def _roots(args):
    from gpudisk_top.collect.roots import Roots
    from gpudisk_top.collect.sampler import SourceError, check_sources

    roots = Roots(procfs=args.procfs, sysfs=args.sysfs)
    try:
        check_sources(roots)
    except SourceError as err:
        raise RuntimeFailure(str(err)) from None
    if not os.path.isdir(roots.sysfs):
        print(f"gpudisk-top: warning: --sysfs {roots.sysfs}: no such directory; "
              "device classes and mountpoints will be unknown", file=sys.stderr)
    return roots


def open_source(args):
    """(source, virtual, origin): the live Sampler, or the simulator for --demo.  Both have
    sample() and close(); `virtual` says the source keeps its own clock (no need to sleep
    between samples); `origin` says where the numbers come from, for every output."""
    if args.demo:
        from gpudisk_top.sim import BUILTIN_NAMES, Simulator, builtin

        if args.demo not in BUILTIN_NAMES:
            raise UsageError(f"no built-in scenario {args.demo!r}; "
                             f"choose one of: {', '.join(BUILTIN_NAMES)}")
        sim = Simulator(builtin(args.demo), seed=args.seed, interval_s=args.interval)
        origin = {"source": f"simulated, scenario {args.demo}, seed {args.seed}",
                  "host_name": "demo-node", "kernel": "simulated"}
        return sim, True, origin
    from gpudisk_top.collect.sampler import Sampler
    from gpudisk_top.output.once import live_origin

    return Sampler(_roots(args)), False, live_origin()


def list_scenarios() -> int:
    from gpudisk_top.sim import BUILTIN_NAMES, builtin

    for name in BUILTIN_NAMES:
        summary = " ".join(builtin(name).description.split())
        print(f"{name:<26} {summary.split('. ')[0].rstrip('.')}.")
    return 0


def run_once(args) -> int:
    from gpudisk_top.model.detect import one_interval
    from gpudisk_top.model.select import DeviceFilter
    from gpudisk_top.model.snapshot import Model
    from gpudisk_top.output import once

    dev_filter = DeviceFilter.from_option(args.all_devices, args.devices)
    thresholds = thresholds_from(args)
    source, virtual, origin = open_source(args)
    try:
        first = source.sample()
        if not virtual:
            time.sleep(args.interval)
        second = source.sample()
    finally:
        source.close()
    if not second.disks and second.host.cpu is None:
        raise RuntimeFailure(f"nothing could be read under {args.procfs}: "
                             + "; ".join(second.warnings or ["no diskstats, no stat"]))
    model = Model.new(second, first)
    verdict = one_interval(model, thresholds)
    for warning in second.warnings:
        print(f"gpudisk-top: warning: {warning}", file=sys.stderr)
    if args.json:
        sys.stdout.write(once.render_json(model, dev_filter, origin, verdict) + "\n")
    else:
        sys.stdout.write(once.render_text(model, dev_filter, origin, verdict))
    return 0


def run_dashboard(args) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("the dashboard needs a terminal; for a report without one use "
                         "`gpudisk-top --once` (or --once --json)")
    raise UsageError("the live dashboard is not in this build yet; use `gpudisk-top --once`")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = build_parser().parse_args(argv)
        if args.list_scenarios:
            return list_scenarios()
        if args.json and not args.once:
            raise UsageError("--json needs --once")
        if args.once:
            return run_once(args)
        return run_dashboard(args)
    except UsageError as err:
        print(f"gpudisk-top: error: {err}", file=sys.stderr)
        return 2
    except RuntimeFailure as err:
        print(f"gpudisk-top: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `gpudisk-top --once | head`: the reader left; nothing to report
        sys.stderr.close()
        return 0
    except Exception as err:  # never a traceback for the user
        if os.environ.get("GPUDISK_TOP_DEBUG"):
            raise
        print(f"gpudisk-top: internal error: {type(err).__name__}: {err} "
              "(run with GPUDISK_TOP_DEBUG=1 for details)", file=sys.stderr)
        return 1
