"""The fault matrix in CI (issue 35), but for the reliability round's solo cases
(tests/test_fault_matrix.py runs those alone): the rest of category 12 and a fixed sample
of every other category, through the real command line, as `python tests/faults/matrix.py`
runs them.  These are the cases the matrix itself runs two at once, so here they run
beside the rest of the suite, as on a shared CI machine.  A case whose outcome is a hang,
a crash, a silent-wrong result, a bad error or harm, or one its input does not allow, fails
the test with the matrix's own reason, as it would alone."""

from __future__ import annotations

import pytest

from matrix_run import SAMPLE_ARGS, SAMPLE_PER_CATEGORY, listed, run_matrix, wrong

pytestmark = pytest.mark.root(reason="the matrix makes device nodes, tmpfs mounts and runs "
                                     "cases as another uid")


def test_every_shared_case_of_the_reliability_round_is_clean(tmp_path):
    doc = run_matrix(tmp_path, "category-12-shared", "--category", "12", "--solo", "without")
    assert len(doc["cases"]) >= 100, "category 12 lost its cases"
    assert not any(c["id"].startswith("12/delayacct/") for c in doc["cases"]), \
        "a delayacct case switches the node's setting: it runs solo, never beside the suite"
    assert not wrong(doc), "\n".join(wrong(doc))


def test_a_sample_of_every_other_category_is_clean(tmp_path):
    doc = run_matrix(tmp_path, "sample", *SAMPLE_ARGS, "--solo", "without")
    solo = listed(*SAMPLE_ARGS, "--solo", "only")      # tests/test_fault_matrix.py's
    assert len(doc["cases"]) + len(solo) == 11 * SAMPLE_PER_CATEGORY, "the sample lost cases"
    assert {c["category"] for c in doc["cases"]} | {int(i.split("/")[0]) for i in solo} \
        == set(range(1, 12))
    assert not wrong(doc), "\n".join(wrong(doc))
