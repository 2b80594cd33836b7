"""Issue 25, item 1: one node's exporter, or whatever answers at the Prometheus URL, must
not break anybody's fleet view.  Crafted answers come from a loopback server
(fleet_harness.AnswerServer: one answer to every request, stops by itself); the real
command line reads them (`fleet --once`, `--json`, the screen on a pseudo-terminal).

- numbers that cannot be true (a state begun in 1e18 s, GPU at 1e308 or -500 %, a
  negative await, a GPU label '²') are dropped and counted, the node's row says "bad
  data from its exporter", the other node's row is whole;
- answers that are not Prometheus's (a proxy's HTML, a truncated body, nesting deeper
  than the stack, an integer of 400 digits, labels that are not text) are one-line
  errors, never an exception;
- a 64 MiB answer of tiny series is refused within seconds and 400 MB;
- a bug that ends the fleet screen prints one line and exits 1.
"""

from __future__ import annotations

import errno
import fcntl
import json
import math
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import threading
import time

import pytest

from fleet_harness import (PROMETHEUS, ROOT, AnswerServer, Fleet, exposition, gpudisk,
                           node_series, table_answer, wait_until)

from gpudisk_top.fleet.table import build_view
from gpudisk_top.fleet.text import render_text
from gpudisk_top.fleet.promapi import MAX_ANSWER_ITEMS, PromClient, parse_answer
from gpudisk_top.model import timefmt

HOSTILE = dict(since=1e18, gpus="²", util0=1e308, util1=-5, await_s=-1)


