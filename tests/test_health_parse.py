"""smartctl --json of real drives (tests/fixtures/health/README.md says where each file
comes from) read into DiskHealth, and judged by the one rule (model/health.py classify).

Every expected number below is one smartctl wrote for that drive: the test names the
JSON field, and for ATA attributes also checks the RAW_VALUE text smartctl prints in its
attribute table (kept in the JSON as raw.string)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from gpudisk_top.collect.health_smartctl import BIT_OPEN, parse_smartctl
from gpudisk_top.collect.health_sysfs import merge_sysfs
from gpudisk_top.collect.sample import DiskHealth
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
    from gpudisk_top.collect.health_smartctl import ASLEEP

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


def test_no_trend_between_two_drives_in_one_slot():
    """sdb replaced by a new drive (another serial number): its counters are not the
    old one's plus anything; no trend, no time above warning across the two."""
    doc = load("hdd-7.3-reallocated.json")
    old = parse_smartctl(doc, "sdb", 0, read_wall_s=1000.0)
    doc.update(serial_number="ZA-NEW-0001", power_on_time={"hours": 3})
    for a in doc["ata_smart_attributes"]["table"]:
        if a["id"] == 5:
            a["raw"]["value"] = 0
    new = parse_smartctl(doc, "sdb", 0, read_wall_s=1900.0)
    assert trend(old, new) is None and view_of(new, old).since_start is None
    assert trend(new, new) is not None                       # one drive: a trend
    # no serial numbers: the model tells two drives apart when one source gives both
    a = dataclasses.replace(old, serial=None)
    assert trend(a, dataclasses.replace(new, serial=None, model="ST4000NM0035")) is None
    assert trend(a, dataclasses.replace(new, serial=None)) is not None    # nothing tells
    assert trend(a, dataclasses.replace(old, serial=None, source="sysfs", model="WDC")) is not None


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


