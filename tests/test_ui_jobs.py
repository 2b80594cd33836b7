"""The dashboard on a shared node (issue 37): each job's row with its verdict and its GPUs,
the GPU cells grouped by job, `j`/`J`/escape following one job (banner, evidence, what-if,
timeline, episodes), the node's worst job in the banner, eight jobs at 80x24, hostile job
names, and replay showing the same.

The jobs are real processes on this machine, made GPU processes by the NVML fake (the
collector tells them apart as it tells any process tree, collect/jobid.py); each GPU's
utilization is the fake's, so one job is starved (an undiagnosed stall: nothing it waits
on is saturated) while the others are busy."""

from __future__ import annotations

import contextlib
import dataclasses
import subprocess
import sys
import time

from gpudisk_top.collect.gpu import GpuCollector
from gpudisk_top.collect.roots import Roots
from gpudisk_top.collect.sampler import Sampler
from gpudisk_top.model.jobs import JobInfo
from gpudisk_top.sim.fake_nvml import FakeGpu, FakeNvml
from gpudisk_top.ui.screens.episodes import EpisodesScreen
from gpudisk_top.ui.screens.help import HelpScreen
from gpudisk_top.ui.widgets.gpus import GpuPanel
from gpudisk_top.ui.widgets.header import HeaderBar
from gpudisk_top.ui.widgets.timeline import Timeline
from gpudisk_top.ui.widgets.verdict import VerdictBanner
from gpudisk_top.verdict.detect import STATE_WORD
from apps import ORIGIN, dashboard_app, replay_screen_app
from recording_helpers import write_recording
from screen_text import lines_of, screen_lines, screen_text, text_of

BUSY_PCT, STARVED_PCT = 95.0, 10.0
SAMPLES = 6


@contextlib.contextmanager
def shared_node(gpus_of_job: list[list[int]], starved: set[int], argv_of=None):
    """A node of 8 stand-in GPUs whose compute processes are one real process per job
    (job k computes on gpus_of_job[k]); the GPUs of the jobs in `starved` at STARVED_PCT,
    the others at BUSY_PCT.  Yields (sampler, pids, the fake); the processes are killed
    after.
    argv_of(k): job k's command line (default: sleep)."""
    argv_of = argv_of or (lambda k: ["sleep", "300"])
    procs = [subprocess.Popen(argv_of(k)) for k in range(len(gpus_of_job))]
    sampler = None
    try:
        nvml = FakeNvml(gpus=[FakeGpu() for _ in range(8)])
        for k, gpus in enumerate(gpus_of_job):
            for i in gpus:
                nvml.set_state(i, util_pct=STARVED_PCT if k in starved else BUSY_PCT,
                               processes=[(procs[k].pid, 2 * 2**30)], mem_used_bytes=2 * 2**30)
        sampler = Sampler(Roots(), gpu=GpuCollector(nvml=nvml))
        yield sampler, [p.pid for p in procs], nvml
    finally:
        if sampler is not None:
            sampler.close()
        for p in procs:
            p.kill()
            p.wait()


def take(app, n: int = SAMPLES) -> None:
    """n samples of the real node, a little apart (each an interval with rates)."""
    for _ in range(n):
        app.advance(1)
        time.sleep(0.1)


def job_of(app, pid: int):
    """(number from 1, JobInfo) of the job whose GPU process is `pid`."""
    jobs = app.shown.model.jobs
    return next((n, j) for n, j in enumerate(jobs, 1) if pid in j.pids)


def states(app) -> dict:
    return {v.job.id: v.state for v in app.shown.verdict.jobs}


def assert_fits(app, width: int, height: int) -> list[str]:
    lines = screen_lines(app)
    assert len(lines) == height and all(len(line) <= width for line in lines), lines
    assert lines[-1].lstrip().startswith("q Quit"), lines[-1]   # the footer, not clipped
    assert not any(ch in line for line in lines for ch in "\x1b\x07\n\r\x9b"), lines
    return lines


