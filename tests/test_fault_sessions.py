"""Fault injection (issue 9, item 6): recordings that mix sources, damaged session headers.

A live recording with a `record --demo` session appended was reported as 11 of its 22
samples and exported with 9 unlabelled simulated intervals in it; one flipped bit in a
session header dropped the SIMULATED label.  Readers now read one source at a time and
say what they left out, and a damaged header is never taken for a live one."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import subprocess
import sys

import pytest

from fault_helpers import LIVE, concat, flip, header_frames, live, record, sim
from gpudisk_top.commands.replay import replay_origin
from gpudisk_top.errors import UsageError
from gpudisk_top.record import Recording, frames, make_header
from gpudisk_top.record.sources import salvage
from gpudisk_top.report import summary
from recording_helpers import run_command

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "recordings")


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """The issue's file: 11 live samples of this machine (dated now), then a demo session
    appended (dated 2026-01): 22 samples, a clock that goes back between them."""
    d = tmp_path_factory.mktemp("mixed")
    live_samples, demo = live(11), sim(11)
    a = record(d / "live.gdtrec", live_samples, header_origin=LIVE)
    b = record(d / "demo.gdtrec", demo)
    return concat(d / "mixed.gdtrec", a, b), live_samples, demo


def _json(*args) -> tuple[dict, str]:
    out = run_command("report", *args, "--json", timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout), out.stderr


def test_the_reader_knows_each_sessions_source(mixed):
    path, live_samples, demo = mixed
    with Recording.open(path) as rec:
        assert len(rec) == 22
        assert [(s.source.kind, s.source.host_name, s.samples) for s in rec.sessions] == \
            [("live", "node-17", 11), ("simulated", "demo-node", 11)]
        assert rec.source.kind == "simulated"          # the file as a whole is not all live
        view = rec.choose_source()
    with view:
        assert len(view) == 11 and view.source.kind == "live"
        assert "left out 1 session of simulated" in view.left_out
        assert [view.wall_s(i) for i in range(11)] == [s.wall_s for s in live_samples]


def test_report_reads_one_source_and_says_what_it_left_out(mixed):
    path, live_samples, demo = mixed
    d, err = _json(path)
    assert d["samples"] == 11 and d["source_kind"] == "live" and d["simulated"] is False
    assert d["start_s"] == live_samples[0].wall_s and d["end_s"] == live_samples[-1].wall_s
    assert "left out 1 session of simulated, scenario demo, seed 0 on demo-node (11 samples)" \
        in d["left_out"] and "--source simulated" in d["left_out"]
    assert err.count("\n") == 1 and err.startswith("gpudisk-top: warning: ") and "mixes sources" in err
    d, _ = _json(path, "--source", "simulated")
    assert d["samples"] == 11 and d["simulated"] is True and d["source_kind"] == "simulated"
    assert d["source"] == "simulated, scenario demo, seed 0" and d["host_name"] == "demo-node"
    assert d["start_s"] == demo[0].wall_s and d["end_s"] == demo[-1].wall_s
    assert "--source live" in d["left_out"]
    text = run_command("report", path, "--source", "simulated", "--no-charts", timeout=120).stdout
    assert "(SIMULATED: simulated, scenario demo, seed 0)" in text and "sources: " in text


def test_export_never_mixes_sources(mixed):
    path, live_samples, demo = mixed
    out = run_command("export", path, "-f", "csv", "-o", "-", timeout=120)
    assert out.returncode == 0 and "mixes sources" in out.stderr
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert {float(r["wall_s"]) for r in rows} == {s.wall_s for s in live_samples[1:]}
    assert {r["name"] for r in rows if r["kind"] == "host"} == {"node-17"}
    out = run_command("export", path, "-f", "jsonl", "-o", "-", "--source", "simulated", timeout=120)
    assert [json.loads(x)["wall_s"] for x in out.stdout.splitlines()] == [s.wall_s for s in demo[1:]]
    out = run_command("export", path, "-f", "perfetto", "-o", "-", "--source", "simulated", timeout=120)
    trace = json.loads(out.stdout)
    names = [e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"]
    assert names and all("(SIMULATED)" in n for n in names)
    assert trace["otherData"]["source_kind"] == "simulated" and "left_out" in trace["otherData"]


@pytest.mark.parametrize("cmd", ["report", "export", "replay"])
def test_a_source_that_matches_nothing_is_a_one_line_error(mixed, cmd):
    path = mixed[0]
    extra = ["-f", "csv", "-o", "-"] if cmd == "export" else []
    out = run_command(cmd, path, *extra, "--source", "node-99", timeout=60)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "--source node-99" in out.stderr
    assert "1 session of live on node-17 (11 samples)" in out.stderr


def test_two_hosts_concatenated(tmp_path):
    a = record(tmp_path / "a.gdtrec", sim(20, scenario="healthy-cached"), header_origin=LIVE)
    b = record(tmp_path / "b.gdtrec", sim(30, scenario="healthy-cached", seed=1),
               header_origin=dataclasses.replace(LIVE, host_name="node-18"))
    path = concat(tmp_path / "ab.gdtrec", a, b)
    d, err = _json(path)
    assert d["samples"] == 20 and d["host_name"] == "node-17" and "--source node-18" in err
    d, _ = _json(path, "--source", "node-18")
    assert d["samples"] == 30 and d["host_name"] == "node-18"


def test_sessions_of_one_source_are_all_read(tmp_path):
    """Restarts of one recorder, and a session without samples of another source, are not
    a mix: no warning, every sample."""
    path = record(tmp_path / "r.gdtrec", sim(15))
    record(path, sim(15, seed=1, start_wall_s=1767225600.0 + 100))
    with open(path, "ab") as f:      # a live recorder stopped before its first sample
        f.write(frames.pack(frames.SESSION, json.dumps(make_header(LIVE)).encode()))
    with Recording.open(path) as rec:
        view = rec.choose_source()
        assert view is rec and rec.left_out is None and len(rec) == 30


# ------------------------------------------------------------------------------ damaged headers
@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    d = tmp_path_factory.mktemp("sim")
    return record(d / "s.gdtrec", sim(30)), d


def _bits_to_flip(path):
    """Every bit of the frame header and of the first 300 bytes of the header's JSON
    (the source, "simulated", the host and the kernel), then one bit in every 13 bytes."""
    h = header_frames(path)[0]
    for byte in range(h.offset, h.start + 300):
        for bit in range(8):
            yield byte, bit
    for byte in range(h.start + 300, h.end, 13):
        yield byte, byte % 8


def test_no_single_flipped_bit_in_a_session_header_makes_it_live(simulated):
    path, d = simulated
    bad = d / "bad.gdtrec"
    kinds = set()
    for byte, bit in _bits_to_flip(path):
        flip(path, bad, byte, bit)
        with Recording.open(bad) as rec:
            assert len(rec) == 30, (byte, bit)
            src = rec.source
            assert src.kind == "simulated", (byte, bit, src)
            assert src.damaged
            assert any("header of session 1" in w and "says simulated" in w for w in rec.warnings)
            kinds.add(src.label)
    # the label as far as it can be read (a flipped bit in it shows), never without
    # "simulated", always saying the header is damaged, printable
    assert {"simulated, scenario demo, seed 0 (session header damaged)",
            "simulated (session header damaged)"} <= kinds
    assert all(k.startswith("simulated") and k.endswith(" (session header damaged)")
               and k.isprintable() for k in kinds)


def test_the_label_survives_in_report_export_and_replay(simulated):
    """The issue's flip: "simulated" renamed ("simulatmd"), which a parser reads happily."""
    path, d = simulated
    h = header_frames(path)[0]
    at = open(path, "rb").read().index(b'"simulated": true', h.start) + 8    # the t of simulated
    bad = flip(path, d / "renamed.gdtrec", at, 3)
    assert open(bad, "rb").read()[at - 7:at + 3] == b'simulatmd"'
    rep, err = _json(bad)
    assert rep["simulated"] is True and rep["source_kind"] == "simulated" and rep["samples"] == 30
    assert "session header damaged" in rep["source"] and "header of session 1" in err
    text = run_command("report", bad, "--no-charts", timeout=120).stdout
    assert "(SIMULATED: simulated, scenario demo, seed 0 (session header damaged))" in text
    out = run_command("export", bad, "-f", "perfetto", "-o", "-", timeout=120)
    assert '"source_kind": "simulated"' in out.stdout and "(SIMULATED)" in out.stdout
    with Recording.open(bad) as rec:
        origin = replay_origin(rec, bad)
    assert "simulated" in origin.label and origin.kind == "simulated"


