"""The Prometheus exposition: names and units, labels, the one-hot state, the HTTP
endpoint (own registry, loopback by default, a port in use), and that a scrape never
waits on sampling."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import prometheus_client
import pytest
from prometheus_client.parser import text_string_to_metric_families

from model_factory import gpu, health, model, verdict
from gpudisk_top.errors import RuntimeFailure, UsageError
from gpudisk_top.exporter import DeviceLabels, MetricsServer, parse_listen
from gpudisk_top.verdict.detect import STATES
from gpudisk_top.model.select import DeviceFilter
from gpudisk_top.watch import FreeSpace

GB = 1000**3
UNIT_SUFFIXES = ("_ratio", "_bytes", "_seconds", "_per_second", "_watts", "_celsius",
                 "_hertz", "_info", "_total", "_size", "_available", "_lost", "_saturated",
                 "_up", "_state", "_fds", "_starved", "_left_out",
                 # device health: a drive's sectors, its status and the bits it raises
                 "_sectors", "_status", "_readable", "_warning")


def scrape(server: MetricsServer) -> dict:
    """{(name, frozenset(labels.items())): value} of one exposition."""
    out = {}
    for fam in text_string_to_metric_families(server.render_text()):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples, metric, **labels):
    hits = [v for (n, ls), v in samples.items()
            if n == metric and all((k, str(x)) in ls for k, x in labels.items())]
    assert len(hits) == 1, (metric, labels, hits)
    return hits[0]


def series(samples, metric):
    return [dict(ls) for (n, ls), _ in samples.items() if n == metric]


class Episode:
    def __init__(self, state):
        self.state = state


def fed_server(**kw) -> MetricsServer:
    labels = DeviceLabels((("nvme0n1", (("purpose", "checkpoints"), ("group", "a"))),
                           ("sd*", (("purpose", "training_data"),))))
    server = MetricsServer(None, labels=labels, alert_names=["disk-busy", "ckpt"], **kw)
    m = model(5, {"nvme0n1": 97.0}, gpus=[gpu(0, 18.0, pids=[4242]), gpu(1, None, temp_c=None)])
    m.health = health()
    fs = [FreeSpace("/checkpoints", size_bytes=4000 * GB, avail_bytes=8 * GB, free_bytes=9 * GB,
                    dev_major=259, dev_minor=1),
          FreeSpace("/nfs/hung", error="no answer for 3 s (a hung mount?)")]

    class Fired:
        rule = "disk-busy"

    server.update(m, verdict("disk-starved"),
                  [Episode("disk-starved"), Episode("cpu-starved"), Episode("disk-starved")],
                  fs, [Fired()])
    return server


def test_values_are_in_base_units_with_their_labels():
    s = scrape(fed_server())
    nvme = dict(device="nvme0n1", mountpoint="/checkpoints", **{"class": "NVMe"},
                purpose="checkpoints", group="a")
    assert value(s, "gpudisk_top_disk_utilization_ratio", **nvme) == pytest.approx(0.97)
    assert value(s, "gpudisk_top_disk_read_await_seconds", **nvme) == pytest.approx(0.0002)
    assert value(s, "gpudisk_top_disk_read_bytes_per_second", **nvme) == 51200 * 1024
    assert value(s, "gpudisk_top_disk_queue_size", **nvme) == 0.5
    assert value(s, "gpudisk_top_disk_reads_per_second", device="sda",
                 purpose="training_data", group="") == 100
    # whole disks and dm devices, as the disk table shows them; no partition
    assert sorted(x["device"] for x in series(s, "gpudisk_top_disk_utilization_ratio")) == \
        ["dm-0", "nvme0n1", "sda"]
    g0 = dict(gpu="0", uuid="GPU-00000000")
    assert value(s, "gpudisk_top_gpu_utilization_ratio", **g0) == pytest.approx(0.18)
    assert value(s, "gpudisk_top_gpu_memory_used_bytes", **g0) == 30000 * 2**20
    assert value(s, "gpudisk_top_gpu_power_watts", **g0) == 500
    assert value(s, "gpudisk_top_gpu_temperature_celsius", **g0) == 60
    assert value(s, "gpudisk_top_gpu_sm_clock_hertz", **g0) == 1.98e9
    assert value(s, "gpudisk_top_gpu_pcie_rx_bytes_per_second", **g0) == 1000 * 1024
    assert value(s, "gpudisk_top_gpu_info", gpu="1", name="NVIDIA H100 80GB HBM3") == 1
    assert value(s, "gpudisk_top_gpu_process_read_bytes_per_second", pid="4242", comm="python",
                 **g0) == 100 * 1024
    # n/a is left out, never 0
    assert series(s, "gpudisk_top_gpu_utilization_ratio") == [g0]
    assert [x["gpu"] for x in series(s, "gpudisk_top_gpu_temperature_celsius")] == ["0"]
    assert value(s, "gpudisk_top_host_pressure_some_ratio", resource="io") == pytest.approx(0.015)
    assert series(s, "gpudisk_top_host_pressure_some_ratio") == [{"resource": "io"}]
    assert value(s, "gpudisk_top_host_cpu_ratio", mode="iowait") == pytest.approx(0.02)
    assert value(s, "gpudisk_top_host_memory_dirty_bytes") == 8 * 1024
    assert value(s, "gpudisk_top_last_sample_timestamp_seconds") == 1767225605.0
    assert value(s, "gpudisk_top_samples_total") == 1


def test_state_is_one_hot_and_counters_count():
    s = scrape(fed_server())
    states = {x["state"]: value(s, "gpudisk_top_state", **x) for x in series(s, "gpudisk_top_state")}
    assert set(states) == set(STATES) and sum(states.values()) == 1
    assert states["disk-starved"] == 1
    assert value(s, "gpudisk_top_episodes_total", state="disk-starved") == 2
    assert value(s, "gpudisk_top_episodes_total", state="cpu-starved") == 1
    assert value(s, "gpudisk_top_episodes_total", state="straggler") == 0
    assert value(s, "gpudisk_top_alerts_fired_total", alert="disk-busy") == 1
    assert value(s, "gpudisk_top_alerts_fired_total", alert="ckpt") == 0


def test_watched_paths():
    s = scrape(fed_server())
    assert value(s, "gpudisk_top_path_avail_bytes", path="/checkpoints", device="nvme0n1p1") == 8 * GB
    assert value(s, "gpudisk_top_path_size_bytes", path="/checkpoints") == 4000 * GB
    assert value(s, "gpudisk_top_path_up", path="/checkpoints") == 1
    assert value(s, "gpudisk_top_path_up", path="/nfs/hung", device="") == 0
    assert [x["path"] for x in series(s, "gpudisk_top_path_avail_bytes")] == ["/checkpoints"]


def test_names_follow_prometheus_conventions():
    families = list(text_string_to_metric_families(fed_server().render_text()))
    names = [f.name for f in families]
    assert len(names) == len(set(names))
    for fam in families:
        assert re.fullmatch(r"[a-z_][a-z0-9_]*", fam.name), fam.name
        assert fam.name.startswith(("gpudisk_top_", "process_")), fam.name
        assert fam.documentation, fam.name
        for s in fam.samples:
            if fam.type == "counter":
                assert s.name.endswith(("_total", "_created")), s.name
            else:
                assert not s.name.endswith("_total"), s.name
            assert s.name.endswith(UNIT_SUFFIXES) or s.name in (
                "process_max_fds", "process_open_fds"), s.name
            assert not re.search(r"_(pct|ms|kb|mib|mhz|percent)(_|$)", s.name), s.name
    for fam in families:   # ratios are ratios
        if fam.name.endswith("_ratio"):
            assert all(0 <= s.value <= 1 for s in fam.samples), fam.name
    assert {"process_cpu_seconds_total", "process_resident_memory_bytes"} <= \
        {s.name for f in families for s in f.samples}


def test_the_global_registry_is_left_alone():
    before = set(prometheus_client.REGISTRY._names_to_collectors)
    fed_server().render_text()
    assert set(prometheus_client.REGISTRY._names_to_collectors) == before
    assert not any(n.startswith("gpudisk_top") for n in before)


def test_before_the_first_sample_only_build_info():
    server = MetricsServer(None, source="simulated, scenario demo, seed 0")
    s = scrape(server)
    assert value(s, "gpudisk_top_build_info", source="simulated, scenario demo, seed 0") == 1
    assert not [k for k in s if k[0].startswith("gpudisk_top_") and k[0] != "gpudisk_top_build_info"]


def test_a_device_filter_chooses_the_disks():
    server = MetricsServer(None, dev_filter=DeviceFilter.from_option(False, "nvme*"))
    server.update(model(1))
    devices = sorted(x["device"] for x in series(scrape(server), "gpudisk_top_disk_queue_size"))
    assert devices == ["nvme0n1", "nvme0n1p1"]


@pytest.mark.parametrize("text, expected", [
    ("127.0.0.1:9425", ("127.0.0.1", 9425)),
    ("9425", ("127.0.0.1", 9425)),
    ("0.0.0.0:80", ("0.0.0.0", 80)),
    ("[::1]:9425", ("::1", 9425)),
    ("localhost:0", ("localhost", 0)),
])
def test_parse_listen(text, expected):
    assert parse_listen(text) == expected


@pytest.mark.parametrize("text, words", [
    (":9425", "give the address to bind: 127.0.0.1:9425"),
    ("127.0.0.1", "give HOST:PORT"),
    ("127.0.0.1:99999", "is not a port number"),
    ("[::1]9425", "write an IPv6 address as [::1]:9425"),
    ("127.0.0.1:http", "'http' is not a port number"),
])
def test_bad_listen(text, words):
    with pytest.raises(UsageError, match=re.escape(words)):
        parse_listen(text)


# ---------------------------------------------------------------------------- HTTP
def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def test_http_endpoint_on_loopback():
    server = MetricsServer("127.0.0.1:0").start()
    try:
        assert server.url == f"http://127.0.0.1:{server.port}/metrics"
        assert server._httpd.server_address[0] == "127.0.0.1"
        server.update(model(1, {"sda": 42.0}))
        text = get(server.url)
        assert 'gpudisk_top_disk_utilization_ratio{class="SSD",device="sda",mountpoint="/datasets"} 0.42' in text
        assert "process_cpu_seconds_total" in text
        with urllib.request.urlopen(server.url, timeout=10) as r:
            assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        assert "/metrics" in get(server.url.removesuffix("metrics"))
        with pytest.raises(urllib.error.HTTPError) as err:
            get(server.url.removesuffix("metrics") + "other")
        assert err.value.code == 404
    finally:
        server.close()


def test_default_listen_is_loopback():
    server = MetricsServer()
    assert server.address == ("127.0.0.1", 9425)


def test_a_port_in_use_is_one_clear_error():
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = busy.getsockname()[1]
    try:
        with pytest.raises(RuntimeFailure) as err:
            MetricsServer(f"127.0.0.1:{port}").start()
        assert str(err.value) == (f"--listen 127.0.0.1:{port}: port {port} is already in use "
                                  "on 127.0.0.1 (another gpudisk-top serve or exporter?); "
                                  "choose another port")
    finally:
        busy.close()


def test_an_address_not_of_this_machine():
    with pytest.raises(UsageError, match="is not an address of this machine"):
        MetricsServer("192.0.2.1:0").start()      # TEST-NET-1: never ours


def test_serve_with_a_port_in_use_exits_1_with_one_line():
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = busy.getsockname()[1]
    try:
        proc = subprocess.run([sys.executable, "-c", SERVE, "--demo", "--listen",
                               f"127.0.0.1:{port}", "--count", "2"],
                              capture_output=True, text=True, timeout=60)
    finally:
        busy.close()
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        f"gpudisk-top: error: --listen 127.0.0.1:{port}: port {port} is already in use on "
        "127.0.0.1 (another gpudisk-top serve or exporter?); choose another port"]


# the console's error handling around serve.run, until cli.py dispatches `serve`
SERVE = ("import sys\n"
         "from gpudisk_top.commands import serve\n"
         "from gpudisk_top.errors import RuntimeFailure, UsageError\n"
         "try:\n"
         "    sys.exit(serve.run(serve.build_parser('gpudisk-top serve').parse_args(sys.argv[1:])))\n"
         "except UsageError as err:\n"
         "    print(f'gpudisk-top: error: {err}', file=sys.stderr); sys.exit(2)\n"
         "except RuntimeFailure as err:\n"
         "    print(f'gpudisk-top: error: {err}', file=sys.stderr); sys.exit(1)\n")


def test_a_scrape_never_waits_on_sampling_and_sampling_never_waits_on_a_scrape():
    server = MetricsServer(None)
    server.update(model(1))
    collector = server.collector
    rendering = threading.Event()
    release = threading.Event()
    real = collector.renderer.render
    calls = []

    def slow_render(frame):
        calls.append(frame)
        rendering.set()
        release.wait(10)
        return real(frame)

    collector.renderer.render = slow_render
    scraper = threading.Thread(target=server.render_text)
    scraper.start()
    assert rendering.wait(5)
    t0 = time.monotonic()
    for i in range(2, 50):            # the sampler goes on while a scrape renders
        server.update(model(i))
    assert time.monotonic() - t0 < 5.0    # blocked, it would wait for the 10 s release
    release.set()
    scraper.join(10)
    # two scrapes of one frame render it once
    collector.renderer.render = lambda frame: (calls.append(frame), real(frame))[1]
    n = len(calls)
    server.render_text()
    server.render_text()
    assert len(calls) == n + 1


def test_concurrent_scrapes_and_updates():
    server = MetricsServer("127.0.0.1:0").start()
    errors = []
    stop = threading.Event()

    def scrape_loop():
        while not stop.is_set():
            try:
                text = get(server.url)
                assert "gpudisk_top_build_info" in text
            except Exception as err:  # pragma: no cover - reported below
                errors.append(err)

    threads = [threading.Thread(target=scrape_loop) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for i in range(1, 200):
            server.update(model(i, {"sda": i % 100}), verdict(STATES[i % len(STATES)]))
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        server.close()
    assert errors == []


def _stepped(scenario: str, n: int):
    """A real simulated node stepped n samples: (server fed each sample, last verdict)."""
    from gpudisk_top.verdict.step import Stepper
    from gpudisk_top.sim import Simulator, builtin

    sim, stepper, server = Simulator(builtin(scenario), seed=3), Stepper(None), MetricsServer(None)
    for _ in range(n):
        m, v, _loss = stepper.step(sim.sample())
        server.update(m, v, stepper.episodes, (), [])
    return server, v, stepper


def test_the_verdict_what_it_blames_and_since_when():
    server, v, stepper = _stepped("disk-starved-sata", 40)
    s = scrape(server)
    assert v.state == "disk-starved" and v.episode is not None and v.devices
    assert value(s, "gpudisk_top_state_since_timestamp_seconds") == v.episode.start_wall_s
    (info,) = series(s, "gpudisk_top_verdict_info")
    assert info == {"state": "disk-starved", "kind": v.kind or "",
                    "devices": ",".join(v.devices), "gpus": ",".join(map(str, v.gpus))}
    assert value(s, "gpudisk_top_gpus_starved") == len(v.gpus) > 0


def test_gpus_starved_counts_only_a_node_starved_by_its_own_cause():
    """A straggler's or an undiagnosed stall's GPUs wait on a peer, not on this node: the
    verdict names them (verdict_info's gpus), gpudisk_top_gpus_starved does not count them
    (verdict/detect/states.py OWN_CAUSE_STATES, the fleet rules' starved states)."""
    from gpudisk_top.verdict.detect import OWN_CAUSE_STATES, Verdict

    server, v, _ = _stepped("straggler", 45)
    s = scrape(server)
    assert v.state == "straggler" and v.gpus == [5]
    assert series(s, "gpudisk_top_verdict_info")[0]["gpus"] == "5"
    assert value(s, "gpudisk_top_gpus_starved") == 0
    for state in STATES:
        server = MetricsServer(None)
        server.update(model(5, {"sda": 90.0}), Verdict(
            wall_s=5.0, state=state, raw_state=state, gpus=[0, 1, 2]), [], (), [])
        assert value(scrape(server), "gpudisk_top_gpus_starved") == (
            3 if state in OWN_CAUSE_STATES else 0), state
    help_text = server.render_text().split("# HELP gpudisk_top_gpus_starved ", 1)[1]
    assert help_text.startswith("GPUs the node's own input or output path starves: the "
                                "verdict's GPUs in state disk-starved, cpu-starved or "
                                "checkpoint-stall; 0 otherwise")


def test_a_calm_state_keeps_its_since():
    server, v, _ = _stepped("healthy-cached", 12)
    first = scrape(server)
    assert v.state in ("healthy", "idle")
    assert value(first, "gpudisk_top_gpus_starved") == 0
    since = value(first, "gpudisk_top_state_since_timestamp_seconds")
    assert since < v.wall_s - 5          # set when the state began, not each sample
