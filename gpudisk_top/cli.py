"""Command line: parse arguments, dispatch, and turn every failure into one line.

Exit status (an API): 0 success; 1 nothing at all could be read, or an internal error;
2 bad usage or bad input.  No traceback reaches the user unless GPUDISK_TOP_DEBUG=1.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

from gpudisk_top import __version__
from gpudisk_top.commands import COMMANDS
from gpudisk_top.commands.common import (Parser, add_detector_options, add_interval_option,
                                         add_source_options, device_filter, load_config,
                                         open_source, thresholds_from)
from gpudisk_top.errors import RuntimeFailure, UsageError, warn
from gpudisk_top.textsafe import printable


def _seconds_into(text: str) -> float:
    """--demo-start: a finite, non-negative number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not (value >= 0 and value < float("inf")):
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds: {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    commands = "".join(f"\n  {name:<8} {summary}" for name, (_, summary) in COMMANDS.items())
    p = Parser(
        prog="gpudisk-top",
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
    p.add_argument("--demo-start", type=_seconds_into, default=0.0, metavar="S",
                   help="with --demo: start S simulated seconds into the scenario, with that "
                        "history on the timeline (the demo's first disk starvation is at 60 s)")
    p.add_argument("--list-scenarios", action="store_true",
                   help="list the simulator's built-in scenarios and exit")
    add_detector_options(p)
    from gpudisk_top.exporter.options import add_export_options

    add_export_options(p)
    return p


def list_scenarios() -> int:
    from gpudisk_top.sim import BUILTIN_NAMES, builtin

    for name in BUILTIN_NAMES:
        summary = " ".join(builtin(name).description.split())
        print(f"{name:<26} {summary.split('. ')[0].rstrip('.')}.")
    return 0


def run_once(args) -> int:
    from gpudisk_top.model.detect import one_interval
    from gpudisk_top.model.snapshot import Model
    from gpudisk_top.output import once

    dev_filter = device_filter(args)
    thresholds = thresholds_from(args)
    from gpudisk_top.collect.gpu_deadline import INIT_TIMEOUT_S

    # one report: worth waiting for a driver that loads slowly (no persistence mode)
    source, virtual, origin = open_source(args, gpu_init_wait_s=INIT_TIMEOUT_S)
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
    for warning in [*second.warnings, *model.warnings]:
        warn(warning)
    if args.json:
        sys.stdout.write(once.render_json(model, dev_filter, origin, verdict) + "\n")
    else:
        sys.stdout.write(once.render_text(model, dev_filter, origin, verdict))
    return 0


def run_dashboard(args) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("the dashboard needs a terminal; without one use "
                         "`gpudisk-top --once` (or --once --json) for a snapshot, or "
                         "`gpudisk-top record -o FILE` to record")
    cfg = load_config(args)
    thresholds = thresholds_from(args, cfg)
    source, _virtual, origin = open_source(args)
    from gpudisk_top.exporter.hooks import SampleHooks

    # alerts (banner, bell), watched free space, and --listen/--push; alert lines do not
    # go to stderr, which is the screen
    hooks = SampleHooks.from_args(args, cfg, origin, device_filter(args), stderr=None).start()
    from gpudisk_top.ui.app import GpuDiskApp  # the only path that loads Textual
    from gpudisk_top.ui.terminal import screen_on_terminal

    recorder = None
    if args.record:
        from gpudisk_top.record.header import make_header
        from gpudisk_top.record.writer import Recorder

        recorder = Recorder(args.record, make_header(origin, args.interval))
    app = GpuDiskApp(source, args.interval, origin, thresholds=thresholds,
                     dev_filter=device_filter(args),
                     prefill=int(args.demo_start / args.interval) if args.demo_start else 0,
                     on_sample=recorder.append if recorder else None, hooks=hooks)
    try:
        with screen_on_terminal():
            app.run(mouse=not args.no_mouse)
    finally:
        if recorder is not None:
            recorder.close("dashboard quit")
    return 0


class _Stdout:
    """sys.stdout while a command runs: a write the system refuses (a full disk behind a
    redirect, /dev/full, a hung-up terminal) becomes a one-line RuntimeFailure instead of
    an internal error.  A reader that left (BrokenPipeError) stays what it is."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def _refused(self, err: OSError) -> RuntimeFailure:
        return RuntimeFailure(f"cannot write to standard output: {err.strerror or err}")

    def write(self, text: str) -> int:
        if self._stream is None:            # started with stdout closed (`>&-`)
            raise RuntimeFailure("cannot write to standard output: it is closed")
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as err:
            raise self._refused(err) from None

    def flush(self) -> None:
        if self._stream is None:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as err:
            raise self._refused(err) from None

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null so that the interpreter's own flush at exit finds nowhere
    to fail (else it prints "Exception ignored ..." after our one line)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno())
        os.close(devnull)
    except (OSError, AttributeError, ValueError):
        pass


def _error(err: Exception) -> None:
    try:
        print(f"gpudisk-top: error: {printable(str(err))}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    real_stdout = sys.stdout
    sys.stdout = _Stdout(real_stdout)
    try:
        status = _main(argv)
        sys.stdout.flush()
        return status
    except RuntimeFailure as err:
        if "standard output" in str(err):
            _silence_stdout()
        _error(err)
        return 1
    except BrokenPipeError:
        # `gpudisk-top --once | head`: the reader left; nothing to report
        _silence_stdout()
        return 0
    finally:
        sys.stdout = real_stdout


def _main(argv: list[str]) -> int:
    try:
        if argv and argv[0] in COMMANDS:
            module = importlib.import_module(COMMANDS[argv[0]][0])
            args = module.build_parser(f"gpudisk-top {argv[0]}").parse_args(argv[1:])
            return module.run(args)
        args = build_parser().parse_args(argv)
        if args.list_scenarios:
            return list_scenarios()
        if args.json and not args.once:
            raise UsageError("--json needs --once")
        if args.demo_start and not args.demo:
            raise UsageError("--demo-start needs --demo")
        if args.once and (args.listen or args.push or args.record):
            raise UsageError("--listen, --push and --record need the dashboard (or `serve`, "
                             "`record`), not --once")
        if args.once:
            return run_once(args)
        return run_dashboard(args)
    except UsageError as err:
        _error(err)
        return 2
    except (RuntimeFailure, BrokenPipeError):
        raise
    except KeyboardInterrupt:
        return 130
    except Exception as err:  # never a traceback for the user
        if os.environ.get("GPUDISK_TOP_DEBUG"):
            raise
        try:
            print(f"gpudisk-top: internal error: {type(err).__name__}: {printable(str(err))} "
                  "(run with GPUDISK_TOP_DEBUG=1 for details)", file=sys.stderr)
        except (OSError, ValueError):
            pass
        return 1
