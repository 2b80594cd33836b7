"""Our health view and JSON against smartctl's own TEXT output for the same data (issue
16's acceptance: "The health view and the JSON on the fixtures match smartctl's own text
output for the same data").

No source publishes smartctl's text and JSON of one reading, and smartctl cannot print
text from JSON.  So the real, unmodified smartctl (Debian's 7.3 here and in CI) reads a
fake drive: tests/smartshim/smartshim.c, an LD_PRELOAD library, answers its ioctls for
one path that does not exist (SMARTSHIM_PATH, never under /dev/) from raw pages that
tests/smartshim/pages.py builds from the values of a real drive's fixture
(tests/fixtures/health/).  smartctl runs twice on the same pages: `-d TYPE -x` (text) and
`-d TYPE` plus exactly the collector's options (collect/health_smartctl.py SMARTCTL_ARGS, JSON).
Our parser reads that JSON; our HealthView judges it; --once renders its health row and
JSON entry (output/once.py render_text, to_json); and every number we show is compared
with the number in smartctl's text.  Then the loop is closed: the reading equals the one
our parser makes of the original fixture, and smartctl's JSON of the pages equals the
fixture's own keys (fixture -> pages -> smartctl -> our parser == fixture).

Two NVMe facts smartctl 7.3 prints as text only were once the known gaps here: the
composite temperature thresholds (WCTEMP/CCTEMP; JSON from 7.5) and the thermal
management transition times (JSON only after 7.5).  The collector's --json=co puts that
text in the same document (smartctl.output[]), our parser reads the two from it where the
JSON lacks them (collect/health_smartctl.py nvme_text_facts), and the tests below assert both
equal the text, and that 7.3's JSON itself still lacks them (so it is the text that
gives them, not a key).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from model_factory import model
from smartshim.pages import DRIVES, STAND_INS, load, pages_for, write_data
from gpudisk_top.collect.health import HealthPoller
from gpudisk_top.collect.health_smartctl import SMARTCTL_ARGS, find_smartctl, parse_smartctl
from gpudisk_top.collect.roots import Roots
from gpudisk_top.collect.sample import DiskHealth
from gpudisk_top.model.health import FAILING, OK, WARNING, HealthView, health_views, view_of
from gpudisk_top.model.select import DeviceFilter
from gpudisk_top.output.once import _HEALTH_COLUMNS, render_text, to_json

SHIM_SRC = Path(__file__).resolve().parent / "smartshim" / "smartshim.c"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "health"
SMARTCTL = find_smartctl() or next(
    (p for p in ("/usr/sbin/smartctl", "/sbin/smartctl") if os.access(p, os.X_OK)), None)
GCC = shutil.which("gcc") or shutil.which("cc")
RUN_TIMEOUT_S = 20

# the fake drives' paths: absolute, not under /dev/, and nothing there (asserted)
FAKE_PATH = {"nvme": "/nonexistent/smartshim-nvme0n1", "ata": "/nonexistent/smartshim-sda"}
DEVICE = {"nvme": "nvme0n1", "ata": "sda"}


# ---------------------------------------------------------------------------- the shim
@pytest.fixture(scope="module")
def shim(tmp_path_factory) -> Path:
    if SMARTCTL is None:
        pytest.skip("needs smartctl (Debian package smartmontools)")
    if GCC is None:
        pytest.skip("needs gcc and libc6-dev to build the LD_PRELOAD shim (tests/smartshim)")
    lib = tmp_path_factory.mktemp("smartshim") / "libsmartshim.so"
    proc = subprocess.run([GCC, "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-o", str(lib),
                           str(SHIM_SRC), "-ldl"], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0 and re.search(r"No such file or directory|not found", proc.stderr):
        pytest.skip("cannot build the shim (C library or kernel headers missing): "
                    + proc.stderr.strip().splitlines()[0])
    assert proc.returncode == 0, proc.stderr
    return lib


def smartctl(lib: Path, data: Path | None, path: str, *args: str, cwd=None
             ) -> subprocess.CompletedProcess:
    """The real smartctl with the shim preloaded, standing in for `path` only."""
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C", "TZ": "UTC",
           "LD_PRELOAD": str(lib), "SMARTSHIM_PATH": path}
    if data is not None:
        env["SMARTSHIM_DATA"] = str(data)
    return subprocess.run([SMARTCTL, *args, path], capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S, env=env, cwd=cwd, stdin=subprocess.DEVNULL)


# ---------------------------------------------------------------------------- smartctl's text
def text_fields(text: str) -> dict[str, str]:
    """'Label:   value' lines of smartctl's text, the first of each label."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z][^:]*?):\s+(\S.*?)\s*$", line)
        if m:
            out.setdefault(m.group(1), m.group(2))
    return out


