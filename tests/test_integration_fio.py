"""`--once` under a live 4k random-read load from fio (O_DIRECT, iodepth 32).

The load is an IOPS-capped volume, the way a cloud disk with provisioned IOPS behaves:
fio reads through a loop device (direct I/O on, so every read reaches this machine's real
disk) while the real disk is capped for fio's cgroup with the block throttle (cgroup v1
blkio.throttle.read_iops_device, or v2 io.max).  Requests queue inside the loop device,
which is saturated (aqu-sz near 32) at a latency of about 1.5 ms, as on a capped cloud
volume.  Two reasons for the cap rather than an uncapped run:
  - uncapped, this 2-core machine's CPU saturates before its disk, and the time a finished
    read waits for fio to run is part of fio's completion latency but never of the block
    layer's, which is what r_await (like iostat's) measures;
  - capped, fio's IOPS and latency are steady, so our 3-second window and fio's whole-run
    figures describe the same load.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.integration

CAP_IOPS = 20000
FIO_RUNTIME_S = 9
ONCE_START_S = 3
ONCE_INTERVAL_S = 3


def _have_loop() -> str | None:
    if shutil.which("fio") is None:
        return "fio is not installed"
    if os.geteuid() != 0 or shutil.which("losetup") is None:
        return "a loop device needs root and losetup"
    return None


@pytest.fixture
def loop_device(tmp_path_factory):
    reason = _have_loop()
    if reason:
        pytest.skip(reason)
    # on the real disk (not tmpfs): /var/tmp
    base = "/var/tmp" if os.path.isdir("/var/tmp") else str(tmp_path_factory.mktemp("fio"))
    path = os.path.join(base, f"gdt-fio-{os.getpid()}.img")
    with open(path, "wb") as f:
        chunk = os.urandom(1 << 20)
        for _ in range(512):
            f.write(chunk)
        f.flush()
        os.fsync(f.fileno())
    proc = subprocess.run(["losetup", "--direct-io=on", "--show", "-f", path],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        os.unlink(path)
        pytest.skip(f"losetup failed: {proc.stderr.strip()}")
    dev = proc.stdout.strip()
    try:
        yield dev, path
    finally:
        subprocess.run(["losetup", "-d", dev])
        os.unlink(path)


class IopsCap:
    """A cgroup whose reads from one disk are capped at `iops` (v1 blkio, else v2 io.max).

    Constructing it raises pytest.skip when neither controller is usable here."""

    def __init__(self, majmin: str, iops: int) -> None:
        name = f"gdt-test-{os.getpid()}"
        v1 = "/sys/fs/cgroup/blkio"
        if os.path.exists(os.path.join(v1, "blkio.throttle.read_iops_device")):
            self.path = os.path.join(v1, name)
            os.makedirs(self.path, exist_ok=True)
            self._write("blkio.throttle.read_iops_device", f"{majmin} {iops}")
            return
        v2 = "/sys/fs/cgroup"
        try:
            with open(os.path.join(v2, "cgroup.controllers")) as f:
                has_io = "io" in f.read().split()
        except OSError:
            has_io = False
        if not has_io:
            pytest.skip("no block I/O throttle here (neither cgroup v1 blkio nor v2 io)")
        with open(os.path.join(v2, "cgroup.subtree_control"), "w") as f:
            f.write("+io")
        self.path = os.path.join(v2, name)
        os.makedirs(self.path, exist_ok=True)
        self._write("io.max", f"{majmin} riops={iops}")

    def _write(self, name: str, text: str) -> None:
        with open(os.path.join(self.path, name), "w") as f:
            f.write(text)

    def enter(self, pid: int) -> None:
        self._write("cgroup.procs", str(pid))

    def remove(self) -> None:
        for _ in range(50):  # the cgroup empties once fio has been reaped
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)


def _backing_disk(path: str) -> str:
    st = os.stat(path)
    name = os.path.basename(os.path.realpath(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}"))
    part = f"/sys/class/block/{name}/partition"
    return os.path.basename(os.path.dirname(os.path.realpath(f"/sys/class/block/{name}"))) \
        if os.path.exists(part) else name


def test_once_matches_fio_iops_and_latency(loop_device):
    dev, path = loop_device
    loop_name = os.path.basename(dev)
    disk = _backing_disk(path)
    with open(f"/sys/block/{disk}/dev") as f:
        capped_cgroup = IopsCap(f.read().strip(), CAP_IOPS)
    fio = subprocess.Popen(
        ["fio", "--name=randread", f"--filename={dev}", "--rw=randread", "--bs=4k",
         "--direct=1", "--ioengine=libaio", "--iodepth=32",
         "--time_based", f"--runtime={FIO_RUNTIME_S}", "--output-format=json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: capped_cgroup.enter(os.getpid()))
    try:
        time.sleep(ONCE_START_S)
        once = subprocess.run(
            [sys.executable, "-m", "gpudisk_top", "--once", "--json",
             "--interval", str(ONCE_INTERVAL_S), "--devices", f"{loop_name},{disk}"],
            capture_output=True, text=True, timeout=30)
        out, err = fio.communicate(timeout=FIO_RUNTIME_S + 30)
    finally:
        if fio.poll() is None:
            fio.kill()
            fio.wait()
        capped_cgroup.remove()
    assert fio.returncode == 0, err
    assert once.returncode == 0, once.stderr
    job = json.loads(out)["jobs"][0]["read"]
    fio_iops, fio_clat_ms = job["iops"], job["clat_ns"]["mean"] / 1e6
    disks = {d["name"]: d for d in json.loads(once.stdout)["disks"]}
    ours = disks[loop_name]
    print(f"fio: {fio_iops:.0f} IOPS, clat {fio_clat_ms:.3f} ms; "
          f"{loop_name}: {ours['r_s']:.0f} r/s, r_await {ours['r_await_ms']:.3f} ms; "
          f"{disk}: {disks[disk]['r_s']:.0f} r/s")
    assert fio_iops == pytest.approx(CAP_IOPS, rel=0.05), "the cap did not take effect"
    assert ours["r_s"] == pytest.approx(fio_iops, rel=0.05)
    assert ours["r_await_ms"] == pytest.approx(fio_clat_ms, rel=0.10)
    assert ours["rareq_kb"] == pytest.approx(4.0)
    assert ours["aqu_sz"] > 16, "the capped device should be saturated"
    # every read of the loop device reached the real disk underneath
    assert disks[disk]["r_s"] >= 0.95 * ours["r_s"]
