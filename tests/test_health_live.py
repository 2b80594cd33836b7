"""Device health on this machine and on sysfs trees laid out as the kernel lays them out:
the "not readable here" path (this machine's disk is virtio: no SMART), smartctl absent,
the kernel's own temperatures (hwmon), and that the health read never runs on, nor
slows, the sampling thread.

smartctl runs for real where installed (Debian's smartmontools; .ci/run installs it).
Where a test needs a smartctl that takes its time, a two-line shell script stands in for
it: what is tested there is the threading, not smartctl."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gpudisk_top.collect.health import HealthPoller, read_device
from gpudisk_top.collect.health_smartctl import NOT_INSTALLED, find_smartctl
from gpudisk_top.collect.health_sysfs import physical_disks, read_sysfs
from gpudisk_top.collect.roots import Roots
from gpudisk_top.collect.sampler import Sampler
from gpudisk_top.model.health import FAILING, OK, UNKNOWN, WARNING, classify
from cli_run import gdt
from slack import slack

SMARTCTL = find_smartctl()
ROOT = Path(__file__).resolve().parent.parent


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def host_sysfs(tmp_path: Path) -> Path:
    """A /sys with an NVMe drive at 78 °C (its hwmon: WCTEMP 75, CCTEMP 85), a SATA SSD
    with the drivetemp driver at 41 °C, a virtio disk, and a loop device."""
    sys_ = tmp_path / "sys"
    pci = sys_ / "devices" / "pci0000:00"
    ctrl = pci / "0000:00:1d.0" / "0000:3d:00.0" / "nvme" / "nvme0"
    (ctrl / "nvme0n1").mkdir(parents=True)
    os.symlink("../../nvme0", ctrl / "nvme0n1" / "device")
    write(ctrl / "model", "Samsung SSD 980 PRO 2TB                 \n")
    write(ctrl / "serial", "S6B0NL0T000000\n")
    write(ctrl / "firmware_rev", "5B2QGXA7\n")
    for f, v in (("temp1_input", 77850), ("temp1_max", 74850), ("temp1_crit", 84850),
                 ("name", "nvme")):
        write(ctrl / "hwmon2" / f, f"{v}\n")
    scsi = pci / "0000:00:17.0" / "ata1" / "host0" / "target0:0:0" / "0:0:0:0"
    (scsi / "block" / "sda").mkdir(parents=True)
    os.symlink("../../../0:0:0:0", scsi / "block" / "sda" / "device")
    write(scsi / "model", "Samsung SSD 860\n")
    for f, v in (("temp1_input", 41000), ("temp1_max", 70000), ("temp1_crit", 80000),
                 ("name", "drivetemp")):
        write(scsi / "hwmon" / "hwmon3" / f, f"{v}\n")
    virtio = pci / "0000:00:02.0" / "virtio1" / "block" / "vda"
    virtio.mkdir(parents=True)
    loop = sys_ / "devices" / "virtual" / "block" / "loop0"
    loop.mkdir(parents=True)
    (sys_ / "block").mkdir()
    for name, target in (("nvme0n1", ctrl / "nvme0n1"), ("sda", scsi / "block" / "sda"),
                         ("vda", virtio), ("loop0", loop)):
        os.symlink(os.path.relpath(target, sys_ / "block"), sys_ / "block" / name)
    return sys_


def stand_in_smartctl(tmp_path: Path, sleep_s: float = 0.0, marker: Path | None = None) -> Path:
    """A directory holding a `smartctl` that answers like smartctl 7.3 on a device it
    cannot open, after sleep_s (and touches marker when run)."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    doc = {"json_format_version": [1, 0], "smartctl": {"version": [7, 3], "exit_status": 2,
           "messages": [{"string": "Smartctl open device: failed: No such device",
                         "severity": "error"}]}}
    touch = f"touch {marker}\n" if marker else ""
    script = bindir / "smartctl"
    script.write_text(f"#!/bin/sh\n{touch}sleep {sleep_s}\necho '{json.dumps(doc)}'\nexit 2\n")
    script.chmod(0o755)
    return bindir


