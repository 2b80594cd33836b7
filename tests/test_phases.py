"""An episode's phases (verdict/detect/phases.py) and the neighbour fix measured by the
job's pace before the neighbour (verdict/detect/before.py), interval by interval; the
whole of it on a real job and a real fio is tests/test_incident_phases.py."""

from __future__ import annotations

from gpudisk_top.verdict.detect.before import with_before
from gpudisk_top.verdict.detect.evidence import Culprit
from gpudisk_top.verdict.detect.phases import (PhaseSplitter, culprits_over, phase_at,
                                               phases_from)
from gpudisk_top.verdict.detect.states import IntervalState
from gpudisk_top.verdict.ledger import IntervalLoss, Ledger
from gpudisk_top.verdict.whatif import WhatIf
from gpudisk_top.model.vocab import phase_json, phase_line


def fio(pid: int = 912, share: float = 90.0) -> Culprit:
    return Culprit(pid=pid, name="fio", device="vda", read_share_pct=share, read_kb_s=300_000.0)


def interval(util: float, *culprits: Culprit, kind: str = "latency-bound",
             whatif=()) -> IntervalState:
    return IntervalState("disk-starved", gpus=[0], kind=kind, devices=["vda"],
                         gpu_util_pct=util, detail=f"at {util}", culprits=list(culprits),
                         whatif=list(whatif))


def feed(seq) -> list:
    """The phases of an episode fed `seq`, one interval a second from t=0."""
    phases: list = []
    split = PhaseSplitter(enter=3)
    for t, raw in enumerate(seq):
        split.extend(phases, raw, float(t), float(t + 1))
    return phases


def test_a_neighbour_that_came_and_went_is_a_phase_of_its_own():
    seq = ([interval(40.0)] * 5 + [interval(6.0, fio(), kind="saturated")] * 6
           + [interval(44.0)] * 5)
    phases = feed(seq)
    assert [(p.start_wall_s, p.end_s(16.0), p.kind) for p in phases] == [
        (0.0, 7.0, "latency-bound"), (7.0, 13.0, "saturated"), (13.0, 16.0, "latency-bound")]
    # the two intervals of fio before the hysteresis held stay in the first phase, summed
    assert phases[0].culprits[0].seconds == 2.0 and phases[1].culprits[0].seconds == 4.0
    # its evidence and predictions are its own cause's, not the next one's first intervals
    assert phases[0].reason == "at 40.0" and phases[1].reason == "at 6.0"
    # ... and its utilization: fio's 4 intervals and the 2 after it before the next held
    assert phases[1].mean_util_pct == (4 * 6.0 + 2 * 44.0) / 6
    summed = culprits_over(phases)
    assert len(summed) == 1 and summed[0].seconds == 6.0
    assert summed[0].as_json()["clause"] == "pid 912 (fio), 90% of its reads for 6 s"
    # an interval belongs to the phase that began before it ended
    assert [phase_at(phases, t + 1.0) for t in range(16)] == [0] * 7 + [1] * 6 + [2] * 3


def test_a_flicker_or_a_minor_reader_is_no_new_phase():
    pip = Culprit(pid=77, name="pip", device="vda", read_share_pct=5.0, read_kb_s=10.0)
    seq = [interval(40.0)] * 4 + [interval(8.0, fio(), kind="saturated")] * 2 + \
        [interval(40.0, pip)] * 4
    phases = feed(seq)
    assert len(phases) == 1 and {s.culprit.name for s in phases[0].culprits} == {"fio", "pip"}
    # two neighbours whose shares cross: the one leading for 3 intervals makes the cause
    a, b = fio(1, 60.0), fio(2, 35.0)
    a2, b2 = fio(1, 35.0), fio(2, 60.0)
    phases = feed([interval(5.0, a, b, kind="saturated")] * 4
                  + [interval(5.0, a2, b2, kind="saturated"), interval(5.0, a, b, kind="saturated")] * 2
                  + [interval(5.0, a2, b2, kind="saturated")] * 3)
    assert [p.cause_culprits for p in phases] == [["pid:1"], ["pid:2"]]


