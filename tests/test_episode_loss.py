"""Nothing downstream writes upstream (issue 36): the step returns each interval's loss
beside its verdict, the stall ledger keeps lost time by episode id, a Stepper numbers its
episodes on across the detectors a gap starts (one id, one episode), and the node's and
the fleet's words for lost time by cause come from one phrase builder."""

from __future__ import annotations

import dataclasses

import pytest

from gpudisk_top.fleet.ledger import lost_text
from gpudisk_top.verdict import ledger as L
from gpudisk_top.verdict.detect import Episode, Verdict
from gpudisk_top.verdict.step import Step, Stepper
from recording_helpers import sim_samples


def _starving_with_gap(n: int = 40, at: int = 20, gap_s: float = 30.0):
    """n samples of the demo node from its first disk starvation on, with a gap in
    sampling of gap_s at sample `at` (the sampler frozen: both clocks jump)."""
    samples = sim_samples("demo", 88 + n)[88:]
    return samples[:at] + [dataclasses.replace(s, mono_s=s.mono_s + gap_s, wall_s=s.wall_s + gap_s)
                           for s in samples[at:]]


def test_the_step_returns_the_loss_beside_the_verdict_and_writes_nothing_back():
    samples = _starving_with_gap()
    stepper = Stepper(cadence_s=1.0)
    steps = [stepper.step(s) for s in samples]
    assert all(isinstance(st, Step) and st.loss.wall_s == st.model.wall_s for st in steps)
    assert "loss" not in {f.name for f in dataclasses.fields(Verdict)}
    assert "lost_gpu_s" not in {f.name for f in dataclasses.fields(Episode)}
    # the gap: one fresh detector, and its episodes numbered on from the ones before
    assert sum(st.loss.gap_s is not None for st in steps) == 1
    ids = [e.id for e in stepper.episodes]
    assert len(stepper.episodes) >= 2 and (stepper.retired or any(t.retired for t in stepper.tracks))
    assert ids == list(range(1, len(ids) + 1))
    # each interval's lost time is its verdict's episode's, and no other's
    led = stepper.ledger
    for e in stepper.episodes:
        mine = sum(st.loss.lost_gpu_s for st in steps if st.verdict.episode is e)
        assert mine > 0 and led.lost_of(e.id) == pytest.approx(mine, rel=1e-12)
    assert sum(led.by_episode.values()) == pytest.approx(led.lost_gpu_s, rel=1e-12)
    assert led.lost_of(10_000) == 0.0


def test_forget_starts_the_numbering_over_and_merge_leaves_ids_out():
    samples = _starving_with_gap()
    stepper = Stepper(cadence_s=1.0)
    for s in samples:
        stepper.step(s)
    other = L.Ledger()
    other.merge(stepper.ledger)
    assert other.lost_gpu_s == pytest.approx(stepper.ledger.lost_gpu_s) and not other.by_episode
    assert stepper.ledger.copy().by_episode == stepper.ledger.by_episode
    stepper.forget()
    for s in samples[:20]:
        stepper.step(s)
    assert [e.id for e in stepper.episodes] == list(range(1, len(stepper.episodes) + 1))


def test_the_node_and_the_fleet_say_lost_time_by_cause_in_one_phrase():
    by_cause = {"disk-starved": 2.9 * 3600, "cpu-starved": 0.3 * 3600, "checkpoint-stall": 0.0,
                "straggler": 0.02 * 3600, "undiagnosed": 0.01 * 3600}
    led = L.Ledger()
    for cause, v in by_cause.items():
        led.add(L.IntervalLoss(wall_s=0.0, interval_s=1.0, state=cause, cause=cause,
                               job_gpus=1, lost_gpu_s=v, job_gpu_s=1.0))
    node = led.line()
    fleet = lost_text(by_cause)
    assert node == "lost 3.23 GPU-h below 100%: disk 2.90, cpu 0.30, straggler 0.02, other 0.01"
    assert fleet == "3.23 GPU-h: disk 2.90, cpu 0.30, straggler 0.02, other 0.01"
    assert node == "lost " + L.lost_phrase(led.lost_gpu_s, led.split(), 3, led.below())
    assert lost_text({c: 0.0 for c in by_cause}) == "0.00 GPU-h" and lost_text(None) == ""


def test_the_replay_screen_knows_each_episodes_lost_time_as_report_counts_it():
    """The recording's episodes the replay screen lists (session/summaries.py
    known_episodes) say the lost time `report` gives them, read from the summaries."""
    from pathlib import Path

    from gpudisk_top.record.reader import Recording
    from gpudisk_top.report import summary
    from gpudisk_top.session import summaries

    demo = Path(__file__).resolve().parent.parent / "examples" / "demo-simulated.gdtrec"
    with Recording.open(demo) as rec:
        episodes, _spans, lost = summaries.known_episodes(rec)
        rows = summary.build(rec).data["ledger"]["by_episode"]
    assert [e.id for e in episodes] == [r["id"] for r in rows] and len(rows) >= 3
    assert all(r["lost_gpu_s"] > 0 for r in rows)
    assert [lost[r["id"]] for r in rows] == pytest.approx([r["lost_gpu_s"] for r in rows], rel=1e-12)