# ---------------------------------------------------------------------------- this machine
def test_this_machines_disks_each_say_once_why_they_are_not_readable():
    roots = Roots()
    disks = physical_disks(roots)
    if not any(why and why.startswith("virtio") for why in disks.values()):
        pytest.skip(f"no virtio disk here ({sorted(disks)}): the test is for a VM like CI's")
    snap = HealthPoller(roots).poll()
    assert set(snap.readings) == set(disks)
    for name, h in snap.readings.items():
        if disks[name] is not None:
            assert not h.readable and h.unreadable_reason == disks[name]
            assert h.unreadable_reason.startswith("virtio disk: no SMART")
            assert classify(h) == (UNKNOWN, (h.unreadable_reason,))
    # loop, zram, dm are no disks of their own
    assert not any(n.startswith(("loop", "zram", "dm-")) for n in snap.readings)
    # --once: one line per disk, in the health section, and nowhere else
    proc = gdt("--once", "-i", "0.2")
    assert proc.returncode == 0, proc.stderr
    for name, why in disks.items():
        if why is not None:
            assert proc.stdout.count(why) == 1, proc.stdout
            assert why not in proc.stderr
    out = json.loads(gdt("--once", "--json", "-i", "0.2").stdout)
    by_name = {h["device"]: h for h in out["health"]}
    for name, why in disks.items():
        if why is not None:
            assert by_name[name]["status"] == "unknown" and by_name[name]["reasons"] == [why]
    for d in out["disks"]:
        if d["name"] in disks:
            assert d["health"]["device"] == d["name"]


@pytest.mark.skipif(SMARTCTL is None, reason="needs smartctl (Debian package smartmontools)")
def test_real_smartctl_on_a_virtio_disk_says_it_cannot_tell_its_type():
    """Asked anyway, smartctl 7.x opens nothing on virtio: exit status bit 0 or 1, its
    own message is the reason."""
    disks = physical_disks(Roots())
    virtio = [n for n, why in disks.items() if why and why.startswith("virtio")]
    if not virtio:
        pytest.skip("no virtio disk here")
    h = read_device(Roots(), virtio[0], SMARTCTL, why_not=None)
    assert not h.readable and h.source == "smartctl"
    assert h.unreadable_reason in ("Unable to detect device type",
                                   "Permission denied") or "failed" in h.unreadable_reason
    assert h.read_cpu_s is not None and h.read_cpu_s < 1.0


# ---------------------------------------------------------------------------- sysfs trees
def test_physical_disks_leave_out_virtual_devices_and_say_virtio(tmp_path):
    roots = Roots(sysfs=str(host_sysfs(tmp_path)))
    disks = physical_disks(roots)
    assert disks == {"nvme0n1": None, "sda": None,
                     "vda": "virtio disk: no SMART (the hypervisor does not pass it through)"}
    assert physical_disks(Roots(sysfs=str(tmp_path / "no-sys"))) == {}


def test_the_kernels_view_without_smartctl(tmp_path):
    roots = Roots(sysfs=str(host_sysfs(tmp_path)))
    nvme = read_sysfs(roots, "nvme0n1")
    assert (nvme.temperature_c, nvme.warning_temp_c, nvme.critical_temp_c) == (77.85, 74.85, 84.85)
    assert nvme.model == "Samsung SSD 980 PRO 2TB" and nvme.firmware == "5B2QGXA7"
    assert nvme.source == "sysfs" and nvme.protocol == "NVMe"
    status, reasons = classify(nvme)
    assert status == WARNING and reasons == ("77.8 °C above warning 74.8 °C",)
    sata = read_sysfs(roots, "sda")
    assert (sata.temperature_c, sata.warning_temp_c) == (41.0, 70.0) and classify(sata)[0] == OK
    assert read_sysfs(roots, "vda") is None


