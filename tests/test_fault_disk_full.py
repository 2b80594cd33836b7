"""Fault round (issue 9, item 4): a full disk never ends recording and never costs what
was recorded.  A real, small tmpfs fills up under the recorder: it compacts, drops only
the samples the disk refuses, says so once a minute, and starts again on its own file."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid

import pytest

from gpudisk_top.errors import UsageError
from gpudisk_top.session.live import Feed
from gpudisk_top.record import Recorder, Recording, make_header
from gpudisk_top.sim import Simulator, builtin
from recording_helpers import command, origin, ROOT
from slack import slack

pytestmark = pytest.mark.root(reason="mounting a tmpfs needs root")


@pytest.fixture
def small_fs(tmp_path):
    """A 256 KiB tmpfs: the demo node's rows (~3 KB a sample) would fill it in about 85
    samples; its blocks take a tenth of that."""
    mnt = tmp_path / f"full-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


def record(path, *extra: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(command("record", "-o", str(path), "--demo", "-i", "0.005", *extra),
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def samples_in(path) -> int:
    """How many samples a reader finds in `path` now (0 before its first is written)."""
    try:
        with Recording.open(path) as rec:
            return len(rec)
    except UsageError:
        return 0


def record_until_full(path, kept_over: int, still_s: float = 2.0) -> subprocess.CompletedProcess:
    """`record` until the disk under `path` has refused samples, more than `kept_over` were
    kept and no more were for `still_s` (every sample refused since: compaction has made
    all the room it can), then SIGTERM (not SIGINT: a shell's background job ignores it,
    and so does the recorder it starts).  A condition, not a duration: at -i 0.005 a busy
    machine took 37 samples a second, not 200, and an 8 s run never filled the disk."""
    proc = subprocess.Popen(command("record", "-o", str(path), "--demo", "-i", "0.005"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    lines: list[str] = []

    def read_stderr():
        for line in proc.stderr:
            lines.append(line)

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    deadline = time.monotonic() + 60 * slack()
    kept, kept_since = 0, time.monotonic()
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
            now, last = samples_in(path), kept
            if now != last:
                kept, kept_since = now, time.monotonic()
            elif (kept > kept_over and time.monotonic() - kept_since >= still_s
                  and any("No space left on device" in x for x in lines[:])):
                break
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60 * slack())          # stderr is the reader's alone
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(timeout=10)
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.read(),
                                       "".join(lines))


def test_recording_goes_on_when_the_disk_fills_and_keeps_what_it_wrote(small_fs):
    path = small_fs / "node.gdtrec"
    rows_alone = 256 * 1024 // 3000
    proc = record_until_full(path, kept_over=3 * rows_alone)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    full = [x for x in lines if "No space left on device" in x]
    # said once (the run is shorter than a minute), with what happens
    assert len(full) == 1 and "dropped until it takes them again" in full[0], lines
    assert "dropped (the disk refused them)" in lines[-1]
    with Recording.open(path) as rec:
        kept = len(rec)
        assert rec.warnings == []                # whole frames only, nothing damaged
        assert rec.sessions[-1].end is not None
        walls = [rec.wall_s(i) for i in range(kept)]
    # compaction made room for several times what the rows alone would have held
    assert kept > 3 * rows_alone, kept
    assert walls == sorted(walls)

    # a restart on the same full file (systemd Restart=always) starts and keeps it whole
    again = record(path, "--duration", "1")
    assert again.returncode == 0, again.stderr
    with Recording.open(path) as rec:
        assert len(rec) >= kept and rec.warnings == []
        assert [rec.wall_s(i) for i in range(kept)] == walls


def fill(fs, leave_bytes: int = 0):
    """Fill the filesystem but `leave_bytes`; returns the filler file."""
    filler = fs / "filler"
    st = os.statvfs(fs)
    size = max(0, st.f_bavail * st.f_frsize - leave_bytes)
    with open(filler, "wb") as f:
        try:
            f.write(b"\0" * (size + (0 if leave_bytes else 1 << 20)))
        except OSError:
            pass                                 # ENOSPC: the disk is full now
    return filler


def test_a_recorder_started_on_a_full_disk_waits_for_room(small_fs):
    filler = fill(small_fs)
    path = small_fs / "late.gdtrec"
    lines = []
    sim = Simulator(builtin("demo"), seed=0, interval_s=1.0)
    rec = Recorder(path, make_header(origin(), 1.0), sync_interval_s=None, warn=lines.append)
    for _ in range(5):
        assert "No space left on device" in rec.append(sim.sample())
    filler.unlink()                              # room again
    for _ in range(5):
        assert rec.append(sim.sample()) is None
    rec.close()
    assert rec.dropped == 5 and len(lines) == 1
    with Recording.open(path) as r:
        assert len(r) == 5 and r.warnings == []


def test_the_dashboard_feed_goes_on_and_says_it_is_not_recording(small_fs):
    fill(small_fs, leave_bytes=96 * 1024)
    path = small_fs / "dash.gdtrec"
    sim = Simulator(builtin("demo"), seed=0, interval_s=1.0)
    rec = Recorder(path, make_header(origin(), 1.0), sync_interval_s=None, warn=lambda _: None)
    feed = Feed(sim, 1.0, on_update=lambda u: None, on_sample=rec.append)
    seqs = []
    saw_full = False
    for _ in range(600):
        update = feed.step()
        seqs.append(update.seq)
        saw_full |= feed.sink_error is not None and "No space left" in feed.sink_error
    rec.close()
    assert seqs == list(range(1, 601))          # the screen never froze
    assert saw_full
    with Recording.open(path) as r:
        assert r.warnings == [] and len(r) > 20


def first_row_bytes(sample) -> int:
    """The bytes of a session's first row (it carries every record) for this sample."""
    from gpudisk_top.record import v2

    layout, vals = v2.Flattener().flatten(sample)
    return len(v2.RowCoder().encode(0, layout, vals)[0])


