"""bench/make_day.py's live cadence (issue 41): a simulated day's processes taken as
`record` takes them on a live node (collect/detail.py's rule), so that a day's size is
what `record` writes; the simulator's own samples left as it made them."""

from __future__ import annotations

import sys
from pathlib import Path

from gpudisk_top.collect.detail import DETAIL_SLOW_S
from gpudisk_top.sim import Simulator, builtin

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import make_day  # noqa: E402


def test_the_live_cadence_carries_the_processes_between_reads_as_the_sampler_does():
    sim = Simulator(builtin("demo"), seed=0)
    made = []
    real = sim.sample

    def kept():
        s = real()
        made.append((s, s.procs, s.procs_age_s))
        return s
    sim.sample = kept
    live = make_day.LiveCadence(sim)
    out = [live.sample() for _ in range(40)]
    # the simulator's samples as it made them: new Samples were made, none written into
    assert all(s.procs is procs and s.procs_age_s == age is None for s, procs, age in made)
    ages = [s.procs_age_s for s in out]
    assert live.carried == sum(1 for a in ages if a) > 10, ages
    last_read = None
    for s, (raw, _, _) in zip(out, made):
        if s.procs_age_s:                      # carried: the last read's dict, its age
            assert s.procs is last_read.procs
            assert s.procs_age_s == s.mono_s - last_read.mono_s <= DETAIL_SLOW_S
        else:                                  # read: this sample's own processes
            assert s.procs is raw.procs
            last_read = s
    # the healthy demo reads them at the slow cadence (0.0) once its first reads are made
    assert ages[:2] == [None, None] and 0.0 in ages
