"""smartctl --json of real drives (tests/fixtures/health/README.md says where each file
comes from) read into DiskHealth, and judged by the one rule (model/health.py classify).

Every expected number below is one smartctl wrote for that drive: the test names the
JSON field, and for ATA attributes also checks the RAW_VALUE text smartctl prints in its
attribute table (kept in the JSON as raw.string)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpudisk_top.collect.health import BIT_OPEN, parse_smartctl
from gpudisk_top.model.health import (FAILING, OK, UNKNOWN, WARNING, classify,
                                      evidence_clause, minutes_above_warning, trend, view_of)

FIXTURES = Path(__file__).parent / "fixtures" / "health"


def load(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def read(name: str, device: str = "sdx"):
    doc = load(name)
    return parse_smartctl((FIXTURES / name).read_text(), device, doc["smartctl"]["exit_status"])


def attr_text(doc: dict, attr_id: int) -> str:
    """The RAW_VALUE column smartctl prints for an ATA attribute."""
    for a in doc["ata_smart_attributes"]["table"]:
        if a["id"] == attr_id:
            return a["raw"]["string"]
    raise KeyError(attr_id)


def leading_int(text: str) -> int:
    return int(re.match(r"\s*(\d+)", text).group(1))


def test_every_fixture_is_listed_in_the_readme():
    readme = (FIXTURES / "README.md").read_text()
    for path in FIXTURES.glob("*.json"):
        assert f"`{path.name}`" in readme, path.name


# ---------------------------------------------------------------------------- NVMe
def test_nvme_healthy_smartctl_7_1():
    doc, h = load("nvme-7.1-healthy.json"), read("nvme-7.1-healthy.json", "nvme0n1")
    log = doc["nvme_smart_health_information_log"]
    assert h.readable and h.source == "smartctl" and h.protocol == "NVMe"
    assert h.model == "INTEL SSDPEKNW010T8" == doc["model_name"]
    assert h.temperature_c == log["temperature"] == doc["temperature"]["current"] == 36
    assert h.available_spare_pct == log["available_spare"] == 100
    assert h.available_spare_threshold_pct == log["available_spare_threshold"] == 10
    assert h.percentage_used_pct == log["percentage_used"] == 0
    assert h.media_errors == log["media_errors"] == 0
    assert h.unsafe_shutdowns == log["unsafe_shutdowns"] == 43
    assert h.error_log_entries == log["num_err_log_entries"]
    assert h.power_on_hours == doc["power_on_time"]["hours"] == log["power_on_hours"] == 2401
    assert h.warning_temp_time_min == log["warning_temp_time"]
    assert h.critical_temp_time_min == log["critical_comp_time"]
    assert h.critical_warning == 0 and h.smart_passed is True
    # smartctl before 7.5 writes no WCTEMP/CCTEMP to JSON: the kernel's hwmon gives them
    assert h.warning_temp_c is None and h.critical_temp_c is None
    assert classify(h) == (OK, ())


def test_nvme_media_errors_smartctl_7_0():
    """scrutiny's smart_test.go fails this drive on media_errors."""
    doc, h = load("nvme-7.0-media-errors.json"), read("nvme-7.0-media-errors.json", "nvme0n1")
    log = doc["nvme_smart_health_information_log"]
    assert h.media_errors == log["media_errors"] == 7
    assert h.error_log_entries == log["num_err_log_entries"] == 62
    assert h.percentage_used_pct == 3 and h.available_spare_pct == 99
    assert h.temperature_c == 35 and h.power_on_hours == 12798
    assert classify(h) == (WARNING, ("media errors 7",))


def test_nvme_critical_warning_exit_status_8():
    """Volatile memory backup failed (critical warning bit 4): smartctl says FAILED and
    exits with bit 3 set, and still gives every number."""
    doc, h = load("nvme-7.3-critical-warning.json"), read("nvme-7.3-critical-warning.json")
    assert doc["smartctl"]["exit_status"] == 8
    assert h.readable and h.smart_passed is False
    assert h.critical_warning == doc["nvme_smart_health_information_log"]["critical_warning"] == 0x10
    assert doc["smart_status"]["nvme"]["volatile_memory_backup_failed"] is True
    status, reasons = classify(h)
    assert status == FAILING
    # NVMe's FAILED is the critical warning, said once, by its meaning
    assert reasons == ("critical warning: volatile memory backup failed",)


def test_nvme_error_log_entries_judge_nothing():
    """14 error-log entries on a drive otherwise fine (aborted commands fill NVMe error
    logs): reported, not a warning."""
    h = read("nvme-7.3-error-log.json")
    assert h.error_log_entries == 14
    assert classify(h) == (OK, ())


