"""`probe` without load: device identity from a fixture sysfs, which device's ceiling a
partition or dm device has, the results file and load_ceilings(), fio's command and
output, refusals of what cannot be probed, and the layering of gpudisk_top/probe."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from cli_run import gdt, one_line_error
from fakeprocfs import FakeProcfs, FakeSysfs
from gpudisk_top.collect.blockdev import read_identity
from gpudisk_top.collect.roots import Roots
from gpudisk_top.errors import RuntimeFailure
from gpudisk_top.probe import fio, store
from gpudisk_top.probe.runner import ProbeResult
from gpudisk_top.probe.spec import BY_NAME, TestResult
from gpudisk_top.probe.target import Target, ceiling_device, describe_devices, identity

# name -> (major, minor, sysfs files)
DEVICES = {
    "nvme0n1": (259, 0, {"wwid": "eui.0025388b91c1a2b3", "device/serial": "S4EWNX0R1"}),
    # an all-zero EUI-64 is no identity: the controller's serial is used instead
    "nvme1n1": (259, 5, {"wwid": "eui.0000000000000000", "device/serial": "S4EWNX0R2"}),
    "sda": (8, 0, {"device/wwid": "naa.5000c500a1b2c3d4", "device/model": "ST8000NM000A",
                   "device/vendor": "ATA"}),
    "sdb": (8, 16, {"device/model": "Samsung SSD 870", "device/vendor": "ATA"}),
    "vda": (254, 0, {"serial": "vol-0abc"}),
    # two virtual disks given the same serial: neither may take the other's results
    "vdb": (254, 16, {"serial": "shared"}),
    "vdc": (254, 32, {"serial": "shared"}),
    "dm-0": (253, 0, {"dm/name": "vg-data", "dm/uuid": "LVM-abc"}),
    "md0": (9, 0, {"md/level": "raid1", "md/uuid": "1b2c:3d4e"}),
}
PARTITIONS = {"sda1": ("sda", 8, 1), "sdb1": ("sdb", 8, 17), "nvme0n1p1": ("nvme0n1", 259, 1)}
SLAVES = {"dm-0": ["sda1"], "md0": ["sdb1", "nvme0n1p1"]}


@pytest.fixture
def roots(tmp_path):
    sysfs, procfs = FakeSysfs(tmp_path / "sys"), FakeProcfs(tmp_path / "proc")
    lines = []
    for name, (major, minor, files) in DEVICES.items():
        sysfs.block_device(name, major, minor,
                           {"size": str(2**31), "queue/rotational": "0", **files},
                           slaves=tuple(SLAVES.get(name, [])))
        lines.append(f"{major} {minor} {name} 10 0 80 5 0 0 0 0 0 4 5")
    for name, (parent, major, minor) in PARTITIONS.items():
        sysfs.partition(name, parent, major, minor)
        lines.append(f"{major} {minor} {name} 10 0 80 5 0 0 0 0 0 4 5")
    procfs.write("diskstats", lines).write("self/mountinfo", "")
    return Roots(procfs=str(procfs), sysfs=str(sysfs))


def test_read_identity_prefers_wwn_then_serial_then_stack_uuids(roots):
    assert read_identity(roots, "nvme0n1") == ("wwid", "eui.0025388b91c1a2b3")
    assert read_identity(roots, "nvme1n1") == ("serial", "S4EWNX0R2")
    assert read_identity(roots, "sda") == ("wwid", "naa.5000c500a1b2c3d4")
    assert read_identity(roots, "vda") == ("serial", "vol-0abc")
    assert read_identity(roots, "dm-0") == ("dm-uuid", "LVM-abc")
    assert read_identity(roots, "md0") == ("md-uuid", "1b2c:3d4e")
    assert read_identity(roots, "sdb") is None
    assert read_identity(roots, "nosuch") is None


def test_identity_keys_weak_ones_and_shared_serials(roots):
    infos = describe_devices(roots)
    assert identity(roots, infos, "sda") == ("wwid:naa.5000c500a1b2c3d4", False)
    assert identity(roots, infos, "vda") == ("serial:vol-0abc", False)
    assert identity(roots, infos, "sdb") == ("model:ATA Samsung SSD 870/sdb", True)
    assert identity(roots, infos, "vdb") == ("serial:shared/vdb", True)
    assert identity(roots, infos, "vdc") == ("serial:shared/vdc", True)


def test_partitions_and_single_disk_stacks_have_their_disks_ceiling(roots):
    infos = describe_devices(roots)
    assert ceiling_device(infos, "sda")[0] == "sda"
    dev, note = ceiling_device(infos, "sda1")
    assert dev == "sda" and "partition of sda" in note
    dev, note = ceiling_device(infos, "dm-0")
    assert dev == "sda" and "vg-data" in note and "on sda alone" in note
    dev, note = ceiling_device(infos, "md0")   # over two disks: its own ceiling
    assert dev == "md0" and "nvme0n1, sdb" in note


def _result(identity_key: str, device: str, qd32: float) -> dict:
    target = Target(arg=device, device=device, path=f"/dev/{device}", kind="device",
                    span_bytes=2**31, identity=identity_key, identity_weak=False)
    res = ProbeResult(target=target, engine="fio", seconds=10.0, measured_at_s=1.7e9)
    for name, iops, mib_s in (("randread_4k_qd1", 9000.0, 35.0), ("randread_4k_qd32", qd32, 400.0),
                              ("read_1m_qd8", 2000.0, 2000.0)):
        res.tests[name] = TestResult(name, "fio", 3.3, int(iops * 3.3), iops, mib_s, 0.1, 0.3)
    return res.to_json()


def test_results_are_kept_by_identity_and_read_back_for_partitions_and_dm(roots, tmp_path):
    path = str(tmp_path / "state" / "gpudisk-top" / "probes.json")
    saved, warning = store.save(_result("wwid:naa.5000c500a1b2c3d4", "sda", 51000.0), path)
    assert saved == path and warning is None
    store.save(_result("serial:vol-0abc", "vda", 3000.0), path)
    store.save(_result("serial:vol-0abc", "vda", 3100.0), path)   # the latest is kept
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    got = store.load_ceilings(["sda", "sda1", "dm-0", "sdb", "vda", "md0"], roots, path)
    assert set(got) == {"sda", "sda1", "dm-0", "vda"}
    assert got["dm-0"] == got["sda"] and got["sda"].randread_qd32_iops == 51000.0
    assert got["sda"].device == "sda" and got["sda"].engine == "fio"
    assert got["sda"].randread_qd1_iops == 9000.0 and got["sda"].seq_read_mib_s == 2000.0
    assert got["sda"].measured_at_s == 1.7e9 and got["sda"].target_kind == "device"
    assert got["vda"].randread_qd32_iops == 3100.0
    with open(path) as f:
        doc = json.load(f)
    assert doc["format"] == "gpudisk-top probes" and doc["version"] == 1
    assert sorted(doc["devices"]) == ["serial:vol-0abc", "wwid:naa.5000c500a1b2c3d4"]


def test_a_damaged_results_file_is_no_ceiling_and_is_replaced_with_a_warning(roots, tmp_path):
    path = str(tmp_path / "probes.json")
    with open(path, "w") as f:
        f.write("{not json")
    assert store.load_ceilings(["sda"], roots, path) == {}
    with pytest.raises(RuntimeFailure, match="not a gpudisk-top probe results file"):
        store.load(path)
    _saved, warning = store.save(_result("wwid:naa.5000c500a1b2c3d4", "sda", 1.0), path)
    assert "replacing it" in warning
    assert set(store.load(path)) == {"wwid:naa.5000c500a1b2c3d4"}
    assert store.load_ceilings(["sda"], roots, str(tmp_path / "missing.json")) == {}


def test_state_path_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert store.state_path() == str(tmp_path / "gpudisk-top" / "probes.json")
    monkeypatch.setenv("XDG_STATE_HOME", "relative/dir")   # XDG: ignored
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert store.state_path() == str(tmp_path / "home/.local/state/gpudisk-top/probes.json")


def test_fio_command_is_read_only_and_bounded():
    cmd = fio.command(BY_NAME["randread_4k_qd32"], "/data/a:b.bin", 2**30, 3.3)
    for opt in ("--readonly", "--allow_file_create=0", "--invalidate=0", "--direct=1",
                "--rw=randread", "--bs=4096", "--iodepth=32", "--time_based",
                "--runtime=3300ms", "--ramp_time=0ms", "--output-format=json",
                "--size=1073741824", "--offset=0"):
        assert opt in cmd, opt
    assert "--filename=/data/a\\:b.bin" in cmd    # fio's file separator escaped
    assert not any("write" in arg for arg in cmd)
    # the job runs as a thread of fio's one process, which dies with probe (fio.py)
    assert "--thread" in cmd


# ------------------------------------------------------------- the results file's bounds
def test_nesting_is_checked_before_json_parses_it():
    ok = json.dumps({"a": [[["]]]{{"]]], "b": {"c": "\\\"[", "d": [{}]}}).encode()
    assert store.nesting_problem(ok) is None                 # brackets in strings are text
    assert store.nesting_problem(b"[" * 16 + b"]" * 16) is None
    assert "deeper than 16 levels" in store.nesting_problem(b"[" * 17 + b"]" * 17)
    assert "deeper than 16" in store.nesting_problem(b"[" * 100_000 + b"]" * 100_000)
    assert "do not pair up" in store.nesting_problem(b"[" * 100_000)
    assert "do not pair up" in store.nesting_problem(b'{"a": [1, 2}]')
    assert "never ends" in store.nesting_problem(b'{"a": "b')
    assert "more than 200000 strings" in store.nesting_problem(b'[' + b'"",' * 250_000 + b'""]')
    assert "more than 200000" in store.nesting_problem(b"[" + b"[]," * 250_000 + b"[]]")


@pytest.mark.parametrize("body,why", [
    (b"[" * 100_000 + b"]" * 100_000, "is nested deeper than 16 levels: not a gpudisk-top"),
    (b"[" * 100_000, "is cut short or damaged (its brackets do not pair up): not a gpudisk-top"),
    (b"", "is empty: not a gpudisk-top probe results file"),
    (b"  \n", "is empty: not a gpudisk-top probe results file"),
    (b"\xff\xfe{}", "is not JSON ("),
    (b'{"format": "gpudisk-top probes", "version": 1, "devices": {"a": 1}', "is cut short"),
    (b'{"format": "other", "devices": {}}', "is not a gpudisk-top probe results file"),
    (b'{"format": "gpudisk-top probes", "version": "1", "devices": {}}',
     "is version '1' of the results file; this gpudisk-top reads version 1"),
])
def test_a_results_file_that_is_not_one_is_refused_in_one_line(tmp_path, body, why):
    path = tmp_path / "probes.json"
    path.write_bytes(body)
    with pytest.raises(RuntimeFailure) as err:
        store.load(str(path))
    assert f"{path} {why}" in str(err.value) and "\n" not in str(err.value)
    assert not isinstance(err.value, store.NewerFile)


def test_a_results_file_over_the_cap_is_refused_without_being_parsed(tmp_path):
    path = tmp_path / "probes.json"
    path.write_bytes(b'{"pad": "' + b"x" * (16 * 2**20) + b'"}')
    with pytest.raises(RuntimeFailure, match="is larger than 16 MiB: not a gpudisk-top"):
        store.load(str(path))


def test_a_newer_versions_file_is_never_replaced(tmp_path):
    path = tmp_path / "probes.json"
    body = json.dumps({"format": "gpudisk-top probes", "version": 2, "devices": {}}).encode()
    path.write_bytes(body)
    with pytest.raises(store.NewerFile, match="version 2 of the results file, written by a "
                       "newer gpudisk-top; this gpudisk-top reads version 1"):
        store.load(str(path))
    with pytest.raises(store.NewerFile, match="not replacing it"):
        store.check_writable(str(path))
    with pytest.raises(store.NewerFile, match="not replacing it"):
        store.save(_result("serial:vol-0abc", "vda", 3000.0), str(path))
    assert path.read_bytes() == body


def test_a_damaged_file_is_replaced_saying_why(tmp_path):
    path = tmp_path / "probes.json"
    path.write_bytes(b"[" * 100_000 + b"]" * 100_000)
    store.check_writable(str(path))                  # damaged: probe may replace it
    _saved, warning = store.save(_result("serial:vol-0abc", "vda", 3000.0), str(path))
    assert "nested deeper than 16 levels" in warning and warning.endswith("; replacing it")
    assert list(store.load(str(path))) == ["serial:vol-0abc"]


def test_a_probe_holding_a_figure_that_is_no_ceiling_is_not_used_and_said(roots, tmp_path):
    path = str(tmp_path / "probes.json")
    store.save(_result("serial:vol-0abc", "vda", 3000.0), path)
    store.save(_result("wwid:naa.5000c500a1b2c3d4", "sda", 51000.0), path)
    with open(path) as f:
        doc = json.load(f)
    doc["devices"]["serial:vol-0abc"]["ceiling"]["randread_qd32_iops"] = 0
    doc["devices"]["wwid:naa.5000c500a1b2c3d4"]["ceiling"]["seq_read_mib_s"] = "fast"
    with open(path, "w") as f:
        json.dump(doc, f)
    said = []
    got = store.load_ceilings(["vda", "sda", "sda1", "sdb"], roots, path, say=said.append)
    assert got == {}        # as if never probed: no figure of either is used
    assert sorted(said) == [
        f"{path}: the probe of sda (wwid:naa.5000c500a1b2c3d4) is not used: its "
        "seq_read_mib_s 'fast' is not a rate",
        f"{path}: the probe of sda (wwid:naa.5000c500a1b2c3d4) is not used: its "
        "seq_read_mib_s 'fast' is not a rate",     # once for sda, once for its partition
        f"{path}: the probe of vda (serial:vol-0abc) is not used: its randread_qd32_iops "
        "'0' is not a rate"]
    # a figure the probe did not measure (null) is no problem
    doc["devices"]["serial:vol-0abc"]["ceiling"] = {"randread_qd32_iops": 3000.0,
                                                   "randread_qd1_iops": None,
                                                   "seq_read_mib_s": None}
    doc["devices"]["wwid:naa.5000c500a1b2c3d4"]["ceiling"] = [1, 2]
    with open(path, "w") as f:
        json.dump(doc, f)
    said.clear()
    got = store.load_ceilings(["vda", "sda"], roots, path, say=said.append)
    assert list(got) == ["vda"] and got["vda"].randread_qd32_iops == 3000.0
    assert said == [f"{path}: the probe of sda (wwid:naa.5000c500a1b2c3d4) is not used: its "
                    "ceiling is not an object"]


def test_the_samplers_ceilings_say_a_problem_once_a_run_and_read_a_changed_file(roots, tmp_path):
    path = tmp_path / "probes.json"
    path.write_bytes(b'{"format": "gpudisk-top probes", "version": 1, "devi')
    said = []
    source = store.ProbeCeilings(said.append, str(path))
    infos = describe_devices(roots)
    for _ in range(3):                   # three device refreshes, the file unchanged
        assert source(infos, roots) == {}
    assert said == [f"{path} is cut short or damaged (a string never ends): not a gpudisk-top "
                    "probe results file; no ceilings from it"]
    store.save(_result("serial:vol-0abc", "vda", 3000.0), str(path))   # mended
    assert source(infos, roots)["vda"].randread_qd32_iops == 3000.0
    path.write_bytes(b"")
    assert source(infos, roots) == {} and len(said) == 2 and "is empty" in said[1]
    path.unlink()                        # none: nothing to say
    assert source(infos, roots) == {} and len(said) == 2


FIO_JSON = """note: both iodepth >= 1 and synchronous I/O engine are selected
{"fio version": "fio-3.33", "jobs": [{"jobname": "gpudisk-top-probe", "error": 0,
 "read": {"io_bytes": 409600, "bw_bytes": 204800000, "iops": 50000.5, "runtime": 3300,
  "total_ios": 165001, "lat_ns": {"min": 1, "max": 9000000, "mean": 640000.0,
  "percentile": {"50.000000": 600000, "99.000000": 1200000}},
  "clat_ns": {"mean": 630000.0}}}]}"""


def test_fio_output_is_read():
    r = fio.parse(BY_NAME["randread_4k_qd32"], FIO_JSON)
    assert (r.engine, r.iops, r.ios, r.seconds) == ("fio", 50000.5, 165001, 3.3)
    assert r.lat_mean_ms == pytest.approx(0.64) and r.lat_p99_ms == pytest.approx(1.2)
    assert r.read_mib_s == pytest.approx(50000.5 * 4096 / 2**20)
    with pytest.raises(RuntimeFailure, match="fio's output could not be read"):
        fio.parse(BY_NAME["randread_4k_qd32"], '{"jobs": []}')


def _one_line_error(proc: subprocess.CompletedProcess, status: int, pattern: str) -> None:
    one_line_error(proc, status, pattern)
    assert proc.stdout == ""


def test_refusals_are_one_line(tmp_path):
    missing = "no such file, directory or block device"
    _one_line_error(gdt("probe", str(tmp_path / "missing")), 2, missing)
    _one_line_error(gdt("probe", "nosuchdisk0"), 2, missing)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    _one_line_error(gdt("probe", str(fifo)), 2, "is a FIFO")
    _one_line_error(gdt("probe", "--seconds", "0.5"), 2, "--seconds")
    _one_line_error(gdt("probe", "--engine", "dd"), 2, "--engine")
    if os.path.isdir("/proc/self"):
        _one_line_error(gdt("probe", "/proc/self"), 2, "no block device here")


def test_engine_fio_without_fio_is_bad_usage(tmp_path):
    env = dict(os.environ, PATH=str(tmp_path / "empty"))
    _one_line_error(gdt("probe", "--engine", "fio", "/", env=env), 2, "fio is not installed")


def test_fio_failing_is_one_line_with_fios_message(tmp_path, big_file):
    """A stand-in fio that fails as a real one does on a read error."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "fio"
    fake.write_text("#!/bin/sh\necho 'fio: io_u error on file x: Input/output error: "
                    "read offset=4096, buflen=4096' >&2\nexit 1\n")
    fake.chmod(0o755)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ.get('PATH', '')}",
               XDG_STATE_HOME=str(tmp_path / "state"))
    proc = gdt("probe", "--engine", "fio", big_file, env=env)
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("gpudisk-top: error: fio failed (exit status 1)")
    assert "Input/output error" in last and "Traceback" not in proc.stderr
    assert not (tmp_path / "state").exists()   # nothing kept from a failed probe


def test_probe_library_imports_neither_textual_nor_the_command_line():
    code = ("import importlib, pkgutil, sys, gpudisk_top.probe as p\n"
            "for m in pkgutil.walk_packages(p.__path__, 'gpudisk_top.probe.'):\n"
            "    importlib.import_module(m.name)\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'textual'\n"
            "             or m.startswith(('gpudisk_top.commands', 'gpudisk_top.cli')))\n"
            "print(bad)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_builtin_reader_refuses_a_file_that_shrank(tmp_path):
    from gpudisk_top.probe import builtin

    path = tmp_path / "shrank.bin"
    path.write_bytes(os.urandom(1 << 20))
    # told the span is 64 MiB, as it was when the probe began; most offsets are past
    # the end now
    with pytest.raises(RuntimeFailure, match="short read"):
        builtin.run(BY_NAME["randread_4k_qd1"], str(path), 64 << 20, 0.3)
