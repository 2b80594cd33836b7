"""The recorder: appending, sessions, never writing over foreign files, syncing, rotation."""

from __future__ import annotations

import os
import time

import pytest

from gpudisk_top.errors import UsageError
from gpudisk_top.record import Recorder, Recording, frames, make_header, v2, writer
from gpudisk_top.record.header import FORMAT_VERSION
from recording_helpers import abandon, canonical, origin, sim_samples, write_recording


@pytest.fixture(scope="module")
def samples():
    return sim_samples("demo", 40)


def test_header_is_self_describing(tmp_path, samples):
    path = write_recording(tmp_path / "h.gdtrec", samples[:3])
    with Recording.open(path) as rec:
        h = rec.header
        assert h["format"] == "gpudisk-top recording" and h["format_version"] == FORMAT_VERSION
        assert h["source"] == "simulated, scenario demo, seed 0" and h["simulated"] is True
        assert (h["host_name"], h["kernel"], h["interval_s"]) == ("demo-node", "simulated", 1.0)
        assert len(h["gpus"]) == 8 and h["gpus"][0]["name"].startswith("NVIDIA")
        assert {d["name"] for d in h["devices"]} >= {"sdb", "sdb1", "nvme2n1"}
        assert h["schema"]["disk"][:3] == ["major", "minor", "nfields"]
        assert h["tool_version"] and h["started"].startswith("2026-01-01T")
        assert rec.sessions[0].end["reason"] == "closed" and rec.sessions[0].end["samples"] == 3
        # what made the summaries: report uses them only with this model and thresholds
        assert h["derived"]["model_version"] and h["derived"]["thresholds"]["enter_intervals"] == 3


def test_records_are_written_in_a_row_only_when_they_change(samples):
    """Device identity, GPU and process identities are in the first row of a run and then
    only when they change."""
    import dataclasses
    import json

    fl, rc = v2.Flattener(), v2.RowCoder()
    bodies = []
    for i, s in enumerate(samples[:5]):
        if i >= 3:  # a new mountpoint appears at sample 3
            s = dataclasses.replace(s, devices=dict(s.devices))
            s.devices["sdb"] = dataclasses.replace(s.devices["sdb"], mountpoints=("/datasets", "/new"))
        layout, vals = fl.flatten(s)
        payload, token = rc.encode(i, layout, vals)
        rc.accepted(token)
        fl.accept(s)
        bodies.append(json.loads(payload[4:]))
    assert bodies[0][0] is not None                     # the layout and every record
    assert [b[0] for b in bodies[1:]] == [None] * 4
    changed = [[vals_of[1] for vals_of in b[1] if isinstance(vals_of[1], list)
                and vals_of[1][:1] == ["sdb"]] for b in bodies[1:]]
    assert changed == [[], [], [["sdb", "sdb", 8, 16, "disk", None, [], False, "SSD",
                                 changed[2][0][9], ["/datasets", "/new"], False, None, None, None, None]], []]
    assert bodies[1][3] is not None                     # the rest as differences


def test_restart_appends_a_new_session(tmp_path, samples):
    path = tmp_path / "a.gdtrec"
    write_recording(path, samples[:10])
    write_recording(path, samples[10:25])
    with Recording.open(path) as rec:
        assert len(rec) == 25 and len(rec.sessions) == 2
        assert rec.sessions[1].first == 10 and rec.starts_session(10) and not rec.starts_session(11)
        assert [s for _, s in rec.samples()] == canonical(samples[:10]) + canonical(samples[10:25])


def test_restart_cuts_off_a_torn_tail_and_keeps_the_rest(tmp_path, samples):
    path = tmp_path / "t.gdtrec"
    rec = Recorder(path, make_header(origin(), 1.0), sync_interval_s=None)
    for s in samples[:10]:
        rec.append(s)
    abandon(rec)
    data = open(path, "rb").read()
    found, _ = frames.scan(data, frames.PREAMBLE.size)
    last = found[-1]
    assert last.kind == frames.ROW
    open(path, "wb").write(data[:last.end - 7])     # killed while writing sample 10
    with Recorder(path, make_header(origin(), 1.0), sync_interval_s=None) as rec:
        assert any("torn tail" in w for w in rec.warnings)
        for s in samples[10:15]:
            rec.append(s)
    with Recording.open(path) as r:
        assert r.warnings == []
        assert [s for _, s in r.samples()] == canonical(samples[:9]) + canonical(samples[10:15])


def test_two_recorders_never_write_one_file(tmp_path, samples):
    path = tmp_path / "l.gdtrec"
    with Recorder(path, make_header(origin(), 1.0), sync_interval_s=None) as rec:
        rec.append(samples[0])
        with pytest.raises(UsageError, match="another gpudisk-top recorder is writing it"):
            Recorder(path, sync_interval_s=None)
    with Recording.open(path) as r:
        assert len(r) == 1 and r.warnings == []