def test_nvme_temperature_thresholds_as_smartctl_7_5_writes_them():
    """The keys smartmontools' nvmeprint.cpp print_drive_capabilities() writes since
    7.5 (jglb["nvme_composite_temperature_threshold"]["warning"] = wctemp - 273, and
    temperature.op_limit_max / critical_limit_max), on the 7.1 drive's document."""
    doc = load("nvme-7.1-healthy.json")
    doc["nvme_composite_temperature_threshold"] = {"warning": 75, "critical": 80}
    doc["temperature"].update(op_limit_max=75, critical_limit_max=80, current=78)
    log = doc["nvme_smart_health_information_log"]
    log.update(temperature=78, warning_temp_time=114)
    h = parse_smartctl(doc, "nvme1n1", 0)
    assert (h.warning_temp_c, h.critical_temp_c, h.temperature_c) == (75, 80, 78)
    assert classify(h) == (WARNING, ("78 °C above warning 75 °C",))


# ---------------------------------------------------------------------------- SATA SSD
def test_sata_ssd_smartctl_7_0_with_sct_and_device_statistics():
    doc, h = load("sata-ssd-7.0-x-sct.json"), read("sata-ssd-7.0-x-sct.json", "sda")
    assert h.protocol == "ATA" and h.model == "Samsung SSD 860 EVO 500GB"
    assert h.temperature_c == doc["temperature"]["current"] == 36
    assert h.temperature_c == leading_int(attr_text(doc, 190))    # Airflow_Temperature_Cel
    # SCT: highest recommended operating temperature, and the limit
    assert h.warning_temp_c == doc["temperature"]["op_limit_max"] == 70
    assert h.critical_temp_c == doc["temperature"]["limit_max"] == 70
    # device statistics page 7, "Percentage Used Endurance Indicator"
    assert h.percentage_used_pct == 19
    assert h.reallocated_sectors == int(attr_text(doc, 5)) == 0
    assert h.power_on_hours == int(attr_text(doc, 9)) == 14551
    assert h.error_log_entries == doc["ata_smart_error_log"]["extended"]["count"] == 0
    assert h.media_errors is None and h.available_spare_pct is None   # no such thing on ATA
    assert classify(h) == (OK, ())


def test_sata_ssd_smartctl_7_3():
    doc, h = load("sata-ssd-7.3.json"), read("sata-ssd-7.3.json", "sda")
    assert h.model == "SAMSUNG MZ7LH1T9HMLT-00005"
    assert h.temperature_c == doc["temperature"]["current"] == leading_int(attr_text(doc, 190))
    assert h.reallocated_sectors == int(attr_text(doc, 5)) == 0
    assert h.power_on_hours == int(attr_text(doc, 9)) == doc["power_on_time"]["hours"]
    assert h.smart_passed is True and classify(h) == (OK, ())


# ---------------------------------------------------------------------------- HDD
def test_hdd_smartctl_7_3():
    doc, h = load("hdd-7.3.json"), read("hdd-7.3.json", "sdb")
    assert h.model == "WDC WD20EFRX-68EUZN0"
    assert h.temperature_c == 34 == leading_int(attr_text(doc, 194))
    for attr_id, got in ((5, h.reallocated_sectors), (197, h.pending_sectors),
                         (198, h.offline_uncorrectable), (9, h.power_on_hours)):
        assert got == int(attr_text(doc, attr_id)), attr_id
    assert h.power_on_hours == 47657
    assert classify(h) == (OK, ())


def test_hdd_with_reallocated_sectors_is_a_warning():
    doc, h = load("hdd-7.3-reallocated.json"), read("hdd-7.3-reallocated.json", "sda")
    assert h.reallocated_sectors == int(attr_text(doc, 5)) == 304
    assert h.pending_sectors == int(attr_text(doc, 197)) == 0
    assert h.smart_passed is True
    assert classify(h) == (WARNING, ("reallocated sectors 304",))


def test_failing_hdd_exit_status_216():
    """scrutiny's smart_test.go: DeviceStatusFailedSmart.  Exit status 216 = bits 3
    (DISK FAILING), 4 (prefail attribute at threshold), 6 (error log) and 7 (self-test
    log): none of them means no data."""
    doc, h = load("hdd-7.1-failing.json"), read("hdd-7.1-failing.json", "sdc")
    assert doc["smartctl"]["exit_status"] == 216 == 8 | 16 | 64 | 128
    assert h.readable and h.smart_passed is False
    assert h.reallocated_sectors == int(attr_text(doc, 5)) == 1975
    assert h.pending_sectors == int(attr_text(doc, 197)) == 8
    assert h.offline_uncorrectable == int(attr_text(doc, 198)) == 0
    assert h.temperature_c == leading_int(attr_text(doc, 194)) == 25   # "25 (Min/Max 19/39)"
    assert h.error_log_entries == doc["ata_smart_error_log"]["summary"]["count"] == 56
    assert h.power_on_hours == 65592
    assert h.failing_attributes == ("Reallocated_Sector_Ct (5)",)
    status, reasons = classify(h)
    assert status == FAILING
    assert reasons == ("SMART self-assessment FAILED", "failing now: Reallocated_Sector_Ct (5)",
                       "reallocated sectors 1975", "pending sectors 8")


