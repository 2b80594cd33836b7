"""The replay screen lists a recording's episodes as `report` does: both read the window
through session/summaries.py, the screen for the episodes alone (episodes_of), report for
everything (report.summary.build).  Held on real recordings written by the recorder, read
from their summaries, replayed from raw samples, and across a restarted recorder."""

from __future__ import annotations

import pytest

from gpudisk_top.record import Recording
from gpudisk_top.report import summary
from gpudisk_top.session import summaries
from recording_helpers import sim_samples, write_recording


def _facts(episodes) -> list[tuple]:
    return [(e.id, e.state, e.start_wall_s, e.end_wall_s, e.last_wall_s, e.intervals,
             list(e.gpus), list(e.devices)) for e in episodes]


@pytest.fixture(scope="module")
def demo_samples():
    # the demo node's first 400 s: its disk starvation begins at 60 s
    return sim_samples("demo", n=400)


@pytest.mark.parametrize("how", ["summaries", "raw", "restarted"])
def test_the_screen_lists_the_episodes_report_lists(demo_samples, tmp_path, how):
    path = tmp_path / f"{how}.gdtrec"
    if how == "restarted":          # two sessions: the recorder stopped and started again
        write_recording(path, demo_samples[:170])
        write_recording(path, demo_samples[170:])
    else:
        write_recording(path, demo_samples, summaries=how != "raw")
    with Recording.open(path) as rec:
        assert summaries.reads_summaries(rec) == (how != "raw")
        episodes, spans = summaries.episodes_of(rec)
        built = summary.build(rec)
    assert built.data["derived"].startswith("recorded") == (how != "raw")
    assert episodes, "the demo's first 400 s hold episodes"
    assert _facts(episodes) == _facts(built.episodes)
    assert spans == built.spans
    assert [e["id"] for e in built.data["episodes"]] == [e.id for e in episodes]
