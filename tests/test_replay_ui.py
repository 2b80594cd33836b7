"""Replay's keys through Pilot, on a recording the test makes from the simulator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from gpudisk_top.record import Recording
from gpudisk_top.record.header import make_header
from gpudisk_top.record.writer import Recorder
from gpudisk_top.sim import Simulator, builtin
from gpudisk_top.ui import replay_app
from gpudisk_top.ui.screens.episodes import EpisodesScreen
from textual.widgets import OptionList
from recording_helpers import sim_samples, write_recording
from gpudisk_top.ui.widgets.disks import DiskPanel
from gpudisk_top.ui.widgets.header import HeaderBar
from gpudisk_top.ui.widgets.hostline import HostLine
from gpudisk_top.ui.widgets.position import PositionBar
from gpudisk_top.ui.widgets.verdict import VerdictBanner
from gpudisk_top.collect.source import simulated_source
from apps import replay_screen_app
from screen_text import text_of

ORIGIN = simulated_source("disk-starved-sata", 0)


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    path = tmp_path_factory.mktemp("rec") / "sata.gdtrec"
    sim = Simulator(builtin("disk-starved-sata"), seed=0)
    rec = Recorder(str(path), make_header(ORIGIN, 1.0))
    for _ in range(150):   # healthy 30 s, disk-starved 90 s, healthy again
        rec.append(sim.sample())
    rec.close("test")
    return str(path)


def assert_shows_an_interval(app, index):
    """The screen shows sample `index` with its interval's rates, not "collecting"."""
    assert app.feed.index == index and app.shown is app.latest
    assert app.shown.model.interval_s > 0
    disks, host = text_of(app.query_one(DiskPanel)), text_of(app.query_one(HostLine))
    assert "collecting" not in disks and "collecting" not in text_of(app.query_one(VerdictBanner))
    shown = app.query_one(DiskPanel).selected(app.shown.model)
    assert shown
    for name in shown:                            # a row of rates for each disk shown
        row = next(line.split() for line in disks.splitlines() if line.split()[:1] == [name])
        assert float(row[2]) == round(app.shown.model.disks[name].r_s, 1), row
    assert "usr n/a" not in host and "PSI io n/a" not in host
    assert f"{index + 1}/{len(app.rec)}" in text_of(app.query_one(PositionBar))


async def test_opens_on_the_first_interval_labelled_replay(recording):
    app = replay_screen_app(recording, ORIGIN)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        # the first sample has no interval: the screen opens on the first one with rates
        assert_shows_an_interval(app, 1)
        header = text_of(app.query_one(HeaderBar))
        assert "REPLAY" in header and "DEMO" in header


async def test_opens_where_asked_and_on_a_session_s_first_interval(tmp_path):
    """A recording of two recorder runs (recording_helpers): --from inside a session opens
    there; at a session's first sample (the start, home, g to it) on the interval after."""
    samples = sim_samples("disk-starved-sata", 40)
    path = write_recording(tmp_path / "two.gdtrec", samples[:20])
    write_recording(path, samples[25:40])          # restarted 5 s later
    app = replay_screen_app(path, ORIGIN, start_index=7)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert_shows_an_interval(app, 7)
        await pilot.press("home")
        await pilot.pause()
        assert_shows_an_interval(app, 1)
        await pilot.press("g")
        for key in ("plus", "2", "5", "s", "enter"):  # the second run's first sample
            await pilot.press(key)
        await pilot.pause()
        assert_shows_an_interval(app, 21)
    app = replay_screen_app(path, ORIGIN, start_index=20)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert_shows_an_interval(app, 21)
        await pilot.press("comma")                 # stepping onto it shows it as it is
        assert app.feed.index == 20 and app.latest.model.interval_s == 0


async def test_step_forward_and_back(recording):
    app = replay_screen_app(recording, ORIGIN, start_index=40)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("full_stop")
        await pilot.press("full_stop")
        assert app.feed.index == 42
        await pilot.press("comma")
        assert app.feed.index == 41
        # a step back recomputes from raw counters: the same verdict as going forward
        forward = Recording.open(recording)
        from gpudisk_top.session.replay import ReplayFeed
        assert ReplayFeed(forward).seek(41).verdict.raw_state == app.latest.verdict.raw_state