async def test_each_job_has_its_row_with_its_state_and_gpus_and_its_gpus_under_it():
    with shared_node([[0, 1, 2, 3], [4, 5, 6, 7]], starved={1}) as (sampler, pids, nvml):
        app = dashboard_app(sampler)
        async with app.run_test(size=(120, 40)) as pilot:
            take(app)
            await pilot.pause()
            (na, a), (nb, b) = job_of(app, pids[0]), job_of(app, pids[1])
            assert (a.gpus, b.gpus) == ((0, 1, 2, 3), (4, 5, 6, 7)) and a.id != b.id
            assert states(app) == {a.id: "healthy", b.id: "undiagnosed-stall"}
            rows = lines_of(app.query_one(GpuPanel))
            assert rows[0].startswith(">GPUs (8) · 2 jobs") and "j: follow a job" in rows[0]
            row_a = next(i for i, r in enumerate(rows) if a.name in r)
            row_b = next(i for i, r in enumerate(rows) if b.name in r)
            # each job's row: its number, its state's mark, its name, its GPUs, their mean
            assert f"{na} {STATE_WORD['healthy']}" in rows[row_a] and "GPU 0-3" in rows[row_a]
            assert rows[row_a].rstrip().endswith("95%")
            assert (f"{nb} {STATE_WORD['undiagnosed-stall']}" in rows[row_b]
                    and "GPU 4-7" in rows[row_b] and rows[row_b].rstrip().endswith("10%"))
            # the GPUs' cells grouped under their job's row
            under_a = " ".join(rows[row_a + 1:row_b])
            under_b = " ".join(rows[row_b + 1:])
            assert all(f" {i} " in under_a for i in range(4)), rows
            assert all(f" {i} " in under_b for i in range(4, 8)), rows
            assert " 5 " not in under_a and " 1 " not in under_b
            # the node's worst job in the banner: the starved one, named
            banner = text_of(app.query_one(VerdictBanner))
            assert "UNDIAGNOSED STALL" in banner and f"job {nb}/2 {b.name}:" in banner
            assert "GPU 4-7" in banner
            assert_fits(app, 120, 40)


async def test_j_follows_one_job_and_escape_goes_back_to_the_node():
    with shared_node([[0, 1, 2, 3], [4, 5, 6, 7]], starved={1}) as (sampler, pids, nvml):
        app = dashboard_app(sampler)
        async with app.run_test(size=(120, 40)) as pilot:
            take(app)
            await pilot.pause()
            (na, a), (nb, b) = job_of(app, pids[0]), job_of(app, pids[1])
            banner, header = app.query_one(VerdictBanner), app.query_one(HeaderBar)
            timeline, panel = app.query_one(Timeline), app.query_one(GpuPanel)
            assert "JOB" not in text_of(header)

            async def follow_to(job):
                for _ in range(4):
                    if app.follow.job_id == job.id:
                        return
                    await pilot.press("j")
                    await pilot.pause()
                raise AssertionError(f"j never reached {job.id}")

            # the healthy job: its own verdict, though the node's is the starved job's
            await follow_to(a)
            assert f"JOB: {na}/2 {a.name}" in text_of(header)
            said = text_of(banner)
            assert "HEALTHY" in said and "UNDIAGNOSED" not in said, said
            assert f"job {na}/2 {a.name}: its GPUs are busy (mean 95%)" in said
            rows = lines_of(timeline)
            assert rows[0].startswith(f" Timeline of job {na}")
            labels = [r.split()[0] for r in rows[2:-1]]
            assert [x for x in labels if x.startswith("GPU")] == ["GPU0", "GPU1", "GPU2", "GPU3"]
            assert "?" not in rows[1].split(None, 1)[1]          # its states: never starved
            assert next(r for r in lines_of(panel) if a.name in r).startswith("▶")
            # the starved job: its verdict, evidence and what-if; its timeline
            await follow_to(b)
            said = text_of(banner)
            assert "UNDIAGNOSED STALL" in said and f"job {nb}/2 {b.name}:" in said
            assert "GPU 4-7 at 10%" in said and "advice:" in said
            rows = lines_of(timeline)
            labels = [r.split()[0] for r in rows[2:-1]]
            assert [x for x in labels if x.startswith("GPU")] == ["GPU4", "GPU5", "GPU6", "GPU7"]
            assert rows[1].rstrip().endswith("?")
            # e: that job's episodes only, with its own ledger
            await pilot.press("e")
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, EpisodesScreen) and screen.episodes
            assert all(ep.job_id == b.id for ep in screen.episodes)
            assert f"[{b.id}]: its episodes only" in screen.note
            await pilot.press("escape")               # closes the list, not the job
            await pilot.pause()
            assert app.follow.job_id == b.id
            assert_fits(app, 120, 40)
            # escape: the node again, its worst job in the banner
            await pilot.press("escape")
            await pilot.pause()
            assert app.follow.job_id is None and "JOB" not in text_of(header)
            assert lines_of(timeline)[0].startswith(" Timeline ") and "of job" not in lines_of(timeline)[0]
            assert f"job {nb}/2 {b.name}:" in text_of(banner)
            # J goes the other way; after the last job, the node
            await pilot.press("J")
            await pilot.pause()
            assert app.follow.job_id == app.shown.model.jobs[-1].id
            await pilot.press("j")
            await pilot.pause()
            assert app.follow.job_id is None