def fleet_cli(url: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(gpudisk("fleet", "--prometheus", url, "--once", *args),
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def hostile_fleet() -> bytes:
    now = time.time()
    return table_answer(node_series("good:9425", now), node_series("bad:9425", now, **HOSTILE))


def strict_json(text: str):
    def refuse(name):
        raise AssertionError(f"{name} in the JSON")
    return json.loads(text, parse_constant=refuse)


def test_one_nodes_impossible_numbers_are_dropped_and_the_table_stands():
    with AnswerServer(hostile_fleet()) as srv:
        doc = strict_json(fleet_cli(srv.url, "--json").stdout)
        text = fleet_cli(srv.url)
    assert doc["error"] is None
    rows = {n["node"]: n for n in doc["nodes"]}
    good, bad = rows["good:9425"], rows["bad:9425"]
    assert good["bad_series"] == 0 and good["gpus"] == [0, 1]
    assert good["gpu_util_pct"] == pytest.approx(4.5)
    assert good["evidence"][0]["r_await_ms"] == pytest.approx(48.0)
    assert abs(good["since_s"] - (time.time() - 300)) < 120
    # since 1e18, GPU 0 at 1e308, GPU 1 at -5 (as ratio), await -1 s: four series dropped
    assert bad["bad_series"] == 4
    assert bad["since_s"] is None and bad["gpu_util_pct"] is None
    assert bad["evidence"][0]["r_await_ms"] is None
    assert bad["evidence"][0]["aqu_sz"] == 31.0      # what can be true is kept
    assert bad["gpus"] == [] and bad["gpus_total"] == 2   # '²' is no GPU index
    assert text.returncode == 0 and text.stderr == "", text.stderr
    line = next(x for x in text.stdout.splitlines() if x.startswith("bad:9425"))
    assert "bad data from its exporter (4 series dropped)" in line
    good_line = next(x for x in text.stdout.splitlines() if x.startswith("good:9425"))
    assert "r_await 48.00 ms" in good_line and "bad data" not in good_line


@pytest.mark.parametrize("what, body, kw", [
    ("a proxy's HTML page", b"<html><body>502 Bad Gateway</body></html>",
     {"content_type": "text/html"}),
    ("a truncated body", hostile_fleet(), {"truncate_to": 300}),
    ("nesting deeper than the stack", b'{"status":"success","data":' + b"[" * 200_000, {}),
    ("an integer of 400 digits as a timestamp",
     b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{},'
     b'"value":[' + b"9" * 400 + b',"1"]}]}}', {}),
    ("labels that are not text",
     b'{"status":"success","data":{"resultType":"vector","result":[{"metric":'
     b'{"instance":["x"]},"value":[1,"1"]}]}}', {}),
    ("warnings that are not a list",
     b'{"status":"success","warnings":5,"data":{"resultType":"vector","result":[]}}', {}),
    ("an error of 300 KB with escapes",
     json.dumps({"status": "error", "errorType": "bad_data",
                 "error": "\x1b]0;owned\x07\n" * 30_000}).encode(), {"status": 400}),
])
def test_answers_that_are_not_prometheus_never_raise(what, body, kw):
    with AnswerServer(body, **kw) as srv:
        result = PromClient(srv.url, timeout_s=5).instant("up")
        view = build_view(result, None, time.time())
    if result.ok:              # well formed: shown, whatever its numbers
        assert view.error is None and all(r.bad_series for r in view.rows)
        json.dumps(view.to_json(), allow_nan=False)
        assert render_text(view)
    else:
        assert "\n" not in result.error and "\x1b" not in result.error, what
        assert len(result.error) < 400 and view.error == result.error


def test_an_html_answer_ends_fleet_once_in_one_line():
    with AnswerServer(b"<html>login</html>", content_type="text/html") as srv:
        proc = fleet_cli(srv.url)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "not Prometheus's JSON" in proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr


def test_a_64_mib_answer_is_refused_in_seconds_within_400_mb():
    one = ('{"metric":{"__name__":"gpudisk_top_gpu_utilization_ratio","instance":'
           '"node-%06d:9425","job":"gpudisk-top","gpu":"0"},"value":[1796200000.5,"0.5"]}')
    count = (64 * 2**20 - 200) // len(one % 0 + ",")
    body = ('{"status":"success","data":{"resultType":"vector","result":['
            + ",".join(one % i for i in range(count)) + "]}}").encode()
    assert 60 * 10**6 < len(body) <= 64 * 2**20 and count > MAX_ANSWER_ITEMS
    with AnswerServer(body) as srv:
        t0 = time.monotonic()
        rc, err, peak_kb = run_measured(gpudisk("fleet", "--prometheus", srv.url, "--once",
                                                "--timeout", "60"))
        took = time.monotonic() - t0
    assert rc == 1, err
    assert err.count("\n") == 1 and "more than 400,000" in err
    assert peak_kb < 400 * 1024, f"peak RSS {peak_kb // 1024} MB"
    assert took < 40, f"{took:.1f} s"     # was 51 s; a loaded machine gets slack


def run_measured(argv, timeout_s: float = 120) -> tuple[int, str, int]:
    """(exit status, stderr, peak RSS in KiB) of argv: wait4's rusage is that child's
    own, not the largest of every child pytest has had."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    err = []
    reader = threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout_s
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"not done in {timeout_s} s")
        time.sleep(0.05)
    proc.returncode = os.waitstatus_to_exitcode(status)
    reader.join(10)
    return proc.returncode, b"".join(err).decode(errors="replace"), usage.ru_maxrss


def test_times_from_outside_never_raise_when_shown():
    for t in (1e18, -1e18, math.inf, -math.inf, math.nan, 1e308):
        assert timefmt.clock(t) == "?" and timefmt.clock_hm(t) == "?"
        assert timefmt.date_clock(t) == "?"
    for s in (math.inf, math.nan, -math.inf):
        assert timefmt.duration(s) == "?" and timefmt.age(s) == "?"
        assert timefmt.duration_compact(s) == "?"
    assert timefmt.duration(125) == "2 min"         # a true time still reads as one


def test_parse_answer_of_a_matrix_with_impossible_times_never_raises():
    doc = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "gpudisk_top_gpu_utilization_ratio", "gpu": "0"},
         "values": [[math.inf, "0.5"], [math.nan, "0.5"], [1e300, "2"], [1, "-5"]]}]}}
    result = parse_answer(doc)
    assert result.ok
    from gpudisk_top.fleet.timeline import build_timeline

    tl = build_timeline(result, "n", 0.0, 60.0, 1.0)
    assert all(not c.gpu_util for c in tl.history.columns)     # none of them true


# ------------------------------------------------------------------ the screen
def _screen(argv, env, quit_after_s: float, bound_s: float = 30.0, until: bytes = b""):
    """argv on a pseudo-terminal (stderr to a pipe); 'q' once `until` was drawn (when
    given) or after quit_after_s; killed past bound_s.  Returns (exit status, stderr,
    screen bytes)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=subprocess.PIPE,
                            env=env, cwd=ROOT, start_new_session=True)
    os.close(slave)
    os.set_blocking(proc.stderr.fileno(), False)
    screen, err = bytearray(), bytearray()
    t0 = time.monotonic()
    sent = False
    try:
        while proc.poll() is None and time.monotonic() - t0 < bound_s:
            if not sent and (time.monotonic() - t0 > quit_after_s
                             or (until and until in screen)):
                os.write(master, b"q")
                sent = True
            ready, _, _ = select.select([master, proc.stderr], [], [], 0.1)
            for fd in ready:
                try:
                    chunk = os.read(fd if fd == master else fd.fileno(), 65536)
                except OSError as e:
                    if e.errno != errno.EIO:
                        raise
                    chunk = b""
                (screen if fd == master else err).extend(chunk)
                if fd == master and b"\x1b[6n" in chunk:
                    os.write(master, b"\x1b[30;120R")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
        proc.wait(10)
        try:
            err.extend(proc.stderr.read() or b"")
        except (OSError, TypeError):
            pass
        os.close(master)
    return proc.returncode, err.decode(errors="replace"), bytes(screen)


def test_the_fleet_screen_shows_a_hostile_node_and_quits_cleanly():
    env = dict(os.environ, TERM="xterm-256color")
    with AnswerServer(hostile_fleet()) as srv:
        rc, err, screen = _screen(gpudisk("fleet", "--prometheus", srv.url), env, 15.0,
                                  until=b"bad data")
    assert rc == 0 and "Traceback" not in err and "internal error" not in err, err
    assert b"bad data" in screen


CRASHING = """
import sys
from gpudisk_top import cli
from gpudisk_top.ui.widgets import fleet_table
def broken(*a, **k):
    raise RuntimeError("a bug \\x1b]0;x\\x07 [b]here[/b]")
fleet_table.device_text = broken
sys.exit(cli.main(["fleet", "--prometheus", sys.argv[1]]))
"""


def test_a_bug_that_ends_the_fleet_screen_is_one_line_and_exit_1():
    """A bug planted in the table's drawing (the thing under test is what the app does
    with a bug, not the bug)."""
    env = dict(os.environ, TERM="xterm-256color")
    env.pop("GPUDISK_TOP_DEBUG", None)
    with AnswerServer(hostile_fleet()) as srv:
        rc, err, _screen_bytes = _screen([sys.executable, "-c", CRASHING, srv.url], env,
                                         quit_after_s=20.0)
    lines = [x for x in err.splitlines() if x.strip()]
    assert rc == 1, (rc, err)
    assert len(lines) == 1 and lines[0].startswith("gpudisk-top: internal error: "
                                                   "RuntimeError: a bug"), err
    assert "\x1b" not in err and "[b]here[/b]" in lines[0]


# ------------------------------------------------------------------ through a real Prometheus
@pytest.mark.skipif(PROMETHEUS is None, reason="needs a Prometheus server (Debian package)")
def test_a_real_prometheus_scraping_one_hostile_exporter(tmp_path):
    """The issue's own case: Prometheus scrapes a node whose exporter says 1e18, '²',
    1e308, -500 % and a negative await, beside a good node; fleet --once (text and JSON)
    shows the good row whole and the bad one as bad data, exit 0."""
    nodes = (("good", None, "llama", False), ("bad", None, "llama", False))
    with Fleet(tmp_path, nodes=nodes) as fleet:
        def body(name, **bad):
            return lambda: exposition(node_series(name, time.time(), **bad))
        with AnswerServer(body("good"), "text/plain; version=0.0.4",
                          port=fleet.ports["good"]), \
                AnswerServer(body("bad", **HOSTILE), "text/plain; version=0.0.4",
                             port=fleet.ports["bad"]):
            def both_seen():
                proc = fleet_cli(fleet.base, "--json")
                doc = strict_json(proc.stdout) if proc.returncode == 0 else {}
                rows = {fleet.name_of(n["node"]): n for n in doc.get("nodes", [])}
                live = all(r.get("state") == "disk-starved" for r in rows.values())
                return rows if len(rows) == 2 and live else None
            rows = wait_until(both_seen, 60, "both nodes scraped")
            text = fleet_cli(fleet.base)
    assert rows["good"]["bad_series"] == 0 and rows["good"]["since_s"] is not None
    assert rows["bad"]["bad_series"] == 4 and rows["bad"]["since_s"] is None
    assert rows["bad"]["gpu_util_pct"] is None and rows["bad"]["gpus"] == []
    assert text.returncode == 0 and text.stderr == "", text.stderr
    assert "bad data from its exporter" in text.stdout
