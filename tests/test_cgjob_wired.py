"""Each job's cgroup totals wired through the sampler, the model and `--once` (issue 41),
on a real job: a busy loop in a real Slurm-shaped cgroup v2 (tests/cgjobs.py), the
compute process of a stand-in GPU.

  - `--once --json`: the job's `cgroup_totals.cpu_pct` is its process's CPU % in the same
    report (its loader's on-CPU share: schedstat over the interval), and the text says it
    on the line after the job's; io is null (not {}) where the cgroup has no io.stat;
  - a live Sampler at the commands' slow process cadence: the samples that carry the
    last process read still read the cgroup, and its CPU % is the busy loop's own clock
    over that very interval (its schedstat, read by the test);
  - the job moved to another cgroup, its cgroup made again under the same path, the job
    killed and its cgroup removed, all mid-run: n/a for that interval, then figures again
    from the next; never a negative figure, never an exception;
  - a cgroup two jobs share (two process trees in one cgroup, each on its own GPU) is
    neither's: its totals would be both's;
  - the job's Prometheus series of them (exporter/jobseries.py) are its JSON's figures in
    base units, a figure n/a left out, none at the first interval or once the job ended.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

import standin
from cgjobs import CgJob, skip_unless_cgroups, slurm_env, slurm_v2, unique_job_id
from gpudisk_top.collect.roots import Roots, read_text
from gpudisk_top.collect.sampler import Sampler
from gpudisk_top.session.detail import after_step, slow_detail
from gpudisk_top.sim.fake_nvml import FakeNvml
from gpudisk_top.verdict.step import Stepper
from slack import slack

BUSY = [sys.executable, "-c", "while True: pass"]
INTERVAL_S = 0.2
SLOW_S = 1.0

pytestmark = pytest.mark.root(reason="makes cgroups and moves processes into them")


def _job():
    jid = unique_job_id()
    return CgJob(slurm_v2(jid), BUSY, env=slurm_env(jid))


def _cpu_s(pid: int) -> float:
    """The process's time on a CPU (schedstat's first field), seconds."""
    return int(read_text(f"/proc/{pid}/schedstat").split()[0]) / 1e9


def _never_negative(totals) -> None:
    """Every rate of a job's cgroup interval (model/cgjob.py CgJobInterval) is >= 0."""
    if totals is None:
        return
    figures = [totals.cpu_pct, totals.user_pct, totals.system_pct,
               totals.throttled_periods_pct, totals.throttled_ms_s]
    figures += [v for pair in totals.psi_pct.values() for v in pair]
    figures += [v for d in totals.io.values() for v in d]
    assert all(v is None or v >= 0 for v in figures), totals


def test_once_says_the_jobs_cgroup_cpu_as_its_processes():
    skip_unless_cgroups("v2")
    with _job() as job:
        done = standin.run(["--once", "--json", "-i", "2"], processes={0: [job.pid]})
        assert done.returncode == 0, done.stderr
        text = standin.run(["--once", "-i", "1"], processes={0: [job.pid]})
        assert text.returncode == 0, text.stderr
        has_io_stat = os.path.exists(os.path.join(job.dirs[0], "io.stat"))
    once = json.loads(done.stdout)
    jobs = [j for j in once["jobs"] if j["pids"] == [job.pid]]
    assert len(jobs) == 1, once["jobs"]
    totals = jobs[0]["cgroup_totals"]
    assert totals is not None and totals["path"] == job.cgroup
    loaders = once["gpus"][0]["processes"][0]["loaders"]
    own_pct = loaders["on_cpu_pct"]            # the busy loop is its own (only) loader
    assert loaders["count"] == 1 and own_pct > 20
    assert totals["cpu_pct"] == pytest.approx(own_pct, abs=(3 + 0.05 * own_pct) * slack())
    assert totals["user_pct"] + totals["system_pct"] == pytest.approx(totals["cpu_pct"], abs=1)
    assert set(totals["psi_some_pct"]) == {"cpu", "io", "memory"}
    assert totals["interval_s"] == pytest.approx(once["interval_s"], rel=0.2)
    # n/a is null, never an empty "no I/O": this host's v2 tree may have no io.stat
    assert (totals["io"] is None) == (not has_io_stat)
    lines = text.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("job: "))
    cg = lines[at + 1]
    assert cg.startswith("cgroup: cpu ") and cg.split()[2].rstrip(",%").isdigit(), cg
    assert ("read n/a" in cg) == (not has_io_stat), cg