def _blank(path, dst, start: int, end: int) -> str:
    data = bytearray(open(path, "rb").read())
    data[start:end] = b"#" * (end - start)
    open(dst, "wb").write(bytes(data))
    return str(dst)


def test_a_header_that_cannot_tell_is_labelled_unknown_never_live(simulated):
    path, d = simulated
    h = header_frames(path)[0]
    data = open(path, "rb").read()
    # what says "simulated" is gone (more than one bit): the source cannot be told
    bad = _blank(path, d / "unknown.gdtrec", h.start + 100, data.index(b'"interval_s"', h.start))
    with Recording.open(bad) as rec:
        assert rec.source.kind == "unknown" and len(rec) == 30
        assert any("cannot be told" in w for w in rec.warnings)
        origin = replay_origin(rec, bad)
    rep, _ = _json(bad)
    assert rep["source_kind"] == "unknown" and rep["simulated"] is True and rep["samples"] == 30
    text = run_command("report", bad, "--no-charts", timeout=120).stdout
    assert "(SOURCE UNKNOWN: unknown (session header damaged))" in text
    from gpudisk_top.ui.replay_app import ReplayApp

    with Recording.open(bad) as rec:
        app = ReplayApp(rec, origin, show_self=False)
        assert "SOURCE?" in app.flags() and "REPLAY" in app.flags() and "DEMO" not in app.flags()