# ---------------------------------------------------------------------------- odd documents
def _paths(doc, pre=()):
    """Every key and list index of a JSON document, outermost first."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        yield pre + (k,)
        yield from _paths(v, pre + (k,))


# what a key may hold instead of what smartctl writes there: every JSON type, and the
# values json.loads takes that no number should be (NaN, an integer no float holds)
WRONG = (None, 5, -1.5, "x", "", [], {}, True, [{"a": 1}], {"a": [1]}, float("nan"),
         10 ** 400)


def _valid(h) -> None:
    """Every field of a reading is of its type (what a recording takes back:
    record.v2.fields.health_value raises otherwise)."""
    from gpudisk_top.record.v2.fields import HEALTH_FIELDS, health_record, health_value

    for name, value in zip(HEALTH_FIELDS, health_record(h)):
        health_value(name, value)
    json.dumps(view_of(h).as_json(), allow_nan=False)


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.json")))
def test_any_key_of_any_type_never_raises(name):
    """A smartctl of another version, a bridge that answers garbage: whatever type each
    key holds, parse_smartctl gives a reading whose fields are each of their type."""
    doc = load(name)
    exit_status = doc["smartctl"]["exit_status"]
    for path in list(_paths(doc)):
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        key = path[-1]
        kept = parent[key]
        for wrong in WRONG:
            parent[key] = wrong
            _valid(parse_smartctl(doc, "sda", exit_status))
            if path[0] == "smartctl":                   # the exit status from the document
                _valid(parse_smartctl(doc, "sda"))
        parent[key] = kept
    for odd in ({"temperature": 5}, {"smartctl": {"messages": 5}, "ata_smart_attributes": 1},
                {"nvme_smart_health_information_log": [], "temperature": "hot"},
                {"ata_device_statistics": {"pages": 7}}, "[" * 100000, b"\xff\xfe", 5, None):
        _valid(parse_smartctl(odd, "sda", 0))


def test_bit_2_with_data_is_read():
    """Exit status bit 2 (a SMART or other ATA command failed: a drive that does not
    answer one log) comes with the data smartctl did read: a reading."""
    h = read("sata-ssd-7.3.json")
    h4 = parse_smartctl((FIXTURES / "sata-ssd-7.3.json").read_text(), "sdx", 0x04)
    assert h4.readable and h4.unreadable_reason is None
    assert h4 == h


# ---------------------------------------------------------------------------- thresholds
@pytest.mark.parametrize("unset", [-273, 65262, 0, -128, 255, 1e6])
def test_a_threshold_the_drive_did_not_set_is_none(unset):
    """A drive that leaves WCTEMP/CCTEMP 0 (smartctl writes 0 K as -273 °C), at 0xFFFF K
    (65262 °C), or an SCT limit of -128 (no value): no threshold, rather than a drive
    always above its warning (or never)."""
    doc = load("nvme-7.0-media-errors.json")
    doc["nvme_composite_temperature_threshold"] = {"warning": unset, "critical": unset}
    h = parse_smartctl(doc, "nvme0n1", 0)
    assert (h.warning_temp_c, h.critical_temp_c) == (None, None)
    assert classify(h)[0] != FAILING and not any("°C" in r for r in classify(h)[1])
    doc = load("sata-ssd-7.0-x-sct.json")
    for key in ("op_limit_max", "critical_limit_max", "limit_max"):
        doc["temperature"][key] = unset
    h = parse_smartctl(doc, "sda", 0)
    assert (h.warning_temp_c, h.critical_temp_c) == (None, None)


def test_a_temperature_outside_any_drives_range_is_none():
    doc = load("nvme-7.0-media-errors.json")
    for bad in (-273, 0, 151, 65262):
        doc["temperature"]["current"] = bad
        doc["nvme_smart_health_information_log"]["temperature"] = bad
        assert parse_smartctl(doc, "nvme0n1", 0).temperature_c is None, bad
    doc["temperature"]["current"] = 150
    assert parse_smartctl(doc, "nvme0n1", 0).temperature_c == 150.0
    sata = load("hdd-7.3.json")
    for a in sata["ata_smart_attributes"]["table"]:
        if a["id"] in (190, 194):
            a["raw"]["string"] = "0"       # an attribute 194 without a sensor
    sata.pop("temperature", None)
    assert parse_smartctl(sata, "sda", 0).temperature_c is None


# ---------------------------------------------------------------------------- smartctl's text
# nvme-7.3-shim-text.json: what the real smartctl 7.3 wrote with the collector's options
# (--json=co) for the 660p's pages on tests/smartshim, thermal management times 120 s and
# 30 s added (test_health_smartctl_text.py checks smartctl still writes these lines)
SHIM_TEXT = "nvme-7.3-shim-text.json"


def _with_lines(replace: dict[str, str | None], name: str = SHIM_TEXT) -> dict:
    """The document with smartctl.output's lines that start with a key replaced by its
    value (None: the line left out)."""
    doc = load(name)
    out = []
    for line in doc["smartctl"]["output"]:
        key = next((k for k in replace if line.startswith(k)), None)
        if key is None:
            out.append(line)
        elif replace[key] is not None:
            out.append(replace[key])
    doc["smartctl"]["output"] = out
    return doc


def test_smartctl_7_3_text_gives_the_nvme_thresholds_and_thermal_times():
    """smartctl 7.3's JSON has neither WCTEMP/CCTEMP nor the thermal management times;
    its text (smartctl.output, --json=o) has both, and they are read from it."""
    doc = load(SHIM_TEXT)
    assert doc["smartctl"]["version"] == [7, 3] and "--json=co" in doc["smartctl"]["argv"]
    assert "nvme_composite_temperature_threshold" not in doc
    assert not any(k.startswith("thermal_mgmt") for k in doc["nvme_smart_health_information_log"])
    lines = doc["smartctl"]["output"]
    for line in ("Warning  Comp. Temp. Threshold:     75 Celsius",
                 "Critical Comp. Temp. Threshold:     85 Celsius",
                 "Thermal Temp. 1 Total Time:         120",
                 "Thermal Temp. 2 Total Time:         30"):
        assert line in lines
    h = read(SHIM_TEXT, "nvme0n1")
    assert (h.warning_temp_c, h.critical_temp_c, h.thermal_throttle_s) == (75, 85, 150)
    assert view_of(h).as_json()["thermal_throttle_s"] == 150
    # every other number is the 660p's own, as without the text
    plain = read("nvme-7.1-healthy.json", "nvme0n1")
    for f in DiskHealth.__slots__:
        if f not in ("warning_temp_c", "critical_temp_c", "thermal_throttle_s"):
            assert getattr(h, f) == getattr(plain, f), f
    # without the text (smartctl run with --json=c): none of the three, as before
    doc["smartctl"].pop("output")
    h = parse_smartctl(doc, "nvme0n1", 0)
    assert (h.warning_temp_c, h.critical_temp_c, h.thermal_throttle_s) == (None, None, None)


def test_json_keys_win_over_the_text():
    """A smartctl that writes the keys (7.5: the thresholds; after 7.5: the times) is
    read from its JSON, whatever its text says; a key it wrote that no drive could mean
    is None, not the text's."""
    doc = load(SHIM_TEXT)
    doc["nvme_composite_temperature_threshold"] = {"warning": 70, "critical": 80}
    doc["nvme_smart_health_information_log"].update(
        thermal_mgmt_temperature_1_total_time=60, thermal_mgmt_temperature_2_total_time=0)
    h = parse_smartctl(doc, "nvme0n1", 0)
    assert (h.warning_temp_c, h.critical_temp_c, h.thermal_throttle_s) == (70, 80, 60)
    doc["nvme_composite_temperature_threshold"] = {"warning": -273}    # WCTEMP 0 K; no CCTEMP
    h = parse_smartctl(doc, "nvme0n1", 0)
    assert (h.warning_temp_c, h.critical_temp_c) == (None, 85)


