"""Helpers for the recording tests: simulated samples, recordings, and a command runner."""

from __future__ import annotations

import os
import subprocess
import sys

from gpudisk_top.record import Recorder, make_header
from gpudisk_top.sim import Simulator, builtin

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# How tests run a subcommand before cli.py registers it: the same one-line errors and exit
# codes as cli.main().
RUNNER = """
import importlib, sys
from gpudisk_top.errors import RuntimeFailure, UsageError
name = sys.argv[1]
module = importlib.import_module("gpudisk_top.commands." + name)
try:
    sys.exit(module.run(module.build_parser("gpudisk-top " + name).parse_args(sys.argv[2:])))
except UsageError as err:
    print(f"gpudisk-top: error: {err}", file=sys.stderr)
    sys.exit(2)
except RuntimeFailure as err:
    print(f"gpudisk-top: error: {err}", file=sys.stderr)
    sys.exit(1)
"""


def command(name: str, *args: str) -> list[str]:
    """argv that runs `gpudisk-top NAME ARGS` in a fresh interpreter."""
    return [sys.executable, "-c", RUNNER, name, *args]


def run_command(name: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(command(name, *args), capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT)


def call(module, *args: str) -> int:
    """Run a command module in this process, as cli.main would (errors raise)."""
    return module.run(module.build_parser("gpudisk-top").parse_args(list(args)))


def sim_samples(scenario: str = "demo", n: int = 30, seed: int = 0, **kwargs):
    sim = Simulator(builtin(scenario), seed=seed, **kwargs)
    return [sim.sample() for _ in range(n)]


def origin(scenario: str = "demo", seed: int = 0) -> dict:
    return {"source": f"simulated, scenario {scenario}, seed {seed}", "host_name": "demo-node",
            "kernel": "simulated"}


def write_recording(path, samples, scenario: str = "demo", seed: int = 0, **kwargs) -> str:
    kwargs.setdefault("sync_interval_s", None)
    with Recorder(path, make_header(origin(scenario, seed), 1.0), **kwargs) as rec:
        for s in samples:
            rec.append(s)
    return os.fspath(path)
