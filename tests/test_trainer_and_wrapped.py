"""Issue 24's starved jobs, real processes on this machine (the one stand-in is the GPU,
tests/standin.py, following the job's real progress):

  - a training loop bound by its own Python (loader_job.py `trainer`: ~30 ms of CPU a
    step, its workers asleep on a full prefetch queue): cpu-starved, kind trainer, with
    the loaders shown asleep as the evidence;
  - a job whose own busy processes sit under `timeout` wrappers (as launchers wrap
    workers) and hold every CPU: cpu-starved, never undiagnosed, however the idle
    wrappers dilute a per-loader mean;
  - a disk-latency job (4 KiB O_DIRECT reads) beside busy loops: disk-starved, with the
    busy loops' share named as the second cause where their predicted gain is worth it.

Every verdict carries its what-if (`verdict.whatif`): the fixes ranked by predicted gain.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

import realdisk
import standin
from jobrun import HEALTHY_STEPS_S, Run, assert_starved
from test_real_jobs import cpu_hogs

pytestmark = pytest.mark.integration

WRAPPED_JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jobs", "wrapped_job.py")


@pytest.fixture(scope="module")
def data_file():
    path = realdisk.random_file(os.path.join(realdisk.BASE, f"gdt-whatif-{os.getpid()}.bin"),
                                768)
    yield path
    os.unlink(path)


def test_a_trainer_bound_loop_is_cpu_starved_by_the_trainer(tmp_path, data_file):
    run = Run(tmp_path, "trainer", 2, data_file)
    ep = assert_starved(run, "cpu-starved", kinds=("trainer",))
    assert "asleep" in ep["reason"] and f"pid {run.pid}" in ep["reason"], run.explain()
    assert run.once["verdict"]["kind"] == "trainer", run.explain()
    # more workers cannot help a loop that is not waiting for them
    assert all(w["fix"] != "workers" for w in run.once["verdict"]["whatif"]), run.explain()


def test_a_job_holding_every_cpu_behind_wrappers_is_cpu_starved(tmp_path):
    progress = str(tmp_path / "progress")
    n = 2 * (os.cpu_count() or 2)       # its own load outweighs what CI runs beside it
    job = subprocess.Popen([sys.executable, WRAPPED_JOB, "--progress", progress,
                            "--children", str(n), "--seconds", "20"])
    try:
        time.sleep(4)
        once = standin.run(["--once", "--json", "-i", "2"], gpus=1,
                           processes={0: [job.pid]}, progress=progress,
                           healthy_steps_s=HEALTHY_STEPS_S)
    finally:
        job.kill()
        job.wait()
    assert once.returncode == 0, once.stderr
    v = json.loads(once.stdout)["verdict"]
    assert v["state"] == "cpu-starved", v
    assert v["kind"] in ("own", "others"), v
    assert job.pid in v["processes"], v


def test_a_latency_job_beside_busy_loops_is_disk_starved_with_the_loops_second(tmp_path, data_file):
    reads = realdisk.starving_reads(data_file, 4, 128)
    run = Run(tmp_path, "disk", 4, data_file, reads=reads, others=cpu_hogs(os.cpu_count() or 2))
    assert_starved(run, "disk-starved", realdisk.whole_disk(data_file),
                   kinds=("latency-bound", "saturated"))
    whatif = run.once["verdict"]["whatif"]
    assert whatif, run.explain()
    fixes = {w["fix"]: w for w in whatif}
    if "others" in fixes and fixes["others"]["speedup"] >= 1.05:
        assert "also: the CPUs are taken by" in run.once["verdict"]["reason"], run.explain()