def test_smartctl_absent_from_path(tmp_path):
    """No smartctl on PATH: each disk says so once, and keeps the kernel's temperature."""
    roots = Roots(sysfs=str(host_sysfs(tmp_path)))
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    env = dict(os.environ, PATH=str(empty))
    code = ("import json,sys; from gpudisk_top.collect.health import *; "
            "from gpudisk_top.collect.roots import Roots; "
            f"p = HealthPoller(Roots(sysfs={str(roots.sysfs)!r})); "
            "print(json.dumps([p.smartctl, {d: [h.source, h.readable, h.unreadable_reason]"
            " for d, h in p.poll().readings.items()}]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    smartctl, readings = json.loads(proc.stdout)
    assert smartctl is None
    assert readings["nvme0n1"] == ["sysfs", True, NOT_INSTALLED]
    assert readings["sda"] == ["sysfs", True, NOT_INSTALLED]
    assert readings["vda"][1:] == [False, "virtio disk: no SMART (the hypervisor does not pass it through)"]


@pytest.mark.skipif(SMARTCTL is None, reason="needs smartctl (Debian package smartmontools)")
def test_real_smartctl_that_cannot_open_the_disk_leaves_the_kernels_view(tmp_path):
    """The tree's disks have no node in /dev here: smartctl 7.x says it cannot open
    them (exit status bit 1), and the kernel's hwmon is what is known."""
    roots = Roots(sysfs=str(host_sysfs(tmp_path)))
    (tmp_path / "dev").mkdir()
    h = read_device(roots, "nvme0n1", SMARTCTL, dev_dir=str(tmp_path / "dev"))
    assert h.source == "sysfs" and h.readable and h.temperature_c == 77.85
    assert "No such" in h.unreadable_reason or "Unable to detect" in h.unreadable_reason


# ---------------------------------------------------------------------------- threads and cost
def test_the_poller_reads_off_the_sampling_thread_and_never_slows_a_sample(tmp_path):
    """A smartctl that takes 1.5 s a disk: samples taken meanwhile come back at once,
    without health; the one after the poll has it.  The poll ran on the poller's thread,
    not the one that sampled."""
    roots = Roots(sysfs=str(host_sysfs(tmp_path)))
    bindir = stand_in_smartctl(tmp_path, sleep_s=1.5)
    poller = HealthPoller(roots, interval_s=600, smartctl=str(bindir / "smartctl"))
    sampler = Sampler(roots, health=poller)
    sampling_threads, durations, healths = set(), [], []

    def sample_a_while():
        sampling_threads.add(threading.get_ident())
        sampler.sample()
        poller.start()
        for _ in range(6):
            t0 = time.monotonic()
            s = sampler.sample()
            durations.append(time.monotonic() - t0)
            healths.append(s.health)
            time.sleep(0.1)

    try:
        t = threading.Thread(target=sample_a_while)
        t.start()
        t.join(30)
        assert healths and all(h is None for h in healths)     # two disks: 3 s of smartctl
        assert max(durations) < 1.0, durations
        assert poller.wait_first(20)
        s = sampler.sample()
        assert s.health is poller.latest and set(s.health.readings) == {"nvme0n1", "sda", "vda"}
        assert poller.poll_thread_id is not None
        assert poller.poll_thread_id not in sampling_threads
        assert poller.poll_thread_id != threading.get_ident()
        # the snapshot is shared, not copied: a sample costs one attribute read
        assert sampler.sample().health is s.health
    finally:
        sampler.close()


def test_a_disk_gone_to_sleep_keeps_its_last_reading(tmp_path):
    """The first poll reads the disk; at the second it is in standby and smartctl -n
    standby leaves it asleep: its last reading stands (no spin-up, no gap)."""
    roots = Roots(sysfs=str(host_sysfs(tmp_path)))
    fixture = Path(__file__).parent / "fixtures" / "health" / "hdd-7.3.json"
    asleep = {"json_format_version": [1, 0], "smartctl": {"exit_status": 2, "messages": [
        {"string": "Device is in STANDBY mode, exit(2)", "severity": "information"}]}}
    (tmp_path / "asleep.json").write_text(json.dumps(asleep))
    state = tmp_path / "polled-once"
    script = tmp_path / "smartctl"
    script.write_text(f"#!/bin/sh\nif [ -e {state} ]; then cat {tmp_path / 'asleep.json'}; "
                      f"exit 2; fi\ncat {fixture}\n")
    script.chmod(0o755)
    poller = HealthPoller(roots, smartctl=str(script))
    first = poller.poll().readings["sda"]
    assert first.readable and first.model == "WDC WD20EFRX-68EUZN0"
    state.touch()
    assert poller.poll().readings["sda"] is first


def test_demo_runs_no_smartctl_and_reads_no_real_health(tmp_path):
    """--demo's health is the simulator's: no smartctl runs, no sysfs (not even one
    named by --sysfs, whose hwmon would say otherwise) is read."""
    marker = tmp_path / "smartctl-ran"
    bindir = stand_in_smartctl(tmp_path, marker=marker)
    sysfs = host_sysfs(tmp_path)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ.get('PATH', '')}")
    proc = gdt("--once", "--json", "--demo", "--sysfs", str(sysfs), env=env)
    assert proc.returncode == 0, proc.stderr
    health = json.loads(proc.stdout)["health"]
    assert len(health) == 16 and {h["source"] for h in health} == {"simulated"}
    nvme = next(h for h in health if h["device"] == "nvme0n1")
    assert nvme["temperature_c"] != 77.85 and nvme["warning_temp_c"] != 74.85
    assert not marker.exists()


