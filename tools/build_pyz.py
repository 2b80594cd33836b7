#!/usr/bin/env python3
"""Build dist/gpudisk-top.pyz: the package and its pure-Python runtime dependencies in one
zip that any CPython 3.10+ runs (`python3 gpudisk-top.pyz`), on any CPU and C library.

Owns: which dependencies go in (pyproject's, resolved by pip for the oldest Python the
zip supports, as pure wheels only), the refusal of anything compiled, and the zip's
layout: `__main__.py` (tools/pyz_main.py) at the top, everything it imports under `lib/`,
so nothing beside the launcher is on sys.path until it has isolated itself.
This file is not in the zip: the build is not part of what runs on a node.

Usage: python tools/build_pyz.py [--out dist/gpudisk-top.pyz]
Exit 0 with the zip written; 1 with one line (`build_pyz: error: ...`) where pip cannot
resolve a dependency or a compiled file would go in."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import zipapp
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAIN_TEMPLATE = Path(__file__).resolve().parent / "pyz_main.py"
# the oldest Python the zip runs on: pip resolves every dependency's version and marker
# (tomli below 3.11) for it; pyz_main.py refuses an older one in one line
MIN_PYTHON = (3, 10)
# plotext 6 draws through a C++ kernel it loads with ctypes (plotext/_kernel/cpp/kernel.so,
# x86_64 glibc only, and ctypes cannot load it from a zip); plotext 5 is pure Python and
# report/charts.py draws with either
PYZ_OVERRIDES = {"plotext": "plotext>=5.2,<6"}
# a file of one of these kinds would tie the zip to one CPU and one C library
COMPILED_SUFFIXES = (".so", ".pyd", ".dylib", ".dll", ".a", ".o")


class BuildError(Exception):
    """A build that cannot give a zip that runs everywhere; its text is the one line."""


def runtime_requirements() -> list[str]:
    """pyproject.toml's [project] dependencies, with the zip's overrides.
    Raises BuildError where pyproject.toml cannot be read."""
    sys.path.insert(0, str(ROOT))
    try:
        from gpudisk_top.tomlread import tomllib
    finally:
        sys.path.pop(0)
    try:
        deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as err:
        raise BuildError(f"cannot read the dependencies in pyproject.toml: {err}") from None
    out = []
    for dep in deps:
        name = dep.split(";")[0].strip()
        for sep in "<>=!~[ ":
            name = name.split(sep)[0]
        out.append(PYZ_OVERRIDES.get(name.lower(), dep))
    return out


def install_pure(requirements: list[str], target: Path) -> None:
    """pip-install `requirements` into `target` as pure wheels resolved for MIN_PYTHON
    (from the index or the wheels pip is configured to reach).  Raises BuildError."""
    argv = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            "--no-compile", "--target", str(target),
            # pure wheels only: pip resolves versions and markers for MIN_PYTHON and takes
            # nothing built for one platform
            "--only-binary=:all:", "--implementation", "py", "--abi", "none",
            "--platform", "any", "--python-version", "%d.%d" % MIN_PYTHON, *requirements]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise BuildError(f"pip could not install the dependencies as pure wheels: {last}")


def _packaging():
    try:
        from packaging.requirements import Requirement
        from packaging.utils import canonicalize_name
    except ImportError:   # pip's own copy, where the build's Python has no packaging
        from pip._vendor.packaging.requirements import Requirement
        from pip._vendor.packaging.utils import canonicalize_name
    return Requirement, canonicalize_name


def for_min_python(requirements: list[str]) -> list[str]:
    """The requirements whose markers hold on MIN_PYTHON, markers dropped: pip evaluates
    markers for the Python it runs under, not for --python-version, so tomli (for Pythons
    before 3.11) would be left out by a build under 3.11."""
    Requirement, _ = _packaging()
    env = {"python_version": "%d.%d" % MIN_PYTHON, "python_full_version": "%d.%d.0" % MIN_PYTHON,
           "extra": ""}
    out = []
    for text in requirements:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate(env):
            req.marker = None
            out.append(str(req))
    return out


def missing_for_min_python(lib: Path) -> list[str]:
    """Dependencies of what is in `lib` that MIN_PYTHON needs and the build's Python did
    not (markers like `python_version < "3.11"`), not installed yet."""
    _, canonicalize_name = _packaging()
    have, wanted = set(), []
    for meta in lib.glob("*.dist-info/METADATA"):
        name = meta.parent.name.rsplit("-", 1)[0]
        have.add(canonicalize_name(name))
        wanted += [line.split(":", 1)[1].strip() for line in meta.read_text().splitlines()
                   if line.startswith("Requires-Dist:")]
    Requirement, _ = _packaging()
    return [r for r in for_min_python(wanted)
            if canonicalize_name(Requirement(r).name) not in have]


def copy_package(target: Path) -> None:
    """The checkout's gpudisk_top: its modules and package data, no bytecode."""
    shutil.copytree(ROOT / "gpudisk_top", target / "gpudisk_top",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo"))


def refuse_compiled(tree: Path) -> None:
    """Raises BuildError naming the first compiled file under `tree`."""
    for path in sorted(tree.rglob("*")):
        if path.is_file() and (path.suffix in COMPILED_SUFFIXES or ".so." in path.name
                               or path.read_bytes()[:4] == b"\x7fELF"):
            raise BuildError(f"a compiled file would go into the zip, which must run on any "
                             f"CPU and C library: {path.relative_to(tree)}")


def prune(lib: Path) -> None:
    """Drop what nothing runs: pip's bin/ scripts, samples, bytecode pip may have left."""
    shutil.rmtree(lib / "bin", ignore_errors=True)
    # nvidia-ml-py's wheel puts its sample program at the top level, as `example`
    (lib / "example.py").unlink(missing_ok=True)
    for cache in list(lib.rglob("__pycache__")):
        shutil.rmtree(cache, ignore_errors=True)


def build(out: Path) -> Path:
    """Write the zip to `out` (through a temporary file beside it, renamed into place).
    Raises BuildError."""
    with tempfile.TemporaryDirectory(prefix="gpudisk-top-pyz-") as tmp:
        stage = Path(tmp) / "stage"
        lib = stage / "lib"
        lib.mkdir(parents=True)
        install_pure(for_min_python(runtime_requirements()), lib)
        for _ in range(4):   # each round may bring dependencies of its own
            missing = missing_for_min_python(lib)
            if not missing:
                break
            install_pure(missing, lib)
        copy_package(lib)
        prune(lib)
        refuse_compiled(stage)
        shutil.copyfile(MAIN_TEMPLATE, stage / "__main__.py")
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(out.name + ".partial")
        # no shebang and no exec bit needed: it runs as `python3 gpudisk-top.pyz`, so a
        # noexec /tmp is no obstacle; a shebang would name one interpreter the node may lack
        zipapp.create_archive(stage, partial, interpreter=None, compressed=True)
        os.replace(partial, out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="build_pyz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist" / "gpudisk-top.pyz",
                        help="where to write the zip (default: dist/gpudisk-top.pyz)")
    args = parser.parse_args(argv)
    try:
        out = build(args.out)
    except BuildError as err:
        print(f"build_pyz: error: {err}", file=sys.stderr)
        return 1
    print(f"{out} ({out.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
