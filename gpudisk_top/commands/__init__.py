"""Subcommands (`gpudisk-top NAME ...`).  Each module has:

    build_parser(prog: str) -> argparse.ArgumentParser   (use common.Parser)
    run(args) -> int                                      (raise errors.UsageError/RuntimeFailure)

and is imported only when its name is on the command line, so `--once` and `record` never
pay for the dashboard's imports.
"""

# name -> (module, one-line summary for --help)
COMMANDS: dict[str, tuple[str, str]] = {
    "record": ("gpudisk_top.commands.record", "record raw samples to a file, headless, until stopped"),
    "replay": ("gpudisk_top.commands.replay", "the dashboard driven by a recording: seek, step, speed"),
    "report": ("gpudisk_top.commands.report", "the postmortem of a recording: states, episodes, worst devices, charts"),
    "export": ("gpudisk_top.commands.export", "a recording's per-interval rates as CSV, JSON Lines or a Perfetto trace"),
    "serve": ("gpudisk_top.commands.serve", "Prometheus metrics and alert rules, headless: serve /metrics, push, act"),
    "fleet": ("gpudisk_top.commands.fleet", "the fleet through Prometheus: every node's state, stale nodes, a job's straggler"),
    "probe": ("gpudisk_top.commands.probe", "a device's read ceiling (4k random QD1/QD32, 1M sequential), read-only"),
}
