"""The what-if model gives the predictions it gave at commit 0eed6fc, on a frozen corpus of
inputs (tests/fixtures/whatif/corpus.json; how it was made, and why it is never remade:
tests/fixtures/whatif/make_corpus.py): the same fixes, in the same order, with the same
`to` worker counts, speed-ups to the 3 decimals every surface prints, GPU to the 1, and
the same cap, confidence and basis.  Making predict() cheaper must not move a figure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpudisk_top.verdict.whatif import Pipeline, predict

CORPUS = json.loads((Path(__file__).parent / "fixtures" / "whatif" / "corpus.json")
                    .read_text(encoding="utf-8"))["cases"]


def pipeline(inputs: dict) -> Pipeline:
    p = Pipeline(**inputs)
    p.others = [tuple(o) for o in p.others]       # (pid, name, CPUs): JSON made them lists
    return p


def test_the_corpus_holds_the_cases_it_must():
    loaders = {c["pipeline"].get("loaders", 0) for c in CORPUS}
    assert {2, 4, 16, 64, 100} <= loaders
    fixes = {w["fix"] for c in CORPUS for w in c["expected"]}
    assert {"workers", "others", "cache", "storage", "checkpoint"} <= fixes
    assert any("no probe" in w["basis"] for c in CORPUS for w in c["expected"])
    assert any(w["fix"] == "workers" and w["to"] - w["from"] >= 8
               for c in CORPUS for w in c["expected"])        # a long search
    assert sum(1 for c in CORPUS if c["expected"]) >= 50


@pytest.mark.parametrize("case", CORPUS, ids=[c["name"] for c in CORPUS])
def test_predictions_are_those_of_0eed6fc(case):
    got = [w.as_json() for w in predict(pipeline(case["pipeline"]), case["state"], case["kind"])]
    assert got == case["expected"]
