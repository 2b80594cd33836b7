"""The fault matrix in CI (issue 35): every timing-sensitive ("solo") case of category 12
(the reliability round), and those of the fixed sample of every other category, through
the real command line, as `python tests/faults/matrix.py` runs them, alone on the machine
(the suite's REAL_LOAD rule: these cases time a stop, switch the node-wide delay
accounting, or probe the real disk).  The other cases, made to run two at once, run
beside the rest of the suite: tests/test_fault_matrix_shared.py.  A case whose outcome is
a hang, a crash, a silent-wrong result, a bad error or harm, or one its input does not
allow, fails the test with the matrix's own reason.  The whole matrix (about 20 minutes)
stays a tool of its own: tests/faults/README.md."""

from __future__ import annotations

import pytest

from matrix_run import SAMPLE_ARGS, run_matrix, wrong

pytestmark = [pytest.mark.integration,
              pytest.mark.root(reason="the matrix makes device nodes, tmpfs mounts and "
                                      "runs cases as another uid")]


def test_every_solo_case_of_the_reliability_round_is_clean(tmp_path):
    doc = run_matrix(tmp_path, "category-12-solo", "--category", "12", "--solo", "only")
    assert len(doc["cases"]) >= 30, "category 12 lost its solo cases"
    assert not wrong(doc), "\n".join(wrong(doc))


def test_the_solo_cases_of_the_other_categories_sample_are_clean(tmp_path):
    doc = run_matrix(tmp_path, "sample-solo", *SAMPLE_ARGS, "--solo", "only")
    assert not wrong(doc), "\n".join(wrong(doc))      # none are drawn today