def test_the_drives_own_threshold_wins_over_the_kernels():
    """Where smartctl's text gives WCTEMP, hwmon's temp1_max (the over-temperature
    threshold the host may have set with Set Features, WCTEMP only by default) does not
    replace it; hwmon fills only what smartctl said nothing of."""
    kernel = DiskHealth(device="nvme0n1", source="sysfs", readable=True, temperature_c=36.0,
                        warning_temp_c=70.0, critical_temp_c=84.0)
    h = merge_sysfs(read(SHIM_TEXT, "nvme0n1"), dataclasses.replace(kernel))
    assert (h.warning_temp_c, h.critical_temp_c, h.source) == (75, 85, "smartctl")
    h = merge_sysfs(read("nvme-7.1-healthy.json", "nvme0n1"), dataclasses.replace(kernel))
    assert (h.warning_temp_c, h.critical_temp_c) == (70, 84)


W, C = "Warning  Comp. Temp. Threshold", "Critical Comp. Temp. Threshold"
T1, T2 = "Thermal Temp. 1 Total Time", "Thermal Temp. 2 Total Time"


@pytest.mark.parametrize("lines, want", [
    # kelvin_to_str() of 0 K (printed only with -r nvmeioctl): no threshold
    ({W: f"{W}:     -", C: f"{C}:     -"}, (None, None, 150)),
    # 0 K read as a number, 0xFFFF K: not a drive's threshold (sane_temp_c)
    ({W: f"{W}:     -273 Celsius", C: f"{C}:     65262 Celsius"}, (None, None, 150)),
    # another unit, text after the number, not an integer, no number: not read
    ({W: f"{W}:     75 Kelvin", C: f"{C}:     85 Celsius (x)"}, (None, None, 150)),
    ({W: f"{W}:     75.5 Celsius", C: f"{C}:"}, (None, None, 150)),
    # trailing blanks are not text after it
    ({W: f"{W}:     75 Celsius  "}, (75, 85, 150)),
    # %d of a count past 2^31 is negative: the sum is not known, never a part of it
    ({T1: f"{T1}:         -5"}, (75, 85, None)),
    ({T2: f"{T2}:         30 s"}, (75, 85, None)),
    # printed only where not 0 (smartctl before 8d65173): one printed, the other is 0
    ({T2: None}, (75, 85, 120)),
    ({T1: None}, (75, 85, 30)),
    # neither printed: 0 or not kept, which smartctl's text cannot tell: not known
    ({T1: None, T2: None}, (75, 85, None)),
    ({W: None, C: None}, (None, None, 150)),
    # a label nvmeprint.cpp does not print is not read
    ({W: "Warning Comp. Temp. Threshold 75 Celsius",
      C: "Critical Composite Temp. Threshold:  85 Celsius"}, (None, None, 150)),
])
def test_a_text_line_that_is_not_exactly_smartctls_is_not_read(lines, want):
    h = parse_smartctl(_with_lines(lines), "nvme0n1", 0)
    assert (h.warning_temp_c, h.critical_temp_c, h.thermal_throttle_s) == want
    _valid(h)


