"""The simulator's device health (gpudisk_top/sim/health.py): every simulated disk a
drive of its class, read every health_interval_s of simulated time by the poller's own
rule, deterministic per seed, overridable per disk in a scenario, and shown by every
output of `--demo` as a real node's health is: --once, serve's gpudisk_top_disk_health_*
series, a recording and report's trend."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from gpudisk_top.collect.health import next_snapshot
from gpudisk_top.collect.health_sysfs import VIRTIO_NO_SMART, XEN_NO_SMART
from gpudisk_top.collect.sample import HEALTH_SIMULATED, DiskHealth
from gpudisk_top.commands import report as report_cmd
from gpudisk_top.verdict.detect import Detector
from gpudisk_top.model.health import classify
from gpudisk_top.model.snapshot import Model
from gpudisk_top.record import Recording
from gpudisk_top.sim import BUILTIN_NAMES, ScenarioError, Simulator, builtin, loads_toml
from gpudisk_top.sim.health import SimulatedPoller
from cli_run import gdt
from recording_helpers import ROOT, call, write_recording
from test_exporter import SERVE

TWO_NVME = """
name = "two-nvme"
disks = [
    {{ name = "nvme0n1", class = "NVMe", mountpoint = "/busy"{busy} }},
    {{ name = "nvme1n1", class = "NVMe", mountpoint = "/idle"{idle} }},
    {{ name = "xvda", class = "virtual" }},
]
[gpus]
count = 1
[[phases]]
name = "busy"
duration_s = 1200
disks.nvme0n1 = {{ util_pct = 100 }}
[[phases]]
name = "rest"
duration_s = 1800
"""


def two_nvme(busy: str = "", idle: str = ""):
    """Two NVMe drives at the same idle temperature (unless told), the first busy for
    20 minutes, then both at rest for 30; and a Xen disk."""
    same = "idle_temp_c = 40"
    busy = busy or same
    idle = idle or same
    return loads_toml(TWO_NVME.format(busy=f", health = {{ {busy} }}",
                                      idle=f", health = {{ {idle} }}"))


def run(sim: Simulator, n: int) -> list:
    return [sim.sample() for _ in range(n)]


# ---------------------------------------------------------------------------- the drives
def test_every_disk_has_a_reading_of_its_class():
    snap = Simulator(builtin("demo"), seed=0).sample().health
    assert snap is not None and snap.polls == 1 and len(snap.readings) == 16
    assert {h.source for h in snap.readings.values()} == {HEALTH_SIMULATED}
    nvme, ssd, hdd = snap.readings["nvme1n1"], snap.readings["sda"], snap.readings["sdf"]
    assert nvme.readable and nvme.protocol == "NVMe" and nvme.smart_passed
    assert (nvme.warning_temp_c, nvme.critical_temp_c) == (75.0, 80.0)
    assert 20 <= nvme.temperature_c < nvme.warning_temp_c
    assert nvme.media_errors == 0 and nvme.critical_warning == 0
    assert nvme.available_spare_pct == 100 and nvme.available_spare_threshold_pct == 10
    assert 0 < nvme.percentage_used_pct < 10 and nvme.unsafe_shutdowns > 0
    assert nvme.power_on_hours > 1000 and nvme.reallocated_sectors is None
    for ata in (ssd, hdd):
        assert ata.readable and ata.protocol == "ATA" and ata.media_errors is None
        assert (ata.reallocated_sectors, ata.pending_sectors, ata.offline_uncorrectable) == (0, 0, 0)
        assert ata.temperature_c < ata.warning_temp_c and ata.power_on_hours > 1000
    assert ssd.percentage_used_pct is not None and hdd.percentage_used_pct is None
    # the model (partition sdb1 included) judges them as any reading
    assert {classify(h)[0] for d, h in snap.readings.items() if d not in ("sde", "vda", "vdb")} == {"ok"}


def test_virtual_disks_are_unreadable_with_the_collectors_reason():
    demo = Simulator(builtin("demo"), seed=0).sample().health.readings
    for name in ("vda", "vdb"):
        assert not demo[name].readable and demo[name].unreadable_reason is VIRTIO_NO_SMART
    xen = Simulator(two_nvme(), seed=0).sample().health.readings["xvda"]
    assert not xen.readable and xen.unreadable_reason is XEN_NO_SMART


def test_the_demo_shows_one_warning_on_a_disk_no_verdict_blames():
    snap = Simulator(builtin("demo"), seed=0).sample().health
    warned = {d: classify(h) for d, h in snap.readings.items() if classify(h)[0] == "warning"}
    assert warned == {"sde": ("warning", ("reallocated sectors 8",))}


@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_health_changes_no_verdict(name):
    """The built-ins' verdicts, reasons and episodes are those of the node without health
    (a disk the verdict blames that ran hot would add its temperature to the reason)."""
    got = []
    for health_interval_s in (600.0, 0.0):
        sim = Simulator(builtin(name), seed=0, health_interval_s=health_interval_s)
        det, last, states = Detector(), None, []
        for _ in range(len(sim.labels()) + 1):
            s = sim.sample()
            states.append(det.feed(Model.new(s, last)))
            last = s
        got.append(([(v.state, v.reason) for v in states if v is not None],
                    [(e.state, e.reason) for e in det.episodes]))
    assert got[0] == got[1]


def test_the_other_numbers_do_not_move_with_health():
    """Health draws from a random stream of its own: the rest of each sample is what
    the same seed gives without health."""
    with_health = run(Simulator(builtin("demo"), seed=4), 20)
    without = run(Simulator(builtin("demo"), seed=4, health_interval_s=0), 20)
    assert all(s.health is None for s in without)
    for a, b in zip(with_health, without):
        a.health = None
        assert a == b


# ---------------------------------------------------------------------------- seed and clock
def test_the_same_seed_gives_the_same_readings_another_seed_others():
    a = run(Simulator(builtin("demo"), seed=7, health_interval_s=60), 200)
    b = run(Simulator(builtin("demo"), seed=7, health_interval_s=60), 200)
    c = run(Simulator(builtin("demo"), seed=8, health_interval_s=60), 200)
    assert [s.health for s in a] == [s.health for s in b]
    assert a[-1].health.readings["sda"].serial != c[-1].health.readings["sda"].serial


def test_a_new_reading_every_health_interval_of_simulated_time():
    sim = Simulator(builtin("demo"), seed=0, interval_s=2.0, health_interval_s=600)
    samples = run(sim, 601)
    # one snapshot object shared until the next poll: a sample pays an identity test
    assert all(s.health is samples[0].health for s in samples[:300])
    assert samples[300].health is not samples[299].health       # 600 s at 2 s a sample
    assert [samples[i].health.polls for i in (0, 299, 300, 599, 600)] == [1, 1, 2, 2, 3]
    assert samples[300].health.polled_wall_s == samples[300].wall_s
    assert samples[300].health.readings["sda"].read_wall_s == samples[300].wall_s
    # the run's first readings stay as `first`; the virtual disks have none
    assert samples[600].health.first["sda"] is samples[0].health.readings["sda"]
    assert "vda" not in samples[600].health.first
    # the clock is the simulated one: a changed interval_s moves the polls with it
    sim.interval_s = 60.0
    later = run(sim, 10)
    assert [s.health.polls for s in later] == [3, 3, 3, 3, 3, 3, 3, 3, 3, 4]


def test_readings_are_made_only_when_a_poll_is_due():
    calls = []

    def read(k, wall_s):
        calls.append((k, wall_s))
        return {"sda": DiskHealth("sda", wall_s, source=HEALTH_SIMULATED, readable=True,
                                  temperature_c=30.0)}
    sim = Simulator(builtin("demo"), seed=0, health_interval_s=100, health_readings=read)
    run(sim, 250)
    assert [k for k, _ in calls] == [0, 1, 2]
    assert sim.health.polls == 3


def test_the_poller_keeps_each_disks_first_readable_reading():
    """The real poller's rule (collect/health.py next_snapshot), on the simulated clock."""
    readings = [{"sda": DiskHealth("sda", 1.0, unreadable_reason="asleep")},
                {"sda": DiskHealth("sda", 2.0, readable=True, temperature_c=30.0)},
                {"sda": DiskHealth("sda", 3.0, readable=True, temperature_c=31.0)}]
    poller = SimulatedPoller(lambda k, t: readings[k], interval_s=1.0)
    snaps = [poller.at(t) for t in (1.0, 2.0, 3.0)]
    assert snaps[0].first == {} and snaps[1].first["sda"] is readings[1]["sda"]
    assert snaps[2].first["sda"] is readings[1]["sda"] and snaps[2].polls == 3
    assert next_snapshot(None, readings[2], 3.0).first == {"sda": readings[2]["sda"]}
    with pytest.raises(ValueError):
        SimulatedPoller(lambda k, t: {}, interval_s=0)
    with pytest.raises(ValueError):
        Simulator(builtin("demo"), health_interval_s=-1)


