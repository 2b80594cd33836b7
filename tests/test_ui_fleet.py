"""The fleet screen (`gpudisk-top fleet`, issue 15) driven through Textual's Pilot against
a real Prometheus on loopback that scrapes real `serve --demo` nodes (tests/fleet_harness.py:
job llama, one disk-starved node and two waiting on peers; job bert, one cpu-starved, one
healthy, one whose process a test kills, one target nobody serves).

One fleet serves the whole module (Prometheus and the nodes take a while to start, and a
scenario's starved phase lasts 80 s from the start): the tests run in file order, the one
that stops Prometheus last.  Below them, the parts that need no server (the label filter's
syntax, the sparkline, the timeline's merge), and the text snapshots made from Prometheus's
captured answers (screenshots/fleet_shots.py)."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import threading
import time

import pytest

from fleet_harness import EXPECTED, PROMETHEUS, DripServer, Fleet, gpudisk
from screen_text import lines_of, text_of
from slack import slack
from ui_helpers import made_with_no_color

from gpudisk_top.fleet.labels import format_filters, parse_filter_text
from gpudisk_top.fleet.promapi import PromClient
from gpudisk_top.fleet.source import FleetSource
from gpudisk_top.model.history import Column, History
from gpudisk_top.ui import theme
from gpudisk_top.ui.fleet_app import FleetApp
from gpudisk_top.ui.screens.fleet_filter import LabelFilterScreen
from gpudisk_top.ui.screens.fleet_help import FleetHelpScreen
from gpudisk_top.ui.screens.fleet_job import JobBanner, JobPicker, JobScreen
from gpudisk_top.ui.screens.fleet_node import FleetTimeline, NodeHead, NodeScreen, merge
from gpudisk_top.ui.widgets.fleet_header import FleetHeader
from gpudisk_top.ui.widgets.fleet_table import FleetTable, sparkline

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "screenshots"))

import fleet_shots  # noqa: E402

needs_prometheus = pytest.mark.skipif(
    PROMETHEUS is None, reason="needs a Prometheus server (Debian package prometheus)")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    if PROMETHEUS is None:
        pytest.skip("needs a Prometheus server (Debian package prometheus)")
    with Fleet(tmp_path_factory.mktemp("fleet")) as f:
        yield f


def make_app(fleet, **kw) -> FleetApp:
    filters = kw.pop("filters", None)
    source = FleetSource(PromClient(fleet.base, timeout_s=2.0), filters=filters)
    return FleetApp(source, interval_s=1.0, **kw)


def expected_now(fleet) -> dict[str, str]:
    """The states the nodes should be in: the harness's, the killed node stale."""
    return dict(EXPECTED, **({"stopped": "stale"} if "stopped" not in fleet.procs else {}))


def states(app, fleet) -> dict[str, str]:
    names = {fleet.instance(n): n for n in fleet.ports}
    rows = app.view.rows if app.view is not None else []
    return {names.get(r.node, r.node): r.state for r in rows}


async def until(pilot, fn, timeout_s: float, what: str):
    """fn()'s first true answer, within timeout_s on an idle machine (more on a busy one:
    Prometheus and seven nodes starting beside 2 busy loops and fio answered nothing in
    60 s)."""
    timeout_s *= slack()
    deadline = time.monotonic() + timeout_s
    while True:
        result = fn()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")
        await pilot.pause(0.2)


async def settled(app, pilot, fleet) -> None:
    await until(pilot, lambda: states(app, fleet) == expected_now(fleet), 60,
                f"the nodes in their states {expected_now(fleet)} (now {states(app, fleet)})")


@contextlib.asynccontextmanager
async def settled_app(fleet):
    """(app, pilot): the fleet screen at 120x40, every node in its expected state."""
    app = make_app(fleet)
    async with app.run_test(size=(120, 40)) as pilot:
        await settled(app, pilot, fleet)
        yield app, pilot


def masked(text: str) -> str:
    """The text with its numbers as #: the same evidence at another moment."""
    return re.sub(r"\d+(\.\d+)?", "#", text.rstrip())


