"""DeadlineWorker: work that may hang is waited for at most a deadline, never started
twice while it hangs, and never keeps the process from exiting."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from gpudisk_top.deadline import DeadlineWorker


def test_a_quick_job_is_answered_and_a_hung_one_is_not_waited_for():
    release = threading.Event()
    calls = []

    def job():
        calls.append(1)
        if len(calls) == 2:
            release.wait()
        return len(calls)

    w = DeadlineWorker(job, "test")
    assert w.ask(1.0) == (True, 1) and w.busy_s is None
    t0 = time.monotonic()
    assert w.ask(0.2) == (False, None)                # the second call hangs
    assert time.monotonic() - t0 < 1.0
    assert w.busy_s is not None and w.busy_s >= 0.2
    assert w.ask(0.2) == (False, None) and len(calls) == 2   # not started again while it hangs
    release.set()
    deadline = time.monotonic() + 5
    while w.busy_s is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert w.ask(1.0) == (True, 3)                    # it answers again once it returned


def test_an_exception_is_handed_back_and_the_thread_lives_on():
    state = {"n": 0}

    def job():
        state["n"] += 1
        if state["n"] == 1:
            raise RuntimeError("driver error")
        return "ok"

    w = DeadlineWorker(job, "test")
    done, result = w.ask(1.0)
    assert done and isinstance(result, RuntimeError)
    assert w.ask(1.0) == (True, "ok")


def test_close_runs_the_closing_on_the_thread_unless_a_job_hangs():
    ran = []
    w = DeadlineWorker(lambda: 1, "test")
    w.ask(1.0)
    w.close(lambda: ran.append(threading.current_thread().name), wait_s=2.0)
    assert ran == ["test"]
    hung = DeadlineWorker(lambda: threading.Event().wait(), "hung")
    hung.ask(0.05)
    t0 = time.monotonic()
    hung.close(lambda: ran.append("never"), wait_s=2.0)
    assert time.monotonic() - t0 < 0.5 and ran == ["test"]


def test_closing_again_returns_at_once_and_a_close_after_a_hang_still_runs_the_closing():
    # the dashboard's feed closes the sampler, and whoever opened it closes it again: the
    # second close waited its 2 s for a thread that had ended
    ran = []
    w = DeadlineWorker(lambda: 1, "test")
    w.ask(1.0)
    w.close(lambda: ran.append("first"), wait_s=2.0)
    t0 = time.monotonic()
    w.close(lambda: ran.append("second"), wait_s=2.0)
    assert time.monotonic() - t0 < 0.5 and ran == ["first"]
    # a close while a job hung runs no closing; one after the job returned still does
    release = threading.Event()
    late = DeadlineWorker(release.wait, "late")
    late.ask(0.05)
    late.close(lambda: ran.append("skipped"), wait_s=2.0)
    release.set()
    deadline = time.monotonic() + 5
    while late.busy_s is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    late.close(lambda: ran.append("late"), wait_s=2.0)
    assert ran == ["first", "late"]


def test_a_job_that_never_returns_does_not_keep_the_process_alive():
    code = ("import threading, sys\n"
            "from gpudisk_top.deadline import DeadlineWorker\n"
            "w = DeadlineWorker(lambda: threading.Event().wait(), 'hung')\n"
            "print(w.ask(0.1))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20)
    assert proc.returncode == 0 and proc.stdout.strip() == "(False, None)"
