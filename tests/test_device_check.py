"""bench/device_check.py, the check a lent GPU runs (issue 40 item 4), on the stand-in
(--fake): it writes its JSON, times each NVML call the sampler makes, and reads the
one-thread kernel's utilization.gpu beside GPM's SM activity."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_device_check_runs_on_the_stand_in(tmp_path):
    run = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "device_check.py"),
                          str(tmp_path), "--fake", "--calls", "50", "--phase-s", "1.5"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    doc = json.loads((tmp_path / "device_check.json").read_text())
    assert doc["fake"] is True and doc["over_2ms"] == []
    calls = doc["calls"]
    assert calls["nvmlGpmMetricsGet"]["calls"] == 50 and calls["nvmlGpmMetricsGet"]["error"] is None
    # the stand-in's PCIe call takes the driver's 20 ms: the check sees it, and says it is
    # off the sampling path
    assert calls["nvmlDeviceGetPcieThroughput (off the sampling path)"]["median_us"] >= 20_000
    assert doc["gpu_read_ms"]["gpus"] == 2
    assert [g["supported"] for g in doc["gpm"]["support"]] == [True, True]
    assert doc["gpm"]["unprivileged"]["sm_active_pct"] is not None
    phases = {p["name"]: p for p in doc["workloads"]}
    assert list(phases) == ["idle", "one-thread", "matmul"]
    one = phases["one-thread"]
    assert (one["gpu_util_pct"], one["sm_active_pct"], one["busy_source"]) == (100.0, 1.0, "gpm-sm-active")
    assert phases["matmul"]["sm_active_pct"] == 97.0 and phases["matmul"]["power_w"] == 650.0
    # issue 40's later calls are timed too, and each phase says what held the clocks and
    # what NVML's per-process sample of the workload read
    for name in ("nvmlDeviceGetFieldValues", "nvmlDeviceGetProcessesUtilizationInfo",
                 "nvmlDeviceGetProcessUtilization"):
        assert calls[name]["calls"] == 50 and calls[name]["error"] is None, name
    matmul = phases["matmul"]
    assert matmul["throttle_source"] == "durations"
    assert abs(matmul["throttle_pct"]["sw_power_cap"] - 33.0) < 0.1
    assert matmul["throttle_pct"]["hw_thermal"] == 0.0
    assert matmul["process_sm_util_pct"] == 100.0 and phases["idle"]["process_sm_util_pct"] is None