def number(value: str | None) -> int | None:
    """'12,798' -> 12798, '35 Celsius' -> 35, '99%' -> 99, '0x10' -> 16; '-' -> None."""
    if value is None:
        return None
    if value.startswith("0x"):
        return int(value, 16)
    m = re.match(r"^([\d,]+)", value)
    return int(m.group(1).replace(",", "")) if m else None


ATTR_ROW = re.compile(r"^\s*(?P<id>\d{1,3}) (?P<name>\S+)\s+(?P<flags>[P-][O-][S-][R-][C-][K-])"
                      r"[+ ]?\s+(?P<value>\d{3}|---)\s+(?P<worst>\d{3}|---)\s+"
                      r"(?P<thresh>\d{3}|---)\s+(?P<fail>NOW|Past|-)\s+(?P<raw>\S.*?)\s*$")


def attribute_table(text: str) -> dict[int, dict]:
    """smartctl -x's (brief) attribute table: {id: {name, fail, raw}}; fail is the
    FAIL column (NOW, Past, -), raw the RAW_VALUE column as printed."""
    rows, inside = {}, False
    for line in text.splitlines():
        if line.startswith("ID# ATTRIBUTE_NAME"):
            assert "FAIL RAW_VALUE" in line, line    # -x prints the brief format
            inside = True
            continue
        if inside:
            m = ATTR_ROW.match(line)
            if not m:
                break
            rows[int(m["id"])] = {"name": m["name"], "fail": m["fail"], "raw": m["raw"]}
    assert rows, "no attribute table in smartctl's text"
    return rows


def verdict(fields: dict[str, str]) -> bool:
    said = fields["SMART overall-health self-assessment test result"]
    assert said in ("PASSED", "FAILED!"), said
    return said == "PASSED"


def nvme_text(text: str) -> dict[str, object]:
    """What smartctl's NVMe text says, by our DiskHealth field (None: not printed)."""
    f = text_fields(text)
    return {
        "model": f["Model Number"], "serial": f["Serial Number"],
        "firmware": f["Firmware Version"],
        "smart_passed": verdict(f),
        "critical_warning": number(f["Critical Warning"]),
        "temperature_c": number(f["Temperature"]),
        "available_spare_pct": number(f["Available Spare"]),
        "available_spare_threshold_pct": number(f["Available Spare Threshold"]),
        "percentage_used_pct": number(f["Percentage Used"]),
        "unsafe_shutdowns": number(f["Unsafe Shutdowns"]),
        "media_errors": number(f["Media and Data Integrity Errors"]),
        "error_log_entries": number(f["Error Information Log Entries"]),
        "power_on_hours": number(f["Power On Hours"]),
        "warning_temp_time_min": number(f.get("Warning  Comp. Temperature Time")),
        "critical_temp_time_min": number(f.get("Critical Comp. Temperature Time")),
        "warning_temp_c": number(f.get("Warning  Comp. Temp. Threshold")),
        "critical_temp_c": number(f.get("Critical Comp. Temp. Threshold")),
        # printed only where not 0; in JSON only since smartmontools commit 8d65173 (May
        # 2026, after 7.5): see test_nvme_thermal_management_time_equals_the_text
        "thermal_throttle_s": (None if "Thermal Temp. 1 Total Time" not in f
                               and "Thermal Temp. 2 Total Time" not in f else
                               (number(f.get("Thermal Temp. 1 Total Time")) or 0)
                               + (number(f.get("Thermal Temp. 2 Total Time")) or 0)),
        # ATA only: not in an NVMe drive's text
        "reallocated_sectors": None, "pending_sectors": None, "offline_uncorrectable": None,
        "failing_attributes": (), "failed_attributes": (),
    }


