"""Device health in every output: --once text and JSON, Prometheus families, alert rules
and the config file.  The node is model_factory's, its disks' health real smartctl
readings (model_factory.health)."""

from __future__ import annotations

import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from model_factory import health, model
from gpudisk_top.alerts import AlertEngine, AlertRule, catalog
from gpudisk_top.config import ConfigError, load
from gpudisk_top.exporter import MetricsServer
from gpudisk_top.model.select import DeviceFilter
from gpudisk_top.output.once import render_text, to_json


def node():
    m = model(2)
    m.health = health()
    return m


def scrape(m) -> dict:
    server = MetricsServer(None)
    server.update(m, None, [], (), [])
    out = {}
    types = {}
    for fam in text_string_to_metric_families(server.render_text()):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
            types[s.name] = fam.type
    return out, types


def value(samples, name, **labels):
    hits = [v for (n, ls), v in samples.items()
            if n == name and all((k, str(x)) in ls for k, x in labels.items())]
    assert len(hits) == 1, (name, labels, hits)
    return hits[0]


# ---------------------------------------------------------------------------- --once
def test_once_json_has_every_disks_health_and_each_device_the_health_under_it():
    out = to_json(node(), DeviceFilter.from_option(True, None))
    json.dumps(out, allow_nan=False)
    by_dev = {h["device"]: h for h in out["health"]}
    assert list(by_dev) == ["nvme0n1", "sda", "vdb"]
    nvme = by_dev["nvme0n1"]
    assert nvme["status"] == "warning" and nvme["model"] == "Samsung SSD 970 EVO 500GB"
    assert nvme["reasons"] == ["78 °C above warning 75 °C", "media errors 7"]
    assert (nvme["temperature_c"], nvme["warning_temp_c"], nvme["media_errors"]) == (78, 75, 7)
    assert nvme["since_start"]["media_errors_gained"] == 3
    assert nvme["since_start"]["warning_temp_min_gained"] == 14
    assert by_dev["vdb"]["status"] == "unknown" and by_dev["vdb"]["temperature_c"] is None
    disks = {d["name"]: d for d in out["disks"]}
    # a partition has its disk's health, a dm device its member's
    assert disks["nvme0n1p1"]["health"] == {"device": "nvme0n1", "status": "warning",
                                            "reasons": nvme["reasons"]}
    assert disks["dm-0"]["health"]["device"] == "sda"


def test_once_text_shows_the_numbers_smartctl_printed():
    text = render_text(node(), DeviceFilter())
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("Device  health"))
    assert "temp C" in lines[head] and "media err" in lines[head] and "power-on h" in lines[head]
    nvme = lines[head + 1].split()
    # temp, warn, crit, used%, spare%, media err, err log, realloc, pending, power-on h
    assert nvme[:12] == ["nvme0n1", "warning", "78", "75", "85", "3", "99", "7", "62", "-",
                         "-", "12798"]
    assert lines[head + 1].endswith("smartctl: 78 °C above warning 75 °C; media errors 7")
    sda = lines[head + 2].split()
    assert sda[:5] == ["sda", "ok", "36", "70", "70"] and sda[5] == "19"   # endurance used
    assert lines[head + 3].split(None, 2) == ["vdb", "n/a", "virtio disk: no SMART"]