def badge_counts(table) -> dict[str, int]:
    """How many of a table's rows carry each mark (▲ ◇ ×) in their state column."""
    rows = lines_of(table)[table.fixed:]        # below the header (and the lost line)
    return {g: sum(1 for line in rows if line[1:2] == g) for g in "▲◇×"}


def header_counts(head: str) -> dict[str, int]:
    found = {g: re.search(rf"{g} \w+ (\d+)", head) for g in "▲◇×"}
    return {g: int(m.group(1)) for g, m in found.items() if m}


def banner_counts(banner: str) -> dict[str, int]:
    found = {g: re.search(rf"{g} (\d+) \w+", banner) for g in "▲◇×"}
    return {g: int(m.group(1)) for g, m in found.items() if m}


def row_line(app, widget, fleet, name: str):
    """(text, styled runs) of the node's row in a table widget."""
    i = widget.order.index(fleet.instance(name))
    line = widget._lines[widget.fixed + i]
    return "".join(t for t, _ in line), line


# ---------------------------------------------------------------------------- live
@needs_prometheus
async def test_starved_nodes_first_and_a_killed_node_turns_stale(fleet):
    async with settled_app(fleet) as (app, pilot):
        table = app.query_one(FleetTable)
        names = {fleet.instance(n): n for n in fleet.ports}
        order = [names[node] for node in table.order]
        # starved first (the model's order), then the nodes not reporting, then those whose
        # GPUs wait on peers, then the healthy
        assert set(order[:2]) == {"disk", "cpu"}, order
        assert order[2:5] == ["down", "peer1", "peer2"], order
        assert set(order[5:]) == {"healthy", "stopped"}, order
        disk, _ = row_line(app, table, fleet, "disk")
        assert "▲ DISK-STARVED" in disk and "8/8" in disk and "sda r_await" in disk, disk
        assert "× DOWN" in row_line(app, table, fleet, "down")[0]
        assert "● HEALTHY" in row_line(app, table, fleet, "stopped")[0]
        head = text_of(app.query_one(FleetHeader))
        assert fleet.base in head and "by instance" in head
        assert "nodes 7" in head and "starved 2" in head and "stale 1" in head, head
        # the header counts what the rows mark: ▲ starved, ◇ waiting on peers, × stale
        assert header_counts(head) == badge_counts(table), (head, lines_of(table))
        for peer in ("peer1", "peer2"):
            assert "◇ WAITING" in row_line(app, table, fleet, peer)[0]
        assert not any("STRAGGLER" in line for line in lines_of(table))
        assert "1 query" in head or "2 queries" in head, head

        fleet.stop("stopped")
        await until(pilot, lambda: "× STALE" in row_line(app, table, fleet, "stopped")[0], 30,
                    "the killed node's row to say STALE")
        text, runs = row_line(app, table, fleet, "stopped")
        order = [names[node] for node in table.order]
        assert set(order[2:4]) == {"down", "stopped"}, order      # up among the unreporting
        # dimmed, and said in words: NO_COLOR loses nothing (where the row cursor is on it,
        # its name shows the cursor, reversed, as on every row)
        assert all(style.dim or (style.reverse and t.strip() == fleet.instance("stopped"))
                   for t, style in runs[1:] if t.strip()), runs
        assert "STALE" in "".join(t for t, style in runs if style.dim)
        assert "stale 2" in text_of(app.query_one(FleetHeader))
        assert header_counts(text_of(app.query_one(FleetHeader))) == badge_counts(table)
        assert app.is_running


