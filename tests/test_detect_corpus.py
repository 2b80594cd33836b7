"""The detector on the labelled corpus (tests/corpus/): every scenario right, no false
alarm on the healthy and idle ones, detection within 3 intervals of onset."""

from __future__ import annotations

import pytest

from corpus import score

RUNS = score.score(seeds=1)


@pytest.mark.parametrize("run", RUNS, ids=[f"{r.name}-seed{r.seed}" for r in RUNS])
def test_scenario_is_right(run):
    assert run.problems == []
    # the episode timeline (what replay and report show) agrees with the labels
    agree = sum(a == b for a, b in zip(run.labels, run.timeline)) / len(run.labels)
    assert agree >= 0.97, agree


def test_every_onset_is_detected_within_three_intervals():
    latencies = [lat for r in RUNS for _, lat in r.latencies]
    assert latencies and all(lat is not None and lat <= 3 for lat in latencies)


def test_no_alarm_on_healthy_and_idle_scenarios():
    calm = [r for r in RUNS if not set(r.labels) - {"healthy", "idle"}]
    assert len(calm) >= 5
    assert all(r.episodes == [] for r in calm), [(r.name, r.episodes[0].reason) for r in calm if r.episodes]


def test_precision_and_recall_per_state():
    pairs = [(lab, got) for r in RUNS for lab, got in zip(r.labels, r.timeline)]
    for state, (p, rec, n) in score.precision_recall(pairs).items():
        if n:
            assert p >= 0.95 and rec >= 0.95, (state, p, rec)