def test_a_disk_with_less_room_than_a_first_row_still_records_whole_samples(small_fs):
    # the matrix's fills/4096k-48k-free: a session's header and first row (tens of KB on
    # the demo node) never fit, so every sample was dropped and an empty file was left,
    # which every reader refuses; a sample now goes into a block of its own
    fill(small_fs, leave_bytes=40 * 1024)
    sim = Simulator(builtin("demo"), seed=0, interval_s=1.0)
    first = sim.sample()
    st = os.statvfs(small_fs)
    assert first_row_bytes(first) > st.f_bavail * st.f_frsize
    path = small_fs / "node.gdtrec"
    lines = []
    rec = Recorder(path, make_header(origin(), 1.0), sync_interval_s=None, warn=lines.append)
    dropped = [rec.append(first)] + [rec.append(sim.sample()) for _ in range(29)]
    rec.close()
    assert dropped[0] is None                    # the first sample is kept
    assert rec.samples >= 2 and rec.samples + rec.dropped == 30
    assert len(lines) == 1 and "No space left on device" in lines[0]
    with Recording.open(path) as r:
        assert r.warnings == [] and len(r) == rec.samples
        assert r.sessions[-1].end is not None and r.sessions[-1].end["samples"] == rec.samples
        walls = [s.wall_s for _, s in r.samples()]
    assert walls == sorted(walls) and walls[0] == first.wall_s and len(walls) == rec.samples


def test_a_crash_at_any_sample_on_a_filling_disk_leaves_every_sample_readable(small_fs):
    # after a compaction in place the next row was written as it had been encoded before
    # it: the differences from a row that had become part of the block, which no reader
    # can decode; the next block replaced it, but a crash before that cost the samples
    # after it.  The recording is read after every sample, as a kill -9 would leave it.
    fill(small_fs, leave_bytes=128 * 1024)
    path = small_fs / "node.gdtrec"
    sim = Simulator(builtin("demo"), seed=0, interval_s=1.0)
    rec = Recorder(path, make_header(origin(), 1.0), sync_interval_s=None, warn=lambda _: None)
    kept = 0
    try:
        for _ in range(100):
            kept += rec.append(sim.sample()) is None
            with Recording.open(path) as r:
                assert len(r) == kept and r.warnings == []
                r.sample(len(r) - 1)             # decodes the rows since the last block
    finally:
        rec.close()
    assert rec.dropped > 0                       # the disk did fill


def test_record_on_a_disk_with_no_room_at_all_says_so_and_leaves_no_file(small_fs):
    fill(small_fs)
    path = small_fs / "node.gdtrec"
    proc = record(path, "--duration", "0.5")
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[-1].startswith(f"gpudisk-top: error: recorded nothing to {path}: the disk "
                                "refused all"), lines
    assert lines[-1].endswith("no file left behind")
    assert not any("error" in x for x in lines[:-1]), lines
    assert not path.exists()