@needs_prometheus
async def test_enter_opens_the_nodes_timeline_from_range_queries(fleet):
    async with settled_app(fleet) as (app, pilot):
        table = app.query_one(FleetTable)
        for _ in range(len(table.order)):
            if table.cursor == fleet.instance("disk"):
                break
            await pilot.press("j")
        assert table.cursor == fleet.instance("disk")
        await pilot.press("enter")
        assert isinstance(app.screen, NodeScreen)
        timeline = app.screen.query_one(FleetTimeline)

        def drawn():
            rows = {line.split()[0]: line for line in lines_of(timeline) if line.strip()}
            return rows if "sda" in rows and "D" in rows.get("state", "") else None
        rows = await until(pilot, drawn, 20, "the node's timeline rows")
        # the local timeline's rows: the state (D: disk-starved), a row per GPU, the
        # blamed disk first among the disks, and the time axis
        assert [f"GPU{i}" in rows for i in range(8)] == [True] * 8, list(rows)
        names = [line.split()[0] for line in lines_of(timeline)[2:] if line.strip()]
        assert names.index("sda") < names.index("nvme0n1"), names
        assert "|" in lines_of(timeline)[-1]
        head = text_of(app.screen.query_one(NodeHead))
        assert "DISK-STARVED" in head and "sda r_await" in head and "range query: 1 query" in head
        await pilot.press("left")
        assert timeline.back == 5
        await pilot.press("end")
        assert timeline.back == 0
        await pilot.press("escape")
        assert isinstance(app.screen.query_one(FleetTable), FleetTable)
        assert not any(isinstance(s, NodeScreen) for s in app.screen_stack)


@needs_prometheus
async def test_the_job_view_names_the_straggler(fleet):
    async with settled_app(fleet) as (app, pilot):
        await pilot.press("J")
        assert isinstance(app.screen, JobPicker)
        picker = app.screen
        picker.query_one("OptionList").highlighted = [g.job for g in picker.jobs].index("llama")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, JobScreen) and app.screen.job == "llama"
        banner = text_of(app.screen.query_one(JobBanner))
        disk = fleet.instance("disk")
        # the node whose own disk starves it, while the other two wait on it
        assert f"▲ STRAGGLER {disk}" in banner, banner
        assert "disk-starved on sda" in banner and "2 of 2 other nodes wait" in banner, banner
        jobs = app.screen.query_one(FleetTable)
        assert sorted(jobs.order) == sorted(fleet.instance(n) for n in ("disk", "peer1", "peer2"))
        assert row_line(app, jobs, fleet, "disk")[0].count("◀") == 1
        # one row labelled straggler, the nodes waiting on it labelled so, and the
        # banner's counts those of the rows' marks
        rows = {n: row_line(app, jobs, fleet, n)[0] for n in ("disk", "peer1", "peer2")}
        assert [n for n, line in rows.items() if "STRAGGLER" in line] == ["disk"], rows
        for peer in ("peer1", "peer2"):
            assert "◇ WAITING" in rows[peer] and rows[peer].endswith(f"waiting on {disk}")
        assert banner_counts(banner) == badge_counts(jobs) == {"▲": 1, "◇": 2, "×": 0}, banner
        # each row's evidence reads as `fleet --once --job llama` gives it (wide enough
        # that none is cut; the numbers masked: the two read Prometheus at other moments)
        await pilot.resize_terminal(220, 40)
        await pilot.pause()
        once = subprocess.run(gpudisk("fleet", "--prometheus", fleet.base, "--once", "--job",
                                      "llama"), capture_output=True, text=True, timeout=60)
        assert once.returncode == 0, once.stderr
        for n in ("disk", "peer1", "peer2"):
            said = next(ln for ln in once.stdout.splitlines()
                        if ln.startswith(fleet.instance(n) + " "))
            # after SEEN: the LOST 24H column, then the evidence
            evidence = said.split(" ago", 1)[1].split(None, 1)[1].strip()
            assert evidence, said
            assert masked(row_line(app, jobs, fleet, n)[0]).endswith(masked(evidence)), (
                row_line(app, jobs, fleet, n)[0], said)
        await pilot.press("enter")            # a node of the job: its timeline
        assert isinstance(app.screen, NodeScreen)
        await pilot.press("escape", "escape")
        assert not isinstance(app.screen, (NodeScreen, JobScreen))

    # `fleet --job bert`: its nodes only (the source's filter), the job view at once
    app = make_app(fleet, job="bert", filters={"training_job": "bert"})
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, JobScreen), 20, "the job view")
        await pilot.pause()
        banner = text_of(app.screen.query_one(JobBanner))
        # its starved node's peers are busy: nobody waits on it
        assert "● NO STRAGGLER" in banner and "bert" in banner, banner