async def test_a_followed_job_that_ends_gives_the_node_back():
    with shared_node([[0, 1], [2, 3]], starved={1}) as (sampler, pids, nvml):
        app = dashboard_app(sampler)
        async with app.run_test(size=(120, 40)) as pilot:
            take(app, 3)
            await pilot.press("j")
            await pilot.pause()
            followed = app.follow.job_id
            assert followed is not None
            gone = next(pid for pid in pids if pid in job_of(app, pid)[1].pids
                        and job_of(app, pid)[1].id == followed)
            # the job's process ends: NVML's list no longer has it, its memory is free
            gpus = job_of(app, gone)[1].gpus
            subprocess.run(["kill", str(gone)], check=True)
            for i in gpus:
                nvml.set_state(i, processes=[], mem_used_bytes=0, util_pct=0.0)
            take(app, 2)
            await pilot.pause()
            assert app.follow.job_id is None
            assert followed not in {j.id for j in app.shown.model.jobs}
            assert "JOB" not in text_of(app.query_one(HeaderBar))


async def test_eight_single_gpu_jobs_fit_80x24_with_the_worst_in_the_banner():
    with shared_node([[i] for i in range(8)], starved={3}) as (sampler, pids, nvml):
        app = dashboard_app(sampler)
        async with app.run_test(size=(80, 24)) as pilot:
            take(app)
            await pilot.pause()
            jobs = app.shown.model.jobs
            assert len(jobs) == 8 and all(len(j.gpus) == 1 for j in jobs)
            worst_n, worst = job_of(app, pids[3])
            panel = app.query_one(GpuPanel)
            assert panel.hidden_below() == 0               # no row lost
            lines = assert_fits(app, 80, 24)
            text = "\n".join(lines)
            for n, job in enumerate(jobs, 1):              # every job, its mark and GPU
                state = states(app)[job.id]
                mark = STATE_WORD[state][0]
                assert f"{n} {mark}" in text and job.name in text, (job, text)
                assert f"GPU {job.gpus[0]} " in text
            banner = text_of(app.query_one(VerdictBanner))
            assert banner.lstrip().startswith("▲ UNDIAGNOSED STALL")
            assert f"job {worst_n}/8 {worst.name}:" in banner
            # following the starved job still fits, its row marked
            while app.follow.job_id != worst.id:
                await pilot.press("j")
                await pilot.pause()
            lines = assert_fits(app, 80, 24)
            assert any(f"▶{worst_n:>2} " in line for line in lines), lines
            assert panel.hidden_below() == 0
            assert f"JOB: {worst_n}/8" in lines[0]
            assert lines_of(app.query_one(Timeline))[0].startswith(f" Timeline of job {worst_n}")


HOSTILE = "\x1b[2J\x1b]0;owned\x07\u202e" + "A" * 10_000 + ".py"


async def test_hostile_job_names_never_break_a_row():
    """A name a process gave itself (escape sequences, a title change, a bidi override,
    10 KB), as the collector reads it, and one of 10 KB with newlines as a recording could
    hold: escaped and cut in every row; the other jobs' rows as they were."""
    python = [sys.executable, "-c", "import time; time.sleep(300)"]
    argv_of = lambda k: python + [HOSTILE] if k == 0 else ["sleep", "300"]  # noqa: E731
    with shared_node([[0, 1], [2, 3], [4, 5]], starved={0}, argv_of=argv_of) as (sampler, pids, nvml):
        app = dashboard_app(sampler)
        async with app.run_test(size=(80, 24)) as pilot:
            take(app)
            await pilot.pause()
            n0, hostile = job_of(app, pids[0])
            assert "\x1b" in hostile.name                   # the collector's name, raw
            await pilot.press("j")                          # the header's flag names it too
            await pilot.pause()
            while app.follow.job_id != hostile.id:
                await pilot.press("j")
                await pilot.pause()
            lines = assert_fits(app, 80, 24)
            text = "\n".join(lines)
            assert "\\x1b[2J" in text and "owned" not in text.split("\\x1b]0;")[0]
            others = [job_of(app, pid) for pid in pids[1:]]
            for n, job in others:
                assert any(job.name in line and f"{n} " in line for line in lines), job
            # a recording's name: 10 KB, newlines and escapes, on the row of job 1
            update = app.shown
            worse = "evil\n\x1b[31mred\r" + "B" * 10_000
            rename = {hostile.id: dataclasses.replace(hostile, name=worse)}
            model = dataclasses.replace(update.model,
                                        jobs=[rename.get(j.id, j) for j in update.model.jobs])
            jobs_v = [dataclasses.replace(v, job=rename.get(v.job.id, v.job))
                      for v in update.verdict.jobs]
            verdict = dataclasses.replace(update.verdict, jobs=jobs_v,
                                          job=rename.get(update.verdict.job.id, update.verdict.job))
            app.apply(dataclasses.replace(update, model=model, verdict=verdict))
            await pilot.pause()
            lines = assert_fits(app, 80, 24)
            panel_rows = lines_of(app.query_one(GpuPanel))
            # the title, the 3 jobs and the GPUs of no job: a line each, as before
            assert len(panel_rows) == 1 + 4 and panel_rows[-1].lstrip().startswith("– ")
            assert any("evil\\x0a\\x1b[31mred\\x0d" in r for r in panel_rows), panel_rows
            for n, job in others:
                assert any(job.name in line for line in lines), job
            assert "evil\\x0a" in lines[0] and "JOB" in lines[0]       # the header's flag
            assert "evil\\x0a" in text_of(app.query_one(VerdictBanner))


