"""Fault injection (issue 9, items 5 and 10): clocks that step and absurd times.

`report` used to cut its window into one-hour pieces over the wall-clock span, so a
recording whose sessions are months apart took minutes, and one whose clock went back
(two files concatenated) counted half its samples while both workers spun.  Every case
here must give the right numbers, in time bounded by the samples."""

from __future__ import annotations

import json

import pytest

from fault_helpers import DAY_S, concat, live, record, shifted, sim
from gpudisk_top.record import Recording
from gpudisk_top.session.replay import Replay
from gpudisk_top.report import summary
from gpudisk_top.collect.source import LIVE, Source
from recording_helpers import run_command

T0 = 1767225600.0          # the simulator's 2026-01-01


@pytest.fixture(scope="module")
def months(tmp_path_factory):
    """A demo session dated 2026-01, then another one 150 days later, in one file."""
    d = tmp_path_factory.mktemp("months")
    a, b = sim(120, seed=0), sim(150, seed=1, start_wall_s=T0 + 150 * DAY_S)
    path = record(d / "m.gdtrec", a)
    record(path, b)
    return path, a, b


@pytest.fixture(scope="module")
def backwards(tmp_path_factory):
    """Two recordings concatenated with cat, the second one's clock an hour earlier."""
    d = tmp_path_factory.mktemp("back")
    a = sim(200, seed=0, start_wall_s=T0 + 3600)
    b = sim(200, seed=1, start_wall_s=T0)
    pa, pb = record(d / "a.gdtrec", a), record(d / "b.gdtrec", b)
    return concat(d / "ab.gdtrec", pa, pb, keep_preambles=True), pa, pb, a, b


def _decodes(monkeypatch) -> list:
    """Count the samples decoded (the report's work) from now on."""
    calls = [0]
    real = Recording.sample

    def counted(self, i):
        calls[0] += 1
        return real(self, i)

    monkeypatch.setattr(Recording, "sample", counted)
    return calls


@pytest.mark.parametrize("recompute", [False, True])
def test_months_between_sessions_cost_nothing(months, monkeypatch, recompute):
    path, a, b = months
    calls = _decodes(monkeypatch)
    with Recording.open(path) as rec:
        assert rec.duration_s > 149 * DAY_S
        d = summary.build(rec, recompute=recompute).data
    # a pass over the samples (each with the one before it, from the summaries), and the
    # stall ledger's replay of a short window read from summaries (report/ledger.py)
    assert calls[0] <= 3 * (len(a) + len(b))
    assert d["samples"] == len(a) + len(b)
    # durations are the intervals' (each session's first sample has none), never end - start
    assert d["duration_s"] == len(a) - 1 + len(b) - 1
    for per in d["states"].values():
        assert sum(per.values()) == pytest.approx(d["duration_s"])
    assert d["start_s"] == a[0].wall_s and d["end_s"] == b[-1].wall_s
    assert all(0 <= e["duration_s"] <= 150 for e in d["episodes"])


def test_months_between_sessions_as_commands(months):
    """The commands in a fresh interpreter, within their timeout, with the same counts."""
    path, a, b = months
    for args in (["--json", "-j", "2", "--recompute"], ["--json"]):
        out = run_command("report", path, *args, timeout=120)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["samples"] == len(a) + len(b)
    out = run_command("report", path, timeout=120)           # the text report, its charts
    assert out.returncode == 0 and "GPU utilization" in out.stdout
    assert "/ a gap or a clock step" in out.stdout
    out = run_command("export", path, "-f", "jsonl", "-o", "-", timeout=120)
    assert out.returncode == 0
    assert len(out.stdout.splitlines()) == len(a) - 1 + len(b) - 1


def _separately(path, recompute=True) -> dict:
    with Recording.open(path) as rec:
        return summary.build(rec, recompute=recompute).data


