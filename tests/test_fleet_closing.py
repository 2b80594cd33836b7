"""The fleet app while it closes (issue 38, item 7): a refresh's answer that lands once the
app has begun to close is dropped, not drawn.

A busy machine's Prometheus answered a refresh of `fleet --job bert` just as the test
left the app: the answer was drawn into screens whose widgets were being taken down, and
the app died with `internal error: NoMatches: No nodes match 'FleetHeader'` (or
'JobBanner': whichever had gone first).  That moment comes by chance; here the refresh is
held on the worker's thread (a source of Prometheus's captured answers) until the app
has closed, and its answer is then handed to the app as its message would be."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from slack import slack

from gpudisk_top.ui.fleet_app import FleetApp, ViewReady
from gpudisk_top.ui.screens.fleet_job import JobScreen

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "screenshots"))

import fleet_shots  # noqa: E402


class HeldSource(fleet_shots.CannedSource):
    """Answers at once until hold(); the refresh after that answers on release()."""

    def __init__(self) -> None:
        super().__init__()
        self.held = False
        self.asked = threading.Event()
        self.go = threading.Event()
        self.answer = None                  # the held refresh's view, once it answered

    def refresh(self, now_s=None, spark=None):
        view = super().refresh()
        if self.held:
            self.asked.set()
            self.go.wait(30 * slack())
            self.answer = view
        return view


async def until(pilot, fn, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s * slack()
    while not fn():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await pilot.pause(0.05)


@pytest.mark.parametrize("job", [None, "llama"])
async def test_an_answer_that_lands_once_the_app_closed_is_not_drawn(job):
    source = HeldSource()
    app = FleetApp(source, interval_s=0.3, job=job)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.view is not None and (
            job is None or isinstance(app.screen, JobScreen)), 20, "the first view")
        shown = app.view
        source.held = True
        await until(pilot, source.asked.is_set, 20, "a refresh in flight")
        asked_mono = app._asked_mono
    assert not app.is_running
    source.go.set()
    deadline = time.monotonic() + 20 * slack()
    while source.answer is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert source.answer is not None, "the held refresh never answered"
    # the answer to the refresh in flight, as its message reaches the app: the old app
    # drew it into the widgets already taken down (NoMatches)
    app.on_view_ready(ViewReady(source.answer, asked_mono, app._generation))
    assert app.view is shown
