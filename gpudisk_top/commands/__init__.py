"""Subcommands (`gpudisk-top NAME ...`).  Each module has:

    build_parser(prog: str) -> argparse.ArgumentParser   (use common.Parser)
    run(args) -> int                                      (raise errors.UsageError/RuntimeFailure)

and is imported only when its name is on the command line, so `--once` and `record` never
pay for the dashboard's imports.
"""

# name -> (module, one-line summary for --help)
COMMANDS: dict[str, tuple[str, str]] = {}