# ---------------------------------------------------------------------------- Prometheus
def test_prometheus_health_families():
    s, types = scrape(node())
    nvme = {"device": "nvme0n1"}
    assert value(s, "gpudisk_top_disk_health_temperature_celsius", **nvme) == 78
    assert value(s, "gpudisk_top_disk_health_temperature_warning_celsius", **nvme) == 75
    assert value(s, "gpudisk_top_disk_health_temperature_critical_celsius", **nvme) == 85
    assert value(s, "gpudisk_top_disk_health_temperature_above_warning_seconds_total", **nvme) \
        == 114 * 60
    assert value(s, "gpudisk_top_disk_health_percentage_used_ratio", **nvme) == pytest.approx(0.03)
    assert value(s, "gpudisk_top_disk_health_available_spare_ratio", **nvme) == pytest.approx(0.99)
    assert value(s, "gpudisk_top_disk_health_available_spare_threshold_ratio", **nvme) == \
        pytest.approx(0.10)
    assert value(s, "gpudisk_top_disk_health_media_errors_total", **nvme) == 7
    assert value(s, "gpudisk_top_disk_health_error_log_entries_total", **nvme) == 62
    assert value(s, "gpudisk_top_disk_health_unsafe_shutdowns_total", **nvme) == 10
    assert value(s, "gpudisk_top_disk_health_power_on_seconds", **nvme) == 12798 * 3600
    assert value(s, "gpudisk_top_disk_health_smart_status", **nvme) == 1
    assert types["gpudisk_top_disk_health_media_errors_total"] == "counter"
    assert types["gpudisk_top_disk_health_temperature_celsius"] == "gauge"
    assert value(s, "gpudisk_top_disk_health_info", device="nvme0n1", source="smartctl",
                 protocol="NVMe", model="Samsung SSD 970 EVO 500GB") == 1
    status = {st: value(s, "gpudisk_top_disk_health_status", device="nvme0n1", status=st)
              for st in ("ok", "warning", "failing", "unknown")}
    assert status == {"ok": 0, "warning": 1, "failing": 0, "unknown": 0}
    assert value(s, "gpudisk_top_disk_health_reallocated_sectors", device="sda") == 0
    # unreadable: said, and no number (n/a is absent, never 0)
    assert value(s, "gpudisk_top_disk_health_readable", device="vdb") == 0
    assert value(s, "gpudisk_top_disk_health_status", device="vdb", status="unknown") == 1
    assert not [k for k in s if k[0].endswith("_celsius") and ("device", "vdb") in k[1]]
    # ATA has no media-error counter: absent, not 0
    assert not [k for k in s if k[0] == "gpudisk_top_disk_health_media_errors_total"
                and ("device", "sda") in k[1]]


def test_no_health_no_families():
    s, _ = scrape(model(2))
    assert not [k for k in s if k[0].startswith("gpudisk_top_disk_health_")]


# ---------------------------------------------------------------------------- alert rules
def health_rule(metric, op, value, **kw) -> AlertRule:
    base = dict(name=metric, kind="metric", metric=metric, op=op, value=value, for_samples=1,
                cooldown_s=300.0, log=None)
    base.update(kw)
    return AlertRule(**base)


def test_alert_rules_on_health():
    m = node()
    assert {"disk_health_media_errors_gained", "disk_health_spare_margin_pct",
            "disk_health_above_warning_c", "disk_health_failing",
            "disk_health_temperature_c"} <= set(catalog.METRICS)
    assert catalog.family("disk_health_media_errors_gained") == "disk"
    obs = dict(catalog.observe(m, "disk_health_media_errors_gained", devices=("nvme0n1",)))
    assert obs == {"nvme0n1": 3.0}
    assert dict(catalog.observe(m, "disk_health_above_warning_c", devices=("nvme0n1", "sda"))) \
        == {"nvme0n1": 3.0, "sda": -34.0}
    assert dict(catalog.observe(m, "disk_health_spare_margin_pct", devices=("nvme0n1",))) == \
        {"nvme0n1": 89.0}
    # a partition watched by name reads its disk's health
    assert dict(catalog.observe(m, "disk_health_failing", devices=("nvme0n1p1",))) == \
        {"nvme0n1p1": 0.0}
    eng = AlertEngine([health_rule("disk_health_media_errors_gained", ">", 0),
                       health_rule("disk_health_spare_margin_pct", "<", 0),
                       health_rule("disk_health_above_warning_c", ">=", 0)],
                      warn=lambda line: None, host_name="node-17", stderr=None)
    fired = eng.update(m)
    assert sorted((f.rule, f.subject) for f in fired) == [
        ("disk_health_above_warning_c", "nvme0n1"), ("disk_health_media_errors_gained", "nvme0n1")]


# ---------------------------------------------------------------------------- config
def test_health_section_of_the_config_file(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text("[health]\ninterval_s = 120\n")
    assert load(str(path), required=True).sections["health"].interval_s == 120
    path.write_text("[detector]\n\n[health]\ninterval_s = -5\n")
    with pytest.raises(ConfigError, match=r"line 4: health.interval_s must be"):
        load(str(path), required=True)
    path.write_text("[health]\nevery = 5\n")
    with pytest.raises(ConfigError, match=r"line 2: unknown setting health.every"):
        load(str(path), required=True)
    assert load(str(tmp_path / "none.toml")).sections["health"].interval_s == 600