def test_two_lines_that_disagree_are_not_read():
    doc = load(SHIM_TEXT)
    doc["smartctl"]["output"] += ["Warning  Comp. Temp. Threshold:     70 Celsius",
                                  "Thermal Temp. 1 Total Time:         7",
                                  "Critical Comp. Temp. Threshold:     85 Celsius"]
    h = parse_smartctl(doc, "nvme0n1", 0)
    assert (h.warning_temp_c, h.critical_temp_c, h.thermal_throttle_s) == (None, 85, None)


def test_the_text_is_read_only_for_nvme():
    """The labels are nvmeprint.cpp's: an ATA or SCSI document's text is not searched."""
    doc = load("sata-ssd-7.3.json")
    doc["smartctl"]["output"] = load(SHIM_TEXT)["smartctl"]["output"]
    h = parse_smartctl(doc, "sda", 0)
    assert (h.warning_temp_c, h.critical_temp_c, h.thermal_throttle_s) == (None, None, None)


@pytest.mark.parametrize("output", [None, 5, f"{W}:     75 Celsius", {"0": "x"},
                                    [1, None, ["x"], {"a": 1}], [],
                                    [f"{W}:     {'9' * 5000} Celsius"]])
def test_text_of_another_shape_is_not_read(output):
    doc = load(SHIM_TEXT)
    doc["smartctl"]["output"] = output
    h = parse_smartctl(doc, "nvme0n1", 0)
    assert h.readable and (h.warning_temp_c, h.critical_temp_c, h.thermal_throttle_s) == (
        None, None, None)
    _valid(h)


# ---------------------------------------------------------------------------- the command line
def test_smartctl_is_given_the_node_under_devfs_with_its_type():
    """smartctl guesses a device's type from its name only under /dev/: under --devfs
    /host/dev the type comes from the kernel's name (smartctl(8) -d)."""
    from gpudisk_top.collect.health_smartctl import SMARTCTL_ARGS, smartctl_argv

    assert smartctl_argv("smartctl", "sda") == ["smartctl", *SMARTCTL_ARGS, "/dev/sda"]
    assert smartctl_argv("smartctl", "nvme0n1", "/dev/") == ["smartctl", *SMARTCTL_ARGS,
                                                             "/dev/nvme0n1"]
    host = [smartctl_argv("smartctl", d, "/host/dev") for d in ("nvme0n1", "sda", "hdb", "vdc")]
    assert [a[len(SMARTCTL_ARGS) + 1:] for a in host] == [
        ["-d", "nvme", "/host/dev/nvme0n1"], ["-d", "sat,auto", "/host/dev/sda"],
        ["-d", "ata", "/host/dev/hdb"], ["/host/dev/vdc"]]
    assert "-n" in SMARTCTL_ARGS and SMARTCTL_ARGS[SMARTCTL_ARGS.index("-n") + 1] == "standby"
    # its messages name the node it was given: left out of the reason
    doc = {"smartctl": {"exit_status": 2, "messages": [
        {"string": "/host/dev/sda: Permission denied", "severity": "error"}]}}
    assert parse_smartctl(doc, "sda", 2, path="/host/dev/sda").unreadable_reason == \
        "Permission denied"
