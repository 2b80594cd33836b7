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

from gpudisk_top.collect.health import (NOT_INSTALLED, HealthPoller, find_smartctl,
                                        physical_disks, read_device, read_sysfs)
from gpudisk_top.collect.roots import Roots
from gpudisk_top.collect.sampler import Sampler
from gpudisk_top.model.health import FAILING, OK, UNKNOWN, WARNING, classify

SMARTCTL = find_smartctl()
ROOT = Path(__file__).resolve().parent.parent


def cli(*args, env=None, timeout=60):
    return subprocess.run([sys.executable, "-m", "gpudisk_top", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=ROOT)


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
    proc = cli("--once", "-i", "0.2")
    assert proc.returncode == 0, proc.stderr
    for name, why in disks.items():
        if why is not None:
            assert proc.stdout.count(why) == 1, proc.stdout
            assert why not in proc.stderr
    out = json.loads(cli("--once", "--json", "-i", "0.2").stdout)
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
    proc = cli("--once", "--json", "--demo", "--sysfs", str(sysfs), env=env)
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
    proc = cli("--once", "--json", "-i", "0.1", "--health-interval", "0", "--sysfs", str(sysfs),
               env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["health"] == [] and not marker.exists()
    # the stand-in answers "cannot open": the kernel's view, with smartctl's reason
    proc = cli("--once", "--json", "-i", "0.1", "--sysfs", str(sysfs), env=env)
    assert proc.returncode == 0, proc.stderr
    health = {h["device"]: h for h in json.loads(proc.stdout)["health"]}
    assert marker.exists()
    assert health["nvme0n1"]["source"] == "sysfs" and health["nvme0n1"]["status"] == WARNING
    assert health["nvme0n1"]["unreadable_reason"] == "Smartctl open device: failed: No such device"
    assert "failing" != health["sda"]["status"] == OK
    assert FAILING not in {h["status"] for h in health.values()}
    text = cli("--once", "-i", "0.1", "--sysfs", str(sysfs), env=env).stdout
    assert "nvme0n1 warning" in text and "(smartctl: Smartctl open device" in text


def test_no_sys_at_all_is_no_health_and_no_crash(tmp_path):
    proc = cli("--once", "--json", "-i", "0.1", "--sysfs", str(tmp_path / "none"))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["health"] == []