def ata_text(text: str) -> dict[str, object]:
    """What smartctl's ATA text says, by our DiskHealth field: the attribute table's
    RAW_VALUE (its leading number: '25 (Min/Max 19/39)' is 25 degrees), FAIL column,
    the overall verdict and the error log's count."""
    f = text_fields(text)
    table = attribute_table(text)

    def raw(attr_id):
        return number(table[attr_id]["raw"]) if attr_id in table else None

    temp_id = 194 if 194 in table else 190
    if "No Errors Logged" in text:
        errors = 0
    else:
        m = re.search(r"^ATA Error Count: (\d+)", text, re.M)
        errors = int(m.group(1)) if m else None
    return {
        "model": f["Device Model"], "serial": f["Serial Number"],
        "firmware": f["Firmware Version"],
        "smart_passed": verdict(f),
        "temperature_c": raw(temp_id),
        "power_on_hours": raw(9),
        "reallocated_sectors": raw(5),
        "pending_sectors": raw(197),
        "offline_uncorrectable": raw(198),
        "error_log_entries": errors,
        "failing_attributes": tuple(f"{r['name']} ({i})" for i, r in table.items()
                                    if r["fail"] == "NOW"),
        "failed_attributes": tuple(f"{r['name']} ({i})" for i, r in table.items()
                                   if r["fail"] == "Past"),
        # not in these drives' text: no NVMe log, no SCT temperatures (not emulated), no
        # device statistics
        "critical_warning": None, "available_spare_pct": None,
        "available_spare_threshold_pct": None, "percentage_used_pct": None,
        "unsafe_shutdowns": None, "media_errors": None, "warning_temp_time_min": None,
        "critical_temp_time_min": None, "warning_temp_c": None, "critical_temp_c": None,
        "thermal_throttle_s": None,
    }


# ---------------------------------------------------------------------------- ours
def once_outputs(view: HealthView) -> tuple[dict[str, float | None], str, dict]:
    """--once's health row (by field), the row itself, and its JSON `health` entry."""
    m = model(2)
    m.health = {view.device: view}
    lines = render_text(m, DeviceFilter()).splitlines()
    head = next(i for i, line in enumerate(lines) if re.match(r"^Device\s+health\s", line))
    row = lines[head + 1]
    cells = row.split()
    assert cells[:2] == [view.device, view.status], row
    shown = {col.field: None if cell == "-" else float(cell)
             for col, cell in zip(_HEALTH_COLUMNS, cells[2:2 + len(_HEALTH_COLUMNS)])}
    entries = to_json(m, DeviceFilter.from_option(True, None))["health"]
    assert [e["device"] for e in entries] == [view.device]
    return shown, row, entries[0]


# what smartctl before 7.5 prints about an NVMe drive as text only: its JSON keys
TEXT_ONLY_KEYS = {
    "warning_temp_c": ("nvme_composite_temperature_threshold", "warning"),
    "critical_temp_c": ("nvme_composite_temperature_threshold", "critical"),
    "thermal_throttle_s": ("nvme_smart_health_information_log",
                           "thermal_mgmt_temperature_1_total_time"),
}


def json_has(doc: dict, field: str) -> bool:
    outer, inner = TEXT_ONLY_KEYS[field]
    return inner in doc.get(outer, {})


def compare_with_text(h: DiskHealth, view: HealthView, said: dict[str, object]) -> None:
    """Every number and verdict we show (the reading, --once's row and JSON) equals
    smartctl's text: anything that differs fails (no known gap is left)."""
    shown, row, entry = once_outputs(view)
    for field, text_value in said.items():
        ours = getattr(h, field)
        if isinstance(text_value, tuple):
            assert ours == text_value, (field, ours, text_value)
            assert tuple(entry[field]) == text_value, (field, entry[field], text_value)
            continue
        assert ours == text_value, (field, ours, text_value)
        assert entry[field] == text_value, ("--once --json", field, entry[field], text_value)
        if field in shown:
            assert shown[field] == text_value, ("--once text", field, row, text_value)
    # a column we show that the text does not say is "-"
    for field, value in shown.items():
        if field not in said:
            assert value is None, (field, row)
    if view.reasons:
        assert row.endswith(f"smartctl: {'; '.join(view.reasons)}"), row
    assert (entry["status"], entry["reasons"]) == (view.status, list(view.reasons))


