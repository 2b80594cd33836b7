"""The /metrics endpoint: our own registry, rendered from the latest Model on scrape.

    server = MetricsServer("127.0.0.1:9425", labels=device_labels).start()
    ...                                   # in the sampler thread, once per interval:
    server.update(model, verdict, detector.episodes, free_space, fired, loss)
    ...
    server.close()

update() only swaps a reference under a lock, so sampling never waits on a scrape; a
scrape renders the latest frame (once: two scrapes of one frame share the rendering) and
never waits on sampling.  prometheus_client's global REGISTRY is not touched.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import threading
import time

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.process_collector import ProcessCollector

from gpudisk_top.errors import RuntimeFailure, UsageError, warn
from gpudisk_top.exporter.families import Frame, Renderer, episode_counts, sample_age
from gpudisk_top.exporter.httpserve import BoundedHTTPServer, raise_nofile
from gpudisk_top.exporter.jobseries import JobBook
from gpudisk_top.exporter.labels import DeviceLabels
from gpudisk_top.exporter.options import (DEFAULT_HOST, DEFAULT_JOB_RETENTION_S, DEFAULT_LISTEN,
                                          DEFAULT_PORT)
from gpudisk_top.verdict.ledger import Ledger
from gpudisk_top.model.select import DeviceFilter

# The classic text format, whatever the scraper prefers: every Prometheus reads it, and
# prometheus_client encodes it in half the time of OpenMetrics (whose extras, exemplars
# and _created series, we do not use).  Not gzipped either: ~60 kB every 15 s costs the
# network nothing and would cost the node CPU.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def parse_listen(text: str) -> tuple[str, int]:
    """'127.0.0.1:9425', '[::1]:9425', 'node17:9425' or a bare port (on 127.0.0.1) ->
    (host, port).  Raises UsageError for anything else, and for ':9425', which other
    exporters read as every interface: that must be said as 0.0.0.0:9425."""
    text = text.strip()
    if text.isdigit():
        host, port_text = DEFAULT_HOST, text
    elif text.startswith("["):
        host, sep, port_text = text[1:].partition("]:")
        if not sep:
            raise UsageError(f"--listen {text!r}: write an IPv6 address as [::1]:{DEFAULT_PORT}")
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep:
            raise UsageError(f"--listen {text!r}: give HOST:PORT, e.g. {DEFAULT_LISTEN}")
        if not host:
            raise UsageError(f"--listen {text!r}: give the address to bind: "
                             f"127.0.0.1{text} for this node only, or 0.0.0.0{text} for "
                             "every interface")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise UsageError(f"--listen {text!r}: {port_text!r} is not a port number (0-65535)")
    return host, int(port_text)


STALE_INTERVALS = 3       # a frame older than this many intervals is not served as now
MIN_STALE_S = 5.0


class ModelCollector:
    """A prometheus_client collector over the latest Frame; thread-safe.

    Every scrape also gets gpudisk_top_sample_age_seconds.  When sampling stalls (a
    source that blocks), a frame older than STALE_INTERVALS intervals is not served as
    if it were now: only the meta series and the age remain, so the data series go
    stale in Prometheus instead of repeating old numbers."""

    def __init__(self, renderer: Renderer, clock=time.monotonic) -> None:
        self.renderer = renderer
        self._clock = clock
        self._lock = threading.Lock()
        self._frame: Frame | None = None
        self._frame_at: float | None = None
        self._rendered_for: Frame | None = None
        self._rendered: list = renderer.render(None)

    def set_frame(self, frame: Frame) -> None:
        with self._lock:
            self._frame = frame
            self._frame_at = self._clock()

    def collect(self):
        with self._lock:
            frame, at = self._frame, self._frame_at
        if frame is None:
            return list(self._rendered)
        age_s = self._clock() - at
        interval_s = getattr(frame.model, "interval_s", 0.0) or 1.0
        if age_s > max(MIN_STALE_S, STALE_INTERVALS * interval_s):
            return self.renderer.render(frame, stalled=True) + [sample_age(age_s)]
        with self._lock:
            if frame is self._rendered_for:
                return list(self._rendered) + [sample_age(age_s)]
        families = self.renderer.render(frame)
        with self._lock:
            self._rendered_for, self._rendered = frame, families
        return list(families) + [sample_age(age_s)]


def metrics_app(registry):
    """A WSGI app: GET /metrics is the exposition; / says where it is; the rest is 404."""
    def app(environ, start_response):
        path = environ.get("PATH_INFO", "/")
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            start_response("405 Method Not Allowed", [("Allow", "GET, HEAD")])
            return [b""]
        if path == "/metrics":
            body = generate_latest(registry)
            start_response("200 OK", [("Content-Type", CONTENT_TYPE),
                                      ("Content-Length", str(len(body)))])
            return [body]
        if path == "/":
            body = b"gpudisk-top: metrics at /metrics\n"
            start_response("200 OK", [("Content-Type", "text/plain; charset=utf-8")])
            return [body]
        start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
        return [b"not found: metrics are at /metrics\n"]
    return app


class MetricsServer:
    """Prometheus exposition of the latest model.

    listen: 'HOST:PORT' (see parse_listen), or None for no HTTP endpoint (push only).
    labels: user labels per device ([devices] in the config file).
    dev_filter: which disks are exported (default: as the disk table, whole disks and
    dm/md devices that did I/O).  alert_names: rules whose fired counters start at 0.
    source: "live" or the simulated scenario, for gpudisk_top_build_info.
    job_retention_s: how long an ended job's series stay (exporter/jobseries.py).
    """

    def __init__(self, listen: str | None = DEFAULT_LISTEN, labels: DeviceLabels | None = None,
                 dev_filter: DeviceFilter | None = None, alert_names=(),
                 source: str = "live",
                 job_retention_s: float = DEFAULT_JOB_RETENTION_S) -> None:
        self.listen = listen
        self.address = parse_listen(listen) if listen is not None else None
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = ModelCollector(Renderer(labels, dev_filter, alert_names, source))
        self.registry.register(self.collector)
        ProcessCollector(registry=self.registry)       # process_cpu_seconds_total, ...
        self._lock = threading.Lock()
        self._fired: dict[str, int] = {}
        self._samples = 0
        # the stall ledger's counters: each verdict's interval added once, from 0 at start
        self._ledger = Ledger()
        # each job's series and counters, kept across updates (exporter/jobseries.py)
        self._jobs = JobBook(job_retention_s)
        self._httpd = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ HTTP
    def start(self) -> "MetricsServer":
        """Bind and serve in a daemon thread.  Raises UsageError for an address that is
        not this machine's, RuntimeFailure for a port in use or not allowed; each is one
        line naming --listen."""
        if self.address is None or self._httpd is not None:
            return self
        host, port = self.address
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                       flags=socket.AI_PASSIVE)
        except socket.gaierror as err:
            raise UsageError(f"--listen {self.listen}: cannot resolve {host!r}: "
                             f"{err.strerror}") from None
        family = infos[0][0]
        # a bounded server (exporter/httpserve.py): idle or slow clients cost a descriptor
        # each, never a thread, and never the collectors' descriptors
        raise_nofile()
        try:
            self._httpd = BoundedHTTPServer(host, port, family, metrics_app(self.registry))
        except OSError as err:
            raise _bind_error(self.listen, host, port, err) from None
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        name="gpudisk-top metrics", daemon=True)
        self._thread.start()
        if not _loopback(host):
            warn(f"--listen {self.listen}: every host that can reach this one can read its "
                 "metrics (GPU process names, devices, mountpoints); 127.0.0.1 keeps them "
                 "on this node")
        return self

    @property
    def port(self) -> int | None:
        """The bound port (the one the kernel chose for port 0)."""
        return self._httpd.server_address[1] if self._httpd is not None else None

    @property
    def url(self) -> str | None:
        if self._httpd is None:
            return None
        host = self.address[0]
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    # ------------------------------------------------------------------ data
    def update(self, model, verdict=None, episodes=None, free_space=None, fired=None,
               loss=None) -> None:
        """Hand over the latest interval; called from the sampler thread.  episodes: the
        Detector's `episodes` list or {state: count}; free_space: FreeSpaceWatch.read();
        fired: the alerts AlertEngine.update() returned for this model; loss: the step's
        IntervalLoss of it (verdict/step.py Step.loss), added to the ledger's counters (the
        node's, and each job's from its `parts`).  Never raises for a missing part (None
        leaves its series out)."""
        counts = episode_counts(episodes)
        with self._lock:
            for alert in fired or ():
                self._fired[alert.rule] = self._fired.get(alert.rule, 0) + 1
            self._samples += 1
            self._ledger.add(loss)
            self._jobs.update(model, verdict, episodes, loss)
            jobs, left_out = self._jobs.series()
            frame = Frame(model=model, verdict=verdict, episodes=counts,
                          free_space=tuple(free_space or ()), alerts_fired=dict(self._fired),
                          samples=self._samples, ledger=self._ledger.copy(), jobs=jobs,
                          jobs_left_out=left_out)
        self.collector.set_frame(frame)

    def render_text(self) -> str:
        """The exposition a scrape would get now (for tests and --once style dumps)."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry).decode("utf-8")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False              # a name: it may resolve to any interface


def _bind_error(listen: str, host: str, port: int, err: OSError) -> Exception:
    if err.errno == errno.EADDRINUSE:
        return RuntimeFailure(f"--listen {listen}: port {port} is already in use on {host} "
                              "(another gpudisk-top serve or exporter?); choose another port")
    if err.errno == errno.EADDRNOTAVAIL:
        return UsageError(f"--listen {listen}: {host} is not an address of this machine")
    if err.errno == errno.EACCES:
        return RuntimeFailure(f"--listen {listen}: permission denied (ports below 1024 need root)")
    return RuntimeFailure(f"--listen {listen}: cannot listen: {err.strerror or err}")
