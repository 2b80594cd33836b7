"""A real Prometheus (Debian's `prometheus` package) scrapes `serve --demo` every second
on loopback; the test finds our series through Prometheus's HTTP API."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import urllib.parse
import urllib.request

import pytest

from gpudisk_top.verdict.detect import STATES
from test_exporter import SERVE

PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(PROMETHEUS is None,
                                reason="needs a Prometheus server (Debian package prometheus)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api(base: str, path: str, **params):
    url = f"{base}/api/v1/{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=5) as r:
        doc = json.load(r)
    assert doc["status"] == "success", doc
    return doc["data"]


def query(base: str, expr: str) -> list[dict]:
    return api(base, "query", query=expr)["result"]


def wait_until(fn, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            result = fn()
            if result:
                return result
        except OSError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.25)


@pytest.fixture
def serve(tmp_path):
    (tmp_path / "ckpt").mkdir()
    cfg = tmp_path / "config.toml"
    cfg.write_text(textwrap.dedent(f"""\
        [devices."sdb"]
        purpose = "training_data"
        group = "worker-group-a"

        [devices."nvme*"]
        purpose = "scratch"

        [watch]
        paths = ["{tmp_path / 'ckpt'}"]
        """))
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", SERVE, "--demo", "--config", str(cfg),
                             "--listen", f"127.0.0.1:{port}", "-i", "0.25"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    assert line.startswith(f"gpudisk-top: serving http://127.0.0.1:{port}/metrics"), \
        line + (proc.stderr.read() if proc.poll() is not None else "")
    yield port, str(tmp_path / "ckpt")
    proc.terminate()
    assert proc.wait(15) == 0     # SIGTERM is a clean stop
    assert proc.stdout.read() == ""


@pytest.fixture
def prometheus(tmp_path, serve):
    target_port, _ = serve
    port = free_port()
    conf = tmp_path / "prometheus.yml"
    conf.write_text(textwrap.dedent(f"""\
        global:
          scrape_interval: 1s
          evaluation_interval: 1s
        scrape_configs:
          - job_name: gpudisk-top
            static_configs:
              - targets: ["127.0.0.1:{target_port}"]
        """))
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={conf}",
                             f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prom.log", "w"),
                            cwd=tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        def ready():
            if proc.poll() is not None:
                pytest.fail("prometheus exited: " + (tmp_path / "prom.log").read_text()[-2000:])
            with urllib.request.urlopen(base + "/-/ready", timeout=1) as r:
                return r.status == 200
        wait_until(ready, 60, "prometheus to start")
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_prometheus_scrapes_our_series(prometheus, serve):
    base = prometheus
    _, ckpt = serve
    gpus = wait_until(lambda: query(base, "gpudisk_top_gpu_utilization_ratio"), 60,
                      "GPU series in Prometheus")
    assert sorted(int(r["metric"]["gpu"]) for r in gpus) == list(range(8))
    assert all(r["metric"]["uuid"].startswith("GPU-") and r["metric"]["job"] == "gpudisk-top"
               for r in gpus)
    assert all(0 <= float(r["value"][1]) <= 1 for r in gpus)

    (target,) = api(base, "targets")["activeTargets"]
    assert target["health"] == "up" and target["lastError"] == ""

    (sdb,) = query(base, 'gpudisk_top_disk_read_bytes_per_second{purpose="training_data"}')
    assert sdb["metric"]["device"] == "sdb" and sdb["metric"]["mountpoint"] == "/datasets"
    assert sdb["metric"]["group"] == "worker-group-a" and sdb["metric"]["class"] == "SSD"
    scratch = query(base, 'gpudisk_top_disk_read_await_seconds{purpose="scratch"}')
    assert sorted(r["metric"]["device"] for r in scratch) == [f"nvme{i}n1" for i in range(8)]

    states = query(base, "gpudisk_top_state == 1")
    assert len(states) == 1 and states[0]["metric"]["state"] in ("healthy", "idle")
    assert len(query(base, "gpudisk_top_state")) == len(STATES)
    assert len(query(base, "gpudisk_top_episodes_total")) == len(STATES)

    (path,) = query(base, "gpudisk_top_path_avail_bytes")
    assert path["metric"]["path"] == ckpt and float(path["value"][1]) > 0
    assert query(base, 'gpudisk_top_host_pressure_some_ratio{resource="io"}')
    assert query(base, 'process_cpu_seconds_total{job="gpudisk-top"}')
    # samples keep coming: the counter grows between two scrapes
    first = float(query(base, "gpudisk_top_samples_total")[0]["value"][1])
    wait_until(lambda: float(query(base, "gpudisk_top_samples_total")[0]["value"][1]) > first,
               10, "a later sample")
