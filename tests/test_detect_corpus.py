"""The detector on the labelled corpus (tests/corpus/): every scenario right, no false
alarm on the healthy and idle ones, detection within 3 intervals of onset."""

from __future__ import annotations

import pytest

from corpus import score


NAMES = [name for name, _ in score.scenarios()]


@pytest.fixture(scope="module")
def runs():
    # scored once per module, when a test asks: at import it would cost every collection
    # (`-m fast` too) the whole corpus
    return score.score(seeds=1)


@pytest.mark.parametrize("index", range(len(NAMES)), ids=[f"{name}-seed0" for name in NAMES])
def test_scenario_is_right(runs, index):
    run = runs[index]
    assert run.name == NAMES[index]
    assert run.problems == []
    # the episode timeline (what replay and report show) agrees with the labels
    agree = sum(a == b for a, b in zip(run.labels, run.timeline)) / len(run.labels)
    assert agree >= 0.97, agree


def test_every_onset_is_detected_within_three_intervals(runs):
    latencies = [lat for r in runs for _, lat in r.latencies]
    assert latencies and all(lat is not None and lat <= 3 for lat in latencies)


def test_no_alarm_on_healthy_and_idle_scenarios(runs):
    calm = [r for r in runs if not set(r.labels) - {"healthy", "idle"}]
    assert len(calm) >= 5
    assert all(r.episodes == [] for r in calm), [(r.name, r.episodes[0].reason) for r in calm if r.episodes]


def test_precision_and_recall_per_state(runs):
    pairs = [(lab, got) for r in runs for lab, got in zip(r.labels, r.timeline)]
    for state, (p, rec, n) in score.precision_recall(pairs).items():
        if n:
            assert p >= 0.95 and rec >= 0.95, (state, p, rec)