class Run:
    """A live Sampler with the commands' slow process cadence (session/detail.py),
    shortened to SLOW_S, on one stand-in GPU whose compute process is the job's."""

    def __init__(self, pid: int) -> None:
        self.nvml = FakeNvml.with_gpus(1)
        self.sampler = Sampler(Roots(), nvml=self.nvml, interval_s=INTERVAL_S)
        slow_detail(self.sampler, None)
        self.sampler.detail.slow_s = SLOW_S
        self.stepper = Stepper()
        self.pid = pid
        # (model, processes read, the busy loop's CPU s and monotonic s right after)
        self.rows: list[tuple] = []

    def one(self):
        self.nvml.set_state(0, util_pct=95.0, power_mw=500_000, power_limit_mw=700_000,
                            processes=[(self.pid, 2**30)])
        self.nvml.advance_to(time.time())
        before = self.sampler._procio.processes_read
        sample = self.sampler.sample()
        mono = time.monotonic()
        try:
            cpu_s = _cpu_s(self.pid)
        except (OSError, AttributeError):
            cpu_s = None                     # the job was ended
        model, verdict, loss = self.stepper.step(sample)
        self.stepped = (model, verdict, loss)
        after_step(self.sampler, verdict)
        self.rows.append((model, self.sampler._procio.processes_read - before, cpu_s, mono))
        for job in model.jobs:
            _never_negative(job.cgroup_totals)
        time.sleep(INTERVAL_S)
        return self.rows[-1]

    def totals(self, row=None):
        model = (row or self.rows[-1])[0]
        mine = [j for j in model.jobs if self.pid in j.pids]
        assert len(mine) == 1, model.jobs
        return mine[0].cgroup_totals

    def close(self) -> None:
        self.sampler.close()


def test_samples_between_process_reads_read_the_cgroup():
    skip_unless_cgroups("v2")
    with _job() as job:
        run = Run(job.pid)
        try:
            deadline = time.monotonic() + 30 * slack()
            while time.monotonic() < deadline and sum(r[1] == 0 for r in run.rows[2:]) < 3:
                run.one()
        finally:
            run.close()
    carried = [(i, r) for i, r in enumerate(run.rows) if i >= 2 and r[1] == 0]
    assert len(carried) >= 3, [r[1] for r in run.rows]
    for i, row in carried:
        assert row[0].procs_age_s > 0              # a sample that read no process
        totals = run.totals(row)
        assert totals is not None and totals.path == job.cgroup
        before = run.rows[i - 1]
        own_pct = 100 * (row[2] - before[2]) / (row[3] - before[3])
        assert own_pct > 10
        assert totals.cpu_pct == pytest.approx(own_pct, abs=(3 + 0.05 * own_pct) * slack())


def _move(pid: int, cgroup_dir: str) -> None:
    with open(os.path.join(cgroup_dir, "cgroup.procs"), "w") as f:
        f.write(str(pid))