async def test_replay_shows_the_jobs_and_follows_one(tmp_path):
    """The replay screen is the dashboard's: a recording of the shared node lists its
    jobs and `j` follows one, from the recording's own job tags."""
    path = str(tmp_path / "shared.gdtrec")
    with shared_node([[0, 1, 2, 3], [4, 5, 6, 7]], starved={1}) as (sampler, pids, nvml):
        samples = []
        for _ in range(SAMPLES + 2):
            samples.append(sampler.sample())
            time.sleep(0.1)
    write_recording(path, samples)
    app = replay_screen_app(path, ORIGIN, start_index=SAMPLES + 1)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        jobs = app.shown.model.jobs
        assert [j.gpus for j in jobs] == [(0, 1, 2, 3), (4, 5, 6, 7)]
        rows = text_of(app.query_one(GpuPanel))
        assert all(j.name in rows for j in jobs) and "2 jobs" in rows
        await pilot.press("j")
        await pilot.press("j")
        await pilot.pause()
        assert app.follow.job_id == jobs[1].id
        assert "UNDIAGNOSED" in text_of(app.query_one(VerdictBanner))
        assert lines_of(app.query_one(Timeline))[0].startswith(" Timeline of job 2")
        assert "JOB: 2/2" in text_of(app.query_one(HeaderBar))
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, EpisodesScreen)
        assert all(ep.job_id == jobs[1].id for ep in app.screen.episodes)
        await pilot.press("escape")
        await pilot.press("escape")
        await pilot.pause()
        assert app.follow.job_id is None


def test_help_says_the_job_keys():
    text = HelpScreen().text
    assert "  j J " in text and "  escape " in text and "JOB" in text
    assert "Jobs[/b]" in text and STATE_WORD["disk-starved"] in text


async def test_one_unknown_job_keeps_the_single_job_screen():
    """The simulated node's processes carry no job tag: one `unknown` job, the screen as
    before jobs were told apart (no job rows, no job in the banner); j says why."""
    app = dashboard_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.advance(100)
        await pilot.pause()
        assert [j.id for j in app.shown.model.jobs] == ["unknown"]
        assert "job" not in text_of(app.query_one(GpuPanel))
        assert "job" not in text_of(app.query_one(VerdictBanner)).split(":")[0]
        await pilot.press("j")
        await pilot.pause()
        assert app.follow.job_id is None
        assert "JOB" not in text_of(app.query_one(HeaderBar))
        assert "job" not in screen_text(app).split("\n")[0]


async def test_a_followed_job_building_up_says_its_own_count():
    """Before its episode opens, a followed job's banner says how many intervals its raw
    state has held: its own detector's count, read back from the timeline's columns."""
    with shared_node([[0, 1, 2, 3], [4, 5, 6, 7]], starved={1}) as (sampler, pids, nvml):
        app = dashboard_app(sampler)
        enter = app.thresholds.enter_intervals
        async with app.run_test(size=(120, 40)) as pilot:
            take(app, 1)
            _, b = job_of(app, pids[1])
            while app.follow.job_id != b.id:
                await pilot.press("j")
                await pilot.pause()
            seen = []
            for _ in range(enter + 1):
                mine = next(v for v in app.shown.verdict.jobs if v.job.id == b.id)
                said = text_of(app.query_one(VerdictBanner))
                if mine.episode is not None:
                    assert "watching" not in said and "since" in said
                    break
                state, count = app.feed.stepper.jobs[b.id].detector.pending
                seen.append(count)
                assert f"watching: {state} {count}/{enter} intervals" in said, said
                take(app, 1)
                await pilot.pause()
            assert seen and mine.episode is not None, seen