def test_temperature_follows_the_disks_load():
    samples = run(Simulator(two_nvme(), seed=0, health_interval_s=600), 2401)

    def temps(i):
        r = samples[i].health.readings
        return r["nvme0n1"].temperature_c, r["nvme1n1"].temperature_c
    busy, idle = temps(600)                     # 10 min into the busy phase
    assert busy >= idle + 18 and 38 <= idle <= 42
    cooling, _ = temps(1800)                    # 10 min after it ended: cooling down
    rested, idle = temps(2400)
    assert busy > cooling > rested and rested <= idle + 1


# ---------------------------------------------------------------------------- TOML overrides
def test_a_scenario_overrides_a_disks_health():
    sc = two_nvme(busy="idle_temp_c = 77, busy_temp_rise_c = 0, warning_temp_c = 70, "
                       "critical_temp_c = 85, media_errors = 3, media_errors_per_h = 2")
    samples = run(Simulator(sc, seed=0, health_interval_s=1800), 3601)
    first, last = samples[0].health.readings["nvme0n1"], samples[3600].health.readings["nvme0n1"]
    assert 76 <= first.temperature_c <= 78 and first.warning_temp_c == 70
    assert first.critical_temp_c == 85 and first.media_errors == 3
    assert last.media_errors == 5                              # 2 an hour, 1 h later
    assert classify(last) == ("warning", (f"{last.temperature_c:.0f} °C above warning 70 °C",
                                          "media errors 5"))
    # hot at rest since the node came up: the drive's counter says so, and grows
    since = Model.new(samples[3600], samples[3599]).health["nvme0n1"].since_start
    assert first.warning_temp_time_min >= 3 * 24 * 60 and since.warning_temp_min_gained == 60
    assert since.media_errors_gained == 2
    # an override leaves every other disk's numbers as they were
    plain = Simulator(two_nvme(), seed=0).sample().health.readings["nvme1n1"]
    assert plain == samples[0].health.readings["nvme1n1"]


