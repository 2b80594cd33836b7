"""Helpers for the recording tests: simulated samples, recordings, and a command runner."""

from __future__ import annotations

import os
import subprocess
import sys

from gpudisk_top.collect.source import Source, simulated_source
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


def origin(scenario: str = "demo", seed: int = 0) -> Source:
    return simulated_source(scenario, seed)


def write_recording(path, samples, scenario: str = "demo", seed: int = 0, **kwargs) -> str:
    kwargs.setdefault("sync_interval_s", None)
    with Recorder(path, make_header(origin(scenario, seed), 1.0), **kwargs) as rec:
        for s in samples:
            rec.append(s)
    return os.fspath(path)


def canonical(samples):
    """The samples of one session as a recording of this version gives them back: NVML
    samples as the UtilWindow of each interval, processes' I/O counters rebuilt from their
    trees' exact increases (record/v2/flatten.py's docstring says what is kept)."""
    from gpudisk_top.record import v2

    return v2.canonical(samples)


def abandon(rec) -> None:
    """Leave a Recorder as kill -9 would: what it wrote stays, nothing more is written
    (no block for its rows, no end frame), and its lock is released."""
    rec._stop.set()
    if rec._syncer is not None:
        rec._syncer.join()
    rec.closed = True
    os.close(rec._fd)
    rec._fd = None


def verdict_fingerprint(verdict) -> dict:
    """What a verdict says (its JSON, model/vocab.py), its interval's own state and its
    episode: equal for the same interval live and replayed."""
    from gpudisk_top.model.vocab import verdict_json

    episode = verdict.episode.id if verdict.episode is not None else None
    return {**verdict_json(verdict), "raw_state": verdict.raw_state, "episode": episode}


def assert_same_for_the_model(originals, decoded) -> None:
    """What the model and the detector use is the same from decoded samples as from the
    originals: every GPU, disk and host figure, every process's CPU, devices and whether
    it read or wrote, and each process tree's I/O; and every verdict."""
    from gpudisk_top.verdict.detect import Detector
    from gpudisk_top.model.snapshot import Model

    assert len(originals) == len(decoded)
    det_a, det_b = Detector(), Detector()
    last_a = last_b = None
    for a, b in zip(originals, decoded):
        ma, mb = Model.new(a, last_a), Model.new(b, last_b)
        assert (a.mono_s, a.wall_s, a.disks, a.devices, a.host, a.warnings) == \
            (b.mono_s, b.wall_s, b.disks, b.devices, b.host, b.warnings)
        assert ma.gpus == mb.gpus and ma.disks == mb.disks and ma.host == mb.host
        assert ma.procs.keys() == mb.procs.keys()
        for pid, va in ma.procs.items():
            vb = mb.procs[pid]
            assert (va.root_pid, va.name, va.cmdline, va.devices, va.cpu_pct) == \
                (vb.root_pid, vb.name, vb.cmdline, vb.devices, vb.cpu_pct)
            for f in ("read_kb_s", "write_kb_s", "rchar_kb_s", "wchar_kb_s"):
                x, y = getattr(va, f), getattr(vb, f)
                assert (x is None) == (y is None) and bool(x) == bool(y), (pid, f, x, y)
        assert ma.gpu_proc_io.keys() == mb.gpu_proc_io.keys()
        for root, ta in ma.gpu_proc_io.items():
            tb = mb.gpu_proc_io[root]
            for f in ("read_kb_s", "write_kb_s", "rchar_kb_s", "wchar_kb_s"):
                assert ta[f] == tb[f] or abs(ta[f] - tb[f]) <= 1e-9 * abs(ta[f]), (root, f)
        assert verdict_fingerprint(det_a.feed(ma)) == verdict_fingerprint(det_b.feed(mb))
        last_a, last_b = a, b