def expected_verdict(name: str, said: dict) -> tuple[str, tuple[str, ...]]:
    """The status and reasons model/health.py's rule gives, spelled from the text."""
    if name == "nvme-7.0-media-errors.json":     # scrutiny fails it on media errors
        return WARNING, (f"media errors {said['media_errors']}",)
    if name == "nvme-7.3-critical-warning.json":  # Critical Warning: 0x10
        assert said["critical_warning"] == 0x10 and said["smart_passed"] is False
        return FAILING, ("critical warning: volatile memory backup failed",)
    if name == "hdd-7.1-failing.json":
        assert said["smart_passed"] is False
        return FAILING, ("SMART self-assessment FAILED",
                         "failing now: " + ", ".join(said["failing_attributes"]),
                         f"reallocated sectors {said['reallocated_sectors']}",
                         f"pending sectors {said['pending_sectors']}")
    if name == "hdd-7.3-reallocated.json":
        return WARNING, (f"reallocated sectors {said['reallocated_sectors']}",)
    # healthy: NVMe error-log entries judge nothing (nvme-7.3-error-log: 14 of them)
    return OK, ()


# ---------------------------------------------------------------------------- one drive
@dataclass
class Run:
    name: str
    kind: str
    text: str
    text_rc: int
    doc: dict
    json_rc: int
    health: DiskHealth
    view: HealthView


@pytest.fixture(scope="module", params=sorted(DRIVES))
def run(request, shim, tmp_path_factory) -> Run:
    name = request.param
    kind = DRIVES[name]
    path = FAKE_PATH[kind]
    assert not os.path.lexists(path) and not path.startswith("/dev/")
    data = write_data(tmp_path_factory.mktemp("pages") / "drive.pages", pages_for(name))
    text = smartctl(shim, data, path, "-d", kind, "-x")
    js = smartctl(shim, data, path, "-d", kind, *SMARTCTL_ARGS)
    assert not text.returncode & 0x03, text.stdout + text.stderr   # parsed, opened
    assert js.returncode == json.loads(js.stdout)["smartctl"]["exit_status"]
    h = parse_smartctl(js.stdout, DEVICE[kind], js.returncode)
    return Run(name, kind, text.stdout, text.returncode, json.loads(js.stdout), js.returncode,
               h, view_of(h))


def test_our_numbers_are_the_ones_smartctl_prints(run):
    assert run.health.readable, run.health.unreadable_reason
    said = nvme_text(run.text) if run.kind == "nvme" else ata_text(run.text)
    compare_with_text(run.health, run.view, said)
    if run.kind == "nvme":
        # the once-known gap, closed: WCTEMP/CCTEMP as the text says them, from the text
        # in smartctl's document where its JSON has no key for them (7.3: none)
        assert said["warning_temp_c"] == STAND_INS["nvme_warning_temp_c"]
        assert said["critical_temp_c"] == STAND_INS["nvme_critical_temp_c"]
        assert (run.health.warning_temp_c, run.health.critical_temp_c) == (
            said["warning_temp_c"], said["critical_temp_c"])
        if run.doc["smartctl"]["version"][:2] < [7, 5]:
            assert not json_has(run.doc, "warning_temp_c")
            assert not json_has(run.doc, "critical_temp_c")
            assert f"Warning  Comp. Temp. Threshold:     {said['warning_temp_c']} Celsius" \
                in run.doc["smartctl"]["output"]


def test_the_verdict_is_what_the_text_implies(run):
    said = nvme_text(run.text) if run.kind == "nvme" else ata_text(run.text)
    assert (run.view.status, run.view.reasons) == expected_verdict(run.name, said)
    # smartctl's own exit status agrees: bit 3 "SMART status check returned DISK FAILING"
    assert bool(run.text_rc & 0x08) == (said["smart_passed"] is False)