def test_a_block_copy_cut_short_by_a_crash_loses_nothing(tmp_path, samples, monkeypatch):
    """Rows become a block in three steps (the block after the rows, synced; over the
    rows, synced; the file cut after it).  Power lost at any moment leaves every sample
    readable, and the next recorder finishes the job."""
    path = tmp_path / "c.gdtrec"
    moments = []
    real_sync = os.fdatasync

    def snapshot(fd):
        real_sync(fd)
        moments.append(path.read_bytes())

    monkeypatch.setattr(writer.os, "fdatasync", snapshot)
    rec = Recorder(path, make_header(origin(), 1.0), segment_samples=8, sync_interval_s=None)
    for s in samples[:8]:
        rec.append(s)                               # the 8th writes the block
    abandon(rec)
    monkeypatch.setattr(writer.os, "fdatasync", real_sync)
    done = path.read_bytes()
    after_1, after_2 = moments[0], moments[1]       # the block after the rows; over them
    found, _ = frames.scan(after_1, frames.PREAMBLE.size)
    rows = [f for f in found if f.kind == frames.ROW]
    block = found[-1]
    assert len(rows) == 8 and block.kind == frames.BLOCK and len(done) < len(after_1)
    frame = after_1[block.offset:block.end]
    start = rows[0].offset
    # power lost in the middle of step 2: half the copy reached the disk
    torn = after_1[:start] + frame[:len(frame) // 2] + after_1[start + len(frame) // 2:]
    expected = canonical(samples[:8])
    for name, content in (("after step 1", after_1), ("in step 2", torn),
                          ("after step 2", after_2), ("done", done)):
        path.write_bytes(content)
        with Recording.open(path) as r:
            assert [s for _, s in r.samples()] == expected, name
            assert r.warnings == [], (name, r.warnings)
        with Recorder(path, make_header(origin(), 1.0), sync_interval_s=None) as rec:
            assert rec.warnings == [], name
            assert rec.bytes_written == len(done), name      # it finished the copy
            rec.append(samples[8])
        with Recording.open(path) as r:
            assert [s for _, s in r.samples()] == expected + canonical(samples[8:9]), name
            assert r.warnings == [], (name, r.warnings)


@pytest.mark.parametrize("content, message", [
    (b"important notes\n", "exists and is not a gpudisk-top recording; not writing over it"),
    (frames.PREAMBLE.pack(frames.MAGIC, FORMAT_VERSION + 1, 0), "newer than this gpudisk-top"),
    (frames.preamble(1), "is a recording of format version 1; this recorder writes version 2"),
])
def test_never_writes_over_a_foreign_file(tmp_path, content, message):
    path = tmp_path / "x"
    path.write_bytes(content)
    with pytest.raises(UsageError, match=message):
        Recorder(path, sync_interval_s=None)
    assert path.read_bytes() == content


def test_sync_thread_fdatasyncs_within_a_second(tmp_path, samples, monkeypatch):
    synced = []
    real = os.fdatasync
    monkeypatch.setattr(writer.os, "fdatasync", lambda fd: (synced.append(time.monotonic()), real(fd)))
    rec = Recorder(tmp_path / "s.gdtrec", make_header(origin(), 1.0), sync_interval_s=0.2)
    try:
        t0 = time.monotonic()
        rec.append(samples[0])
        deadline = t0 + 2.0
        while not synced and time.monotonic() < deadline:
            time.sleep(0.02)
        assert synced and synced[0] - t0 <= 1.0
        n = len(synced)
        time.sleep(0.5)
        assert len(synced) == n  # nothing written since: no sync
    finally:
        rec.close()


def test_a_refused_write_compacts_the_tail_and_writes_the_sample_again(tmp_path, samples, monkeypatch):
    path = tmp_path / "f.gdtrec"
    rec = Recorder(path, make_header(origin(), 1.0), sync_interval_s=None)
    for s in samples[:5]:
        rec.append(s)
    real_write = os.pwrite
    calls = {"n": 0}

    def flaky(fd, data, offset):
        calls["n"] += 1
        if calls["n"] == 1:
            real_write(fd, bytes(data[:9]), offset)  # part of the frame got out, then the disk filled
            raise OSError(28, "No space left on device")
        return real_write(fd, data, offset)

    monkeypatch.setattr(writer.os, "pwrite", flaky)
    rec.append(samples[5])                     # the tail became a block, then the row went in
    rec.append(samples[6])
    rec.close()
    assert rec.dropped == 0 and rec.warnings == []
    with Recording.open(path) as r:
        assert r.warnings == []
        assert [s for _, s in r.samples()] == canonical(samples[:7])


def test_writes_refused_for_good_drop_only_those_samples_and_say_so_once(tmp_path, samples, monkeypatch):
    path = tmp_path / "f.gdtrec"
    lines = []
    rec = Recorder(path, make_header(origin(), 1.0), sync_interval_s=None, warn=lines.append)
    for s in samples[:5]:
        rec.append(s)
    real_write = os.pwrite
    full = {"on": True}

    def refusing(fd, data, offset):
        if full["on"]:
            raise OSError(28, "No space left on device")
        return real_write(fd, data, offset)

    monkeypatch.setattr(writer.os, "pwrite", refusing)
    for s in samples[5:8]:
        rec.append(s)                          # never raises: recording goes on
    full["on"] = False
    rec.append(samples[8])                     # room again
    rec.close()
    assert rec.dropped == 3
    assert len(lines) == 1, lines              # a full disk is said once, whatever it cost
    assert "No space left on device" in lines[0] and "dropped" in lines[0]
    with Recording.open(path) as r:
        assert r.warnings == []
        assert [s for _, s in r.samples()] == canonical(samples[:5] + [samples[8]])


def test_max_size_rotates_and_keeps_the_total_under_the_budget(tmp_path):
    samples = sim_samples("demo", 400)
    path = tmp_path / "m.gdtrec"
    budget_mb = 0.15                                 # rotates every 64 KiB (the least part)
    write_recording(path, samples, max_size_mb=budget_mb)
    gens = sorted(p for p in os.listdir(tmp_path) if p.startswith("m.gdtrec."))
    total = sum(os.path.getsize(tmp_path / p) for p in os.listdir(tmp_path))
    assert gens and total <= budget_mb * 2**20
    # every file is a whole recording; together, newest first, they hold the newest samples
    got = []
    by_wall = {s.wall_s: i for i, s in enumerate(samples)}
    for name in ["m.gdtrec"] + [f"m.gdtrec.{n}" for n in range(1, len(gens) + 1)]:
        with Recording.open(tmp_path / name) as rec:
            assert rec.warnings == [] and rec.sessions[0].header["format_version"] == FORMAT_VERSION
            part = [s for _, s in rec.samples()]
            first = by_wall[part[0].wall_s]
            assert part == canonical(samples[first:first + len(part)])   # one session each
            got = part + got
    assert [s.wall_s for s in got] == [s.wall_s for s in samples[len(samples) - len(got):]]
    assert len(got) < len(samples)  # the oldest were dropped, by design


def test_retain_rotates_daily_and_drops_old_days(tmp_path):
    # 1 sample an hour for 5 days: each local day goes to its own generation
    samples = sim_samples("healthy-cached", 5 * 24)
    for i, s in enumerate(samples):
        s.wall_s = 1767225600.0 + 3600.0 * i
        s.mono_s = 1000.0 + 3600.0 * i
    path = tmp_path / "d.gdtrec"
    with Recorder(path, make_header(origin("healthy-cached"), 3600.0), retain_days=2,
                  sync_interval_s=None) as rec:
        for s in samples:
            rec.append(s)
    days = []
    for name in sorted(os.listdir(tmp_path)):
        with Recording.open(tmp_path / name) as r:
            days.append({time.strftime("%Y-%m-%d", time.localtime(r.wall_s(i))) for i in range(len(r))})
    assert all(len(d) == 1 for d in days)             # one day per file
    newest = samples[-1].wall_s
    with Recording.open(path) as r:
        assert r.end_s == newest
    for name in os.listdir(tmp_path):
        with Recording.open(tmp_path / name) as r:
            assert r.end_s >= newest - 2 * 86400      # nothing older than the policy keeps
    assert len(os.listdir(tmp_path)) in (3, 4)


def test_a_model_failure_costs_the_summaries_not_the_samples(tmp_path, samples, monkeypatch):
    """Summaries are derived: if the model or the detector fails on a sample, the
    recorder keeps recording raw samples (report replays what has no summary)."""
    from gpudisk_top.record import derived
    from gpudisk_top.report import summary, tally

    real = derived.Model.new
    calls = {"n": 0}

    def failing(sample, last):
        calls["n"] += 1
        if calls["n"] > 20:
            raise ValueError("a bug in the model")
        return real(sample, last)

    monkeypatch.setattr(derived.Model, "new", staticmethod(failing))
    path = tmp_path / "f.gdtrec"
    with Recorder(path, make_header(origin(), 1.0), segment_samples=10, sync_interval_s=None) as rec:
        for s in samples[:35]:
            rec.append(s)
        assert any("no more summaries in this session (ValueError: a bug in the model)" in w
                   for w in rec.warnings)
    monkeypatch.setattr(derived.Model, "new", staticmethod(real))
    with Recording.open(path) as r:
        assert [s for _, s in r.samples()] == canonical(samples[:35])
        assert [(g, b.n) for g, b, _ in r.summaries()] == [(0, 10), (10, 10)]
        # a window this short is charted from every sample (report/tally.py
        # MIN_CHART_BLOCKS); as a long one, only what has no summary is replayed
        assert summary.build(r).data["replayed_samples"] == 35
        monkeypatch.setattr(tally, "MIN_CHART_BLOCKS", 0)
        d = summary.build(r).data
        assert d["samples"] == 35 and d["replayed_samples"] == 15
