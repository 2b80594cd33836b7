"""Options and helpers that several commands share: sources, the detector's thresholds,
the exporter's --listen/--push."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable

from gpudisk_top.collect.source import live_source, simulated_source
from gpudisk_top.errors import RuntimeFailure, UsageError, note, warn
from gpudisk_top.exporter.options import (DEFAULT_JOB, DEFAULT_LISTEN, DEFAULT_PUSH_INTERVAL_S,
                                          ExportOptions)


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not argparse's usage block
        raise UsageError(message)


Bound = tuple[Callable[[float], bool], str]


def number_type(convert: Callable[[str], float], what: str,
                *bounds: Bound) -> Callable[[str], float]:
    """An argparse type for a number within bounds: every command's numeric options.

    `convert` (float or int) reads the text; when it raises ValueError the option is
    refused with "not a {what}: 'TEXT'".  Each bound is (holds, message): the first whose
    `holds(value)` is false, or any bound at all for an infinite or NaN value, refuses it
    with `message.format(text=TEXT)`.  Refusals are argparse.ArgumentTypeError, which
    argparse turns into its one-line usage error."""
    def parse(text: str) -> float:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a {what}: {text!r}") from None
        # only a float can be infinite or NaN (math.isfinite would overflow on a huge int)
        unbounded = isinstance(value, float) and not math.isfinite(value)
        for holds, message in bounds:
            if unbounded or not holds(value):
                raise argparse.ArgumentTypeError(message.format(text=text))
        return value
    return parse


_INTERVAL: Bound = (lambda v: 0 < v <= 3600, "must be between 0 and 3600 seconds: {text!r}")

# argparse type: a sampling interval in seconds
interval_s = number_type(float, "number of seconds", _INTERVAL)


# a count of things (samples, jobs): a whole number, at least 1
count_type = number_type(int, "whole number", (lambda v: v >= 1, "must be at least 1: {text!r}"))


def add_interval_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--interval", type=interval_s, default=1.0, metavar="S",
                   help="seconds between samples (default 1)")


MIN_PUSH_INTERVAL_S = 1.0   # a gateway is not to be flooded: Prometheus scrapes at 15 s


_push_interval = number_type(
    float, "number of seconds", _INTERVAL,
    (lambda v: v >= MIN_PUSH_INTERVAL_S,
     f"at least {MIN_PUSH_INTERVAL_S:g} s between pushes: {{text!r}}"))


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


def export_options(args, serve: bool = False) -> ExportOptions:
    """What add_export_options' options ask, checked.  Raises UsageError (one line that
    names the option) for a bad --listen or --push, a --push-interval without --push, and
    for `serve` with neither an endpoint nor a push."""
    listen = None if getattr(args, "no_listen", False) else args.listen
    if listen is not None:
        from gpudisk_top.exporter.server import parse_listen   # loads prometheus_client

        parse_listen(listen)
    if args.push is None and args.push_interval is not None:
        raise UsageError("--push-interval needs --push URL")
    if args.push is not None:
        from gpudisk_top.exporter.push import check_push_url

        check_push_url(args.push)
    if serve and listen is None and args.push is None:
        raise UsageError("--no-listen needs --push URL: otherwise nothing leaves this node")
    return ExportOptions(listen=listen, push_url=args.push,
                         push_interval_s=args.push_interval or DEFAULT_PUSH_INTERVAL_S,
                         push_job=args.push_job)


def alert_options(args):
    """What add_source_options' --demo-actions asks of the alert engine (open_source
    refuses it without --demo)."""
    from gpudisk_top.alerts.engine import AlertOptions

    return AlertOptions(demo_actions=getattr(args, "demo_actions", False))


_health_interval = number_type(
    float, "number of seconds",
    (lambda v: 0 <= v <= 86400, "must be between 0 (never) and 86400 seconds: {text!r}"))


def add_source_options(p: argparse.ArgumentParser, demo: bool = True) -> None:
    g = p.add_argument_group("sources")
    g.add_argument("--procfs", default="/proc", metavar="PATH",
                   help="procfs to read (default /proc; e.g. the host's /proc mounted in a container)")
    g.add_argument("--sysfs", default="/sys", metavar="PATH", help="sysfs to read (default /sys)")
    g.add_argument("--rootfs", default="/", metavar="PATH",
                   help="the host's root, where jobs' names are read (the kubelet's "
                        "/var/log/pods, Docker's /var/lib/docker/containers; default /; "
                        "e.g. /host in a container that mounts the host's root there)")
    g.add_argument("--devfs", default="/dev", metavar="PATH",
                   help="where the disks' device nodes are, for smartctl's health reads "
                        "(default /dev; e.g. the host's /dev mounted in a container at "
                        "/host/dev); nothing is ever written to them")
    g.add_argument("--delayacct", action="store_true",
                   help="as root: switch kernel.task_delayacct on while running (off again at "
                        "exit), so the time the job's loaders are blocked on reads is measured, "
                        "not estimated")
    g.add_argument("--health-interval", type=_health_interval, metavar="S",
                   help="seconds between reads of each disk's SMART / NVMe health "
                        "(smartctl, hwmon), on a thread of its own (default 600, or the "
                        "config file's [health] interval_s; 0: never; with --demo: "
                        "seconds of simulated time between simulated readings)")
    g.add_argument("-a", "--all-devices", action="store_true",
                   help="show every block device: partitions, loop, idle devices too")
    g.add_argument("-d", "--devices", metavar="GLOBS",
                   help="only devices whose name matches one of these comma-separated globs "
                        "(e.g. 'nvme*,sda')")
    if demo:
        g.add_argument("--demo", nargs="?", const="demo", metavar="SCENARIO",
                       help="read a simulated node instead of this one (default scenario: demo, "
                            "8 GPUs and 16 disks with starvation episodes); see --list-scenarios")
        g.add_argument("--seed", type=int, default=None,
                       help="with --demo: the simulator's seed (default 0)")
        g.add_argument("--demo-actions", action="store_true",
                       help="with --demo: let alert rules run their commands and write their "
                            "touch and log files (never with PIDs: simulated PIDs name "
                            "nobody here); by default nothing real happens under --demo")


# --demo-start: a finite, non-negative number of seconds
seconds_into = number_type(float, "number of seconds",
                           (lambda v: v >= 0, "must be 0 or more seconds: {text!r}"))
# The simulated history --demo-start runs through before the dashboard, --once or serve
# starts: a few seconds at most (about 5 ms an interval), never a wait with no end.
DEMO_START_MAX_INTERVALS = 600


def check_demo_start(args) -> None:
    """Raises UsageError for a --demo-start without --demo or with too long a history."""
    if args.demo_start and not args.demo:
        raise UsageError("--demo-start needs --demo")
    if args.demo_start > DEMO_START_MAX_INTERVALS * args.interval:
        raise UsageError(f"--demo-start {args.demo_start:g}: at most "
                         f"{DEMO_START_MAX_INTERVALS} intervals of simulated history "
                         f"({DEMO_START_MAX_INTERVALS * args.interval:g} s at --interval "
                         f"{args.interval:g})")


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


def load_config(args):
    """The config file named by --config (required then), else the XDG default if any.
    Its warnings are said here: a command reads it once and passes it on
    (thresholds_from, open_source).  Raises UsageError for a file that cannot be used."""
    from gpudisk_top import config

    try:
        cfg = config.load(args.config, required=args.config is not None)
    except config.ConfigError as err:
        raise UsageError(f"config: {err}") from None
    for line in cfg.warnings:
        warn(line)
    return cfg


def health_interval_s(args, cfg) -> float:
    """--health-interval, else the config file's [health] interval_s, else 600 s."""
    if args.health_interval is not None:
        return args.health_interval
    return cfg.sections["health"].interval_s