async def test_play_pause_and_speeds(recording):
    app = replay_screen_app(recording, ORIGIN)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("3")             # x60
        await pilot.press("space")
        assert app.playing
        # x60: 20 samples take a third of a second (x1 would take 20 s); a loaded machine
        # may be slower, never as slow as x1
        t0 = time.monotonic()
        while app.feed.index < 20 and time.monotonic() - t0 < 15:
            await pilot.pause(0.1)
        elapsed_s = time.monotonic() - t0
        await pilot.press("space")
        assert not app.playing
        moved = app.feed.index
        assert moved >= 20 and elapsed_s < 15, (moved, elapsed_s)
        assert "❚❚ x60" in text_of(app.query_one(PositionBar))
        await pilot.press("f")             # x60 -> x1
        assert app.speed == 1
        await pilot.press("f")
        assert app.speed == 10


async def test_next_and_previous_episode(recording):
    app = replay_screen_app(recording, ORIGIN)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("n")
        await pilot.pause()
        # the disk starvation starts at 30 s; replay lands where it is confirmed
        assert 30 <= app.feed.index <= 35
        assert app.latest.verdict.state == "disk-starved"
        assert "DISK-STARVED" in text_of(app.query_one(VerdictBanner))
        await pilot.press("end")
        await pilot.press("N")
        await pilot.pause()
        assert 30 <= app.feed.index <= 35


async def test_jump_to_a_time(recording):
    app = replay_screen_app(recording, ORIGIN)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("g")
        for key in ("plus", "1", "m", "enter"):
            await pilot.press(key)
        await pilot.pause()
        assert app.feed.index == 60        # one minute after the start
        await pilot.press("g")
        for key in ("minus", "1", "0", "s", "enter"):
            await pilot.press(key)
        await pilot.pause()
        assert app.feed.index == 139       # ten seconds before the end
        await pilot.press("g")
        for key in ("x", "y", "z", "enter"):
            await pilot.press(key)
        await pilot.pause()
        assert app.feed.index == 139       # a time that cannot be read changes nothing


def test_replay_without_a_terminal_and_bad_files(tmp_path, recording):
    run = lambda *a: subprocess.run([sys.executable, "-m", "gpudisk_top", "replay", *a],  # noqa: E731
                                    capture_output=True, text=True, stdin=subprocess.DEVNULL)
    proc = run(recording)
    assert proc.returncode == 2 and "report" in proc.stderr and "Traceback" not in proc.stderr
    junk = tmp_path / "junk.gdtrec"
    junk.write_bytes(b"not a recording at all")
    proc = run(str(junk))
    assert proc.returncode == 2 and "not a gpudisk-top recording" in proc.stderr
    assert proc.stderr.count("\n") == 1
    proc = run(str(tmp_path / "missing.gdtrec"))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


async def test_help_in_replay_lists_replay_keys(recording):
    from gpudisk_top.ui.screens.help import HelpScreen

    app = replay_screen_app(recording, ORIGIN)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert "Replay" in app.screen.text and "next / previous starvation episode" in app.screen.text
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


# ---------------------------------------------------------------------------- issue 23, item 8
DEMO = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    "examples", "demo-simulated.gdtrec")


def report_episodes(path) -> list[tuple[int, str, float]]:
    """(id, state, start_s) of the episodes `gpudisk-top report --json` lists."""
    proc = subprocess.run([sys.executable, "-m", "gpudisk_top", "report", "--json", path],
                          capture_output=True, text=True, check=True)
    return [(e["id"], e["state"], e["start_s"]) for e in json.loads(proc.stdout)["episodes"]]


def listed(screen) -> list[str]:
    return [str(o.prompt) for o in screen.query_one(OptionList)._options]


async def settle(pilot, app, timeout_s: float = 60.0) -> None:
    """Until the recording's episodes are known (a thread finds them without summaries)."""
    deadline = time.monotonic() + timeout_s
    while app.feed.known is None:
        assert time.monotonic() < deadline, "the recording's episodes never came"
        await pilot.pause(0.1)