def test_health_interval_0_reads_nothing(tmp_path):
    marker = tmp_path / "smartctl-ran"
    bindir = stand_in_smartctl(tmp_path, marker=marker)
    sysfs = host_sysfs(tmp_path)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ.get('PATH', '')}")
    proc = gdt("--once", "--json", "-i", "0.1", "--health-interval", "0", "--sysfs", str(sysfs),
               env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["health"] == [] and not marker.exists()
    # the stand-in answers "cannot open": the kernel's view, with smartctl's reason
    proc = gdt("--once", "--json", "-i", "0.1", "--sysfs", str(sysfs), env=env)
    assert proc.returncode == 0, proc.stderr
    health = {h["device"]: h for h in json.loads(proc.stdout)["health"]}
    assert marker.exists()
    assert health["nvme0n1"]["source"] == "sysfs" and health["nvme0n1"]["status"] == WARNING
    assert health["nvme0n1"]["unreadable_reason"] == "Smartctl open device: failed: No such device"
    assert "failing" != health["sda"]["status"] == OK
    assert FAILING not in {h["status"] for h in health.values()}
    text = gdt("--once", "-i", "0.1", "--sysfs", str(sysfs), env=env).stdout
    assert "nvme0n1 warning" in text and "(smartctl: Smartctl open device" in text


def test_no_sys_at_all_is_no_health_and_no_crash(tmp_path):
    proc = gdt("--once", "--json", "-i", "0.1", "--sysfs", str(tmp_path / "none"))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["health"] == []


# ---------------------------------------------------------------------------- stand-ins
def script(tmp_path: Path, name: str, body: str) -> Path:
    """An executable shell script (a smartctl stand-in); `$dev` is its last argument."""
    path = tmp_path / name
    path.write_text(f'#!/bin/sh\nfor dev; do :; done\n{body}\n')
    path.chmod(0o755)
    return path


def sata_sysfs(tmp_path: Path, n: int) -> Path:
    """A /sys with n SATA disks (sda, sdb, ...), each with a drivetemp hwmon."""
    sys_ = tmp_path / "sys"
    (sys_ / "block").mkdir(parents=True)
    for i in range(n):
        name = "sd" + chr(ord("a") + i)
        scsi = sys_ / "devices" / "pci0000:00" / "0000:00:17.0" / f"ata{i + 1}" / f"host{i}" \
            / f"target{i}:0:0" / f"{i}:0:0:0"
        (scsi / "block" / name).mkdir(parents=True)
        os.symlink(f"../../../{i}:0:0:0", scsi / "block" / name / "device")
        write(scsi / "hwmon" / f"hwmon{i}" / "temp1_input", "41000\n")
        os.symlink(os.path.relpath(scsi / "block" / name, sys_ / "block"), sys_ / "block" / name)
    return sys_


FIXTURE_HDD = Path(__file__).parent / "fixtures" / "health" / "hdd-7.3.json"
STANDBY = json.dumps({"json_format_version": [1, 0], "smartctl": {
    "version": [7, 3], "exit_status": 2, "messages": [
        {"string": "Device is in STANDBY mode, exit(2)", "severity": "information"}]}})


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# ---------------------------------------------------------------------------- one disk, one poll
def test_one_disk_that_fails_to_read_leaves_the_others_read(tmp_path, monkeypatch):
    """A bug reading one disk (here the kernel's view of sda) is that disk's reading,
    with the reason; the other disks are read, and the poll is published."""
    from gpudisk_top.collect import health as health_mod

    roots = Roots(sysfs=str(host_sysfs(tmp_path)))
    real = health_mod.read_sysfs

    def broken(roots, device, wall=0.0):
        if device == "sda":
            raise RuntimeError("odd hwmon")
        return real(roots, device, wall)

    monkeypatch.setattr(health_mod, "read_sysfs", broken)
    snap = HealthPoller(roots, smartctl=False).poll()
    assert snap is not None and snap.polls == 1
    sda = snap.readings["sda"]
    assert not sda.readable and sda.unreadable_reason == "health read failed: RuntimeError: odd hwmon"
    assert snap.readings["nvme0n1"].readable and snap.readings["nvme0n1"].temperature_c == 77.85


def test_a_failed_poll_is_said_once_in_the_samples(tmp_path, monkeypatch):
    """A poll that fails as a whole (a bug) leaves the last readings; the samples say so
    once, not once a second, and again only when it fails otherwise."""
    from gpudisk_top.collect import health as health_mod

    roots = Roots(sysfs=str(host_sysfs(tmp_path)))
    monkeypatch.setattr(health_mod, "physical_disks", lambda roots: 1 / 0)
    poller = HealthPoller(roots, interval_s=0.05, smartctl=False)
    sampler = Sampler(roots, health=poller)
    try:
        poller.start()
        assert poller.wait_first(10)
        said = [w for _ in range(5) for w in sampler.sample().warnings if "health" in w]
        assert said == ["device health poll failed: ZeroDivisionError: division by zero "
                        "(the last readings stand)"]
    finally:
        sampler.close()


# ---------------------------------------------------------------------------- asleep
def test_a_disk_asleep_is_not_read_through_the_kernel_either(tmp_path):
    """smartctl -n standby leaves a sleeping disk asleep; so must the hwmon read after it
    (drivetemp asks a SATA disk for its temperature with SCT/SMART commands, which may
    reset its spin-down timer).  The stand-in answers as smartctl 7.3 does for a disk in
    standby (exit status 2, its message); the kernel-shaped tree's sda has a drivetemp
    hwmon at 41 °C, which a read would turn into a reading."""
    from gpudisk_top.collect.health_smartctl import ASLEEP

    roots = Roots(sysfs=str(host_sysfs(tmp_path)))
    (tmp_path / "standby.json").write_text(STANDBY)
    smartctl = script(tmp_path, "smartctl", f"cat {tmp_path / 'standby.json'}; exit 2")
    h = read_device(roots, "sda", str(smartctl))
    assert not h.readable and h.unreadable_reason == ASLEEP
    assert h.source == "smartctl" and h.temperature_c is None      # hwmon was not read
    # awake again: the kernel's view fills in as before
    smartctl.write_text(f"#!/bin/sh\ncat {FIXTURE_HDD}\n")
    assert read_device(roots, "sda", str(smartctl)).warning_temp_c == 70.0


# ---------------------------------------------------------------------------- thresholds
def test_hwmon_thresholds_a_drive_left_unset_are_none(tmp_path):
    """An NVMe drive with WCTEMP and CCTEMP 0 K: the kernel's hwmon says -273150 and
    (0xFFFF K) 65261850 millidegrees.  No threshold, not a drive always above its warning."""
    sys_ = host_sysfs(tmp_path)
    hw = next(sys_.glob("devices/**/nvme0/hwmon2"))
    for name, value in (("temp1_max", -273150), ("temp1_crit", 65261850)):
        (hw / name).write_text(f"{value}\n")
    h = read_sysfs(Roots(sysfs=str(sys_)), "nvme0n1")
    assert (h.temperature_c, h.warning_temp_c, h.critical_temp_c) == (77.85, None, None)
    assert classify(h) == (OK, ())
    (hw / "temp1_input").write_text("-273150\n")      # no sensor: no temperature at all
    assert read_sysfs(Roots(sysfs=str(sys_)), "nvme0n1") is None


# ---------------------------------------------------------------------------- smartctl's end
def test_smartctl_killed_by_a_signal_is_no_reading(tmp_path):
    roots = Roots(sysfs=str(host_sysfs(tmp_path)))
    smartctl = script(tmp_path, "smartctl", "kill -KILL $$")
    h = read_device(roots, "vda", str(smartctl))
    assert not h.readable and h.unreadable_reason == "smartctl was killed by SIGKILL: no reading"
    h = read_device(roots, "nvme0n1", str(smartctl))     # the kernel's view stands in
    assert h.readable and h.source == "sysfs"
    assert h.unreadable_reason == "smartctl was killed by SIGKILL: no reading"


def test_smartctl_that_does_not_answer_is_killed(tmp_path):
    roots = Roots(sysfs=str(host_sysfs(tmp_path)))
    pid_file = tmp_path / "pid"
    smartctl = script(tmp_path, "smartctl", f"echo $$ > {pid_file}\nexec sleep 60")
    t0 = time.monotonic()
    h = read_device(roots, "vda", str(smartctl), timeout_s=0.5)
    assert time.monotonic() - t0 < 5
    assert not h.readable and h.unreadable_reason == "smartctl did not answer in 0.5 s (stopped)"
    assert not alive(int(pid_file.read_text()))        # killed, and reaped


def test_close_kills_a_running_smartctl_and_joins_the_thread(tmp_path):
    roots = Roots(sysfs=str(host_sysfs(tmp_path)))
    pids = tmp_path / "pids"
    smartctl = script(tmp_path, "smartctl", f"echo $$ >> {pids}\nexec sleep 60")
    poller = HealthPoller(roots, smartctl=str(smartctl)).start()
    deadline = time.monotonic() + 10
    while not (pids.exists() and len(pids.read_text().split()) == 2) and time.monotonic() < deadline:
        time.sleep(0.02)
    running = [int(p) for p in pids.read_text().split()]
    assert len(running) == 2 and all(map(alive, running))     # nvme0n1 and sda, at once
    t0 = time.monotonic()
    poller.close()
    assert time.monotonic() - t0 < 2.5 * slack()
    assert not poller._thread.is_alive()
    assert not any(map(alive, running))
    assert poller.latest is None              # a poll cut short publishes nothing


# ---------------------------------------------------------------------------- --once's wait
def test_disks_are_read_a_few_at_a_time(tmp_path):
    """Eight disks whose smartctl takes 1 s each: four at a time, two seconds, not eight."""
    roots = Roots(sysfs=str(sata_sysfs(tmp_path, 8)))
    smartctl = script(tmp_path, "smartctl", f"sleep 1; cat {FIXTURE_HDD}")
    poller = HealthPoller(roots, smartctl=str(smartctl), parallel=4)
    t0 = time.monotonic()
    snap = poller.poll()
    took = time.monotonic() - t0
    assert list(snap.readings) == [f"sd{c}" for c in "abcdefgh"]
    assert all(h.readable for h in snap.readings.values())
    assert 1.9 < took < min(5 * slack(), 7.5), took   # never the eight seconds of one at a time
    # each reading's CPU is its own smartctl's, not its neighbours' (a sleep: almost none)
    assert all(h.read_cpu_s < 0.5 for h in snap.readings.values())


def test_once_reports_without_waiting_for_a_slow_disk(tmp_path):
    """--once waits for the health reads a few seconds at most: a disk whose smartctl
    has not answered by then is in the report as not read yet, the others are read."""
    from gpudisk_top.collect.health import NOT_READ_YET
    from gpudisk_top.commands.once import HEALTH_WAIT_S

    sysfs = host_sysfs(tmp_path)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script(bindir, "smartctl", f'case "$dev" in */sda) exec sleep 60;; esac\ncat {FIXTURE_HDD}')
    env = dict(os.environ, PATH=f"{bindir}:{os.environ.get('PATH', '')}")
    t0 = time.monotonic()
    proc = gdt("--once", "--json", "-i", "0.2", "--sysfs", str(sysfs), env=env)
    took = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr
    assert took < HEALTH_WAIT_S + 5, took
    health = {h["device"]: h for h in json.loads(proc.stdout)["health"]}
    assert health["sda"]["status"] == UNKNOWN and health["sda"]["reasons"] == [NOT_READ_YET]
    assert health["nvme0n1"]["readable"] and health["nvme0n1"]["source"] == "smartctl"
    text = gdt("--once", "-i", "0.2", "--sysfs", str(sysfs), env=env).stdout
    assert f"sda     n/a      {NOT_READ_YET}" in text


def test_a_sampler_that_fails_leaves_no_poller_behind(tmp_path, monkeypatch):
    """open_source starts the poller once the Sampler is built: a Sampler that raises
    leaves no thread and runs no smartctl."""
    import argparse

    from gpudisk_top import config
    from gpudisk_top.collect import sampler as sampler_mod
    from gpudisk_top.commands.common import open_source

    marker = tmp_path / "smartctl-ran"
    bindir = stand_in_smartctl(tmp_path, marker=marker)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ.get('PATH', '')}")

    def broken(self, *a, **kw):
        raise RuntimeError("no sampler")

    monkeypatch.setattr(sampler_mod.Sampler, "__init__", broken)
    args = argparse.Namespace(procfs="/proc", sysfs=str(host_sysfs(tmp_path)), devfs="/dev",
                              interval=1.0, health_interval=600.0, demo=None, seed=None,
                              demo_actions=False, delayacct=False)
    with pytest.raises(RuntimeError, match="no sampler"):
        open_source(args, config.load(str(tmp_path / "absent.toml")))
    time.sleep(0.3)
    assert not [t for t in threading.enumerate() if t.name.startswith("gpudisk-top-health")]
    assert not marker.exists()


