"""The what-if's fixes are one registry and its binding limit is a key
(gpudisk_top/verdict/whatif/fixes.py, limit.py): every fix one entry (name, family, title,
predict) that docs/whatif.md describes, every limit its one sentence, and each prediction
carries the key beside the sentence it prints, on the frozen corpus's inputs, while its
JSON and a recording's episodes keep the sentence alone, as before the key."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from gpudisk_top.verdict.whatif import (CHECKPOINT, CPUS, DEVICE_LIMITS, FIX, FIXES, READS,
                                        REGISTRY, Cap, Limit, Pipeline, WhatIf, names_of,
                                        of_json, predict)

ROOT = Path(__file__).parent.parent
CORPUS = json.loads((ROOT / "tests" / "fixtures" / "whatif" / "corpus.json")
                    .read_text(encoding="utf-8"))["cases"]


def _predictions() -> list[WhatIf]:
    out = []
    for case in CORPUS:
        p = Pipeline(**case["pipeline"])
        p.others = [tuple(o) for o in p.others]
        out += predict(p, case["state"], case["kind"])
    return out


def test_every_fix_is_one_entry_of_one_registry():
    assert FIXES == tuple(f.name for f in REGISTRY) == tuple(FIX)
    assert len(set(FIXES)) == len(FIXES) == 7
    assert all(f.family in (READS, CPUS, CHECKPOINT) and callable(f.predict) for f in REGISTRY)
    # the families the detector weighs a mixed cause by (verdict/detect/classify.py)
    assert names_of(READS) == ("workers", "neighbour", "cache", "storage")
    assert names_of(CPUS) == ("others", "fewer-workers")
    assert names_of(CHECKPOINT) == ("checkpoint",)
    assert names_of("no-such-family") == ()


def test_a_predictions_title_is_its_fixs():
    def title(fix, **kw):
        return WhatIf(fix, 1.5, 60.0, 40.0, "measured", "", **kw).title()

    assert title("workers", from_=4, to=8) == "num_workers 4 → 8"
    assert title("fewer-workers", from_=6, to=3) == "num_workers 6 → 3"
    assert title("others", pids=[812]) == "stop the processes that take the CPUs"
    assert title("cache") == "the dataset in the page cache"
    assert title("storage") == "reads at the device's QD32 ceiling"
    assert title("neighbour", who="pid 912 (fio)") == "stop or throttle pid 912 (fio)'s reads"
    assert (title("neighbour", who="job slurm 1001 (train.py)")
            == "stop or throttle job slurm 1001 (train.py)'s reads")
    assert title("checkpoint") == "asynchronous checkpoints"
    with pytest.raises(KeyError):
        title("no-such-fix")


def test_adding_a_fix_means_its_docs_too():
    """docs/whatif.md names every fix of the registry, and no fix the registry lacks."""
    doc = (ROOT / "docs" / "whatif.md").read_text(encoding="utf-8")
    start = doc.index("The fixes (")
    listed = doc[start:doc.index("\n\n", doc.index("\n- ", start))]
    assert re.findall(r"^- `([a-z-]+)`: ", listed, re.M) == list(FIXES)
    assert "## Adding a fix" in doc


def test_each_limit_prints_its_one_sentence():
    """The sentences every surface has printed since the what-if began (byte for byte)."""
    assert {c.limit: c.sentence for c in (
        Cap.of(Limit.GPU), Cap.of(Limit.LOADERS), Cap.of(Limit.TRAINER, 0.454),
        Cap.of(Limit.CPUS, 2.0, "host"), Cap.of(Limit.DEVICE_SEEN, 31234.5),
        Cap.of(Limit.DEVICE_BANDWIDTH, 1999.6), Cap.of(Limit.DEVICE_QD32, 60255.0),
    )} == {
        Limit.GPU: "capped by the GPU: 100%",
        Limit.LOADERS: "capped by the loaders",
        Limit.TRAINER: "capped by the trainer's own step (45% on a CPU)",
        Limit.CPUS: "capped by the CPUs: 2.0 on the host",
        Limit.DEVICE_SEEN: "capped by the device: 31234 r/s, the highest seen (no probe)",
        Limit.DEVICE_BANDWIDTH: "capped by the device: 2000 MiB/s (the probe's 1 MiB reads)",
        Limit.DEVICE_QD32: "capped by the device: 60k r/s at QD32",
    }
    assert Cap.of(Limit.CPUS, 8.0, "cpu.max").sentence == "capped by the CPUs: 8.0 (cpu.max)"
    assert DEVICE_LIMITS == {Limit.DEVICE_SEEN, Limit.DEVICE_BANDWIDTH, Limit.DEVICE_QD32}
    with pytest.raises(TypeError):
        Cap.of(Limit.CPUS, 2.0)                     # a sentence without its figures


def test_every_prediction_carries_its_key_beside_its_sentence():
    out = _predictions()
    assert len(out) >= 80
    seen = set()
    for w in out:
        assert (w.cap is None) == (w.limit is None), w
        # the loaders' own cycle is no cap: solve() says the device's, or nothing
        assert w.limit is not Limit.LOADERS
        seen.add(w.limit)
    assert {Limit.CPUS, Limit.TRAINER, Limit.DEVICE_QD32, None} <= seen


def test_the_key_stays_out_of_the_json_and_the_recordings():
    """The JSON contract and a recording's episodes (dataclasses.asdict, read back with
    WhatIf(**d)) are what they were before the key: the sentence alone."""
    w = next(w for w in _predictions() if w.limit is Limit.CPUS)
    assert set(w.as_json()) == {"fix", "from", "to", "speedup", "gpu_util_pct", "cap",
                                "confidence", "basis", "gpu_now_pct"}
    stored = dataclasses.asdict(w)
    assert set(stored) == {"fix", "speedup", "gpu_util_pct", "gpu_now_pct", "confidence",
                           "basis", "cap", "from_", "to", "pids", "who", "unprobed"}
    json.dumps(stored)                               # a recording can hold it
    again = WhatIf(**stored)
    assert again == w and again.limit is None and again.line() == w.line()
    back = of_json([w.as_json()])[0]
    assert back.limit is None and back.cap == w.cap and back.line() == w.line()