def test_moved_made_again_removed_mid_run_is_na_then_counted_again():
    skip_unless_cgroups("v2")
    with _job() as job:
        home = job.dirs[0]
        other = os.path.join(os.path.dirname(home), "task_9")
        os.mkdir(other)
        run = Run(job.pid)
        try:
            run.one()
            run.one()
            assert run.totals() is not None and run.totals().path == job.cgroup
            # moved to another cgroup between two samples: n/a, then the new one's
            _move(job.pid, other)
            run.one()
            assert run.totals() is None
            run.one()
            assert run.totals() is not None and run.totals().path.endswith("/task_9")
            # back in its cgroup, made again under the same path meanwhile
            _move(job.pid, home)
            run.one()
            run.one()
            assert run.totals() is not None and run.totals().path == job.cgroup
            _move(job.pid, other)
            os.rmdir(home)
            os.mkdir(home)
            _move(job.pid, home)
            run.one()
            assert run.totals() is None              # same path, another cgroup
            run.one()
            assert run.totals() is not None and run.totals().cpu_pct > 0
            # the job killed and its cgroup removed while NVML still lists it
            job.proc.kill()
            job.proc.wait()
            os.rmdir(home)
            run.one()
            run.one()
            assert all(j.cgroup_totals is None for j in run.rows[-1][0].jobs)
        finally:
            run.close()
            if job.proc.poll() is None:
                os.makedirs(home, exist_ok=True)
                _move(job.pid, home)
            os.rmdir(other)
            os.makedirs(home, exist_ok=True)    # the harness removes its own


def test_a_cgroup_two_jobs_share_is_neithers():
    """Two jobs (two process trees, each its own GPU) in one cgroup: its totals are both's,
    so neither job is given them; with one of them alone on the GPUs, that one is."""
    skip_unless_cgroups("v2")
    path = f"gdt-wired-{os.getpid()}.slice/shared/leaf"
    with CgJob(path, BUSY) as a:
        b = subprocess.Popen(BUSY, start_new_session=True)
        try:
            _move(b.pid, a.dirs[0])
            nvml = FakeNvml.with_gpus(2)
            sampler = Sampler(Roots(), nvml=nvml)
            try:
                nvml.set_state(0, util_pct=95.0, processes=[(a.pid, 2**30)])
                nvml.set_state(1, util_pct=95.0, processes=[(b.pid, 2**30)])
                both = sampler.sample()
                nvml.set_state(1, util_pct=0.0, processes=[])
                alone = sampler.sample()
            finally:
                sampler.close()
        finally:
            b.kill()
            b.wait()
    tags = {both.procs[p].job[0] for p in (a.pid, b.pid)}
    assert len(tags) == 2                       # told apart as two jobs
    assert both.cgjobs == {}
    assert [raw.path for raw in alone.cgjobs.values()] == [a.cgroup]


