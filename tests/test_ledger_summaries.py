"""The stall ledger in the recorder's summaries (record/v2/summary.py LEDGER_FIELDS):
`report` over a window read from summaries counts its GPU time lost from them, whatever
the window's length, and it equals what `report --recompute` counts from the raw
samples.  A window longer than REPLAY_MAX_SAMPLES is what this is for; such a recording
would be slow to make here, so the bound is lowered in-process (it is not what is under
test: a bound the summaries must not need)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gpudisk_top.verdict.ledger import CAUSES
from gpudisk_top.record import Recorder, Recording, make_header
from gpudisk_top.report import ledger as report_ledger
from gpudisk_top.report import summary
from gpudisk_top.report.text import render
from gpudisk_top.sim import Simulator, builtin
from recording_helpers import origin

HERE = Path(__file__).resolve().parent
DEMO = HERE.parent / "examples" / "demo-simulated.gdtrec"
# the demo recording as examples/make_demo.py made it before summaries carried the
# ledger (same model version, no "ledger" in its blocks)
OLD = HERE / "fixtures" / "recordings" / "v2-model9-no-ledger.gdtrec"
REL = 1e-3          # 0.1 %


@pytest.fixture
def short_bound(monkeypatch):
    """Every window here is longer than the replay bound."""
    monkeypatch.setattr(report_ledger, "REPLAY_MAX_SAMPLES", 10)


def _both(path, start=None, end=None):
    with Recording.open(path) as rec:
        s = None if start is None else rec.start_s + start
        e = None if end is None else rec.start_s + end
        fast = summary.build(rec, s, e)
        slow = summary.build(rec, s, e, recompute=True)
    return fast, slow


def _same_ledger(fast: dict, slow: dict) -> None:
    assert fast["counted"] and slow["counted"]
    assert slow["counted_from"] == report_ledger.FROM_REPLAY
    assert fast["counted_from"] == report_ledger.FROM_SUMMARIES
    assert fast["lost_gpu_s"] == pytest.approx(slow["lost_gpu_s"], rel=REL)
    assert fast["idle_gpu_s"] == pytest.approx(slow["idle_gpu_s"], rel=REL, abs=1e-9)
    assert fast["gpu_s"] == pytest.approx(slow["gpu_s"], rel=REL)
    for c in CAUSES:
        assert fast["by_cause"][c] == pytest.approx(slow["by_cause"][c], rel=REL, abs=1e-9), c
    assert fast["by_device"].keys() == slow["by_device"].keys()
    for d, v in slow["by_device"].items():
        assert fast["by_device"][d] == pytest.approx(v, rel=REL), d
    assert [(e["id"], e["state"]) for e in fast["by_episode"]] == \
        [(e["id"], e["state"]) for e in slow["by_episode"]]
    for a, b in zip(fast["by_episode"], slow["by_episode"]):
        assert a["lost_gpu_s"] == pytest.approx(b["lost_gpu_s"], rel=REL, abs=1e-9), a["id"]
    assert fast["reference"] == slow["reference"]


def test_the_demo_summaries_count_the_ledger_a_recompute_counts(short_bound):
    fast, slow = _both(DEMO)
    assert fast.data["derived"].startswith("recorded summaries")
    assert fast.data["samples"] > report_ledger.REPLAY_MAX_SAMPLES
    f, s = fast.data["ledger"], slow.data["ledger"]
    _same_ledger(f, s)
    # something of every kind the demo stages was lost, and named
    assert f["by_cause"]["disk-starved"] > 0 and f["by_cause"]["cpu-starved"] > 0
    assert f["by_cause"]["checkpoint-stall"] > 0 and f["by_device"]
    assert sum(e["lost_gpu_s"] for e in f["by_episode"]) == pytest.approx(f["lost_gpu_s"], rel=REL)
    text = render(fast, charts=False)
    assert "GPU time lost: not counted" not in text and "GPU time lost:" in text


@pytest.mark.parametrize("window", [(30.5, None), (None, 200.0), (61.0, 179.0)])
def test_windows_cut_from_summaries_count_what_a_recompute_counts(short_bound, window):
    """Windows that cut summary blocks: their cut intervals' ledger rows are taken one by
    one (the demo's job has one level from its start: the replay's warm-up finds it)."""
    fast, slow = _both(DEMO, *window)
    _same_ledger(fast.data["ledger"], slow.data["ledger"])


def _two_sessions(path, second_job_pid: int | None):
    """Two runs of a recorder into one file; the second run records the first one's job
    going on (second_job_pid None) or the demo scenario again with a new job (its GPU
    processes have other PIDs, as after the recorder and the job were restarted)."""
    first = Simulator(builtin("demo"), seed=3)
    samples = [first.sample() for _ in range(230)]
    if second_job_pid is None:
        second = first
    else:
        scenario = builtin("demo")
        scenario = replace(scenario, job=replace(scenario.job, pid=second_job_pid))
        second = Simulator(scenario, seed=4, start_wall_s=samples[-1].wall_s + 5.0,
                           start_mono_s=samples[-1].mono_s + 5.0)
    runs = (samples, [second.sample() for _ in range(200)])
    for part in runs:
        with Recorder(path, make_header(origin(), 1.0), segment_samples=60,
                      sync_interval_s=None) as rec:
            for s in part:
                rec.append(s)
    with Recording.open(path) as r:
        assert len(r.sessions) == 2 and len(r.ranges()) == 1
    return path


def test_two_sessions_summaries_count_the_ledger_a_recompute_counts(short_bound, tmp_path):
    path = _two_sessions(tmp_path / "two.gdtrec", second_job_pid=9000)
    fast, slow = _both(path)
    assert fast.data["derived"].startswith("recorded summaries")
    _same_ledger(fast.data["ledger"], slow.data["ledger"])
    assert fast.data["ledger"]["lost_gpu_s"] > 0
    assert {e["state"] for e in fast.data["ledger"]["by_episode"]} >= {"disk-starved", "cpu-starved"}


def test_two_sessions_of_one_job_count_alike(short_bound, tmp_path):
    path = _two_sessions(tmp_path / "one-job.gdtrec", second_job_pid=None)
    fast, slow = _both(path)
    _same_ledger(fast.data["ledger"], slow.data["ledger"])


def test_a_recording_whose_summaries_predate_the_ledger_still_reports(monkeypatch):
    """Summaries without the ledger: the window is replayed for it up to the bound, and
    beyond the section says why it is not counted; both say how they counted.  The only
    such summaries are model 9's (the recorder has written the ledger since), which a
    later model recomputes whole: the reading model is pinned to the fixture's here, the
    fallback's one case."""
    from gpudisk_top.record import derived

    monkeypatch.setattr(derived, "MODEL_VERSION", "9")
    monkeypatch.setattr(derived, "DERIVED_LAYOUT", 2)      # and its layout (no job rows)
    with Recording.open(OLD) as rec:
        assert all(b.ledger is None for _g, b, _s in rec.summaries())
        within = summary.build(rec)
        full = summary.build(rec, recompute=True)
    led = within.data["ledger"]
    assert within.data["derived"].startswith("recorded summaries")
    assert led["counted"] and led["counted_from"] == report_ledger.FROM_OLD_SUMMARIES
    assert led["lost_gpu_s"] == pytest.approx(full.data["ledger"]["lost_gpu_s"], rel=REL)
    assert f"counted from {report_ledger.FROM_OLD_SUMMARIES}" in render(within, charts=False)

    monkeypatch.setattr(report_ledger, "REPLAY_MAX_SAMPLES", 10)
    with Recording.open(OLD) as rec:
        beyond = summary.build(rec)
    led = beyond.data["ledger"]
    assert not led["counted"] and "before they carried the ledger" in led["why_not"]
    assert "--recompute" in led["why_not"]
    assert "GPU time lost: not counted (" in render(beyond, charts=False)
