"""The fault matrix run from the suite (tests/test_fault_matrix*.py): its command line, as
`python tests/faults/matrix.py` runs it, and what in its JSON fails a test."""

from __future__ import annotations

import json
import os
import subprocess
import sys

MATRIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "faults", "matrix.py")
# the sample of categories 1-11 CI runs: its solo cases alone (tests/test_fault_matrix.py),
# the others beside the suite (tests/test_fault_matrix_shared.py)
SAMPLE_PER_CATEGORY = 5
SAMPLE_ARGS = ("--quick", "--per-category", str(SAMPLE_PER_CATEGORY),
               *(a for n in range(1, 12) for a in ("--category", str(n))))


def run_matrix(tmp_path, name: str, *args: str) -> dict:
    """The matrix's per-case results (its --json) for these arguments, two cases at once."""
    out = tmp_path / f"{name}.json"
    proc = subprocess.run([sys.executable, MATRIX, "--jobs", "2", "--json", str(out), *args],
                          capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with open(out) as f:
        return json.load(f)


def listed(*args: str) -> list[str]:
    """The ids of the cases these arguments select (the matrix's --list), none run."""
    proc = subprocess.run([sys.executable, MATRIX, "--list", *args], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [line.split()[0] for line in proc.stdout.splitlines()[:-1] if line.strip()]


def wrong(doc: dict) -> list[str]:
    """A line for each case whose outcome is a hang, a crash, a silent-wrong result, a bad
    error or harm, or one its input does not allow (the matrix's own reason)."""
    return [f"{c['id']}: {c['outcome']}: {c['detail'][:300]}"
            for c in doc["cases"]
            if c["outcome"] not in ("clean-error", "handled") or c["outcome"] not in c["expect"]]
