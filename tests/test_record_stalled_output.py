"""Issue 25, item 6: the loop never waits on the disk it writes to.  The recording lives on
a real FUSE filesystem (tests/slowfs.py --writable) whose daemon the test stops with
SIGSTOP: every write, sync and open on it then blocks in the kernel, as on a hung
network filesystem.  `record` must go on sampling, say it is not recording, mark the
samples it could not keep as a gap that `report` shows, and stop on SIGTERM within a few
seconds even while the output is stalled.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import slowfs

from cli_run import gdt, gdt_argv
from gpudisk_top.record import Recorder, Recording, make_header
from gpudisk_top.record.queued import QueuedRecorder
from gpudisk_top.sim import Simulator, builtin

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def report(path: str) -> str:
    proc = gdt("report", path)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def samples_in(path: str) -> int:
    with Recording.open(path) as rec:
        return len(rec)


def start_record(path: str) -> tuple[subprocess.Popen, list[str]]:
    proc = subprocess.Popen(gdt_argv("record", "-o", path, "-i", "0.1"), cwd=ROOT,
                            stderr=subprocess.PIPE, text=True)
    lines: list[str] = []

    def read():
        for line in proc.stderr:       # line by line, as they come
            lines.append(line)
    threading.Thread(target=read, daemon=True).start()
    return proc, lines


def wait_for(what, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if what():
            return True
        time.sleep(0.1)
    return False


def stop_within(proc: subprocess.Popen, bound_s: float) -> float:
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(bound_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
        raise AssertionError(f"record did not stop within {bound_s} s of SIGTERM")
    return time.monotonic() - t0


def test_a_stalled_output_costs_a_marked_gap_never_the_sampling(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    with slowfs.mounted(str(src), writable=True) as (mnt, daemon):
        path = os.path.join(mnt, "node.gdtrec")
        proc, lines = start_record(path)
        try:
            assert wait_for(lambda: os.path.exists(src / "node.gdtrec")
                            and os.path.getsize(src / "node.gdtrec") > 0, 30)
            time.sleep(1.0)
            os.kill(daemon.pid, signal.SIGSTOP)           # the output stalls
            stalled_at = time.time()
            # 60 samples queue in 6 s at 0.1 s; beyond, the samples are not kept and
            # it says so (sampling goes on: the count of lost ones grows)
            assert wait_for(lambda: any("not recording" in x for x in lines), 30), lines
            time.sleep(3.0)
            os.kill(daemon.pid, signal.SIGCONT)           # it answers again
            resumed_at = time.time()
            time.sleep(2.0)
        finally:
            os.kill(daemon.pid, signal.SIGCONT)
            stop_within(proc, 10)
        assert proc.returncode == 0, lines
        end = [x for x in lines if "recorded" in x][-1]
        assert "not recorded (the output stalled; marked as a gap)" in end, end
        text = report(path)
    gap = next((x for x in text.splitlines() if x.startswith("NOT RECORDED ")), None)
    assert gap is not None, text
    assert "the output stalled" in gap and "samples lost" in gap
    lost = int(gap.split("stalled, ")[1].split()[0])
    assert lost > 0
    with Recording.open(str(src / "node.gdtrec")) as rec:
        walls = [rec.wall_s(i) for i in range(len(rec))]
        ends = [s.end for s in rec.sessions]
    # the gap lies inside the stall, between two sessions' samples
    (g,) = [e["gap"] for e in ends if e and "gap" in e]
    assert stalled_at - 1 <= g["from_s"] <= g["to_s"] <= resumed_at + 1
    assert any(w < g["from_s"] for w in walls) and any(w > g["to_s"] for w in walls)
    assert not any(g["from_s"] <= w <= g["to_s"] for w in walls)


def test_sigterm_ends_record_within_seconds_while_the_output_is_stalled(tmp_path):
    """record does its last work and says so within seconds of SIGTERM, whatever the
    output does.  (The process's exit status itself waits for the FUSE daemon: the kernel
    closes the recording's fd at exit, and a FUSE close sends a FLUSH that a stopped
    daemon never answers; no userspace program can exit past that.  A real NFS or disk
    stall does not have it.)"""
    src = tmp_path / "src"
    src.mkdir()
    with slowfs.mounted(str(src), writable=True) as (mnt, daemon):
        proc, lines = start_record(os.path.join(mnt, "node.gdtrec"))
        try:
            assert wait_for(lambda: os.path.exists(src / "node.gdtrec")
                            and os.path.getsize(src / "node.gdtrec") > 0, 30)
            time.sleep(1.0)
            written = os.path.getsize(src / "node.gdtrec")
            os.kill(daemon.pid, signal.SIGSTOP)
            time.sleep(1.0)
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            assert wait_for(lambda: any("; SIGTERM" in x for x in lines), 8), lines
            took = time.monotonic() - t0
        finally:
            os.kill(daemon.pid, signal.SIGCONT)
        proc.wait(20)
        assert took < 8, f"{took:.1f} s"
        assert proc.returncode == 0, lines
        assert os.path.getsize(src / "node.gdtrec") >= written      # nothing written is lost
        assert samples_in(str(src / "node.gdtrec")) > 0


APPENDS = 20   # samples appended while the output is stopped: 4 queue, 1 in hand


def test_queued_recorder_never_blocks_append_and_marks_the_gap(tmp_path):
    """In-process, with a Recorder whose writes block on a real stalled FUSE mount: each
    append returns at once, the gap is written once the output answers."""
    src = tmp_path / "src"
    src.mkdir()
    sim = Simulator(builtin("healthy-cached"), seed=1)
    with slowfs.mounted(str(src), writable=True) as (mnt, daemon):
        rec = QueuedRecorder(Recorder(os.path.join(mnt, "r.gdtrec"), make_header(),
                                      summaries=False, sync_interval_s=None),
                             max_queued=4, stall_after_s=0.5)
        rec.append(sim.sample())
        assert wait_for(lambda: rec.samples == 1, 20)
        os.kill(daemon.pid, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            whys = [rec.append(sim.sample()) for _ in range(APPENDS)]
            assert time.monotonic() - t0 < 2.0            # never waits on the output
            # 4 queued, and 1 in the writer's hand (blocked) once it has taken one: the
            # rest are lost; a write or two the kernel takes before the stopped daemon is
            # asked (on a loaded machine the writer may run first) is kept too
            assert APPENDS - rec.lost >= 4
            assert rec.lost >= 1 and whys[-1] is not None and "stalled" in whys[-1]
        finally:
            os.kill(daemon.pid, signal.SIGCONT)
        rec.append(sim.sample())
        assert rec.close("test")
        with Recording.open(os.path.join(mnt, "r.gdtrec")) as r:
            gaps = [s.end["gap"] for s in r.sessions if s.end and "gap" in s.end]
            assert len(r) == 1 + (APPENDS - rec.lost) + 1
        # one gap a run of lost samples (the writer may take one between two runs)
        assert gaps and sum(g["samples"] for g in gaps) == rec.lost


def test_an_alert_log_on_a_stalled_filesystem_never_holds_the_sampling(tmp_path):
    """The alert engine's log file on the stopped FUSE mount: update() (the sampling
    thread's) returns at once, the line is written when the filesystem answers again."""
    from test_alerts import disk_rule, engine, model

    src = tmp_path / "src"
    src.mkdir()
    with slowfs.mounted(str(src), writable=True) as (mnt, daemon):
        log = os.path.join(mnt, "alerts.log")
        eng, warns = engine(disk_rule(name="to-file", for_samples=1, log=log))
        os.kill(daemon.pid, signal.SIGSTOP)
        # bounded even where update() does wait on the file (the failure this catches)
        resume = threading.Timer(10.0, os.kill, (daemon.pid, signal.SIGCONT))
        resume.start()
        try:
            t0 = time.monotonic()
            for i in range(1, 4):
                eng.update(model(i, {"nvme0n1": 99}))
            assert time.monotonic() - t0 < 2.0
        finally:
            os.kill(daemon.pid, signal.SIGCONT)
            resume.cancel()
        eng.close()
        assert wait_for(lambda: (src / "alerts.log").exists()
                        and "to-file:" in (src / "alerts.log").read_text(), 10), warns


