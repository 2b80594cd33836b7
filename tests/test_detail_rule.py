"""The slow cadence of per-process reads and the one rule for the rates between reads
(issue 41: collect/detail.py, verdict/detail.py, model/detail.py), on real processes.

A job of real processes (a shell, sleepers, one busy loop) is the compute process of one
stand-in GPU; a live Sampler with the commands' cadence (session/detail.py), its slow
cadence shortened to SLOW_S so that a test takes seconds, samples it every INTERVAL_S:

  - the samples between reads read no process and carry every row of the last read, with
    its rates and its age: none vanishes, none is zero for want of a read;
  - a read after a slow stretch has rates over the span since the read before: the busy
    loop's %CPU is exactly its clock ticks over that span;
  - the sample in which the job's GPU falls under the detector's busy threshold reads the
    processes itself (the cheap figure is read first in the same sample);
  - an interval as long as the cadence reads every sample; no read before (a gap, a
    session's start): n/a, never zero;
  - the samples through a recording's codec give back each one's age and the same rates.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from gpudisk_top.collect.detail import CADENCE
from gpudisk_top.collect.roots import Roots
from gpudisk_top.collect.sampler import Sampler
from gpudisk_top.model.snapshot import Model
from gpudisk_top.record.v2 import canonical
from gpudisk_top.session.detail import after_step, slow_detail
from gpudisk_top.sim.fake_nvml import FakeNvml
from gpudisk_top.verdict.step import Stepper
from slack import slack

INTERVAL_S = 0.2
SLOW_S = 1.0
CLK_TCK = os.sysconf("SC_CLK_TCK")


@pytest.fixture
def job():
    """A job: a shell with 3 sleepers and one busy loop under it."""
    p = subprocess.Popen(["sh", "-c", "sleep 600 & sleep 600 & sleep 600 & "
                          f"{sys.executable} -c 'while True: pass' & wait"],
                         start_new_session=True)
    time.sleep(0.5)
    yield p
    os.killpg(p.pid, 9)
    p.wait()


class Run:
    """The sampler, its stand-in GPU and a Stepper, as `serve` runs them."""

    def __init__(self, job_pid: int, interval_s: float = INTERVAL_S, thresholds=None) -> None:
        self.nvml = FakeNvml.with_gpus(1)
        self.sampler = Sampler(Roots(), nvml=self.nvml, interval_s=interval_s)
        slow_detail(self.sampler, thresholds)
        self.sampler.detail.slow_s = SLOW_S
        self.stepper = Stepper(thresholds)
        self.job_pid = job_pid
        self.interval_s = interval_s
        self.rows = []     # (sample, model, processes read, why)

    def one(self, util_pct: float = 95.0):
        self.nvml.set_state(0, util_pct=util_pct, power_mw=500_000, power_limit_mw=700_000,
                            processes=[(self.job_pid, 2**30)])
        self.nvml.advance_to(time.time())
        before = self.sampler._procio.processes_read
        sample = self.sampler.sample()
        read = self.sampler._procio.processes_read - before
        model, verdict, _ = self.stepper.step(sample)
        after_step(self.sampler, verdict)
        self.rows.append((sample, model, read, self.sampler.detail.reason))
        time.sleep(self.interval_s)
        return self.rows[-1]

    def until_carrying(self, carried: int = 1) -> None:
        """Sample until the last `carried` samples read no process: this machine's disk,
        busy with other work, asks for them every second while it is (the job's
        processes map their binaries from it), so this waits for a quiet spell."""
        deadline = time.monotonic() + 30 * slack()
        while time.monotonic() < deadline:
            self.one()
            if len(self.rows) > 2 and all(r[3] is None for r in self.rows[-carried:]):
                return
        pytest.fail(f"never carried: {[(r[2], r[3]) for r in self.rows]}")

    def close(self):
        self.sampler.close()


def _busy(model: Model, job_pid: int):
    """The busy loop's row: the job's member with the most CPU."""
    members = [v for v in model.procs.values() if v.root_pid == job_pid and v.cpu_pct]
    return max(members, key=lambda v: v.cpu_pct, default=None)


def test_between_reads_every_row_is_carried_and_a_read_covers_the_span(job):
    run = Run(job.pid)
    try:
        run.until_carrying()
        deadline = time.monotonic() + 30 * slack()
        while time.monotonic() < deadline and not (
                run.rows[-1][3] == CADENCE and run.rows[-2][3] is None):
            run.one()
        for _ in range(3):
            run.one()
    finally:
        run.close()
    rows = run.rows[2:]             # past the session's two first reads
    carried = [r for r in rows if r[3] is None]
    reads = [r for r in rows if r[3] is not None]
    assert carried and reads, [(r[2], r[3]) for r in run.rows]
    for sample, model, read, _why in carried:
        assert read == 0
        before = next(r for r in reversed(run.rows) if r[0].mono_s < sample.mono_s and r[3])
        assert sample.procs is before[0].procs           # the last read, unchanged
        assert sample.procs_age_s == pytest.approx(sample.mono_s - before[0].mono_s)
        assert model.procs_age_s == sample.procs_age_s and model.detail_s is not None
        # every row of that read, with that read's rates
        assert model.procs.keys() == before[1].procs.keys()
        for pid, v in model.procs.items():
            assert v.cpu_pct == before[1].procs[pid].cpu_pct
        assert model.procs_span_s == before[1].procs_span_s
    for sample, model, read, why in reads:
        assert read > 0 and model.procs_age_s == 0.0
    # a read at the cadence: its rates over the span since the read before, exactly
    sample, model, _, _ = next(r for r in reversed(reads) if r[3] == CADENCE)
    i = run.rows.index(next(r for r in run.rows if r[0] is sample))
    base = next(r for r in reversed(run.rows[:i]) if r[3] is not None)
    span_s = sample.mono_s - base[0].mono_s
    assert model.procs_span_s == pytest.approx(span_s) and span_s >= SLOW_S - INTERVAL_S
    busy = _busy(model, job.pid)
    assert busy is not None and busy.cpu_pct > 0
    ticks = sample.procs[busy.pid].cpu_ticks - base[0].procs[busy.pid].cpu_ticks
    assert busy.cpu_pct == pytest.approx(ticks / CLK_TCK / span_s * 100)
    # through a recording's codec: each sample's age, and the same rates from it
    back = canonical([r[0] for r in run.rows])
    last = None
    for r, s in zip(run.rows, back):
        assert s.procs_age_s == (None if r[0].procs_age_s is None
                                 else pytest.approx(r[0].procs_age_s, abs=1e-3))
        m = Model.new(s, last)
        assert m.procs.keys() == r[1].procs.keys()
        for pid, v in m.procs.items():
            want = r[1].procs[pid].cpu_pct
            assert (v.cpu_pct is None) == (want is None)
            if want is not None:
                assert v.cpu_pct == pytest.approx(want, rel=5e-3, abs=1e-3)
        last = s


def test_the_sample_the_gpu_falls_in_reads_the_processes(job):
    run = Run(job.pid)
    try:
        run.until_carrying()
        sample, model, read, why = run.one(util_pct=20.0)
        assert why == "GPU 0 at 20%" and read > 0
        assert sample.procs_age_s is None and model.procs_age_s == 0.0
        assert model.detail_s is None       # the full cadence: the header says nothing
        # rates over the span since the last read: never zero for want of one
        assert model.procs_span_s > model.interval_s
        busy = _busy(model, job.pid)
        assert busy is not None and busy.cpu_pct > 0
        # the verdict starved: the next samples read too, asked by it
        run.one(util_pct=20.0)
        run.one(util_pct=20.0)
        assert all(r[2] > 0 and r[3] is not None for r in run.rows[-3:])
        assert run.rows[-1][1].procs_span_s == pytest.approx(run.rows[-1][1].interval_s)
    finally:
        run.close()


def test_an_interval_as_long_as_the_cadence_reads_every_sample(job):
    run = Run(job.pid, interval_s=SLOW_S)
    try:
        for _ in range(4):
            run.one()
    finally:
        run.close()
    assert all(r[2] > 0 and r[0].procs_age_s is None for r in run.rows)
    assert all(r[1].detail_s is None for r in run.rows)


def test_no_read_before_is_na_never_zero(job):
    run = Run(job.pid)
    try:
        run.until_carrying(2)
    finally:
        run.close()
    sample = run.rows[-1][0]
    assert sample.procs_age_s > 0
    # a gap (or a seek) into the slow stretch: no read to take the rates against
    first = Model.new(sample, None)
    assert first.procs.keys() == run.rows[-1][1].procs.keys()
    assert all(v.cpu_pct is None for v in first.procs.values())
    # and a carried sample after a sample that has no link: n/a, not zero
    bare = replace(run.rows[-2][0], procs_base=None)
    again = Model.new(unlinked := replace(sample, procs_base=None), bare)
    assert unlinked.procs_base is None
    assert all(v.cpu_pct is None for v in again.procs.values())


def test_the_bound_is_the_detectors_threshold(job):
    """A job's GPU at 50 % is starved for the default threshold (70 %) and not for a
    [detector] gpu_low_util_pct of 30: the cadence follows the thresholds it is given."""
    from gpudisk_top.verdict.detect import Thresholds
    run = Run(job.pid, thresholds=Thresholds(gpu_low_util_pct=30.0))
    try:
        run.until_carrying()
        _, _, read, why = run.one(util_pct=50.0)
        # (a read asked by this machine's busy disk is not the GPU's)
        assert why is None or not why.startswith("GPU"), why
        run.until_carrying()
        _, _, read, why = run.one(util_pct=20.0)
        assert read > 0 and why == "GPU 0 at 20%"
    finally:
        run.close()


async def test_the_dashboard_header_says_the_cadence_while_it_is_slow(job):
    """The dashboard's own Feed gives the live sampler its cadence: while every job is
    healthy its header says `procs every 5s`; the sample the job's GPU falls in reads the
    processes, and the header says nothing of it (they are the interval's own)."""
    from apps import dashboard_app
    from screen_text import lines_of
    from gpudisk_top.collect.source import LIVE, Source
    from gpudisk_top.ui.widgets.header import HeaderBar

    nvml = FakeNvml.with_gpus(1)

    def gpu(util_pct: float) -> None:
        nvml.set_state(0, util_pct=util_pct, power_mw=500_000, power_limit_mw=700_000,
                       processes=[(job.pid, 2**30)])
        nvml.advance_to(time.time())

    sampler = Sampler(Roots(), nvml=nvml)
    app = dashboard_app(sampler, origin=Source(LIVE, "test", LIVE, kernel="test"))
    async with app.run_test(size=(160, 40)) as pilot:
        assert sampler.detail is not None          # the Feed's (session/detail.py)
        deadline = time.monotonic() + 30 * slack()
        while True:                                # until a sample carries the processes
            gpu(95.0)
            app.advance()
            await pilot.pause(0.3)
            if app.latest.model.procs_age_s > 0:
                break
            assert time.monotonic() < deadline, sampler.detail.reason
        await pilot.pause(0.2)
        assert "procs every 5s" in lines_of(app.query_one(HeaderBar))[0]
        gpu(20.0)
        app.advance()
        await pilot.pause(0.3)
        assert sampler.detail.reason == "GPU 0 at 20%"
        assert "procs every" not in lines_of(app.query_one(HeaderBar))[0]