def thresholds_from(args, cfg):
    """The detector's thresholds: defaults, then the config file, then the options."""
    t = cfg.thresholds
    for opt, attr in (("gpu_low_pct", "gpu_low_util_pct"), ("enter", "enter_intervals"),
                      ("leave", "leave_intervals")):
        value = getattr(args, opt)
        if value is not None:
            setattr(t, attr, value)
    problems = t.validate()
    if problems:
        raise UsageError(problems[0])
    return t


def device_filter(args):
    from gpudisk_top.model.select import DeviceFilter

    return DeviceFilter.from_option(getattr(args, "all_devices", False),
                                    getattr(args, "devices", None))


def roots_from(args):
    from gpudisk_top.collect.roots import Roots
    from gpudisk_top.collect.sampler import SourceError, check_sources

    roots = Roots(procfs=args.procfs, sysfs=args.sysfs, rootfs=getattr(args, "rootfs", "/"))
    try:
        check_sources(roots)
    except SourceError as err:
        raise RuntimeFailure(str(err)) from None
    if not os.path.isdir(roots.sysfs):
        warn(f"--sysfs {roots.sysfs}: no such directory; "
             "device classes and mountpoints will be unknown")
    return roots


def open_source(args, cfg, gpu_init_wait_s: float | None = None,
                start_wall_s: float | None = None, scenario: str | None = None,
                seed_offset: int = 0, host_name: str = "demo-node"):
    """(sampler, virtual, origin): the live Sampler, or the simulator for --demo, each a
    SampleSource (collect/sample_source.py; close it with close_source); `virtual` says the sampler keeps its own clock (no need to
    sleep between samples); `origin` (a Source) says where the numbers come from, for
    every output.  cfg: the config file (load_config), for the health interval.
    start_wall_s: the simulated clock's start (default: the scenario's, 2026-01-01);
    scenario, seed_offset, host_name: one node of several simulated ones (serve --nodes)."""
    if getattr(args, "demo_actions", False) and not getattr(args, "demo", None):
        raise UsageError("--demo-actions needs --demo")
    if getattr(args, "delayacct", False) and getattr(args, "demo", None):
        raise UsageError("--delayacct reads this machine; it has no meaning with --demo")
    if getattr(args, "seed", None) is not None and not getattr(args, "demo", None):
        raise UsageError("--seed needs --demo")
    if getattr(args, "demo", None):
        from gpudisk_top.sim import BUILTIN_NAMES, Simulator, builtin

        name = scenario or args.demo
        if name not in BUILTIN_NAMES:
            raise UsageError(f"no built-in scenario {name!r}; "
                             f"choose one of: {', '.join(BUILTIN_NAMES)}")
        seed = (args.seed if args.seed is not None else 0) + seed_offset
        start = {} if start_wall_s is None else {"start_wall_s": start_wall_s}
        # the simulated disks' health, read every --health-interval of simulated time;
        # nothing real is read (no smartctl, no /sys)
        sim = Simulator(builtin(name), seed=seed, interval_s=args.interval,
                        health_interval_s=health_interval_s(args, cfg), **start)
        return sim, True, simulated_source(name, seed, host_name)
    from gpudisk_top.collect.health import HealthPoller
    from gpudisk_top.collect.sampler import Sampler

    roots = roots_from(args)
    every_s = health_interval_s(args, cfg)
    # the disks' health, read on a thread of its own (never the sampler's): each Sample
    # gets the latest readings by reference.  Started once the Sampler is built: a
    # Sampler that fails leaves no thread and no smartctl behind
    health = (HealthPoller(roots, interval_s=every_s, dev_dir=getattr(args, "devfs", "/dev"))
              if every_s > 0 else None)
    from gpudisk_top.probe.store import ProbeCeilings

    # what `gpudisk-top probe` measured; a results file that cannot be used is said once,
    # now, before the dashboard takes the screen
    ceilings = ProbeCeilings(warn)
    ceilings.stored()
    sampler = Sampler(roots, interval_s=args.interval,
                      delayacct=getattr(args, "delayacct", False),
                      gpu_init_wait_s=gpu_init_wait_s, ceilings=ceilings, health=health)
    if health is not None:
        if not os.path.isdir(health.dev_dir):
            warn(f"--devfs {health.dev_dir}: no such directory; smartctl will find no disk "
                 "there (the kernel's temperatures are still read)")
        health.start()
    say_notes(sampler)
    # what cannot be seen from here, by key: the dashboard's header flags it
    return sampler, False, live_source(blind_spots=[b.key for b in sampler.blind_spots])


def say_notes(source) -> None:
    """Say, one note line each on stderr, what the SampleSource `source` has to say
    (collect/sample_source.py drain_notes: --delayacct's switch).  Never raises."""
    for line in source.drain_notes():
        note(line)


def close_source(source) -> None:
    """Close the SampleSource `source`, then say what closing it did (--delayacct's
    setting left on), also where closing raised (which is raised on)."""
    try:
        source.close()
    finally:
        say_notes(source)
