#!/usr/bin/env python3
"""Build dist/gpudisk-top.pyz: the package and its pure-Python runtime dependencies in one
zip that any CPython 3.10+ runs (`python3 gpudisk-top.pyz`), on any CPU and C library.

Owns: which dependencies go in (pyproject's, resolved by pip for the oldest Python the
zip supports, as pure wheels only), the refusal of anything compiled, and the file's
layout: a first line that Python reads only when the zip's end is lost (the file is then
run as a script, and that line's coding cookie is what Python says), then the zip:
`__main__.py` (tools/pyz_stub.py, which checks the rest) and `pyz_main.py`
(tools/pyz_main.py, the launcher) stored at the top, everything it imports under `lib/`,
so nothing beside them is on sys.path until the launcher has isolated itself.  The
stub's CHECK holds the byte range from the launcher's header to the zip's directory and
its CRC-32.  Members are written in name order
with one fixed date, so two builds of the same tree and wheels are the same bytes.
This file is not in the zip: the build is not part of what runs on a node.

Usage: python tools/build_pyz.py [--out dist/gpudisk-top.pyz]
Exit 0 with the zip and OUT.sha256 (`sha256sum` format: `sha256sum -c` checks a copy)
written and the checksum line printed; 1 with one line (`build_pyz: error: ...`) where
pip cannot resolve a dependency or a compiled file would go in."""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STUB = Path(__file__).resolve().parent / "pyz_stub.py"
LAUNCHER = Path(__file__).resolve().parent / "pyz_main.py"
# A file whose zip directory (at its end) is lost is run by Python as a script: before it
# compiles a byte, it reads the first line's coding cookie, and an unknown encoding is the
# one line it prints (`SyntaxError: encoding problem: NAME`, CPython 3.9 to 3.13; a
# zip's own bytes would give `source code cannot contain null bytes` under a 3-line
# header, or `Non-UTF-8 code`).  NAME may hold only letters, digits, `-`, `_` and `.`.
# An intact zip is found from its end, so Python never reads this line then.
TRUNCATED_LINE = (b"# coding: gpudisk-top.pyz-is-truncated-or-not-a-whole-zip--copy-it-again-"
                  b"and-compare-its-sha256sum-with-gpudisk-top.pyz.sha256\n")
# the stub's placeholder for START-END-CRC32, filled in at the same length
CHECK_PLACEHOLDER = b'CHECK = "0000000000-0000000000-00000000-0000000000-0000000000"'
ZIP_DATE = (1980, 1, 1, 0, 0, 0)   # the earliest a zip can hold: no build time in the bytes
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
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(out.name + ".partial")
        write_zip(lib, partial)
        os.replace(partial, out)
    return out


def _add(zf: zipfile.ZipFile, name: str, data: bytes, compress_type: int) -> None:
    info = zipfile.ZipInfo(name, date_time=ZIP_DATE)
    info.external_attr = 0o644 << 16
    info.compress_type = compress_type
    zf.writestr(info, data)


def _write(lib: Path, path: Path, stub: bytes) -> None:
    with open(path, "wb") as fd:
        fd.write(TRUNCATED_LINE)
        with zipfile.ZipFile(fd, "w") as zf:
            # stored: a damaged byte in the stub stays one byte (it cannot check itself),
            # and the launcher is read before zlib's decompressor is needed
            _add(zf, "__main__.py", stub, zipfile.ZIP_STORED)
            _add(zf, "pyz_main.py", LAUNCHER.read_bytes(), zipfile.ZIP_STORED)
            for file in sorted(p for p in lib.rglob("*") if p.is_file()):
                _add(zf, "lib/" + file.relative_to(lib).as_posix(), file.read_bytes(),
                     zipfile.ZIP_DEFLATED)


def _checked_region(path: Path) -> tuple[int, int, int, int, int]:
    """(start, end, CRC-32, the launcher's source's start and end): the range from the
    launcher's header to the zip's directory, in the file (the first line counted)."""
    data = path.read_bytes()
    with zipfile.ZipFile(path) as zf:
        launcher = zf.getinfo("pyz_main.py")
        start, end = launcher.header_offset, zf.start_dir
    # the local header: 30 bytes, then the name and the extra field, lengths at 26 and 28
    source_start = (start + 30 + int.from_bytes(data[start + 26:start + 28], "little")
                    + int.from_bytes(data[start + 28:start + 30], "little"))
    source_end = source_start + launcher.compress_size
    if data[source_start:source_end] != LAUNCHER.read_bytes():
        raise BuildError("the launcher is not where its zip header says")
    return start, end, zlib.crc32(data[start:end]) & 0xFFFFFFFF, source_start, source_end


def write_zip(lib: Path, path: Path) -> None:
    """The file at `path`: TRUNCATED_LINE, then the zip (the stub and the launcher stored,
    lib/ deflated).  Written twice: the first gives the range the stub checks and its
    CRC, the second the stub holding them (same length, so the range's bytes are the
    same).  No shebang and no exec bit: it runs as `python3 gpudisk-top.pyz`, so a
    noexec /tmp is no obstacle, and a shebang would name one interpreter the node may
    lack.  Raises BuildError where the stub has no placeholder or the second write
    differs."""
    stub = STUB.read_bytes()
    if stub.count(CHECK_PLACEHOLDER) != 1:
        raise BuildError(f"{STUB} has no {CHECK_PLACEHOLDER.decode()} to fill in")
    _write(lib, path, stub)
    region = _checked_region(path)
    check = b'CHECK = "%010d-%010d-%08x-%010d-%010d"' % region
    _write(lib, path, stub.replace(CHECK_PLACEHOLDER, check))
    if _checked_region(path) != region:
        raise BuildError("the zip's bytes changed between its two writes")


def write_sha256(out: Path) -> str:
    """OUT.sha256 beside `out`, in sha256sum's format with the bare file name, so that
    `sha256sum -c gpudisk-top.pyz.sha256` checks a copy in the directory it lies in;
    returns its line."""
    line = f"{hashlib.sha256(out.read_bytes()).hexdigest()}  {out.name}\n"
    out.with_name(out.name + ".sha256").write_text(line)
    return line


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
    line = write_sha256(out)
    print(f"{out} ({out.stat().st_size / 1e6:.1f} MB)")
    print(line, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