def test_the_ledger_counts_each_phase_and_the_json_reads_back():
    phases = feed([interval(40.0)] * 5 + [interval(6.0, fio(), kind="saturated")] * 6)
    led = Ledger()
    for t in range(11):
        wall = t + 1.0
        led.add(IntervalLoss(wall, 1.0, "disk-starved", cause="disk-starved", lost_gpu_s=0.5,
                             job_gpus=1, episode_id=4, phase=phase_at(phases, wall)))
    assert (led.lost_of_phase(4, 0), led.lost_of_phase(4, 1)) == (3.5, 2.0)
    assert led.lost_of(4) == 5.5
    j = phase_json(phases[1], led.lost_of_phase(4, 1), episode_end_s=12.0)
    assert (j["start_s"], j["end_s"], j["duration_s"], j["mean_util_pct"]) == (7.0, 12.0, 5.0, 6.0)
    assert phases[1].end_wall_s is None     # the last phase ends where its episode does
    assert j["culprits"][0]["seconds"] == 4.0 and j["lost_gpu_s"] == 2.0
    line = phase_line(2, j)
    assert "saturated vda" in line and "pid 912 (fio), 90% of its reads for 4 s" in line
    assert "GPU 6% mean" in line and "lost 0.00 GPU-h" in line
    # as a recording's summary block keeps them (dataclasses.asdict), and back
    from dataclasses import asdict
    back = phases_from([asdict(p) for p in phases] + [{"start_wall_s": "x"}, 7])
    assert [asdict(p) for p in back] == [asdict(p) for p in phases]


def test_the_neighbour_fix_is_the_jobs_pace_without_it():
    workers = WhatIf(fix="workers", speedup=2.3, gpu_util_pct=9.0, gpu_now_pct=4.0,
                     confidence="estimated", basis="b", from_=2, to=6)
    seq = [interval(30.0)] * 6 + [interval(3.0, fio(), kind="saturated", whatif=[workers])] * 4
    phases = feed(seq)
    now = interval(3.0, fio(), kind="saturated", whatif=[workers])
    out = with_before(now, phases)
    assert out is not now and now.whatif == [workers]      # raw is not written into
    best = out.whatif[0]
    assert best.fix == "neighbour" and best.confidence == "measured"
    # its pace in the phase before: its own 6 intervals at 30 % (not the 2 of fio's that
    # came before the hysteresis held, which its mean takes in); now: fio's phase's own
    # mean once it has 3 intervals, this interval's until then
    assert phases[0].mean_util_pct == (6 * 30.0 + 2 * 3.0) / 8
    before = 30.0
    assert best.gpu_util_pct == before and best.gpu_now_pct == 3.0
    assert best.speedup == before / 3.0 and best.pids == [912] and best.who == "pid 912 (fio)"
    assert out.whatif[1] is workers
    # no phase without it (it was there from the start): no measured neighbour fix
    alone = feed([interval(3.0, fio(), kind="saturated")] * 6)
    assert with_before(now, alone) is now
    # the job was no faster without it: nothing to gain
    slow = feed([interval(2.0)] * 6)
    assert with_before(now, slow) is now


def test_the_banner_says_this_intervals_figure_and_the_episodes_own():
    """Issue 38: "GPU 0-3 at 5% for 37 s" paired this interval's figure with the
    episode's length (it had been 41% for 32 of those seconds)."""
    from gpudisk_top.verdict.detect.detector import _compose
    raw = interval(5.0)
    assert _compose(raw, 37.0, 18.0) == "GPU 0 at 5% now, 18% mean for 37 s; at 5.0"
    # a mean within a few points of now is the same figure: said once
    assert _compose(raw, 37.0, 7.0) == "GPU 0 at 5% for 37 s; at 5.0"
    assert _compose(raw, 3.0) == "GPU 0 at 5% for 3 s; at 5.0"


def test_a_cause_that_flips_all_day_keeps_its_phases_bounded():
    from gpudisk_top.verdict.detect.phases import MAX_CULPRIT_SUMS, MAX_PHASES
    seq = []
    for k in range(200):           # a new leading reader every 4 intervals, 800 s
        seq += [interval(5.0, fio(1000 + k), kind="saturated")] * 4
    phases = feed(seq)
    assert len(phases) == MAX_PHASES
    assert all(len(p.culprits) <= MAX_CULPRIT_SUMS for p in phases)
    # every interval is still in a phase, the last one going on to the end
    assert sum(p.intervals for p in phases) == len(seq) and phases[-1].last_wall_s == len(seq)
