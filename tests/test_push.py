"""Pushgateway: pushes recorded by a tiny local HTTP server, then the real gateway
(Debian's prometheus-pushgateway) when it is installed."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from model_factory import model, verdict
from test_exporter import SERVE
from gpudisk_top.errors import UsageError
from gpudisk_top.exporter import MetricsServer, Pusher
from gpudisk_top.exporter.push import check_push_url


class Recorder(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        self.pushes: list[tuple[str, str, str]] = []    # (method, path, body)
        self.status = 200
        super().__init__(("127.0.0.1", 0), _Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    def _record(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        self.server.pushes.append((self.command, self.path, body))
        self.send_response(self.server.status)
        self.end_headers()

    do_PUT = do_POST = _record

    def log_message(self, *args):
        pass


@pytest.fixture
def gateway():
    rec = Recorder()
    yield rec
    rec.shutdown()
    rec.server_close()


def fed_registry():
    server = MetricsServer(None)
    server.update(model(1, {"sda": 55.0}), verdict("healthy"))
    return server.registry


def test_push_puts_the_group_of_this_node(gateway):
    pusher = Pusher(gateway.url, fed_registry(), interval_s=60, instance="node-17")
    assert pusher.push_once()
    (method, path, body), = gateway.pushes
    assert method == "PUT" and path == "/metrics/job/gpudisk-top/instance/node-17"
    assert 'gpudisk_top_disk_utilization_ratio{class="SSD",device="sda",mountpoint="/datasets"} 0.55' in body
    assert 'gpudisk_top_state{state="healthy"} 1.0' in body


def test_pushes_every_interval_and_once_more_at_close(gateway):
    pusher = Pusher(gateway.url, fed_registry(), interval_s=0.2, job="train-42").start()
    time.sleep(1.0)
    pusher.close()
    n = len(gateway.pushes)
    assert n >= 3 and pusher.pushes == n     # ~5; fewer on a loaded machine
    assert all(p[1] == "/metrics/job/train-42" for p in gateway.pushes)


def test_a_failing_gateway_is_one_warning_until_it_works_again(gateway):
    warns = []
    pusher = Pusher(gateway.url, fed_registry(), interval_s=60, warn=warns.append)
    gateway.status = 500
    assert not pusher.push_once() and not pusher.push_once()
    assert len(warns) == 1 and warns[0].startswith(f"push to {gateway.url} failed: ")
    assert warns[0].endswith("retrying every 60 s") and "\n" not in warns[0]
    gateway.status = 200
    assert pusher.push_once()
    assert warns[1] == f"push to {gateway.url} works again"
    down = Pusher("http://127.0.0.1:9", fed_registry(), warn=warns.append)   # discard port
    assert not down.push_once() and "Connection refused" in warns[2]


@pytest.mark.parametrize("url", ["pushgateway:9091", "ftp://x", "http://"])
def test_bad_push_urls(url):
    with pytest.raises(UsageError, match="give the Pushgateway's URL"):
        check_push_url(url)


def test_serve_pushes_at_exit_without_listening(gateway):
    proc = subprocess.run([sys.executable, "-c", SERVE, "--demo", "--no-listen", "--push",
                           gateway.url, "--push-interval", "60", "--count", "3", "-i", "0.05"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [f"gpudisk-top: pushing to {gateway.url} every 60 s"]
    (method, path, body), = gateway.pushes
    assert path == "/metrics/job/gpudisk-top/instance/demo-node"
    assert "gpudisk_top_samples_total 3.0" in body and "gpudisk_top_gpu_utilization_ratio" in body


@pytest.mark.parametrize("args, words", [
    (["--no-listen"], "--no-listen needs --push URL"),
    (["--push-interval", "5"], "--push-interval needs --push URL"),
    (["--push", "gateway:9091"], "give the Pushgateway's URL"),
])
def test_serve_push_usage_errors(args, words):
    proc = subprocess.run([sys.executable, "-c", SERVE, "--demo", "--count", "1", *args],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert len(proc.stderr.splitlines()) == 1 and words in proc.stderr


# ---------------------------------------------------------------------------- the real one
PUSHGATEWAY = shutil.which("prometheus-pushgateway") or shutil.which("pushgateway")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(PUSHGATEWAY is None, reason="needs prometheus-pushgateway (Debian package)")
def test_the_real_pushgateway_takes_our_push(tmp_path):
    port = free_port()
    gw = subprocess.Popen([PUSHGATEWAY, f"--web.listen-address=127.0.0.1:{port}"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          cwd=tmp_path)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(url + "/-/ready", timeout=1).read()
                break
            except OSError:
                if time.monotonic() > deadline or gw.poll() is not None:
                    pytest.fail(f"pushgateway did not start: {gw.stderr.read() if gw.poll() is not None else ''}")
                time.sleep(0.1)
        warns = []
        pusher = Pusher(url, fed_registry(), instance="node-17", warn=warns.append)
        assert pusher.push_once(), warns
        text = urllib.request.urlopen(url + "/metrics", timeout=5).read().decode()
        line = next(x for x in text.splitlines()
                    if x.startswith("gpudisk_top_disk_utilization_ratio{") and 'device="sda"' in x)
        assert 'instance="node-17"' in line and 'job="gpudisk-top"' in line
        assert line.endswith(" 0.55")
        assert 'process_cpu_seconds_total{instance="node-17",job="gpudisk-top"}' in text
    finally:
        gw.terminate()
        gw.wait(10)
