"""`gpudisk-top record` as a real process: kill -9, SIGTERM and SIGINT, bad arguments."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from gpudisk_top.commands import record as record_cmd
from gpudisk_top.errors import UsageError
from gpudisk_top.record import Recording, frames
from recording_helpers import ROOT, call, command, run_command


def _start(path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(command("record", "-o", str(path), "--demo", "-i", "0.05", *extra),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)


def _wait_for_samples(path, n: int, proc: subprocess.Popen, timeout_s: float = 30.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        if os.path.exists(path) and os.path.getsize(path) > frames.PREAMBLE.size:
            with Recording.open(path) as rec:
                if len(rec) >= n:
                    return len(rec)
        time.sleep(0.05)
    raise AssertionError(f"fewer than {n} samples after {timeout_s} s")


def test_kill_9_loses_nothing_that_was_written(tmp_path):
    path = tmp_path / "k.gdtrec"
    proc = _start(path)
    try:
        seen = _wait_for_samples(path, 20, proc)
        time.sleep(2.0)   # every sample older than 2 s must survive the kill
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    with Recording.open(path) as rec:
        assert len(rec) >= seen + 10
        assert [w for w in rec.warnings if "torn" not in w] == []
        assert rec.sessions[0].end is None          # it never ended cleanly
        decoded = [s for _, s in rec.samples()]
        assert len(decoded) == len(rec)
        walls = [s.wall_s for s in decoded]
        assert walls == sorted(walls) and walls[1] - walls[0] == pytest.approx(0.05)
    # and the recorder starts again on the same file: a second session after the first
    again = run_command("record", "-o", str(path), "--demo", "-i", "0.05", "--duration", "0.2")
    assert again.returncode == 0, again.stderr
    with Recording.open(path) as rec:
        assert len(rec.sessions) == 2 and rec.sessions[1].end["reason"] == "duration reached"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_stop_cleanly_with_everything_flushed(tmp_path, sig):
    path = tmp_path / "s.gdtrec"
    proc = _start(path)
    try:
        _wait_for_samples(path, 10, proc)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert f"; {sig.name}" in err and err.count("\n") == 1
    recorded = int(err.split("recorded ")[1].split(" samples")[0])
    with Recording.open(path) as rec:
        assert rec.warnings == []
        assert len(rec) == recorded
        assert rec.sessions[0].end == {"reason": sig.name, "samples": recorded,
                                       "ended": rec.sessions[0].end["ended"]}
        assert rec.sample(len(rec) - 1).wall_s == rec.end_s


def test_duration_and_header(tmp_path):
    path = tmp_path / "d.gdtrec"
    out = run_command("record", "-o", str(path), "--demo", "checkpoint-stalls", "--seed", "3",
                      "-i", "0.05", "--duration", "0.5")
    assert out.returncode == 0, out.stderr
    with Recording.open(path) as rec:
        assert len(rec) == 11
        assert rec.header["source"] == "simulated, scenario checkpoint-stalls, seed 3"
        assert rec.header["interval_s"] == 0.05 and rec.header["simulated"] is True


@pytest.mark.parametrize("args, message", [
    (["--max-size", "10", "--retain", "2"], "not allowed with argument"),
    (["--max-size", "0"], "must be a positive number of megabytes"),
    (["--duration", "soon"], "not a duration"),
    (["--demo", "no-such-scenario"], "no built-in scenario"),
])
def test_bad_arguments_are_usage_errors(tmp_path, args, message):
    with pytest.raises(UsageError, match=message):
        call(record_cmd, "-o", str(tmp_path / "x.gdtrec"), *args)


def test_not_a_recording_is_left_alone(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("keep me\n")
    out = run_command("record", "-o", str(path), "--demo", "--duration", "0.1")
    assert out.returncode == 2
    assert out.stderr == (f"gpudisk-top: error: {path} exists and is not a gpudisk-top "
                          "recording; not writing over it\n")
    assert path.read_text() == "keep me\n"


def test_listen_serves_the_recorders_samples_and_alerts_run(tmp_path):
    """record --listen: a scrape sees the same samples the file gets (the verdict, the
    disks), an [[alerts]] rule runs once, and SIGTERM still ends the session cleanly."""
    import urllib.request

    from test_serve import disk_busy_config

    fired = tmp_path / "fired.jsonl"
    cfg = disk_busy_config(tmp_path, "import sys; open(sys.argv[1], 'a').write('x' + chr(10))",
                           fired)
    path = tmp_path / "l.gdtrec"
    proc = subprocess.Popen(command("record", "-o", str(path), "--demo", "healthy-nvme-busy",
                                    "--demo-actions", "-i", "0.05", "--listen", "127.0.0.1:0",
                                    "--config", cfg),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        line = proc.stderr.readline()
        assert line.startswith("gpudisk-top: serving http://127.0.0.1:"), line
        url = line.split()[2]
        _wait_for_samples(path, 10, proc)
        body = urllib.request.urlopen(url, timeout=10).read().decode()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert 'gpudisk_top_state{state="healthy"} 1.0' in body
    assert "gpudisk_top_disk_utilization_ratio{" in body and 'device="nvme' in body
    assert fired.read_text() == "x\n"
    with Recording.open(path) as rec:
        assert rec.sessions[-1].end is not None and len(rec) >= 10


def test_record_without_listen_never_loads_the_exporter(tmp_path):
    path = tmp_path / "q.gdtrec"
    code = ("import sys; from gpudisk_top.cli import main; "
            f"rc = main(['record', '-o', {str(path)!r}, '--demo', '-i', '0.05', '--duration', '0.2', '-q']); "
            "assert 'prometheus_client' not in sys.modules and 'textual' not in sys.modules; "
            "sys.exit(rc)")
    import sys

    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_a_missing_directory_is_made_and_one_that_cannot_be_is_one_line(tmp_path):
    """README's `-o /var/log/gpudisk-top/node.gdtrec` on a fresh node (issue 38): the
    directory is made as `mkdir -p` makes it; where a file stands in its way, one line."""
    path = tmp_path / "log" / "gpudisk-top" / "node.gdtrec"
    out = run_command("record", "-o", str(path), "--demo", "demo", "-i", "0.05",
                      "--duration", "0.2")
    assert out.returncode == 0, out.stderr
    assert f"made {path.parent}" in out.stderr
    with Recording.open(path) as rec:
        assert len(rec) >= 2
    (tmp_path / "file").write_text("")
    out = run_command("record", "-o", str(tmp_path / "file" / "x.gdtrec"), "--demo", "demo",
                      "--duration", "0.2")
    assert out.returncode == 1
    assert out.stderr.count("\n") == 1 and "cannot make its directory" in out.stderr
    assert (tmp_path / "file").read_text() == ""
