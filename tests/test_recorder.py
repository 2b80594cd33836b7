"""The recorder: appending, sessions, never writing over foreign files, syncing, rotation."""

from __future__ import annotations

import os
import time

import pytest

from gpudisk_top.errors import RuntimeFailure, UsageError
from gpudisk_top.record import Recorder, Recording, frames, make_header, writer
from gpudisk_top.record.header import FORMAT_VERSION
from recording_helpers import origin, sim_samples, write_recording


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


def test_device_info_is_stored_only_when_it_changes(samples):
    import dataclasses
    import json
    import zlib

    from gpudisk_top.record.format_v1 import Encoder

    enc = Encoder()
    payloads = []
    for i, s in enumerate(samples[:5]):
        if i >= 3:  # a new mountpoint appears at sample 3
            s = dataclasses.replace(s, devices=dict(s.devices))
            s.devices["sdb"] = dataclasses.replace(s.devices["sdb"], mountpoints=("/datasets", "/new"))
        payloads.append(enc.encode(s))
    z = zlib.decompressobj(-15)
    stored = ["v" in json.loads(z.decompress(p + b"\x00\x00\xff\xff")) for p in payloads]
    assert stored == [True, False, False, True, False]


def test_restart_appends_a_new_session(tmp_path, samples):
    path = tmp_path / "a.gdtrec"
    write_recording(path, samples[:10])
    write_recording(path, samples[10:25])
    with Recording.open(path) as rec:
        assert len(rec) == 25 and len(rec.sessions) == 2
        assert rec.sessions[1].first == 10 and rec.starts_session(10) and not rec.starts_session(11)
        assert [s for _, s in rec.samples()] == samples[:25]


def test_restart_cuts_off_a_torn_tail_and_keeps_the_rest(tmp_path, samples):
    path = tmp_path / "t.gdtrec"
    write_recording(path, samples[:10])
    data = open(path, "rb").read()
    found, _ = frames.scan(data, frames.PREAMBLE.size)
    last = [f for f in found if f.kind in frames.SAMPLE_TYPES][-1]
    open(path, "wb").write(data[:last.end - 7])     # killed while writing sample 10
    with Recorder(path, make_header(origin(), 1.0), sync_interval_s=None) as rec:
        assert any("torn tail" in w for w in rec.warnings)
        for s in samples[10:15]:
            rec.append(s)
    with Recording.open(path) as r:
        assert r.warnings == []
        assert [s for _, s in r.samples()] == samples[:9] + samples[10:15]


@pytest.mark.parametrize("content, message", [
    (b"important notes\n", "exists and is not a gpudisk-top recording; not writing over it"),
    (frames.PREAMBLE.pack(frames.MAGIC, FORMAT_VERSION + 1, 0), "newer than this gpudisk-top"),
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


def test_a_failed_write_leaves_a_readable_file(tmp_path, samples, monkeypatch):
    path = tmp_path / "f.gdtrec"
    rec = Recorder(path, make_header(origin(), 1.0), sync_interval_s=None)
    for s in samples[:5]:
        rec.append(s)
    real_write = os.write
    calls = {"n": 0}

    def flaky(fd, data):
        calls["n"] += 1
        if calls["n"] == 1:
            real_write(fd, bytes(data[:9]))     # part of the frame got out, then the disk filled
            raise OSError(28, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(writer.os, "write", flaky)
    with pytest.raises(RuntimeFailure, match="No space left on device"):
        rec.append(samples[5])
    rec.append(samples[6])                     # space again: a new segment starts
    rec.close()
    with Recording.open(path) as r:
        assert r.warnings == []
        assert [s for _, s in r.samples()] == samples[:5] + [samples[6]]


def test_max_size_rotates_and_keeps_the_total_under_the_budget(tmp_path):
    samples = sim_samples("demo", 400)
    path = tmp_path / "m.gdtrec"
    budget_mb = 0.25                                 # rotates every 64 KiB (the least part)
    write_recording(path, samples, max_size_mb=budget_mb)
    gens = sorted(p for p in os.listdir(tmp_path) if p.startswith("m.gdtrec."))
    total = sum(os.path.getsize(tmp_path / p) for p in os.listdir(tmp_path))
    assert gens and total <= budget_mb * 2**20
    # every file is a whole recording; together, newest first, they hold the newest samples
    got = []
    for name in ["m.gdtrec"] + [f"m.gdtrec.{n}" for n in range(1, len(gens) + 1)]:
        with Recording.open(tmp_path / name) as rec:
            assert rec.warnings == [] and rec.sessions[0].header["format_version"] == 1
            got = [s for _, s in rec.samples()] + got
    assert got == samples[len(samples) - len(got):]
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
