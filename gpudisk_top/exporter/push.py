"""Pushgateway: for short jobs and nodes that Prometheus cannot scrape.

Every push replaces this node's group (HTTP PUT to /metrics/job/<job>/instance/<host>),
so a series that vanished here vanishes there too.  Pushes run in their own thread: a
gateway that is slow or down never delays sampling.  close() pushes once more, so a
short job's last interval is not lost.
"""

from __future__ import annotations

import threading
import urllib.parse

from prometheus_client import push_to_gateway

from gpudisk_top.errors import UsageError
from gpudisk_top.exporter.options import DEFAULT_JOB


def check_push_url(url: str) -> str:
    """The URL, if it is an http(s) URL with a host and, if any, a port that exists.
    Raises UsageError otherwise."""
    hint = "give the Pushgateway's URL, e.g. http://pushgateway:9091"
    try:
        parts = urllib.parse.urlparse(url)
        port = parts.port                       # ValueError past 65535 or not a number
        host = parts.hostname
    except ValueError as err:                   # 'http://[::1' (an unclosed bracket), ...
        raise UsageError(f"--push {url!r}: {err}; {hint}") from None
    if parts.scheme not in ("http", "https") or not host:
        raise UsageError(f"--push {url!r}: {hint}")
    if any(c.isspace() or not c.isprintable() for c in url):
        raise UsageError(f"--push {url!r}: a URL holds no spaces or control characters; {hint}")
    if port == 0:
        raise UsageError(f"--push {url!r}: port 0 is not a port to push to; {hint}")
    return url


class Pusher:
    """Pushes `registry` to `url` every interval_s seconds.  Failures go to `warn` (one
    line when pushing starts failing, one when it works again), never raise."""

    def __init__(self, url: str, registry, interval_s: float = 15.0, job: str = DEFAULT_JOB,
                 instance: str = "", warn=None, timeout_s: float | None = None) -> None:
        self.url = check_push_url(url)
        self.registry = registry
        self.interval_s = interval_s
        self.job = job
        self.grouping = {"instance": instance} if instance else {}
        self.timeout_s = timeout_s if timeout_s is not None else min(10.0, max(1.0, interval_s))
        self.warn = warn if warn is not None else (lambda line: None)
        self.pushes = 0           # successful pushes
        self.failures = 0
        self._failing = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._push_lock = threading.Lock()

    def start(self) -> "Pusher":
        self._thread = threading.Thread(target=self._loop, name="gpudisk-top push", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.push_once()

    def push_once(self) -> bool:
        """Push now; True when the gateway took it."""
        with self._push_lock:
            try:
                push_to_gateway(self.url, job=self.job, registry=self.registry,
                                grouping_key=self.grouping, timeout=self.timeout_s)
            except Exception as err:  # URLError, HTTPError, OSError, timeouts: all one line
                self.failures += 1
                if not self._failing:
                    self._failing = True
                    self.warn(f"push to {self.url} failed: {_one_line(err)}; retrying every "
                              f"{self.interval_s:g} s")
                return False
            self.pushes += 1
            if self._failing:
                self._failing = False
                self.warn(f"push to {self.url} works again")
            return True

    def close(self, final_push: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.timeout_s + 1)
            self._thread = None
        if final_push:
            self.push_once()


def _one_line(err: Exception) -> str:
    text = " ".join(str(err).split())
    return text or type(err).__name__
