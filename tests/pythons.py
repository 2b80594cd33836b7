"""The CPythons this machine has, for the tests that run gpudisk-top.pyz with each
(tests/test_pyz.py, tests/test_pyz_recipes.py): pyenv's, the system's python3.X, and the
one running the tests.  WANTED are the versions the zip is for: a test takes each as a
parameter and skips, naming where it looked, where this machine has none of it."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from pathlib import Path

import pytest


def version_of(python: str) -> tuple[int, int] | None:
    """(major, minor) of the Python at `python`; None where it does not run."""
    try:
        out = subprocess.run([python, "-c", "import sys; print('%d %d' % sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    return tuple(map(int, out.stdout.split())) if out.returncode == 0 else None


PYENV = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
# the CPythons the zip is for: each is a test's parameter, skipped where this machine has
# none, the skip naming where it was looked for
WANTED = ("3.10", "3.11", "3.12", "3.13")


def _pythons() -> dict[str, str]:
    """Each CPython here by its version: pyenv's (2.7 and 3.6 to 3.13 on the development
    machine), the system's python3.X, and the one running the tests (a fresh CI machine
    may have only these)."""
    found = {}
    candidates = sorted(glob.glob(str(PYENV / "*" / "bin" / "python")))
    candidates += [f"/usr/bin/python3.{minor}" for minor in range(6, 15)]
    candidates += ["/usr/bin/python3", sys.executable]
    for python in candidates:
        version = version_of(python) if os.access(python, os.X_OK) else None
        if version:
            found.setdefault("%d.%d" % version, python)
    return found


PYTHONS = _pythons()
SUPPORTED = {v: p for v, p in PYTHONS.items() if tuple(map(int, v.split("."))) >= (3, 10)}


def python_for(version: str) -> str:
    """This machine's CPython `version`; skips the test, naming what is missing, where
    there is none."""
    if version not in PYTHONS:
        pytest.skip(f"no CPython {version} on this machine (looked in {PYENV}/*/bin/python, "
                    f"/usr/bin/python{version}, and the tests' own {sys.version.split()[0]}); "
                    f"found: {', '.join(sorted(PYTHONS)) or 'none'}")
    return PYTHONS[version]


def _ends() -> tuple[str, ...]:
    """The oldest and the newest of WANTED this machine has (one where it has one): the
    heavier recipes run with these two, the zip's own runs with every one; WANTED's ends
    where it has none, so that each skips naming what is missing."""
    have = [v for v in WANTED if v in PYTHONS] or [WANTED[0], WANTED[-1]]
    return tuple(dict.fromkeys((have[0], have[-1])))


ENDS = _ends()