def test_a_clock_that_went_back_is_read_in_recorded_order(backwards):
    """The concatenation reports what its two files report apart: every sample, the
    states added up, the episodes of both."""
    path, pa, pb, a, b = backwards
    ra, rb = _separately(pa), _separately(pb)
    with Recording.open(path) as rec:
        assert len(rec) == 400 and rec.runs == [(0, 199), (200, 399)]
        assert any("went back 1 time" in w for w in rec.warnings)
        assert any("another recording's preamble" in w for w in rec.warnings)   # cat left it
        d = summary.build(rec).data
        assert d == summary.build(rec, recompute=True).data
    assert d["samples"] == 400 and d["duration_s"] == ra["duration_s"] + rb["duration_s"]
    assert [(g["samples"], g["start_s"], g["end_s"]) for g in d["segments"]] == \
        [(200, a[0].wall_s, a[-1].wall_s), (200, b[0].wall_s, b[-1].wall_s)]
    assert d["start_s"] == b[0].wall_s and d["end_s"] == a[-1].wall_s
    for gpu, per in d["states"].items():
        for state, seconds in per.items():
            assert seconds == pytest.approx(ra["states"][gpu][state] + rb["states"][gpu][state])
    key = lambda e: (e["state"], e["start_s"], e["end_s"], e["intervals"])  # noqa: E731
    assert [key(e) for e in d["episodes"]] == [key(e) for e in ra["episodes"] + rb["episodes"]]
    assert [e["id"] for e in d["episodes"]] == list(range(1, len(d["episodes"]) + 1))
    assert len(d["episodes"]) >= 2


def test_a_window_across_a_step_back_takes_its_samples_from_both_stretches(backwards):
    path, _, _, a, b = backwards
    start, end = T0 + 100, T0 + 3600 + 50
    want = [s.wall_s for s in a + b if start <= s.wall_s <= end]
    with Recording.open(path) as rec:
        assert rec.ranges(start, end) == [(0, 49), (299, 399)]
        assert [s.wall_s for _, s in rec.between(start, end)] == want
        d = summary.build(rec, start, end).data
        models = [m for m, _ in Replay(rec).models(start, end)]
    assert d["samples"] == len(want) == len(models) == 50 + 101
    assert [m.wall_s for m in models] == want
    out = run_command("export", path, "-f", "jsonl", "-o", "-", "--from", f"@{start}",
                      "--to", f"@{end}", timeout=120)
    assert out.returncode == 0
    assert [json.loads(x)["wall_s"] for x in out.stdout.splitlines()] == \
        [m.wall_s for m in models if m.interval_s > 0]


