"""The fault matrix in CI (issue 35), but for the reliability round's solo cases
(tests/test_fault_matrix.py runs those alone): the rest of category 12 and a fixed sample
of every other category, through the real command line, as `python tests/faults/matrix.py`
runs them.  These are the cases the matrix itself runs two at once, so here they run
beside the rest of the suite, as on a shared CI machine.  A case whose outcome is a hang,
a crash, a silent-wrong result, a bad error or harm, or one its input does not allow, fails
the test with the matrix's own reason, as it would alone."""

from __future__ import annotations

import pytest

from matrix_run import run_matrix, wrong

SAMPLE_PER_CATEGORY = 5

pytestmark = pytest.mark.root(reason="the matrix makes device nodes, tmpfs mounts and runs "
                                     "cases as another uid")


def test_every_shared_case_of_the_reliability_round_is_clean(tmp_path):
    doc = run_matrix(tmp_path, "category-12-shared", "--category", "12", "--solo", "without")
    assert len(doc["cases"]) >= 100, "category 12 lost its cases"
    assert not any(c["id"].startswith("12/delayacct/") for c in doc["cases"]), \
        "a delayacct case switches the node's setting: it runs solo, never beside the suite"
    assert not wrong(doc), "\n".join(wrong(doc))


def test_a_sample_of_every_other_category_is_clean(tmp_path):
    args = [a for n in range(1, 12) for a in ("--category", str(n))]
    doc = run_matrix(tmp_path, "sample", "--quick", "--per-category", str(SAMPLE_PER_CATEGORY),
                     "--solo", "without", *args)
    assert {c["category"] for c in doc["cases"]} == set(range(1, 12))
    assert len(doc["cases"]) == 11 * SAMPLE_PER_CATEGORY, \
        "a sampled case is solo: it must run alone (tests/test_fault_matrix.py)"
    assert not wrong(doc), "\n".join(wrong(doc))