@needs_prometheus
async def test_filter_by_label_and_group_by_another_label(fleet):
    async with settled_app(fleet) as (app, pilot):
        await pilot.press("slash")
        assert isinstance(app.screen, LabelFilterScreen)
        await pilot.press(*"training_job=llama", "enter")
        llama = {fleet.instance(n) for n in ("disk", "peer1", "peer2")}
        await until(pilot, lambda: app.view is not None
                    and {r.node for r in app.view.rows} == llama, 20, "llama's nodes only")
        assert app.source.filters == {"training_job": "llama"}
        assert "filter training_job=llama" in text_of(app.query_one(FleetHeader))
        await pilot.press("escape")           # clears it
        await until(pilot, lambda: app.view is not None and len(app.view.rows) == 7, 20,
                    "every node again")
        await pilot.press("slash", *"nolabel", "enter")     # not label=value: said, not raised
        assert app.source.filters == {}
        # g: the next label the nodes carry (instance -> job -> training_job)
        await pilot.press("g")
        assert app.target("group_by") == "job"
        await until(pilot, lambda: app.view is not None and [r.node for r in app.view.rows]
                    == ["gpudisk-top"], 20, "one row: Prometheus's job")
        await pilot.press("g")
        assert app.target("group_by") == "training_job"
        await until(pilot, lambda: app.view is not None
                    and sorted(r.node for r in app.view.rows) == ["bert", "llama"], 20,
                    "a row per training job")
        assert "by training_job" in text_of(app.query_one(FleetHeader))


@needs_prometheus
async def test_a_stopped_prometheus_shows_the_error_and_the_last_table(fleet):
    """Last in the module: it stops the module's Prometheus."""
    async with settled_app(fleet) as (app, pilot):
        fleet.prometheus.terminate()
        fleet.prometheus.wait(15)
        header = app.query_one(FleetHeader)
        await until(pilot, lambda: "✕ ERROR" in text_of(header), 20, "the error line")
        head = text_of(header)
        assert "connection refused" in head and "the table is from" in head, head
        assert "OLD" in head
        table = app.query_one(FleetTable)
        assert len(table.order) == 7                     # the last good table, dimmed
        # (row 2: not the cursor's, which stays reversed)
        row = table._lines[table.fixed + 1]         # the second row (the first has the cursor)
        assert all(style.dim for t, style in row[1:] if t.strip()), row
        # still answering keys: the node screen says the same error, the help opens
        await pilot.press("enter")
        head = app.screen.query_one(NodeHead)
        await until(pilot, lambda: "✕ ERROR" in text_of(head), 20, "the node's error")
        await pilot.press("escape", "question_mark")
        await pilot.press("escape", "r")
        await pilot.pause(0.5)
        assert app.is_running and "✕ ERROR" in text_of(header)


# ---------------------------------------------------------------------------- no server
async def test_a_prometheus_that_never_answers_times_out_on_screen_and_keys_go_on():
    """A server that takes the connection and never answers: the refresh waits on a worker
    thread until the client's timeout, the keys answer meanwhile (a filter typed while
    the query hangs does not wait for it), and the timeout shows as the error line."""
    with socket.socket() as mute:
        mute.bind(("127.0.0.1", 0))
        mute.listen(16)                  # the kernel accepts; nobody ever reads or writes
        url = "http://127.0.0.1:%d" % mute.getsockname()[1]
        app = FleetApp(FleetSource(PromClient(url, timeout_s=1.5)), interval_s=1.0)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause(0.2)
            assert app._asked_mono is not None and app.view is None      # in flight
            await pilot.press("slash", *"rack=a", "enter")
            assert app._asked_mono is not None and app.target("filters") == {"rack": "a"}
            await pilot.press("question_mark")
            assert isinstance(app.screen, FleetHelpScreen)
            await pilot.press("escape")
            header = app.query_one(FleetHeader)
            await until(pilot, lambda: "✕ ERROR" in text_of(header), 10, "the timeout's line")
            assert "timed out after 1.5 s" in text_of(header), text_of(header)
            assert "filter rack=a" in text_of(header)
            assert app.source.filters == {"rack": "a"}      # given to the source by the worker
            assert app.is_running



