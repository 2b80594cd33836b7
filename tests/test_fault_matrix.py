"""The fault matrix in CI (issue 35): every case of category 12 (the reliability round)
and a fixed sample of every other category, through the real command line, as
`python tests/faults/matrix.py` runs them.  A case whose outcome is a hang, a crash, a
silent-wrong result, a bad error or harm, or one its input does not allow, fails the test
with the matrix's own reason.  The whole matrix (about 20 minutes) stays a tool of its
own: tests/faults/README.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
MATRIX = os.path.join(HERE, "faults", "matrix.py")
SAMPLE_PER_CATEGORY = 5

pytestmark = [pytest.mark.integration,
              pytest.mark.root(reason="the matrix makes device nodes, tmpfs mounts and "
                                      "runs cases as another uid")]


def _run(tmp_path, name: str, *args: str) -> dict:
    out = tmp_path / f"{name}.json"
    proc = subprocess.run([sys.executable, MATRIX, "--jobs", "2", "--json", str(out), *args],
                          capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with open(out) as f:
        return json.load(f)


def _wrong(doc: dict) -> list[str]:
    return [f"{c['id']}: {c['outcome']}: {c['detail'][:300]}"
            for c in doc["cases"]
            if c["outcome"] not in ("clean-error", "handled") or c["outcome"] not in c["expect"]]


def test_every_case_of_the_reliability_round_is_clean(tmp_path):
    doc = _run(tmp_path, "category-12", "--category", "12")
    assert len(doc["cases"]) >= 30, "category 12 lost its cases"
    assert not _wrong(doc), "\n".join(_wrong(doc))


def test_a_sample_of_every_other_category_is_clean(tmp_path):
    args = [a for n in range(1, 12) for a in ("--category", str(n))]
    doc = _run(tmp_path, "sample", "--quick", "--per-category", str(SAMPLE_PER_CATEGORY), *args)
    assert {c["category"] for c in doc["cases"]} == set(range(1, 12))
    assert not _wrong(doc), "\n".join(_wrong(doc))
