"""Predictions that know what they lack (issue 38 item 3): without a probe the device the
loaders wait on is capped at what it was seen doing (its most reads and kB a second in the
run; past that its latency grows with the queue, Little against that rate), every surface
says so beside the gain ("no probe of vda: gpudisk-top probe /data"), and the CPUs other
processes take, niced ones too, cap the workers fix.  Flat latency predicted num_workers
2 -> 6 x2.32 where x1.37 was measured; a quiet --once interval beside another user's load,
workers 6 x2.58 where x0.98 was measured."""

from __future__ import annotations

import pytest

from gpudisk_top.verdict.whatif import (ESTIMATED, Pipeline, WhatIf, best_line, predict,
                                        text_lines)
from gpudisk_top.verdict.whatif.device import Device
from whatif_inputs import latency_bound


def unprobed(seen_r_s: float = 0.0, **kw) -> Pipeline:
    """Two latency-bound workers of 4 KiB reads, no probe; the device seen reading
    `seen_r_s` a second at most (0: only what it reads now)."""
    p = latency_bound(2, qd1_iops=None, qd32_iops=None, read_kb=4.0, **kw)
    p.device_read_kb_s = p.device_r_s * 4.0
    p.seen_r_s, p.seen_kb_s = seen_r_s, seen_r_s * 4.0
    p.probe_target = "/data"
    return p


def by_fix(p: Pipeline) -> dict[str, WhatIf]:
    return {w.fix: w for w in predict(p, "disk-starved", "latency-bound")}


def test_a_device_seen_only_at_what_it_reads_now_promises_no_more_reads():
    # flat latency gave this job num_workers 2 -> 5 at x2.18: nothing says the device can
    # serve more reads than it does, so no fix that needs them is offered
    assert "workers" not in by_fix(unprobed())


def test_a_device_seen_faster_gains_up_to_that_rate_and_says_how_to_measure_it():
    p = unprobed()
    now = p.device_r_s
    p.seen_r_s, p.seen_kb_s = 1.6 * now, 1.6 * now * 4.0
    w = by_fix(p)["workers"]
    # its loaders sleep 30 % of the time: by the model the job could go 1.4x as it is, so
    # what more readers gain over that is at most the rest of the 1.6x the device has shown
    assert 1.1 < w.speedup <= 1.6 + 1e-6 and w.confidence == ESTIMATED
    # however many workers: never past the rate the device was seen at
    assert all(speed <= 1.6 + 1e-3 for speed, _ in predict_all_workers(p))
    assert (f"no probe of vda: capped at the {1.6 * now:,.0f} r/s it was seen doing; "
            "`gpudisk-top probe /data` measures it") in w.basis
    # the short form beside the gain, on every surface (one owner: WhatIf.line)
    hint = "no probe of vda: gpudisk-top probe /data"
    assert w.unprobed == hint and w.as_json()["unprobed"] == hint
    assert f"(×{w.speedup:.2f}, estimated; {hint})" in best_line([w])
    assert f"estimated; {hint})" in text_lines([w])[0]
    assert WhatIf.from_json(w.as_json()).unprobed == hint      # a report's, from JSON


def predict_all_workers(p: Pipeline):
    """(speed-up, binding limit) of num_workers 2 -> 3..10 by the solver itself."""
    from gpudisk_top.verdict.whatif.solver import Change, Solver
    solver = Solver(p)
    out = []
    for n in range(3, 11):
        speed, cap = solver.solve(Change(n))
        out.append((speed, cap.limit if cap else None))
    return out


def test_the_latency_grows_with_the_queue_past_the_rate_seen():
    p = unprobed(seen_r_s=0.0)
    d = Device(p)
    least = p.device_aqu / p.device_r_s
    assert d.lat_q_s(0.5) == pytest.approx(least)
    # Little: past the seen rate a deeper queue waits in proportion
    assert d.lat_q_s(64) == pytest.approx(64 / p.device_r_s)
    assert d.rho(1.0, 2) == pytest.approx(1.0)
    # 8 readers at the rate it serves now (and was seen at): each waits 4 times as long
    assert d.rho(1.0, 8) == pytest.approx(4.0)


def test_a_probed_device_keeps_the_probes_curve_and_no_hint():
    w = {x.fix: x for x in predict(latency_bound(2), "disk-starved", "latency-bound")}["workers"]
    assert w.unprobed is None and "unprobed" not in w.as_json() and "no probe" not in w.line()


def _cpu_free(**kw) -> Pipeline:
    # one decoding worker at 100 % of a CPU on a 2-CPU host (the harness's cpu-free)
    return Pipeline(0.3, loaders=1, c=1.0, w=0.0, trainer_c=0.05, trainer_w=0.0, cpus=2.0,
                    job_cpu=1.05, **kw)


def test_cpus_others_take_cap_the_workers_fix_niced_ones_too():
    free = {w.fix: w for w in predict(_cpu_free(), "cpu-starved", "own")}
    assert free["workers"].speedup == pytest.approx(2.0 / 1.05, rel=0.02)
    # another user's busy loop took 0.9 of the free CPU this interval: nothing left
    busy = {w.fix: w for w in predict(_cpu_free(others_cpu=0.9), "cpu-starved", "own")}
    assert "workers" not in busy
    # the same at nice 19 in a session of its own: the scheduler shares the CPUs among
    # sessions before nice counts, so it takes them as much
    niced = {w.fix: w for w in predict(_cpu_free(niced_cpu=0.9), "cpu-starved", "own")}
    assert "workers" not in niced
