"""The command with no name: the dashboard, `--once`, `--list-scenarios`.

    gpudisk-top [options]            the dashboard (commands/dashboard.py)
    gpudisk-top --once [--json]      one report and exit (commands/once.py)
"""

from __future__ import annotations

import argparse

from gpudisk_top import __version__
from gpudisk_top.commands import COMMANDS
from gpudisk_top.commands.common import (DEMO_START_MAX_INTERVALS, Parser, add_detector_options,
                                         add_export_options, add_interval_option,
                                         add_source_options, check_demo_start, seconds_into)
from gpudisk_top.errors import UsageError


def build_parser(prog: str = "gpudisk-top") -> argparse.ArgumentParser:
    commands = "".join(f"\n  {name:<8} {summary}" for name, (_, summary) in COMMANDS.items())
    p = Parser(
        prog=prog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="GPUs and the disks that feed them on one timeline; "
                    "flags GPUs starved by storage.",
        epilog=(f"commands (gpudisk-top COMMAND --help):{commands}" if commands else None))
    p.add_argument("--version", action="version", version=f"gpudisk-top {__version__}")
    p.add_argument("--once", action="store_true",
                   help="take two samples --interval apart, print one report and exit (no TTY needed)")
    p.add_argument("--json", action="store_true", help="with --once: print one JSON object")
    p.add_argument("--no-mouse", action="store_true",
                   help="dashboard: leave the mouse to the terminal (select and copy text)")
    p.add_argument("--record", metavar="FILE",
                   help="dashboard: also record every raw sample to FILE (as `record` does)")
    add_interval_option(p)
    add_source_options(p)
    p.add_argument("--demo-start", type=seconds_into, default=0.0, metavar="S",
                   help="with --demo: start S simulated seconds into the scenario, with that "
                        "history on the timeline (the demo's first disk starvation is at 60 s; "
                        f"at most {DEMO_START_MAX_INTERVALS} intervals); with --once: report "
                        "the interval from S on, judged with that history")
    p.add_argument("--list-scenarios", action="store_true",
                   help="list the simulator's built-in scenarios and exit")
    add_detector_options(p)
    add_export_options(p)
    return p


def list_scenarios() -> int:
    from gpudisk_top.sim import BUILTIN_NAMES, builtin

    for name in BUILTIN_NAMES:
        summary = " ".join(builtin(name).description.split())
        print(f"{name:<26} {summary.split('. ')[0].rstrip('.')}.")
    return 0


def run(args) -> int:
    if args.list_scenarios:
        return list_scenarios()
    if args.json and not args.once:
        raise UsageError("--json needs --once")
    check_demo_start(args)
    if args.once and (args.listen or args.push or args.record):
        raise UsageError("--listen, --push and --record need the dashboard (or `serve`, "
                         "`record`), not --once")
    if args.once:
        from gpudisk_top.commands import once

        return once.run(args)
    from gpudisk_top.commands import dashboard

    return dashboard.run(args)
