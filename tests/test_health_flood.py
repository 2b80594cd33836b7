"""A smartctl that writes for ever (issue 25, item 2): its answer is read up to
collect.health_children.MAX_SMARTCTL_BYTES, then it is stopped and the reading dropped with the
reason; `--once` and `serve` stay under 200 MB of RSS.  The smartctl is a shell script
on PATH (as tests/test_health_live.py's stand-in), here `yes` with a JSON-looking line;
the disks are test_health_live's sysfs tree (an NVMe drive and a SATA SSD)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from gpudisk_top.collect.health import read_device
from gpudisk_top.collect.health_children import MAX_SMARTCTL_BYTES
from gpudisk_top.collect.roots import Roots
from test_health_live import host_sysfs

ROOT = Path(__file__).resolve().parent.parent
RSS_LIMIT_KB = 200 * 1024


def flooding_smartctl(tmp_path: Path) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "smartctl"
    script.write_text('#!/bin/sh\nexec yes \'{"json_format_version": [1, 0], "x": "'
                      + "x" * 200 + '"}\'\n')
    script.chmod(0o755)
    return bindir


def env_with(bindir: Path) -> dict:
    return dict(os.environ, PATH=f"{bindir}:{os.environ.get('PATH', '')}", PYTHONPATH=str(ROOT))


def peak_rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            m = re.search(r"VmHWM:\s+(\d+)", f.read())
        return int(m.group(1)) if m else 0
    except OSError:
        return 0


def watch(proc: subprocess.Popen, seconds: float) -> int:
    """The peak RSS of proc (kB) while it runs, for at most `seconds`."""
    peak = 0
    end = time.monotonic() + seconds
    while proc.poll() is None and time.monotonic() < end:
        peak = max(peak, peak_rss_kb(proc.pid))
        time.sleep(0.05)
    return peak


def test_a_smartctl_that_writes_for_ever_is_stopped_and_said(tmp_path):
    bindir = flooding_smartctl(tmp_path)
    sysfs = host_sysfs(tmp_path)
    h = read_device(Roots(sysfs=str(sysfs)), "sda", str(bindir / "smartctl"), timeout_s=60)
    assert h.unreadable_reason is not None
    assert f"more than {MAX_SMARTCTL_BYTES // 2**20} MiB" in h.unreadable_reason
    assert h.source != "smartctl"          # smartctl's flood is no reading
    assert h.temperature_c == 41.0         # the kernel's view still fills in


def test_once_stays_small_whatever_smartctl_prints(tmp_path):
    bindir = flooding_smartctl(tmp_path)
    sysfs = host_sysfs(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "gpudisk_top", "--once", "--json",
                             "-i", "1.5", "--sysfs", str(sysfs)], cwd=ROOT, env=env_with(bindir),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = watch(proc, 60)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert peak < RSS_LIMIT_KB, f"peak RSS {peak // 1024} MB"
    health = {h["device"]: h for h in json.loads(out)["health"]}
    assert set(health) >= {"nvme0n1", "sda"}


def test_serve_stays_small_whatever_smartctl_prints(tmp_path):
    bindir = flooding_smartctl(tmp_path)
    sysfs = host_sysfs(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "gpudisk_top", "serve", "--listen", "127.0.0.1:0",
                             "-i", "0.5", "--health-interval", "1", "--sysfs", str(sysfs)],
                            cwd=ROOT, env=env_with(bindir), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        peak = watch(proc, 8)      # several polls of both disks, each a flood
        assert proc.poll() is None, proc.communicate()[1]
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert "Traceback" not in err
    assert peak < RSS_LIMIT_KB, f"peak RSS {peak // 1024} MB"
