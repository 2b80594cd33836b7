"""Inputs the cases share, made once per matrix run (in this process, with the test
helpers) and kept under the run's base directory.  Thread-safe: the first case that needs
one makes it, the others wait."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import threading

from harness import PY, ROOT, gdt_argv

_lock = threading.RLock()
_base: str | None = None
_made: dict = {}


def set_base(base: str) -> None:
    global _base
    _base = os.path.join(base, "fixtures")
    os.makedirs(_base, exist_ok=True)
    os.chmod(_base, 0o755)


def _once(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        key = (fn.__name__, args)
        with _lock:
            if key not in _made:
                _made[key] = fn(*args)
            return _made[key]
    return wrapper


def fpath(name: str) -> str:
    return os.path.join(_base, name)


@_once
def demo_recording(n: int = 12) -> str:
    """A simulated recording of n samples (0640, as the recorder makes them)."""
    from recording_helpers import sim_samples, write_recording

    path = fpath(f"demo{n}.gdtrec")
    write_recording(path, sim_samples("demo", n))
    os.chmod(path, 0o640)
    return path


@_once
def export_baseline(fmt: str) -> tuple[bytes, str]:
    """(what `export demo12 -f fmt -o -` writes, the "wrote N rows" of an export to a file)."""
    rec = demo_recording()
    out = subprocess.run(gdt_argv("export", rec, "-f", fmt, "-o", "-"), capture_output=True,
                         cwd=ROOT, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"baseline export failed: {out.stderr.decode()}")
    tmp = fpath(f"baseline.{fmt}")
    err = subprocess.run(gdt_argv("export", rec, "-f", fmt, "-o", tmp), capture_output=True,
                         text=True, cwd=ROOT, timeout=120).stderr
    m = re.search(r"wrote (\d+ \w+) to", err)
    return out.stdout, (m.group(1) if m else "")


def free_major(kind: str) -> int:
    """A device major number no driver has here (so opening a node of it fails)."""
    with open("/proc/devices") as f:
        text = f.read()
    char, _, block = text.partition("Block devices:")
    used = {int(m) for m in re.findall(r"^\s*(\d+)\s", char if kind == "char" else block, re.M)}
    for major in range(240, 255):
        if major not in used:
            return major
    return 0


@_once
def live_recording(n: int = 11) -> str:
    """A recording whose header says live, host node-17 (samples of this machine)."""
    from fault_helpers import LIVE, live, record

    return record(fpath("live-node17.gdtrec"), live(n), header_origin=LIVE)


@_once
def this_host_live_recording() -> str:
    """A live recording made by the real `record` on this machine (so its host is ours)."""
    path = fpath("live-here.gdtrec")
    subprocess.run(gdt_argv("record", "-o", path, "--duration", "1", "-i", "0.2", "-q"),
                   capture_output=True, cwd=ROOT, timeout=60, check=True)
    return path


def python() -> str:
    return PY