def test_perfetto_keeps_every_interval_of_a_clock_that_went_back(backwards):
    path, _, _, a, b = backwards
    out = run_command("export", path, "-f", "perfetto", "-o", "-", timeout=120)
    assert out.returncode == 0, out.stderr
    events = json.loads(out.stdout)["traceEvents"]
    host = [e for e in events if e["ph"] == "C" and e["name"] == "host"]
    assert len(host) == 199 + 199                       # none dropped (199 before)
    last: dict = {}
    for e in events:
        if e["ph"] in "CX":
            track = (e["pid"], e["tid"], e["name"] if e["ph"] == "C" else "")
            assert e["ts"] > last.get(track, -1), track
            last[track] = e["ts"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert any("clock stretch 2" in n for n in names)


@pytest.mark.parametrize("back_s", [3600.0, 0.0])
def test_a_clock_step_inside_a_session(tmp_path, back_s):
    """NTP stepping the clock back an hour (or not), then a VM resumed 40 days later, in
    one recorder run: every sample counted, durations from the intervals, no episode
    across a step, the summaries and a replay alike."""
    s = sim(300, scenario="demo", seed=2)
    steps = s[:100] + shifted(s[100:200], -back_s) + shifted(s[200:], 40 * DAY_S - back_s)
    path = record(tmp_path / "steps.gdtrec", steps)
    with Recording.open(path) as rec:
        assert rec.runs == ([(0, 99), (100, 299)] if back_s else [(0, 299)])
        fast = summary.build(rec).data
        slow = summary.build(rec, recompute=True).data
        replay = Replay(rec)
        models = list(replay.models())
    # the detector starts afresh at the session's start and at each step
    assert replay.breaks_at == ([0, 100, 200] if back_s else [0, 200])
    # the recorder's summaries ran one detector across the steps: not used
    assert fast["derived"] == slow["derived"] == "recomputed"
    for d in (fast, slow):
        assert d["samples"] == 300 and d["duration_s"] == 299.0
        assert d["episodes"]
        assert all(0 <= e["duration_s"] <= 100 for e in d["episodes"]), d["episodes"]
        assert all(e["end_s"] >= e["start_s"] for e in d["episodes"])
    assert [e["start_s"] for e in fast["episodes"]] == [e["start_s"] for e in slow["episodes"]]
    assert len(models) == 300 and all(m.interval_s == 1.0 for m, _ in models[1:])


def test_live_and_demo_clocks_months_apart_as_the_issue_recorded_them(tmp_path):
    """The issue's 998-sample file: a demo session dated 2026-01, then a live one: the
    report reads the live one (and says so), the demo one on request, each whole."""
    demo = record(tmp_path / "demo.gdtrec", sim(270))
    live_path = record(tmp_path / "live.gdtrec", live(30),
                       header_origin=Source(LIVE, "node-17", LIVE, kernel="6.8"))
    path = concat(tmp_path / "mixed.gdtrec", demo, live_path)
    out = run_command("report", path, "--json", timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["samples"] == 30
    out = run_command("report", path, "--json", "--source", "simulated", "--recompute",
                      timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["samples"] == 270


# ------------------------------------------------------------------------------ item 10
@pytest.mark.parametrize("cmd", ["report", "export"])
@pytest.mark.parametrize("when", ["@1e20", "@-1e20", "@nan", "@inf", "99999-01-01T00:00",
                                  "0001-01-01", "100000000000d ago", "+99999999999999999999d",
                                  "@1e15"])
def test_absurd_times_are_one_line_usage_errors(months, cmd, when):
    path = months[0]
    extra = ["-f", "csv", "-o", "-"] if cmd == "export" else []
    out = run_command(cmd, path, *extra, "--from", when, timeout=60)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("gpudisk-top: error: ") and out.stderr.count("\n") == 1
    assert "internal error" not in out.stderr and out.stdout == ""


def test_absurd_times_through_the_cli_entry_point(months):
    """cli.main, which turns anything unexpected into "internal error", must not see one."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "gpudisk_top", "report", months[0], "--to", "@1e20"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "out of range" in proc.stderr
    assert "internal error" not in proc.stderr and proc.stderr.count("\n") == 1


def test_the_replay_screen_agrees_with_replay_across_clock_steps(tmp_path):
    """The dashboard's replay (step by step) and Replay (report, export) start their
    detectors afresh at the same samples, so their verdicts are the same; n lands on
    each episode in recorded order even where the clock went back over itself."""
    from gpudisk_top.session.replay import ReplayFeed

    s = sim(300, scenario="demo", seed=2)
    steps = s[:100] + shifted(s[100:200], -30) + shifted(s[200:], 40 * DAY_S - 30)
    path = record(tmp_path / "steps.gdtrec", steps)
    with Recording.open(path) as rec:
        replay = Replay(rec, warmup_s=None)
        want = [(m.wall_s, v.state) for m, v in replay.models() if m.interval_s > 0]
        feed = ReplayFeed(rec)
        feed.seek(0)
        got = []
        while (u := feed.step()) is not None:
            got.append((u.model.wall_s, u.verdict.state))
        assert got == want and len(got) == 299
        assert [(e.state, e.start_wall_s) for e in feed.episodes] == \
            [(e.state, e.start_wall_s) for e in replay.episodes]
        feed.seek(0)
        landed = []
        while (i := feed.next_episode_index(1)) is not None:
            landed.append(i)
            feed.seek(i + 3)
        assert landed == sorted(landed) and len(landed) == len(replay.episodes) >= 4
        for i, e in zip(landed, replay.episodes):
            # the first sample at or after its start, within its stretch of the clock
            assert rec.wall_s(i) >= e.start_wall_s
            assert i == rec.run_of(i)[0] or rec.wall_s(i - 1) < e.start_wall_s + 1.0