# ---------------------------------------------------------------------------- older formats
def test_smartctl_6_7_json_format_0_1_scsi():
    """The oldest JSON there is (smartctl 6.7, format 0.1): most keys missing, read as
    None; SCSI's grown defect list counts as reallocated, its trip temperature as
    critical."""
    doc, h = load("scsi-6.7-json-0.1.json"), read("scsi-6.7-json-0.1.json", "sdb")
    assert doc["json_format_version"] == [0, 1]
    assert h.readable and h.protocol == "SCSI" and h.model == "SEAGATE ST1200MM0088"
    assert h.temperature_c == 31 and h.critical_temp_c == doc["temperature"]["drive_trip"] == 60
    assert h.reallocated_sectors == doc["scsi_grown_defect_list"] == 0
    log = doc["scsi_error_counter_log"]          # (no "verify" page in this one)
    assert h.media_errors == sum(log[op]["total_uncorrected_errors"] for op in log) == 0
    assert h.power_on_hours == 5675
    assert h.percentage_used_pct is None and h.available_spare_pct is None
    assert classify(h) == (OK, ())


def test_missing_keys_are_none_never_an_exception():
    h = parse_smartctl({"json_format_version": [1, 0], "smartctl": {"exit_status": 0},
                        "device": {"protocol": "ATA"}, "smart_status": {"passed": True}},
                       "sda")
    assert h.readable and h.temperature_c is None and h.power_on_hours is None
    assert parse_smartctl("not json {", "sda").unreadable_reason.startswith("smartctl gave no JSON")
    assert parse_smartctl("[]", "sda").readable is False


def test_open_failed_is_unreadable_with_smartctls_reason():
    """Exit status bit 1: smartctl 7.3 on this machine's virtio disk says exactly this."""
    doc = {"json_format_version": [1, 0],
           "smartctl": {"version": [7, 3], "exit_status": 1 << 1, "messages": [
               {"string": "/dev/vda: Unable to detect device type", "severity": "error"}]}}
    h = parse_smartctl(doc, "vda", BIT_OPEN)
    assert not h.readable and h.unreadable_reason == "Unable to detect device type"
    assert classify(h) == (UNKNOWN, ("Unable to detect device type",))


def test_a_disk_asleep_is_not_woken_and_says_so():
    """-n standby: smartctl's ataprint.cpp says jinf("Device is in %s mode, exit(%d)")
    and exits 2 (the default -n status) without touching the disk."""
    from gpudisk_top.collect.health import ASLEEP

    for mode in ("STANDBY", "STANDBY_Y", "SLEEP"):
        doc = {"json_format_version": [1, 0], "smartctl": {"version": [7, 3], "exit_status": 2,
               "messages": [{"string": f"Device is in {mode} mode, exit(2)",
                             "severity": "information"}]},
               "power_mode": {"ata_value": 0, "name": mode}}
        h = parse_smartctl(doc, "sdb", 2)
        assert not h.readable and h.unreadable_reason == ASLEEP, mode


# ---------------------------------------------------------------------------- trend
def test_trend_between_two_readings_of_one_drive():
    doc = load("nvme-7.0-media-errors.json")
    first = parse_smartctl(doc, "nvme0n1", 0, read_wall_s=1000.0)
    log = doc["nvme_smart_health_information_log"]
    log.update(media_errors=12, percentage_used=4, warning_temp_time=14, temperature=78,
               num_err_log_entries=70)
    doc["temperature"]["current"] = 78
    doc["nvme_composite_temperature_threshold"] = {"warning": 75, "critical": 85}
    last = parse_smartctl(doc, "nvme0n1", 0, read_wall_s=1900.0)
    t = trend(first, last)
    assert (t.span_s, t.media_errors_gained, t.wear_gained_pct, t.warning_temp_min_gained,
            t.error_log_gained) == (900.0, 5, 1.0, 14, 8)
    assert minutes_above_warning([first, last]) == 14.0
    view = view_of(last, first)
    assert view.status == WARNING
    assert evidence_clause(view) == ("composite temperature 78 °C, above its 75 °C warning "
                                     "for 14 min: thermal throttling; 12 media errors (5 since start)")


def test_minutes_above_warning_without_a_drive_counter():
    """ATA keeps no time-above-warning counter: the time between readings that found it
    at or above its warning temperature."""
    doc = load("sata-ssd-7.0-x-sct.json")
    readings = []
    for i, temp in enumerate((60, 71, 72, 65)):
        doc["temperature"]["current"] = temp
        readings.append(parse_smartctl(doc, "sda", 0, read_wall_s=600.0 * i))
    assert minutes_above_warning(readings) == 20.0
    assert minutes_above_warning(readings[:1]) is None


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.json")))
def test_every_fixture_has_a_json_view(name):
    view = view_of(read(name))
    out = view.as_json()
    json.dumps(out, allow_nan=False)
    assert out["status"] in ("ok", "warning", "failing") and out["device"] == "sdx"