# ---------------------------------------------------------------------------- --devfs
def test_devfs_names_the_node_smartctl_is_given(tmp_path):
    """In a container the host's /dev is mounted elsewhere (--devfs /host/dev): smartctl
    is given that node, with the type its name no longer tells."""
    sysfs = host_sysfs(tmp_path)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "argv"
    script(bindir, "smartctl", f'echo "$*" >> {log}\ncat {FIXTURE_HDD}')
    env = dict(os.environ, PATH=f"{bindir}:{os.environ.get('PATH', '')}")
    hostdev = tmp_path / "host-dev"
    hostdev.mkdir()
    proc = gdt("--once", "--json", "-i", "0.1", "--sysfs", str(sysfs), "--devfs", str(hostdev),
               env=env)
    assert proc.returncode == 0, proc.stderr
    assert sorted(log.read_text().splitlines()) == [
        f"--json=co -x -n standby -d nvme {hostdev}/nvme0n1",
        f"--json=co -x -n standby -d sat,auto {hostdev}/sda"]
    proc = gdt("--once", "-i", "0.1", "--sysfs", str(sysfs), "--devfs", str(tmp_path / "none"),
               env=env)
    assert proc.returncode == 0 and f"--devfs {tmp_path / 'none'}: no such directory" in proc.stderr


