"""tests/alone.py's rule, on a real pytest-xdist run: the tests of the real-load modules
start only after every other test of the run has ended and every other worker has exited,
and run one after another on one worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent

CONFTEST = f"""
import sys
sys.path.insert(0, {str(HERE)!r})
import pytest

@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from alone import AloneLastScheduling
    return AloneLastScheduling(config, log, modules=frozenset({{"test_load.py"}}))
"""

# each test writes when it ran and in which worker process; the workers' own exit time is
# written by a session-finish hook
TEST = """
import json, os, time, pytest

@pytest.mark.parametrize("i", range({n}))
def test_one(i):
    start = time.monotonic()
    time.sleep({sleep_s})
    with open(os.path.join(os.environ["LOG_DIR"], f"{{__name__}}-{{i}}.json"), "w") as f:
        json.dump({{"start": start, "end": time.monotonic(), "pid": os.getpid()}}, f)
"""

EXIT_HOOK = """
import json, os, time
def pytest_sessionfinish(session):
    if hasattr(session.config, "workerinput"):
        with open(os.path.join(os.environ["LOG_DIR"], f"exit-{os.getpid()}.json"), "w") as f:
            json.dump({"pid": os.getpid(), "end": time.monotonic()}, f)
"""


def test_the_real_load_modules_run_last_alone_on_one_worker(tmp_path):
    suite, logs = tmp_path / "suite", tmp_path / "logs"
    suite.mkdir()
    logs.mkdir()
    (suite / "conftest.py").write_text(CONFTEST + EXIT_HOOK)
    (suite / "test_cpu_a.py").write_text(TEST.format(n=6, sleep_s=0.2))
    (suite / "test_load.py").write_text(TEST.format(n=3, sleep_s=0.3))
    (suite / "test_cpu_b.py").write_text(TEST.format(n=6, sleep_s=0.2))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "3",
         "--dist", "load", "-c", os.devnull, "--rootdir", str(suite), str(suite)],
        cwd=suite, env={**os.environ, "LOG_DIR": str(logs)}, capture_output=True, text=True,
        timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "15 passed" in run.stdout, run.stdout

    ran = {p.stem: json.loads(p.read_text()) for p in logs.glob("test_*.json")}
    exits = {e["pid"]: e["end"] for e in map(json.loads, (p.read_text() for p in logs.glob("exit-*.json")))}
    load = [v for k, v in ran.items() if k.startswith("test_load-")]
    others = [v for k, v in ran.items() if not k.startswith("test_load-")]
    assert len(load) == 3 and len(others) == 12
    # the parallel part used more than one worker (else this proves nothing about "alone")
    assert len({v["pid"] for v in others}) >= 2
    # one worker ran every real-load test, one after another
    assert len({v["pid"] for v in load}) == 1
    load.sort(key=lambda v: v["start"])
    assert all(a["end"] <= b["start"] for a, b in zip(load, load[1:]))
    # ... after every other test ended and every other worker exited
    first = load[0]["start"]
    assert max(v["end"] for v in others) <= first
    alone_pid = load[0]["pid"]
    assert all(end <= first for pid, end in exits.items() if pid != alone_pid), (exits, first)
    assert len(exits) == 3