def test_the_loop_closes_fixture_pages_smartctl_parser(run):
    """Our reading of smartctl's JSON of the pages is our reading of the fixture, field
    for field; and smartctl's JSON of the pages is the fixture's, key for key, but for
    what the pages cannot carry (named below)."""
    fixture = load(run.name)
    ours_of_fixture = parse_smartctl(fixture, DEVICE[run.kind], fixture["smartctl"]["exit_status"])
    if run.kind == "nvme":
        # the one thing the pages add: WCTEMP/CCTEMP stand-ins, which no fixture has
        # (their smartctl wrote them as text only, and kept no text), smartctl's text says
        assert ours_of_fixture.warning_temp_c is None is ours_of_fixture.critical_temp_c
        ours_of_fixture.warning_temp_c = float(STAND_INS["nvme_warning_temp_c"])
        ours_of_fixture.critical_temp_c = float(STAND_INS["nvme_critical_temp_c"])
    for f in DiskHealth.__slots__:
        if f in ("read_wall_s", "read_cpu_s"):
            continue
        assert getattr(run.health, f) == getattr(ours_of_fixture, f), f
    assert view_of(ours_of_fixture).status == run.view.status
    assert view_of(ours_of_fixture).reasons == run.view.reasons

    not_carried = {
        "smartctl", "local_time", "json_format_version",
        "device",                   # the fake path, -d ata/nvme (the fixture: sat, usbjmicron)
        "ata_sct_capabilities",     # SCT is not emulated (IDENTIFY word 206 = 0)
    }
    for key, value in fixture.items():
        if key in not_carried:
            continue
        got = run.doc.get(key)
        if key == "ata_smart_data":
            # General Purpose Logging is not emulated: smartctl could not read a GP log
            # over HDIO_DRIVE_CMD anyway
            value = {**value, "capabilities": {**value["capabilities"],
                                               "gp_logging_supported": False}}
        assert got == value, (key, got, value)
    # the exit status: the 7.3 ATA fixtures' `--log=error` read no self-test log; -x asks
    # for one, the pages have none, the read is aborted (bit 2, "a SMART command failed")
    want = fixture["smartctl"]["exit_status"]
    if run.kind == "ata" and "ata_smart_self_test_log" not in fixture:
        want |= 0x04
    assert run.json_rc == want


def thermal_pages(times: tuple[int, int] = (120, 30)) -> dict[str, bytes]:
    """Not a fixture's data: the 660p's pages with Thermal Management Temperature 1 and 2
    transition counts 2 and 1 and total times `times` (SMART / Health log bytes 216-231;
    none of the fixtures' drives has any)."""
    pages = pages_for("nvme-7.1-healthy.json")
    log = bytearray(pages["nvme.log.02"])
    struct.pack_into("<IIII", log, 216, 2, 1, *times)   # transitions 1, 2; times 1, 2
    pages["nvme.log.02"] = bytes(log)
    return pages


@pytest.mark.parametrize("times", [(120, 30), (0, 45), (120, 0)])
def test_nvme_thermal_management_time_equals_the_text(shim, tmp_path, times):
    """smartctl 7.3 prints the transition times as text (each only where not 0), its JSON
    has no key for them (thermal_mgmt_temperature_*_total_time: smartmontools commit
    8d65173, after 7.5), and the kernel keeps none: the once-known gap.  Our reading takes
    them from the text in smartctl's document (--json=o), and --once --json says what
    smartctl's text says."""
    data = write_data(tmp_path / "p", thermal_pages(times))
    text = smartctl(shim, data, FAKE_PATH["nvme"], "-d", "nvme", "-x").stdout
    js = smartctl(shim, data, FAKE_PATH["nvme"], "-d", "nvme", *SMARTCTL_ARGS)
    doc = json.loads(js.stdout)
    said = nvme_text(text)
    assert said["thermal_throttle_s"] == sum(times)
    h = parse_smartctl(js.stdout, "nvme0n1", js.returncode)
    assert h.thermal_throttle_s == sum(times)
    assert view_of(h).as_json()["thermal_throttle_s"] == sum(times)
    compare_with_text(h, view_of(h), said)      # every other number too
    if doc["smartctl"]["version"][:2] <= [7, 5]:
        assert not json_has(doc, "thermal_throttle_s")   # it is the text that gives it


def test_the_stored_text_fixture_is_what_this_smartctl_prints(shim, tmp_path):
    """tests/fixtures/health/nvme-7.3-shim-text.json (test_health_parse.py's document with
    smartctl.output) was written by smartctl 7.3 on these pages: this smartctl, if it is a
    7.3, writes the same lines (the time and the build's platform aside), and every
    key of it."""
    stored = json.loads((FIXTURES / "nvme-7.3-shim-text.json").read_text())
    data = write_data(tmp_path / "p", thermal_pages())
    js = smartctl(shim, data, FAKE_PATH["nvme"], "-d", "nvme", *SMARTCTL_ARGS)
    doc = json.loads(js.stdout)
    if doc["smartctl"]["version"] != stored["smartctl"]["version"]:
        pytest.skip(f"smartctl {doc['smartctl']['version']}: the fixture is 7.3's")

    def steady(lines):
        return [line for line in lines
                if not line.startswith(("smartctl 7", "Local Time is:"))]

    assert steady(doc["smartctl"]["output"]) == steady(stored["smartctl"]["output"])
    for key in set(doc) | set(stored):
        if key not in ("local_time", "smartctl"):
            assert doc.get(key) == stored.get(key), key
    assert parse_smartctl(doc, "nvme0n1", js.returncode).thermal_throttle_s == 150


