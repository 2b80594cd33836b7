"""`gpudisk-top probe [PATH|DEVICE]`: a device's read ceiling, read-only, in bounded time.

The work is in gpudisk_top/probe/ (UI-free); this module parses options, warns that the
device is about to be loaded, prints the table or the JSON object, and keeps the result.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys

from gpudisk_top.commands.common import Parser, number_type
from gpudisk_top.errors import RuntimeFailure, UsageError, note, warn
from gpudisk_top.textsafe import printable

MIN_SECONDS = 1.5     # half a second for each of the three tests
MAX_SECONDS = 600.0


_seconds = number_type(
    float, "number of seconds",
    (lambda v: MIN_SECONDS <= v <= MAX_SECONDS,
     f"must be between {MIN_SECONDS:g} and {MAX_SECONDS:g} seconds: {{text!r}}"))


def build_parser(prog: str) -> argparse.ArgumentParser:
    p = Parser(prog=prog, description=(
        "Measure a block device's read ceiling: 4 KiB random reads at queue depth 1 and "
        "32, and 1 MiB sequential reads at queue depth 8, with O_DIRECT, read-only. The "
        "result is kept per device (by its WWN or serial) under "
        "$XDG_STATE_HOME/gpudisk-top/probes.json. It loads the device while it runs."))
    p.add_argument("target", nargs="?", metavar="PATH|DEVICE",
                   help="a block device (/dev/nvme0n1, nvme0n1), or a file or directory on "
                        "one (default: the current directory)")
    p.add_argument("--seconds", type=_seconds, default=10.0, metavar="S",
                   help="time for all three tests together, a third each (default 10)")
    p.add_argument("--engine", choices=("auto", "fio", "builtin"), default="auto",
                   help="fio (libaio), the built-in O_DIRECT reader, or auto: fio when "
                        "installed (default auto)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--no-save", action="store_true",
                   help="do not keep the result in the results file")
    return p


def _engine(choice: str) -> str:
    from gpudisk_top.probe import fio

    if choice == "builtin":
        return "builtin"
    if fio.available():
        return "fio"
    if choice == "fio":
        raise UsageError("--engine fio: fio is not installed (install it, or use "
                         "--engine builtin)")
    warn("fio is not installed: using the built-in reader, whose QD32 figure is bounded "
         "by this machine's CPU (see README)")
    return "builtin"


def _sigterm(_signo, _frame):
    raise KeyboardInterrupt   # the engines stop their reads and fio on the way out


def run(args) -> int:
    from gpudisk_top.probe import store
    from gpudisk_top.probe.runner import run_probe
    from gpudisk_top.probe.target import resolve

    old = signal.signal(signal.SIGTERM, _sigterm)
    try:
        engine = _engine(args.engine)
        if not args.no_save:
            store.check_writable()   # before the device is loaded for a result we could not keep
        target = resolve(args.target)
        for line in target.notes:
            note(line)
        warn(f"probe reads {target.path} for about {args.seconds:g} s, up to 32 reads at "
             f"once: this loads {target.device} and slows the jobs that use it")
        result = run_probe(target, args.seconds, engine)
    finally:
        signal.signal(signal.SIGTERM, old)
    doc = result.to_json()
    doc["stored"] = None
    failure = None
    if not args.no_save:
        try:
            doc["stored"], problem = store.save(doc)
        except RuntimeFailure as err:   # the figures are still shown, then the error
            failure = err
        else:
            if problem:
                warn(problem)
    if args.json:
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    else:
        sys.stdout.write(render_text(doc, kept=failure is None))
    if failure is not None:
        raise failure
    return 0


def render_text(doc: dict, kept: bool = True) -> str:
    from gpudisk_top.model.present import Col, table
    from gpudisk_top.probe.spec import TESTS

    what = "its device node" if doc["target_kind"] == "device" else "a file through the filesystem"
    model = f", {doc['model']}" if doc.get("model") else ""
    rows = [(spec.label, f"{r['iops']:.0f}", f"{r['read_mib_s']:.1f}", f"{r['lat_mean_ms']:.3f}",
             f"{r['lat_p99_ms']:.3f}", "fio" if r["engine"] == "fio" else "built-in")
            for spec in TESTS if (r := doc["tests"].get(spec.name)) is not None]
    lines = [f"{doc['device']}{model}: read {doc['target']} ({what})", *table(rows, (
        Col("test", 28, "<"), Col("IOPS", 9), Col("MiB/s", 9), Col("mean ms", 9),
        Col("p99 ms", 9), Col("engine", 0, "<", "  ")))]
    weak = " (weak: no WWN or serial)" if doc["identity_weak"] else ""
    lines.append(f"kept as {doc['identity']}{weak} in {doc['stored']}" if doc["stored"]
                 else f"identity {doc['identity']}{weak}; not kept"
                 + (" (--no-save)" if kept else ""))
    return "\n".join(printable(line) for line in lines) + "\n"
