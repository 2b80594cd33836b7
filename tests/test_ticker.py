"""session/ticker.py: the one tick policy of the live thread, `serve` and `record`, and
the one SIGINT/SIGTERM helper."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from gpudisk_top.session.ticker import StopSignals, Ticker
from slack import slack


def test_ticks_stay_on_the_grid():
    t = Ticker(1.0, now_s=100.0)
    assert t.advance(now_s=100.3) == pytest.approx(0.7) and t.due_s == 101.0
    assert abs(t.advance(now_s=101.05) - 0.95) < 1e-9 and t.due_s == 102.0   # no drift


def test_a_late_loop_skips_the_ticks_it_missed_instead_of_bursting():
    t = Ticker(1.0, now_s=100.0)
    wait = t.advance(now_s=103.4)          # a sample that took 3.4 s
    assert t.due_s == 104.0 and abs(wait - 0.6) < 1e-9
    assert t.ticks == 4                    # the missed ticks count (record --duration)
    assert t.advance(now_s=104.0) == 1.0   # then on the grid again


def test_a_late_loop_exactly_on_a_tick_samples_at_once():
    t = Ticker(0.5, now_s=0.0)
    assert t.advance(now_s=1.0) == 0.0 and t.due_s == 1.0


def test_a_new_interval_starts_a_grid_no_later_than_the_old_next_tick():
    t = Ticker(10.0, now_s=0.0)
    t.advance(now_s=0.1)                   # next tick at 10
    t.retime(1.0, now_s=2.0)               # shorter: the next tick comes at 3, not 10
    assert t.due_s == 3.0
    assert t.advance(now_s=3.0) == 1.0 and t.due_s == 4.0
    t.retime(60.0, now_s=3.5)              # longer: the tick already due at 4 stays
    assert t.due_s == 4.0
    assert t.advance(now_s=4.0) == 60.0


def test_sigterm_wakes_the_wait_and_the_old_handler_comes_back():
    before = signal.getsignal(signal.SIGTERM)
    stop = StopSignals()
    try:
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
        t0 = time.monotonic()
        stop.wait(10.0)
        took = time.monotonic() - t0
        assert stop.reason == "SIGTERM" and took < 5.0 * slack(), took
        stop.wait(10.0)                    # once stopped, waits return at once
        assert time.monotonic() - t0 < 5.0 * slack()
    finally:
        stop.restore()
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_wait_works_past_1024_open_files():
    """serve --nodes 256 holds over a thousand sockets: the stop pipe's fd is then past
    select()'s FD_SETSIZE, where select.select raised ValueError and ended serve."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"RLIMIT_NOFILE's hard limit is {hard}: no fd past 1024 here")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = []
    try:
        while not held or held[-1] < 1100:
            held.append(os.open(os.devnull, os.O_RDONLY))
        stop = StopSignals()
        try:
            assert stop._rfd > 1024
            t0 = time.monotonic()
            stop.wait(0.05)                # a plain timeout, past FD_SETSIZE
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
            stop.wait(10.0)
            assert stop.reason == "SIGTERM" and time.monotonic() - t0 < 5.0 * slack()
        finally:
            stop.restore()
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_off_the_main_thread_it_installs_nothing_and_sleeps():
    got = {}

    def body():
        stop = StopSignals()
        t0 = time.monotonic()
        stop.wait(0.2)
        got["slept"] = time.monotonic() - t0
        got["reason"] = stop.reason
        stop.restore()

    before = signal.getsignal(signal.SIGINT)
    th = threading.Thread(target=body)
    th.start()
    th.join(5)
    assert got["reason"] is None and 0.15 <= got["slept"] < 3.0
    assert signal.getsignal(signal.SIGINT) is before


def test_one_interval_stepping_rule_for_the_dashboard_and_the_fleet():
    """+/- step to the next longer or shorter choice, stay at either end, and an interval
    between two choices (from --interval) steps to its neighbours, on both screens."""
    from gpudisk_top.session.live import INTERVALS_S as DASHBOARD
    from gpudisk_top.session.ticker import stepped_interval
    from gpudisk_top.ui.fleet_app import INTERVALS_S as fleet

    assert fleet[:2] == (1.0, 2.0) and 15.0 in fleet and 3.0 not in fleet
    assert stepped_interval(1.0, +1, DASHBOARD) == 2.0
    assert stepped_interval(0.25, -1, DASHBOARD) == 0.25 and stepped_interval(60.0, +1, fleet) == 60.0
    assert (stepped_interval(20.0, -1, fleet), stepped_interval(20.0, +1, fleet)) == (15.0, 30.0)
    assert (stepped_interval(3.0, -1, fleet), stepped_interval(3.0, +1, fleet)) == (2.0, 5.0)
    assert stepped_interval(0.1, -1, fleet) == 0.1 and stepped_interval(0.1, +1, fleet) == 1.0


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
                                 signal.SIGRTMIN + 2])
def test_every_signal_that_ends_a_process_stops_the_wait(sig):
    """Issue 35, 2: only SIGINT and SIGTERM were answered; SIGHUP (an SSH session dropped,
    a tmux pane closed) ended record and serve by its default action, and what
    --delayacct had switched on stayed on."""
    before = signal.getsignal(sig)
    stop = StopSignals()
    try:
        threading.Timer(0.2, os.kill, (os.getpid(), sig)).start()
        t0 = time.monotonic()
        stop.wait(10.0)
        assert stop.signum == sig and time.monotonic() - t0 < 5.0 * slack()
        assert stop.reason == (signal.Signals(sig).name if sig < signal.SIGRTMIN
                               else "SIGRTMIN+2")
    finally:
        stop.restore()
    assert signal.getsignal(sig) == before


def test_a_signal_ignored_at_start_stays_ignored():
    """`nohup` ignores SIGHUP: record under it must record on through a hang-up."""
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        stop = StopSignals()
        try:
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)
            stop.wait(0.3)
            assert stop.reason is None
        finally:
            stop.restore()
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, old)


def test_a_loop_sleeping_in_its_selector_is_woken_by_the_signal():
    """The dashboard's asyncio loop never calls wait(): call_in() hands it the signal at
    once, and one that came before it was handed over is answered when it is."""
    import asyncio

    stop = StopSignals()
    try:
        os.kill(os.getpid(), signal.SIGHUP)          # while "starting": before the loop
        got = []

        async def main():
            loop = asyncio.get_running_loop()
            done = loop.create_future()
            stop.call_in(loop, lambda reason: (got.append(reason),
                                               len(got) == 2 and done.set_result(None)))
            loop.call_later(0.2, os.kill, os.getpid(), signal.SIGTERM)
            t0 = time.monotonic()
            await asyncio.wait_for(done, 10.0 * slack())
            return time.monotonic() - t0

        took_s = asyncio.run(main())
        assert got == ["SIGHUP", "SIGTERM"] and took_s < 5.0 * slack()
        stop.call_in(None, None)
        os.kill(os.getpid(), signal.SIGTERM)        # the loop has closed: only the flag
        assert stop.reason == "SIGTERM" and got == ["SIGHUP", "SIGTERM"]
    finally:
        stop.restore()