# ---------------------------------------------------------------------------- end to end
def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


# the NVMe controller's hwmon temp1_max: its over-temperature threshold (Get Features,
# Temperature Threshold), WCTEMP by default, here as a host set it lower (Set Features,
# or a write to temp1_max): not the drive's own WCTEMP, which smartctl's text says
HWMON_MAX_C = STAND_INS["nvme_warning_temp_c"] - 5


def fake_sysfs(root: Path, nvme_doc: dict) -> Path:
    """A /sys with one NVMe disk (its controller's hwmon: the composite temperature, the
    over-temperature threshold HWMON_MAX_C and CCTEMP, which the kernel reads from the
    same Identify Controller) and one SATA disk (no hwmon)."""
    sys_ = root / "sys"
    pci = sys_ / "devices" / "pci0000:00"
    ctrl = pci / "0000:00:1d.0" / "0000:3d:00.0" / "nvme" / "nvme0"
    (ctrl / "nvme0n1").mkdir(parents=True)
    os.symlink("../../nvme0", ctrl / "nvme0n1" / "device")
    temp = nvme_doc["nvme_smart_health_information_log"]["temperature"]
    for f, v in (("temp1_input", temp * 1000),
                 ("temp1_max", HWMON_MAX_C * 1000),
                 ("temp1_crit", STAND_INS["nvme_critical_temp_c"] * 1000), ("name", "nvme")):
        _write(ctrl / "hwmon2" / f, f"{v}\n")
    scsi = pci / "0000:00:17.0" / "ata1" / "host0" / "target0:0:0" / "0:0:0:0"
    (scsi / "block" / "sda").mkdir(parents=True)
    os.symlink("../../../0:0:0:0", scsi / "block" / "sda" / "device")
    (sys_ / "block").mkdir()
    for name, target in (("nvme0n1", ctrl / "nvme0n1"), ("sda", scsi / "block" / "sda")):
        os.symlink(os.path.relpath(target, sys_ / "block"), sys_ / "block" / name)
    return sys_


def test_end_to_end_the_collector_on_the_fake_drives(shim, tmp_path):
    """The collector's own path: HealthPoller finds the disks under a sysfs tree and runs
    its smartctl command on <dev_dir>/<disk> (its `smartctl` and `dev_dir` parameters:
    no product change).  The command is a wrapper that runs the real smartctl with the
    shim, standing in for /nonexistent/smartshim-dev/<disk> only, with the shim's `-d
    TYPE` in place of the collector's (a node outside /dev gets `-d nvme` or `-d
    sat,auto` from smartctl_argv, which the wrapper logs; the shim's ATA drive answers
    the HDIO ioctls of `-d ata`, not SAT's SCSI pass-through).
    The NVMe thresholds, text only in smartctl 7.3's output, come from that text in the
    document the collector's own command gets, and equal the text: the drive's WCTEMP,
    not the lower over-temperature threshold the kernel's hwmon says (HWMON_MAX_C)."""
    dev_dir = "/nonexistent/smartshim-dev"
    assert not os.path.lexists(dev_dir)
    disks = {"nvme0n1": ("nvme-7.0-media-errors.json", "nvme"),
             "sda": ("hdd-7.1-failing.json", "ata")}
    cases = []
    for disk, (name, kind) in disks.items():
        data = write_data(tmp_path / f"{disk}.pages", pages_for(name))
        cases.append(f'  {dev_dir}/{disk}) data={data}; type={kind} ;;')
    wrapper = tmp_path / "bin" / "smartctl"
    argv_log = tmp_path / "argv"
    _write(wrapper, "#!/bin/sh\n"
           "# the real smartctl on the shim's fake drive named by the last argument\n"
           f'echo "$*" >> {argv_log}\n'
           'for dev; do :; done\n'
           'case "$dev" in\n' + "\n".join(cases) + "\n"
           '  *) echo "not a fake drive: $dev" >&2; exit 2 ;;\n'
           "esac\n"
           "# the collector's -d TYPE out, the shim's in\n"
           'skip=0\n'
           'for a; do\n'
           '  shift\n'
           '  if [ "$skip" = 1 ]; then skip=0; continue; fi\n'
           '  if [ "$a" = "-d" ]; then skip=1; continue; fi\n'
           '  set -- "$@" "$a"\n'
           'done\n'
           f'export LD_PRELOAD={shim} SMARTSHIM_PATH="$dev" SMARTSHIM_DATA="$data"\n'
           f'exec {SMARTCTL} -d "$type" "$@"\n')
    wrapper.chmod(0o755)
    roots = Roots(sysfs=str(fake_sysfs(tmp_path, load("nvme-7.0-media-errors.json"))))
    snap = HealthPoller(roots, interval_s=600, smartctl=str(wrapper), dev_dir=dev_dir,
                        timeout_s=RUN_TIMEOUT_S).poll()
    assert sorted(snap.readings) == ["nvme0n1", "sda"]
    assert sorted(argv_log.read_text().splitlines()) == [
        " ".join([*SMARTCTL_ARGS, "-d", "nvme", f"{dev_dir}/nvme0n1"]),
        " ".join([*SMARTCTL_ARGS, "-d", "sat,auto", f"{dev_dir}/sda"])]
    views = health_views(snap)
    for disk, (name, kind) in disks.items():
        h = snap.readings[disk]
        assert h.readable and h.source == "smartctl", h.unreadable_reason
        text = smartctl(shim, tmp_path / f"{disk}.pages", f"{dev_dir}/{disk}", "-d", kind, "-x")
        said = nvme_text(text.stdout) if kind == "nvme" else ata_text(text.stdout)
        # every number, the thresholds included (smartctl's text's): no gap left
        compare_with_text(h, views[disk], said)
        assert (views[disk].status, views[disk].reasons) == expected_verdict(name, said)
    nvme = snap.readings["nvme0n1"]
    assert nvme.warning_temp_c == STAND_INS["nvme_warning_temp_c"] != HWMON_MAX_C
    assert nvme.critical_temp_c == STAND_INS["nvme_critical_temp_c"]