def test_the_live_feed_goes_on_and_says_not_recording_while_the_output_stalls(tmp_path):
    """The dashboard's sampling thread (session/live.py Feed) with --record's writer on a
    stopped FUSE mount: updates keep coming, and sink_error (the header's NOT RECORDING)
    says why."""
    from gpudisk_top.session.live import Feed

    src = tmp_path / "src"
    src.mkdir()
    updates = []
    with slowfs.mounted(str(src), writable=True) as (mnt, daemon):
        rec = QueuedRecorder(Recorder(os.path.join(mnt, "r.gdtrec"), make_header(),
                                      summaries=False), max_queued=5, stall_after_s=1.0)
        feed = Feed(Simulator(builtin("healthy-cached"), seed=1, interval_s=0.1), 0.1,
                    updates.append, on_sample=rec.append)
        feed.start()
        try:
            assert wait_for(lambda: rec.samples >= 2, 20)
            os.kill(daemon.pid, signal.SIGSTOP)
            before = len(updates)
            # sampling goes on meanwhile, and says why nothing is recorded
            assert wait_for(lambda: len(updates) >= before + 20, 20), len(updates) - before
            why = feed.sink_error or ""
            assert "stalled" in why or "no write" in why, why
        finally:
            os.kill(daemon.pid, signal.SIGCONT)
            feed.stop()
        rec.close("test")
        assert rec.lost > 0