def test_label_filters_parse_and_print_back():
    assert parse_filter_text("") == {}
    assert parse_filter_text("training_job=llama cluster=a") == {"training_job": "llama",
                                                                 "cluster": "a"}
    assert parse_filter_text("a=1,b=2") == {"a": "1", "b": "2"}
    assert parse_filter_text('rack="row 3"') == {"rack": "row 3"}
    for bad in ("llama", "=x", "1a=b", "__name__=x", "a=\udcff"):
        with pytest.raises(ValueError):
            parse_filter_text(bad)
    assert parse_filter_text(format_filters({"rack": "row 3", "a": "x"})) == {"rack": "row 3",
                                                                            "a": "x"}


def _new_threads(before: set[int]) -> list[str]:
    return [t.name for t in threading.enumerate()
            if t.ident not in before and not t.name.startswith("drip")]


# Textual runs thread workers in asyncio's default executor (threads asyncio_N), which
# starts a second thread when a worker is handed over while the one before has not yet
# gone idle: one more thread than queries in flight, at most.  A pile-up is one thread
# per key pressed (6 and more here).
HANDOVER_THREADS = 1


async def test_a_hung_prometheus_never_piles_up_threads():
    """A Prometheus that sends its answer a byte at a time (every socket read returns
    within the timeout): each query still ends at its deadline, and `r` pressed again and
    again, a new filter, and the node screen's `r` start no second query while one is in
    flight: the threads stay one per screen, not one per key."""
    before = {t.ident for t in threading.enumerate()}
    with DripServer(every_s=0.2) as drip:
        app = FleetApp(FleetSource(PromClient(drip.url, timeout_s=1.5)), interval_s=1.0)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause(0.2)
            for _ in range(8):
                await pilot.press("r")
            await pilot.press("slash", *"rack=a", "enter")
            await pilot.pause(0.3)
            assert len(_new_threads(before)) <= 1 + HANDOVER_THREADS, _new_threads(before)
            header = app.query_one(FleetHeader)
            started = time.monotonic()
            await until(pilot, lambda: "✕ ERROR" in text_of(header), 10, "the deadline's line")
            assert "timed out after 1.5 s" in text_of(header), text_of(header)
            # the answer to the question before the filter was dropped, the filter's asked
            assert time.monotonic() - started < 4.5
            app.open_node("127.0.0.1:1")
            await pilot.pause(0.2)
            assert isinstance(app.screen, NodeScreen)
            for _ in range(6):
                await pilot.press("r")
            await pilot.pause(0.3)
            assert len(_new_threads(before)) <= 2 + HANDOVER_THREADS, _new_threads(before)
            head = app.screen.query_one(NodeHead)
            await until(pilot, lambda: "timed out after 1.5 s" in text_of(head), 10,
                        "the node's deadline")
            assert app.is_running


async def test_a_row_of_several_targets_is_not_opened_as_one_node():
    """--by training_job (or `g`): a row gathers several nodes; Enter says so instead of
    drawing their GPUs and disks as one node's timeline."""
    source = fleet_shots.CannedSource()
    source.group_by = "training_job"
    app = FleetApp(source, autostart=False)
    async with app.run_test(size=(120, 40)) as pilot:
        app.apply(source.refresh())
        await pilot.pause()
        assert app.query_one(FleetTable).cursor in ("llama", "bert")
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, NodeScreen)
        (note,) = [n.message for n in app._notifications]
        assert " gathers " in note and "scrape targets" in note and "(g, /)" in note


def test_the_sparkline_marks_unknown_minutes_and_ends_now():
    assert sparkline([0.0, 50.0, 100.0, None], 4) == "▁▅█·"
    assert sparkline([100.0], 3) == "  █"              # right-aligned: the right edge is now
    assert sparkline([10.0] * 70, 5) == "▂▂▂▂▂"        # the newest only


def _col(t: float, state: str = "healthy", util: float | None = 90.0) -> Column:
    return Column(wall_s=t, interval_s=1.0, state=state, raw_state=state, episode=None,
                  gpu_util={0: util})