# ---------------------------------------------------------------------------- the shim's safety
def test_the_shim_never_stands_in_for_a_path_that_exists(shim, tmp_path):
    real = tmp_path / "nvme0"
    real.write_bytes(b"not a drive")
    before = real.stat()
    data = write_data(tmp_path / "p", pages_for("nvme-7.1-healthy.json"))
    p = smartctl(shim, data, str(real), "-d", "nvme", "-x")
    assert p.returncode & 0x02 and "No such device" in p.stdout, p.stdout
    after = real.stat()
    assert real.read_bytes() == b"not a drive"
    assert (after.st_mtime_ns, after.st_size) == (before.st_mtime_ns, before.st_size)


@pytest.mark.parametrize("path", ["/dev/null", "/dev/smartshim-no-such-node", "smartshim-rel"])
def test_the_shim_refuses_dev_and_relative_paths(shim, tmp_path, path):
    """Under /dev/ (there or not) or relative: open fails with ENOENT, nothing is opened
    (without the refusal, /dev/null would open and fail its ioctls instead)."""
    data = write_data(tmp_path / "p", pages_for("nvme-7.1-healthy.json"))
    p = smartctl(shim, data, path, "-d", "nvme", "-x", cwd=tmp_path)
    assert p.returncode & 0x02 and "No such device" in p.stdout, p.stdout
    assert "Inappropriate ioctl" not in p.stdout


def test_other_paths_and_their_ioctls_go_to_the_kernel(shim, tmp_path):
    """A path that is not SMARTSHIM_PATH is opened by libc, and its ioctls reach the
    kernel (a regular file: ENOTTY)."""
    plain = tmp_path / "plain"
    plain.write_bytes(b"")
    data = write_data(tmp_path / "p", pages_for("nvme-7.1-healthy.json"))
    env = {"PATH": "/usr/sbin:/usr/bin", "LC_ALL": "C", "LD_PRELOAD": str(shim),
           "SMARTSHIM_PATH": FAKE_PATH["nvme"], "SMARTSHIM_DATA": str(data)}
    p = subprocess.run([SMARTCTL, "-d", "nvme", "-x", str(plain)], capture_output=True,
                       text=True, timeout=RUN_TIMEOUT_S, env=env, stdin=subprocess.DEVNULL)
    assert "Inappropriate ioctl for device" in p.stdout, p.stdout


def test_without_its_data_file_the_fake_drive_does_not_open(shim):
    p = smartctl(shim, None, FAKE_PATH["nvme"], "-d", "nvme", "-x")
    assert p.returncode & 0x02 and "Input/output error" in p.stdout, p.stdout