def test_a_scenario_may_make_a_disk_unreadable():
    sc = two_nvme(idle='unreadable_reason = "smartctl: Permission denied"')
    h = Simulator(sc, seed=0).sample().health.readings["nvme1n1"]
    assert not h.readable and h.unreadable_reason == "smartctl: Permission denied"


@pytest.mark.parametrize("health, error", [
    ("bogus = 1", "unknown key 'bogus'"),
    ("reallocated_sectors = -1", "health.reallocated_sectors must be >= 0"),
    ("available_spare_pct = 120", "health.available_spare_pct must be within 0..100"),
    ("warning_temp_c = 80, critical_temp_c = 70", "health.critical_temp_c (70) is below"),
    ('smart_passed = "yes"', "must be true or false"),
])
def test_a_bad_health_override_names_the_disk_and_the_key(health, error):
    with pytest.raises(ScenarioError, match=re.escape(error)):
        two_nvme(busy=health)


# ---------------------------------------------------------------------------- the outputs
def test_once_demo_shows_the_health_section():
    proc = gdt("--once", "--demo")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("Device  health "))
    rows = {x.split()[0]: x for x in lines[at + 1:at + 17]}
    assert len(rows) == 16
    assert rows["sde"].split()[1] == "warning"
    assert rows["sde"].endswith("simulated: reallocated sectors 8")
    assert rows["nvme0n1"].split()[1] == "ok" and rows["nvme0n1"].endswith("  simulated")
    assert rows["vda"].endswith(VIRTIO_NO_SMART)
    proc = gdt("--once", "--json", "--demo", "--health-interval", "0")
    assert proc.returncode == 0 and json.loads(proc.stdout)["health"] == []


