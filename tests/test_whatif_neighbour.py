"""The `neighbour` fix (gpudisk_top/verdict/whatif/fixes.py): what a job gains when the
verdict's culprits, others reading the device it waits on, stop their reads.  On the
figures an interval gives the model: their part of the device's queue goes, the latency
after is the probe's curve at the queue left, their CPU is freed; it names them as the
verdict does, says `estimated` where their CPU was not read, and is not offered without
a probe or without culprits.  Proven against the neighbour stopped for real in
tests/test_whatif_counterfactual.py."""

from __future__ import annotations

import dataclasses

import pytest

from gpudisk_top.verdict.whatif import (ESTIMATED, MEASURED, WhatIf, lat_ms, of_json,
                                        predict, text_lines)
from whatif_inputs import latency_bound


def beside(neighbour_q: float, workers: int = 4, **kw):
    """Latency-bound loaders beside a neighbour holding `neighbour_q` reads in the device's
    queue, all of the others' kB a second (its CPU read: 0.2 CPUs)."""
    p = latency_bound(workers, **kw)
    p.device_aqu += neighbour_q
    own_kb_s = p.reads_s * 4
    p.job_read_kb_s, p.neighbour_kb_s = own_kb_s, 3 * own_kb_s
    p.device_read_kb_s = own_kb_s + p.neighbour_kb_s
    p.neighbour_who, p.neighbour_pids, p.neighbour_share_pct = "pid 912 (fio)", [912], 75.0
    p.neighbour_cpu, p.others_cpu = 0.2, 0.2
    return p


def neighbour(p) -> WhatIf | None:
    return next((w for w in predict(p, "disk-starved", "saturated") if w.fix == "neighbour"),
                None)


def test_its_gain_grows_with_the_neighbours_queue_up_to_reads_at_qd1():
    gains = [neighbour(beside(q)).speedup for q in (2, 8, 24)]
    assert 1.02 < gains[0] < gains[1] < gains[2]
    # never more than the loaders' reads at the probe's QD1 latency and no wait for a CPU:
    # the latency now is the curve's at the queue (Little: the others' and the loaders'
    # reads a second x the latency), lat = (A + S q_others) / (1 - S reads_s)
    p = beside(24)
    s_ms = lat_ms(p, 2) - lat_ms(p, 1)
    now_ms = (lat_ms(p, 1) - s_ms + s_ms * 24) / (1 - s_ms / 1000 * p.reads_s)
    bound = (p.c + p.w + p.b) / (p.c + p.b * lat_ms(p, 1) / now_ms)
    assert gains[2] < bound


def test_it_names_the_neighbour_and_says_its_figures():
    w = neighbour(beside(8))
    assert w.title() == "stop or throttle pid 912 (fio)'s reads"
    assert w.line().startswith("stop or throttle pid 912 (fio)'s reads: GPU ~30% → ~")
    assert w.pids == [912] and w.confidence == MEASURED
    assert "pid 912 (fio) 75% of vda's reads" in w.basis
    assert "the others' queue 8.0 → 0.0" in w.basis and "the probe's curve" in w.basis
    assert "0.2 CPUs they take" in w.basis
    job = beside(8)
    job.neighbour_who = "job slurm 1001 (train.py)"
    assert neighbour(job).title() == "stop or throttle job slurm 1001 (train.py)'s reads"


def test_only_its_share_of_the_others_queue_goes():
    """A neighbour with a third of the others' kB a second takes a third of their queue."""
    whole, third = beside(12), beside(12)
    third.device_read_kb_s = third.job_read_kb_s + 3 * third.neighbour_kb_s
    assert "the others' queue 12.0 → 8.0" in neighbour(third).basis
    assert 1.0 < neighbour(third).speedup < neighbour(whole).speedup


def test_its_cpu_not_read_makes_it_estimated_and_the_named_others_are_not_its():
    p = beside(8)
    p.neighbour_cpu, p.others_cpu = None, 1.2
    p.others = [(40, "stress", 0.9)]
    w = neighbour(p)
    assert w.confidence == ESTIMATED and "their CPU (not read yet" in w.basis
    assert "0.3 CPUs they take" in w.basis           # 1.2 less stress's 0.9


def test_not_offered_without_a_probe_culprits_or_reads():
    assert neighbour(beside(8)) is not None
    assert neighbour(beside(8, qd1_iops=None, qd32_iops=None)) is None
    nobody = beside(8)
    nobody.neighbour_who, nobody.neighbour_kb_s = None, 0.0
    assert neighbour(nobody) is None
    # loaders hardly blocked on reads: the device is not what they wait on
    assert neighbour(beside(8, b=0.02)) is None


def test_who_and_pids_go_through_the_json_and_a_recording():
    w = neighbour(beside(8))
    doc = w.as_json()
    assert doc["who"] == "pid 912 (fio)" and doc["pids"] == [912] and doc["fix"] == "neighbour"
    back = of_json([doc])[0]
    assert back.title() == w.title() and back.pids == [912]
    again = WhatIf(**dataclasses.asdict(w))           # a recording's episodes
    assert again.line() == w.line()
    assert text_lines([w])[0].startswith("what-if: stop or throttle pid 912 (fio)'s reads")
    # a who that is not text is dropped, never printed as something else
    assert WhatIf.from_json({**doc, "who": {"x": 1}}).who is None


@pytest.mark.parametrize("q", [0.0, 0.3])
def test_a_neighbour_with_no_queue_or_cpu_to_take_gains_nothing_worth_offering(q):
    p = beside(q)
    p.neighbour_cpu = p.others_cpu = 0.0
    w = neighbour(p)
    assert w is None or w.speedup < 1.05