def test_the_jobs_cgroup_is_its_prometheus_series_as_in_its_json():
    """Each job's cgroup interval as its own Prometheus series (exporter/jobseries.py,
    model/cgjob_words.py JOB_CGROUP), through the exporter's rendering and
    prometheus_client's parser: the CPUs used are the busy loop's own CPU over that very
    interval (its schedstat), every figure is its JSON's cgroup_totals in base units, and
    a figure the interval cannot give (throttling without a cpu.max limit, reads without
    io.stat) is left out, never 0; no series at the first interval, and none once the job
    is killed and its cgroup removed."""
    skip_unless_cgroups("v2")
    from test_job_metrics import job_samples, scrape_text
    from gpudisk_top.exporter.server import MetricsServer
    from gpudisk_top.model.cgjob_words import cgroup_totals_json

    server = MetricsServer(None)
    cpu = "gpudisk_top_job_cgroup_cpu_used_cpus"

    def scrape(run):
        model, verdict, loss = run.stepped
        server.update(model, verdict, run.stepper.episodes, loss=loss)
        return scrape_text(server.render_text())

    with _job() as job:
        home = job.dirs[0]
        has_io_stat = os.path.exists(os.path.join(home, "io.stat"))
        run = Run(job.pid)
        got = []      # (the row, the job's cgroup_totals JSON, its id, the scrape)
        try:
            for _ in range(4):
                row = run.one()
                (info,) = [j for j in row[0].jobs if job.pid in j.pids]
                got.append((row, cgroup_totals_json(info.cgroup_totals), info.id, scrape(run)))
            job.proc.kill()
            job.proc.wait()
            os.rmdir(home)
            run.one()
            run.one()
            after = scrape(run)
        finally:
            run.close()
            os.makedirs(home, exist_ok=True)    # the harness removes its own
    assert got[0][1] is None and not job_samples(got[0][3], cpu, got[0][2])
    for (before, _, _, _), (row, js, job_id, s) in zip(got, got[1:]):
        assert js is not None and js["path"] == job.cgroup

        def series(name, label=None):
            found = job_samples(s, f"gpudisk_top_job_cgroup_{name}", job_id)
            return {dict(ls)[label] if label else None: v for ls, v in found.items()}

        (used,) = series("cpu_used_cpus").values()
        own = (row[2] - before[2]) / (row[3] - before[3])
        assert own > 0.1
        assert used == pytest.approx(own, abs=(0.03 + 0.05 * own) * slack())
        assert used == pytest.approx(js["cpu_pct"] / 100, abs=5e-5)   # JSON: 2 places
        for kind in ("some", "full"):
            want = {r: v / 100 for r, v in js[f"psi_{kind}_pct"].items() if v is not None}
            got_psi = series(f"pressure_{kind}_ratio", "resource")
            assert got_psi.keys() == want.keys() and set(want) <= {"cpu", "io", "memory"}
            assert all(got_psi[r] == pytest.approx(v, abs=5e-5) for r, v in want.items())
        throttled = series("throttled_ratio")
        if js["throttled_pct"] is None:
            assert not throttled                    # no cpu.max limit: n/a, not 0
        else:
            assert throttled == {None: pytest.approx(js["throttled_pct"] / 100, abs=5e-5)}
        reads = series("read_bytes_per_second")
        assert bool(reads) == has_io_stat == (js["io"] is not None)
    # ended: no figure of it is true any more
    assert not [k for k in after if k[0].startswith("gpudisk_top_job_cgroup_")]


async def test_the_dashboard_says_the_job_in_views_cgroup_as_once_does():
    """The host line's JOB line (ui/widgets/hostline.py): the job's own cgroup over the
    interval in --once's words (cgroup_line of the very model shown), for the node's one
    named job and for the job `j` follows; its CPU figure is the busy loop's."""
    skip_unless_cgroups("v2")
    from apps import dashboard_app
    from gpudisk_top.collect.gpu import GpuCollector
    from gpudisk_top.model.cgjob_words import cgroup_line
    from gpudisk_top.ui.widgets.hostline import HostLine
    from screen_text import lines_of
    with _job() as job:
        nvml = FakeNvml.with_gpus(1)
        nvml.set_state(0, util_pct=95.0, processes=[(job.pid, 2**30)])
        sampler = Sampler(Roots(), gpu=GpuCollector(nvml=nvml))
        app = dashboard_app(sampler)
        try:
            async with app.run_test(size=(120, 40)) as pilot:

                async def job_line() -> tuple[str, object]:
                    for _ in range(2):
                        app.advance(1)
                        time.sleep(0.3)
                    await pilot.pause()
                    info = next(j for j in app.shown.model.jobs if job.pid in j.pids)
                    rows = [r for r in lines_of(app.query_one(HostLine)) if "JOB" in r]
                    assert len(rows) == 1, lines_of(app.query_one(HostLine))
                    return rows[0], info

                row, info = await job_line()
                assert info.cgroup_totals is not None and info.cgroup_totals.path == job.cgroup
                assert row.strip() == f"JOB 1 {cgroup_line(info.cgroup_totals)}"
                assert info.cgroup_totals.cpu_pct > 10
                await pilot.press("j")
                await pilot.pause()
                assert app.follow.job_id == info.id
                row, info = await job_line()
                assert row.strip() == f"JOB 1 {cgroup_line(info.cgroup_totals)}"
        finally:
            sampler.close()
