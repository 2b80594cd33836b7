"""`gpudisk-top serve` as a process: alert rules from the config file run their command
once per hold, log lines go to stderr, and SIGTERM stops it cleanly with a last push."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest

from fleet_harness import free_ports
from test_exporter import SERVE
from test_push import Recorder


def disk_busy_config(tmp_path, code: str, out) -> str:
    """A config file whose one rule, nvme* above 90 % util for 3 samples (cooldown 300 s),
    runs `python -c code out`.  Returns its path."""
    cfg = tmp_path / "config.toml"
    cfg.write_text(textwrap.dedent(f"""\
        [[alerts]]
        name = "disk-busy"
        metric = "disk_util_pct"
        device = "nvme*"
        op = ">"
        value = 90
        for_samples = 3
        cooldown_s = 300
        command = [{json.dumps(sys.executable)}, "-c", {json.dumps(code)}, "{out}"]
        """))
    return str(cfg)


def test_an_alert_rule_runs_its_command_once(tmp_path):
    out = tmp_path / "fired.jsonl"
    cfg = disk_busy_config(tmp_path, "import json, os, sys; open(sys.argv[1], 'a')"
                           ".write(json.dumps(dict(os.environ)) + chr(10))", out)
    proc = subprocess.run([sys.executable, "-c", SERVE, "--demo", "healthy-nvme-busy",
                           "--demo-actions", "--config", cfg, "--listen", "127.0.0.1:0",
                           "-i", "0.05", "--count", "12"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("gpudisk-top: serving http://127.0.0.1:")
    alerts = [x for x in lines if " gpudisk-top alert " in x]
    assert len(alerts) == 1, lines
    assert alerts[0].split(" ", 1)[1].startswith("gpudisk-top alert disk-busy: nvme")
    assert alerts[0].endswith("for 3 samples (simulated)")
    runs = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(runs) == 1
    env = runs[0]
    assert env["GDT_ALERT_NAME"] == "disk-busy" and env["GDT_ALERT_DEVICE"].startswith("nvme")
    assert float(env["GDT_ALERT_VALUE"]) > 90 and env["GDT_ALERT_HOST"] == "demo-node"
    assert env["GDT_ALERT_SOURCE"] == "simulated, scenario healthy-nvme-busy, seed 0"
    assert env["GDT_ALERT_PIDS"] == ""    # simulated PIDs name nobody on this machine


def test_under_demo_alert_rules_run_nothing_real_unless_asked(tmp_path):
    out = tmp_path / "fired.jsonl"
    cfg = disk_busy_config(tmp_path, "import sys; open(sys.argv[1], 'a').write('x')", out)
    proc = subprocess.run([sys.executable, "-c", SERVE, "--demo", "healthy-nvme-busy",
                           "--config", cfg, "--listen", "127.0.0.1:0", "-i", "0.05",
                           "--count", "12"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert len([x for x in lines if " gpudisk-top alert disk-busy" in x]) == 1   # said
    assert not out.exists()                                                      # not run
    assert ("gpudisk-top: warning: alerts on simulated data (--demo) run no command and "
            "write no touch or log file; --demo-actions runs them") in lines


def test_sigterm_stops_cleanly_after_a_last_push():
    gateway = Recorder()
    try:
        proc = subprocess.Popen([sys.executable, "-c", SERVE, "--demo", "--listen",
                                 "127.0.0.1:0", "--push", gateway.url, "--push-interval", "600",
                                 "-i", "0.1"], stderr=subprocess.PIPE, text=True)
        assert proc.stderr.readline().startswith("gpudisk-top: serving ")
        time.sleep(0.5)
        assert gateway.pushes == []
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        assert len(gateway.pushes) == 1
        assert "gpudisk_top_samples_total" in gateway.pushes[0][2]
    finally:
        gateway.shutdown()
        gateway.server_close()


def test_nodes_serve_a_simulated_fleet_one_port_each():
    base = free_ports(3)
    proc = subprocess.Popen([sys.executable, "-c", SERVE, "--demo",
                             "disk-starved-sata,healthy-cached", "--nodes", "3", "--seed", "7",
                             "--listen", f"127.0.0.1:{base}", "-i", "0.2"],
                            stderr=subprocess.PIPE, text=True)
    try:
        lines = [proc.stderr.readline() for _ in range(3)]
        assert lines == [f"gpudisk-top: serving http://127.0.0.1:{base + i}/metrics (simulated, "
                         f"scenario {s}, seed {7 + i})\n" for i, s in
                         enumerate(["disk-starved-sata", "healthy-cached", "disk-starved-sata"])]
        time.sleep(1.0)
        now = time.time()
        for i in range(3):
            with urllib.request.urlopen(f"http://127.0.0.1:{base + i}/metrics", timeout=5) as r:
                text = r.read().decode()
            (stamp,) = re.findall(r"^gpudisk_top_last_sample_timestamp_seconds (\S+)$", text, re.M)
            assert abs(float(stamp) - now) < 5      # a served node's clock is now
            assert "gpudisk_top_verdict_info{" in text
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_demo_start_serves_a_scenario_seconds_in_with_its_past():
    """--demo-start 45: disk-starved-sata's starvation (from 30 s in) is served from the
    first scrape, with since in the past and the latest sample's clock now."""
    from test_prometheus_server import free_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", SERVE, "--demo", "disk-starved-sata",
                             "--demo-start", "45", "--listen", f"127.0.0.1:{port}", "-i", "1"],
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr.readline().startswith("gpudisk-top: serving")
        deadline = time.monotonic() + 30
        while True:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                text = r.read().decode()
            if "verdict_info{" in text or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        now = time.time()
        assert 'gpudisk_top_verdict_info{devices="sda",gpus="0,1,2,3,4,5,6,7",kind="saturated",' \
               'state="disk-starved"} 1.0' in text
        (since,) = re.findall(r"^gpudisk_top_state_since_timestamp_seconds (\S+)$", text, re.M)
        (stamp,) = re.findall(r"^gpudisk_top_last_sample_timestamp_seconds (\S+)$", text, re.M)
        assert abs(float(stamp) - now) < 5 and now - 20 < float(since) < now - 5
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.parametrize("argv, message", [
    (["--demo", "--nodes", "2", "--listen", "127.0.0.1:0"], "leaves room"),
    (["--nodes", "2"], "--nodes needs --demo"),
    (["--demo", "demo,healthy-cached"], "several --demo scenarios need --nodes N"),
    (["--demo-start", "40"], "--demo-start needs --demo"),
    (["--demo", "--demo-start", "700"], "at most 600 intervals"),
])
def test_nodes_usage(argv, message):
    proc = subprocess.run([sys.executable, "-c", SERVE, *argv], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
