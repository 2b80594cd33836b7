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

import realdisk

pytestmark = pytest.mark.integration

CAP_IOPS = 20000
FIO_RUNTIME_S = 9
ONCE_START_S = 3
ONCE_INTERVAL_S = 3


@pytest.fixture
def loop_device():
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed")
    with realdisk.loop_device(512, "fio") as dev_path:
        yield dev_path


def test_once_matches_fio_iops_and_latency(loop_device):
    dev, path = loop_device
    loop_name = os.path.basename(dev)
    disk = realdisk.whole_disk(path)
    capped_cgroup = realdisk.IopsCap.for_disk_of(path, CAP_IOPS)
    fio = subprocess.Popen(
        ["fio", "--name=randread", f"--filename={dev}", "--rw=randread", "--bs=4k",
         "--direct=1", "--ioengine=libaio", "--iodepth=32",
         "--time_based", f"--runtime={FIO_RUNTIME_S}", "--output-format=json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=capped_cgroup.enter_self)
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