async def test_the_recordings_episodes_are_there_from_the_start():
    expected = report_episodes(DEMO)
    assert len(expected) == 3
    app = replay_screen_app(DEMO, ORIGIN)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.feed.index == 1                  # at the start, nothing passed yet
        assert app.feed.known is not None           # from the summaries, at once
        assert text_of(app.query_one(PositionBar)).count("▲") == 3
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, EpisodesScreen)
        rows = listed(app.screen)
        assert [r.split()[:2] for r in rows] == [[f"#{i}", s] for i, s, _ in reversed(expected)]
        assert "No starvation episode yet" not in str(app.screen.query_one("#evidence").render())
        assert "3 episodes" in str(app.screen.query_one("#note").render())
        await pilot.press("escape")
        # n lands on each in turn, where the replayed detector confirms it; then no more
        for _, state, start_s in expected:
            await pilot.press("n")
            await pilot.pause()
            assert app.latest.verdict.state == state
            assert app.rec.wall_s(app.feed.index) >= start_s
            assert text_of(app.query_one(PositionBar)).count("▲") >= 2   # the cursor hides one at most
        here = app.feed.index
        await pilot.press("n")
        await pilot.pause()
        assert app.feed.index == here
        # N back through them, each once (not stuck on the one it is in)
        for _, state, _ in reversed(expected[:-1]):
            await pilot.press("N")
            await pilot.pause()
            assert app.latest.verdict.state == state
        # Enter on an episode in the list goes to it
        await pilot.press("end", "e")
        await pilot.pause()
        await pilot.press("enter")                  # the newest, highlighted first
        await pilot.pause()
        assert app.latest.verdict.state == expected[-1][1]


async def test_without_summaries_the_episodes_are_found_by_replaying(tmp_path):
    path = write_recording(tmp_path / "plain.gdtrec", sim_samples("demo", 271), summaries=False)
    expected = report_episodes(path)
    assert expected
    app = replay_screen_app(path, ORIGIN)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        assert [(e.id, e.state, e.start_wall_s) for e in app.feed.known] == expected
        assert text_of(app.query_one(PositionBar)).count("▲") == len(expected)
        await pilot.press("e")
        await pilot.pause()
        assert len(listed(app.screen)) == len(expected)


async def test_too_long_to_replay_without_summaries_says_so(tmp_path, monkeypatch):
    path = write_recording(tmp_path / "plain.gdtrec", sim_samples("demo", 100), summaries=False)
    monkeypatch.setattr(replay_app, "FIND_MAX_SAMPLES", 50)
    app = replay_screen_app(path, ORIGIN)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("e")
        await pilot.pause()
        note = str(app.screen.query_one("#note").render())
        assert "no summaries" in note and "report" in note, note
        assert app.feed.known is None
        await pilot.press("escape")
        await pilot.press("n")                      # still found by replaying ahead
        await pilot.pause()
        assert app.latest.verdict.state in ("disk-starved", "cpu-starved", "checkpoint-stall")


async def test_known_episodes_across_a_clock_that_went_back(tmp_path):
    """A clock stepped back over itself: episodes of the second stretch began at wall
    times the first stretch also holds; each is placed in its own stretch, and n visits
    each in recorded order, landing where the screen's own detector confirms it."""
    from fault_helpers import shifted

    s = sim_samples("demo", 300, seed=2)
    steps = s[:150] + shifted(s[150:], -100)
    path = write_recording(tmp_path / "steps.gdtrec", steps, seed=2)
    expected = report_episodes(path)
    app = replay_screen_app(path, ORIGIN)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        assert [(e.id, e.state, e.start_wall_s) for e in app.feed.known] == expected
        (a0, b0), (a1, _) = app.rec.runs
        assert len(expected) == 3 and a1 == 150
        # the later two began at times the first stretch holds as well
        assert all(app.rec.wall_s(a0) <= t <= app.rec.wall_s(b0) for _, _, t in expected[1:])
        landed = []
        for _, state, start_s in expected:
            await pilot.press("n")
            await pilot.pause()
            landed.append(app.feed.index)
            assert app.latest.verdict.state == state
            assert app.rec.wall_s(app.feed.index) >= start_s
        assert landed == sorted(landed) and landed[0] < a1 <= landed[1]


async def _timeline_at(recording, index: int, moves=()) -> str:
    from gpudisk_top.ui.widgets.timeline import Timeline
    app = replay_screen_app(recording, ORIGIN, start_index=index if not moves else 0)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        for where in moves:
            await pilot.press("g")
            for key in where:
                await pilot.press(key)
            await pilot.press("enter")
            await pilot.pause()
        assert app.feed.index == index
        return text_of(app.query_one(Timeline))


async def test_a_seek_back_draws_what_a_fresh_open_draws(recording):
    """The same position draws the same rows however the screen got there (issue 38: after
    a seek back the GPU and disk rows kept the bars of the window the seek came from)."""
    fresh = await _timeline_at(recording, 62)
    forth_and_back = await _timeline_at(recording, 62, moves=(("plus", "1", "4", "0", "s"),
                                                             ("plus", "6", "2", "s")))
    assert forth_and_back == fresh