def test_a_damaged_header_in_the_middle_loses_no_session(tmp_path):
    """Before, the samples of a session whose header failed its CRC were taken for the
    session before's, and dropped as copies of its samples."""
    a, b = sim(40), sim(25, seed=1, start_wall_s=1767225600.0 + 1000)
    path = record(tmp_path / "two.gdtrec", a)
    record(path, b)
    second = header_frames(path)[1]
    bad = flip(path, tmp_path / "bad.gdtrec", second.start + 40, 2)
    with Recording.open(bad) as rec:
        assert len(rec) == 65 and len(rec.sessions) == 2
        assert [rec.wall_s(i) for i in range(65)] == [s.wall_s for s in a + b]
        assert [s.source.kind for s in rec.sessions] == ["simulated", "simulated"]
        view = rec.choose_source()
        assert view is rec                        # one source: nothing left out
        d = summary.build(rec).data
    assert d["samples"] == 65
    # a header gone altogether, frame and all: the samples numbered from 0 again tell
    gone = _blank(path, tmp_path / "gone.gdtrec", second.offset, second.end)
    with Recording.open(gone) as rec:
        assert len(rec) == 65
        assert [s.source.kind for s in rec.sessions] == ["simulated", "unknown"]
    rep, err = _json(gone)
    assert rep["samples"] == 40 and "--source unknown" in err
    rep, _ = _json(gone, "--source", "unknown")
    assert rep["samples"] == 25 and rep["source_kind"] == "unknown"


def test_a_damaged_live_header_stays_live_only_on_clear_evidence(tmp_path):
    path = record(tmp_path / "live.gdtrec", sim(20, scenario="healthy-cached"), header_origin=LIVE)
    h = header_frames(path)[0]
    data = open(path, "rb").read()
    elsewhere = flip(path, tmp_path / "a.gdtrec", data.index(b'"tool"', h.start) + 2, 1)
    in_source = flip(path, tmp_path / "b.gdtrec", data.index(b'"source": "live"', h.start) + 12, 1)
    with Recording.open(elsewhere) as rec:
        assert rec.source.kind == "live" and rec.source.damaged and rec.source.host_name == "node-17"
    with Recording.open(in_source) as rec:
        assert rec.source.kind == "unknown"


def test_salvage_reads_only_what_one_flip_cannot_forge():
    assert salvage(b'{"source": "live", "simulated": false, "host_name": "n1"}')["source_kind"] == "live"
    assert salvage(b'{"source": "live", "simulatqd": false}')["source_kind"] == "unknown"
    assert salvage(b'{"source": "livm", "simulated": true}')["source_kind"] == "simulated"
    assert salvage(b'{"kernel": "simulated"}')["source_kind"] == "simulated"
    assert salvage(b"")["source_kind"] == "unknown"
    assert salvage(b'{"interval_s": 1e400}').get("interval_s") is None


def test_a_version_1_recording_is_refused_in_one_line(tmp_path):
    """Format 1 was replaced before any release: such a file is named and refused, never
    misread as version 2."""
    path = tmp_path / "old.gdtrec"
    path.write_bytes(frames.preamble(1) + b"\0" * 64)
    with pytest.raises(UsageError) as err:
        Recording.open(path)
    assert str(err.value) == (f"{path}: recording format version 1 (recorded by a "
                              "development build before 0.1.0) is no longer read")
    run = subprocess.run([sys.executable, "-m", "gpudisk_top", "report", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr == f"gpudisk-top: error: {err.value}\n"