"""A call of the fleet's source from a thread worker (the fleet table's refresh, a node
screen's range query): one caller of the source at a time, and a bug shown on the
screen instead of ending the app."""

from __future__ import annotations

from textual.worker import get_current_worker


def call_source(lock, call, failed):
    """From a thread worker: call() under `lock`, or, where it raised (a bug),
    failed("internal error: ...") to be shown as the source's own errors are; None when
    the worker was cancelled meanwhile (nobody waits for the answer).  Never raises."""
    worker = get_current_worker()
    try:
        with lock:
            answer = call()
    except Exception as err:     # noqa: BLE001 - a bug must show on screen, not end it
        answer = failed(f"internal error: {type(err).__name__}: {err}")
    return None if worker.is_cancelled else answer
