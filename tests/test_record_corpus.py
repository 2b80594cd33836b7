"""What a recording keeps is enough for the detector: on every scenario of the labelled
corpus (tests/corpus/), the verdicts and episodes replayed from what format v2 keeps are
those of the live samples, interval by interval (record/v2/flatten.py's docstring: NVML samples as
one sum per interval, processes' I/O as exact tree totals with each member's share)."""

from __future__ import annotations

import pytest

from corpus.corpus import scenarios
from gpudisk_top.verdict.detect import Detector
from gpudisk_top.model.snapshot import Model
from gpudisk_top.model.vocab import episode_json
from gpudisk_top.sim import Simulator
from recording_helpers import assert_same_for_the_model, canonical

SCENARIOS = scenarios()


@pytest.mark.parametrize("name, scenario", SCENARIOS, ids=[n for n, _ in SCENARIOS])
def test_replayed_verdicts_are_the_live_verdicts(name, scenario):
    sim = Simulator(scenario, seed=0)
    live = [sim.sample() for _ in range(len(sim.labels()) + 1)]
    kept = canonical(live)
    assert_same_for_the_model(live, kept)      # every interval's verdict, and more
    episodes = []
    for samples in (live, kept):
        det, last = Detector(), None
        for s in samples:
            det.feed(Model.new(s, last))
            last = s
        det.close(samples[-1].wall_s)
        episodes.append([episode_json(e) for e in det.episodes])
    assert episodes[0] == episodes[1]