def test_serve_demo_exports_the_health_series():
    proc = subprocess.Popen([sys.executable, "-c", SERVE, "--demo", "--listen", "127.0.0.1:0",
                             "-i", "0.1"], stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        first = proc.stderr.readline()
        url = re.search(r"http://\S+", first).group(0)
        url = url if url.endswith("/metrics") else url.rstrip("/") + "/metrics"
        text = ""
        for _ in range(50):
            text = urllib.request.urlopen(url, timeout=10).read().decode()
            if "gpudisk_top_disk_health_status" in text:
                break
            proc.poll()
            assert proc.returncode is None, proc.stderr.read()
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
    assert 'gpudisk_top_disk_health_status{device="sde",status="warning"} 1.0' in text
    assert 'gpudisk_top_disk_health_reallocated_sectors{device="sde"} 8.0' in text
    assert re.search(r'gpudisk_top_disk_health_temperature_celsius\{device="nvme0n1"\} \d', text)
    assert 'gpudisk_top_disk_health_readable{device="vda"} 0.0' in text
    info = [x for x in text.splitlines() if x.startswith("gpudisk_top_disk_health_info{")
            and 'device="sda"' in x]
    assert len(info) == 1 and 'source="simulated"' in info[0]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Three minutes of the demo with a reading a minute."""
    samples = run(Simulator(builtin("demo"), seed=0, health_interval_s=60), 181)
    return write_recording(tmp_path_factory.mktemp("simhealth") / "demo.gdtrec", samples), samples


def test_a_recording_of_the_demo_gives_its_health_back(recorded):
    path, samples = recorded
    with Recording.open(path) as rec:
        back = [s for _, s in rec.samples()]
    assert len(back) == len(samples)
    assert all(b.health == s.health for b, s in zip(back, samples))
    assert back[10].health is back[11].health and back[180].health.polls == 4


def test_report_on_the_demo_shows_its_device_health_with_a_trend(recorded, capsys):
    path, _ = recorded
    assert call(report_cmd, path, "--no-charts") == 0
    out = capsys.readouterr().out
    assert "Device health (readings in the window; gained from the first to the last):" in out
    lines = out.splitlines()
    head = next(i for i, x in enumerate(lines) if x.startswith("Device health "))
    assert lines[head + 2].split()[:4] == ["sde", "!", "warn", "4"]   # the worst first
    at = head + 2
    assert lines[at + 1].strip() == "why: reallocated sectors 8"
    assert call(report_cmd, path, "--json") == 0
    health = {d["device"]: d for d in json.loads(capsys.readouterr().out)["health"]}
    assert health["sde"]["worst_status"] == "warning" and health["sde"]["readings"] == 4
    trend = health["nvme0n1"]["trend"]
    assert trend["span_s"] == 180 and trend["media_errors_gained"] == 0
    assert health["vda"]["trend"] is None and health["vda"]["status"] == "unknown"
