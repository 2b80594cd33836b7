#!/usr/bin/env python3
"""Check that the fast lane (`python -m pytest -m fast`) exercises every module of
gpudisk_top: each one imported, and a function or method of it run (a module with no
function counts once imported). The subprocesses the tests start are measured too
(coverage's `patch = subprocess`). Needs `pip install coverage` (7.10 or newer); not part
of the test extra, because no test needs it.

usage: python tests/fast_lane_coverage.py [PYTEST ARGS...]
Exits 1 and names the modules the lane leaves out; 0 when it leaves none.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "gpudisk_top"


def _runs_something(path: Path) -> bool:
    body = ast.parse(path.read_text()).body
    return bool(body[1:] if body and ast.get_docstring(ast.Module(body, [])) else body)


def unexercised(report: dict) -> list[str]:
    files = report["files"]
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        data = files.get(rel)
        if data is None or not data["executed_lines"]:
            if _runs_something(path):     # a package's __init__.py may hold only its docstring
                out.append(f"{rel}: never imported")
            continue
        bodies = [f for name, f in data["functions"].items() if name and f["summary"]["num_statements"]]
        if bodies and not any(f["executed_lines"] for f in bodies):
            out.append(f"{rel}: imported, but none of its {len(bodies)} functions ran")
    return out


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="fast-lane-coverage-") as tmp:
        # some tests run the program as another user (nobody), whose coverage writes here too
        os.chmod(tmp, 0o1777)
        rc = Path(tmp) / "coveragerc"
        rc.write_text(f"[run]\nsource = {PACKAGE}\nparallel = true\npatch = subprocess\n"
                      f"data_file = {tmp}/.coverage\n")
        cov = [sys.executable, "-m", "coverage"]
        run = subprocess.run(cov + ["run", f"--rcfile={rc}", "-m", "pytest", "-m", "fast", "-q",
                                    "-p", "no:cacheprovider", *argv], cwd=ROOT)
        if run.returncode != 0:
            print(f"the fast lane failed (exit {run.returncode}); coverage not judged", file=sys.stderr)
            return run.returncode
        subprocess.run(cov + ["combine", f"--rcfile={rc}", "-q"], cwd=ROOT, check=True)
        subprocess.run(cov + ["json", f"--rcfile={rc}", "-q", "-o", f"{tmp}/cov.json"], cwd=ROOT,
                       check=True)
        missing = unexercised(json.loads(Path(tmp, "cov.json").read_text()))
    for line in missing:
        print(line)
    print(f"{len(missing)} module(s) of gpudisk_top the fast lane does not exercise")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
