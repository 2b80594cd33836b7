"""A real job gpudisk-top cannot see names no cause (verdict/detect/unseen.py): the job
runs on the host, gpudisk-top in a PID namespace of its own (`unshare --pid --fork
--mount-proc`), as root and as nobody, with stand-in GPUs that report the job's host PID
as a real driver does, while busy loops of other processes take every CPU.  It said
"cpu-starved: the host's CPUs are taken by other processes" (issue 38)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

import standin
from jobrun import HEALTHY_STEPS_S, JOB

NOBODY = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")

# its busy loops take every CPU: it runs alone (REAL_LOAD), not beside the other tests
pytestmark = [pytest.mark.integration,
              pytest.mark.root(reason="needs root: unshare of a PID and mount namespace")]


@pytest.fixture
def busy_job(tmp_path):
    """A job whose two workers decode on CPUs (no reads), beside busy loops of other
    processes on every CPU; its progress file."""
    if os.geteuid() != 0:
        pytest.skip("needs root: unshare of a PID and mount namespace")
    if shutil.which("unshare") is None or shutil.which("setpriv") is None:
        pytest.skip("unshare and setpriv (util-linux) are not installed")
    data = tmp_path / "data.bin"
    data.write_bytes(b"\0" * (1 << 20))
    progress = tmp_path / "progress"
    job = subprocess.Popen([sys.executable, JOB, "cpu", "--workers", "2", "--seconds", "60",
                            "--data", str(data), "--progress", str(progress)])
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(os.cpu_count() or 1)]
    time.sleep(3)
    yield job.pid, str(progress)
    for p in loops + [job]:
        p.kill()
        p.wait()


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_a_job_in_another_pid_namespace_is_said_unseen_not_cpu_starved(busy_job, user):
    pid, progress = busy_job
    cmd, env = standin.command(["--once", "--json", "-i", "2"], gpus=1, processes={0: [pid]},
                               progress=progress, healthy_steps_s=HEALTHY_STEPS_S)
    who = list(NOBODY) if user == "nobody" else []
    run = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", *who, *cmd],
                         env=env, capture_output=True, text=True, timeout=120,
                         cwd=standin.ROOT)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    d = json.loads(run.stdout)
    p = d["gpus"][0]["processes"][0]
    assert p["pid"] == pid and not p["mapped"], p          # nothing here is the job
    v = d["verdict"]
    assert v["processes"] == [pid], v
    assert v["state"] != "cpu-starved" and "taken by" not in v["reason"] + v["advice"], v
    assert v["whatif"] == [], v
    if v["state"] == "disk-starved":
        # another's reads saturated a disk meanwhile: said of a device, as no proven cause
        assert v["kind"] == "saturated" and "not a proven cause" in v["reason"], v
        return
    assert v["state"] == "undiagnosed-stall" and v["kind"] == "unseen", v
    assert "the job's processes cannot be seen from here (another PID namespace" in v["reason"]
    assert "so no cause is named" in v["reason"] and v["culprits"] == [], v
    assert "--pid=host" in v["advice"], v
