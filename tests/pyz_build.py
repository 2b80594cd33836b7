"""gpudisk-top.pyz built once for a test process (tools/build_pyz.py, as README gives it,
into a temporary directory removed at exit): test_pyz.py and test_pyz_recipes.py run the
same file, and each build costs a pip resolution (~5 s)."""

from __future__ import annotations

import atexit
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "tools" / "build_pyz.py"
_built: list[tuple[Path, str]] = []


def built() -> tuple[Path, str]:
    """(the zip, what the build printed).  Raises AssertionError, with the build's error
    line, where the build fails."""
    if not _built:
        out_dir = Path(tempfile.mkdtemp(prefix="gdt-pyz-"))
        atexit.register(shutil.rmtree, out_dir, True)
        out = out_dir / "gpudisk-top.pyz"
        proc = subprocess.run([sys.executable, str(BUILD), "--out", str(out)],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        _built.append((out, proc.stdout))
    return _built[0]