def test_merge_appends_replaces_and_fills_gaps():
    h = History(capacity=100)
    assert not merge(h, [_col(t) for t in range(10, 15)])
    assert [c.wall_s for c in h.columns] == [10, 11, 12, 13, 14]
    # a refetch of the last seconds: the same columns change nothing, a late scrape does
    assert not merge(h, [_col(t) for t in range(12, 16)])
    assert merge(h, [_col(14, "disk-starved", 40.0), _col(16)])
    assert [c.wall_s for c in h.columns] == [10, 11, 12, 13, 14, 15, 16]
    assert h.columns[4].state == "disk-starved"
    # a pause longer than the refetch: blank columns keep the axis one column a second
    merge(h, [_col(20)])
    assert [c.wall_s for c in h.columns][-4:] == [17, 18, 19, 20]
    assert [c.state for c in h.columns][-4:] == ["", "", "", "healthy"]


async def test_no_color_the_states_read_in_glyphs_words_and_attributes():
    """NO_COLOR: a starved node's badge is bold and reversed, with its glyph and word; a
    stale one says STALE and is dimmed; no colour anywhere in the rows."""
    source = fleet_shots.CannedSource()
    app = made_with_no_color(lambda: FleetApp(source, autostart=False))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            app.apply(source.refresh())
            await pilot.pause()
            table = app.query_one(FleetTable)
            runs = [run for line in table._lines[table.fixed:] for run in line]
            assert all(style.color is None and style.bgcolor is None for _, style in runs)
            i = table.order.index(source.instance("disk"))
            badge = table._lines[table.fixed + i][1]
            assert badge[0].startswith("▲ DISK-STARVED") and badge[1].bold and badge[1].reverse
            i = table.order.index(source.instance("stopped"))
            badge = table._lines[table.fixed + i][1]
            assert badge[0].startswith("× STALE") and badge[1].dim
    finally:
        theme.use_no_color(False)


# ---------------------------------------------------------------------------- snapshots
@pytest.mark.parametrize("name", list(fleet_shots.SHOTS))
def test_fleet_screenshot_matches(name):
    text = fleet_shots.render(name)[1]
    with open(os.path.join(ROOT, "screenshots", f"{name}.txt")) as f:
        assert text == f.read(), f"{name}: the screen changed; {fleet_shots.REGENERATE}"


@pytest.mark.parametrize("view,width,height", [(v, w, h) for v in fleet_shots.MATRIX
                                                for w, h in fleet_shots.MATRIX_SIZES])
def test_fleet_matrix_snapshot_matches(view, width, height):
    """The table, and the table while Prometheus fails, at 80x24 and 120x40."""
    text = fleet_shots.render_matrix(width, height, view)
    with open(fleet_shots.matrix_path(width, height, view)) as f:
        assert text == f.read(), f"fleet {view} at {width}x{height}: {fleet_shots.REGENERATE}"
    lines = text.splitlines()
    assert len(lines) == height and all(len(line) <= width for line in lines)
    assert lines[-1].lstrip().startswith("q Quit"), lines[-1]


def test_every_key_of_the_fleet_screens_is_in_its_page_and_help():
    """The keys FleetApp, its node screen and its job screen bind: each in the fleet
    page's key table (docs/fleet.md) and on the fleet help screen."""
    from test_readme import _key_names, doc, section as section_of
    from gpudisk_top.ui.screens.fleet_help import FLEET_HELP

    section = section_of(doc("fleet.md"), "## The fleet screen")
    for key in _key_names(FleetApp.BINDINGS + NodeScreen.BINDINGS + JobScreen.BINDINGS):
        assert f"`{key}`" in section, key
        assert re.search(rf"(?<![\w`]){re.escape(key)}(?![\w`])", FLEET_HELP), key


def test_the_fleet_page_shows_the_fleet_screenshots():
    from test_readme import doc

    text = doc("fleet.md")
    for name in fleet_shots.SHOTS:
        assert f"](../screenshots/{name}.svg)" in text, name
