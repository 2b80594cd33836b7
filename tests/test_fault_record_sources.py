"""Fault round (issue 9, item 6, the writer's side): one file holds one source.  `record`
refuses to append a session of another source, also when the file's last session header
is damaged and what remains of it cannot prove the same source; nothing is written then."""

from __future__ import annotations

import dataclasses

import pytest

from gpudisk_top.errors import UsageError
from gpudisk_top.record import Recorder, Recording, make_header
from gpudisk_top.collect import source
from gpudisk_top.collect.source import Source
from recording_helpers import origin, run_command, sim_samples, write_recording

LIVE = Source(source.LIVE, "node-17", source.LIVE, kernel="6.8.0")


def live_samples(n: int = 3):
    return sim_samples("demo", n)      # the numbers do not matter here, the header does


def test_a_simulated_session_is_not_appended_to_a_live_recording(tmp_path):
    path = tmp_path / "live.gdtrec"
    with Recorder(path, make_header(LIVE, 1.0), sync_interval_s=None) as rec:
        for s in live_samples():
            rec.append(s)
    before = path.read_bytes()
    proc = run_command("record", "-o", str(path), "--demo", "--duration", "0.3", "-i", "0.1")
    assert proc.returncode == 2
    assert proc.stderr == (f"gpudisk-top: error: {path} holds live on node-17; these samples "
                           "are simulated, scenario demo, seed 0 on demo-node: record to "
                           "another file\n")
    assert path.read_bytes() == before


def test_another_hosts_recording_is_not_appended_to(tmp_path):
    path = tmp_path / "a.gdtrec"
    with Recorder(path, make_header(LIVE, 1.0), sync_interval_s=None) as rec:
        rec.append(live_samples(1)[0])
    with pytest.raises(UsageError, match="holds live on node-17; these samples are live on node-18"):
        Recorder(path, make_header(dataclasses.replace(LIVE, host_name="node-18"), 1.0),
                 sync_interval_s=None)


def _flip_in_header(path, needle: bytes = b'"host_name"') -> None:
    data = bytearray(path.read_bytes())
    at = data.index(needle) + 3                    # a bit inside the header's JSON
    data[at] ^= 0x04
    path.write_bytes(bytes(data))


def test_a_damaged_header_that_proves_its_source_may_be_appended_to(tmp_path):
    path = tmp_path / "sim.gdtrec"
    write_recording(path, sim_samples("demo", 3))
    _flip_in_header(path, b'"tool"')                  # its source and host still read
    with Recorder(path, make_header(origin(), 1.0), sync_interval_s=None) as rec:
        rec.append(sim_samples("demo", 1)[0])
    with Recording.open(path) as r:
        assert len(r) >= 4


def test_a_damaged_header_whose_source_cannot_be_told_is_refused(tmp_path):
    path = tmp_path / "live.gdtrec"
    with Recorder(path, make_header(LIVE, 1.0), sync_interval_s=None) as rec:
        rec.append(live_samples(1)[0])
    _flip_in_header(path, b'"source"')             # "source": "live" no longer reads
    before = path.read_bytes()
    with pytest.raises(UsageError, match="the header of its last session is damaged, so its "
                                         "source cannot be told"):
        Recorder(path, make_header(LIVE, 1.0), sync_interval_s=None)
    assert path.read_bytes() == before


def test_a_replay_is_flagged_by_its_recordings_kind_not_by_its_path(tmp_path):
    """The dashboard's DEMO flag comes from the Source's kind, not from text in a label: a
    live recording named "simulated-..." replays without it, a simulated one with it."""
    from gpudisk_top.commands.replay import replay_origin
    from gpudisk_top.ui.replay_app import ReplayApp

    live_path = str(tmp_path / "simulated-run.gdtrec")
    with Recorder(live_path, make_header(LIVE, 1.0), sync_interval_s=None) as rec:
        for s in live_samples():
            rec.append(s)
    sim_path = write_recording(tmp_path / "demo.gdtrec", sim_samples("demo", 3))
    for path, demo in ((live_path, False), (sim_path, True)):
        with Recording.open(path) as rec:
            origin = replay_origin(rec, path)
            flags = ReplayApp(rec, origin, show_self=False).flags()
        assert origin.label.startswith(f"replay of {path}"), origin
        assert flags[0] == "REPLAY" and ("DEMO" in flags) == demo, (path, flags)