# ---------------------------------------------------------------------------- a drive replaced
def test_a_drive_replaced_in_its_slot_starts_its_trend_again(tmp_path):
    """sda's drive is swapped between two polls (another serial number, fewer hours):
    the trend since start is the new drive's, never one drive's counters against the
    other's."""
    from gpudisk_top.model.health import health_views

    roots = Roots(sysfs=str(host_sysfs(tmp_path)))
    doc = json.loads(FIXTURE_HDD.read_text())
    (tmp_path / "old.json").write_text(json.dumps(doc))
    doc.update(serial_number="WD-NEW0000001", power_on_time={"hours": 10})
    (tmp_path / "new.json").write_text(json.dumps(doc))
    which = tmp_path / "which"
    which.write_text("old")
    smartctl = script(tmp_path, "smartctl", f"cat {tmp_path}/$(cat {which}).json")
    poller = HealthPoller(roots, smartctl=str(smartctl))
    old = poller.poll().readings["sda"]
    which.write_text("new")
    snap = poller.poll()
    new = snap.readings["sda"]
    assert old.serial != new.serial and snap.first["sda"] is new
    assert health_views(snap)["sda"].since_start is None
    which.write_text("new")
    again = poller.poll()
    assert again.first["sda"] is new
    assert health_views(again)["sda"].since_start.span_s >= 0
