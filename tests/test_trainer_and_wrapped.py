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
from jobrun import HEALTHY_STEPS_S, RECORD_S, Run
from test_real_jobs import cpu_hogs

pytestmark = pytest.mark.integration

WRAPPED_JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jobs", "wrapped_job.py")


@pytest.fixture(scope="module")
def data_file():
    path = realdisk.random_file(os.path.join(realdisk.BASE, f"gdt-whatif-{os.getpid()}.bin"),
                                768)
    yield path
    os.unlink(path)


def longest(run: Run) -> dict:
    assert run.episodes(), run.explain()
    return max(run.episodes(), key=lambda e: e["duration_s"])


def test_a_trainer_bound_loop_is_cpu_starved_by_the_trainer(tmp_path, data_file):
    run = Run(tmp_path, "trainer", 2, data_file)
    assert run.starved_share() >= 0.6, run.explain()      # the job really was starved
    # most of the recording in it (the recorder at 1 Hz; a --once of one interval on a
    # machine loaded by others may not see the trainer's time whole, and another's
    # writeback burst beside it reads as a checkpoint stall: the checkpoint rule's)
    trainer = [e for e in run.episodes("cpu-starved") if e["kind"] == "trainer"]
    assert sum(e["duration_s"] for e in trainer) >= RECORD_S / 2, run.explain()
    ep = max(trainer, key=lambda e: e["duration_s"])
    assert "asleep" in ep["reason"] and f"pid {run.pid}" in ep["reason"], run.explain()
    assert not run.episodes("undiagnosed-stall"), run.explain()
    # more workers cannot help a loop that is not waiting for them
    assert all(w["fix"] != "workers" for w in ep["whatif"]), run.explain()


def test_a_job_holding_every_cpu_behind_wrappers_is_cpu_starved(tmp_path):
    progress, rec = str(tmp_path / "progress"), str(tmp_path / "wrapped.gdtrec")
    n = 2 * (os.cpu_count() or 2)       # its own load outweighs what CI runs beside it
    job = subprocess.Popen([sys.executable, WRAPPED_JOB, "--progress", progress,
                            "--children", str(n), "--seconds", str(RECORD_S + 8)])
    try:
        time.sleep(2)
        recorder = standin.popen(["record", "-o", rec, "-i", "1", "--duration", str(RECORD_S)],
                                 gpus=1, processes={0: [job.pid]}, progress=progress,
                                 healthy_steps_s=HEALTHY_STEPS_S)
        assert recorder.wait(RECORD_S + 60) == 0, recorder.stderr.read()
    finally:
        job.kill()
        job.wait()
    report = subprocess.run([sys.executable, "-m", "gpudisk_top", "report", rec, "--json"],
                            capture_output=True, text=True, timeout=120, cwd=standin.ROOT)
    assert report.returncode == 0, report.stderr
    episodes = json.loads(report.stdout)["episodes"]
    assert episodes, report.stdout[:2000]
    ep = max(episodes, key=lambda e: e["duration_s"])
    explain = json.dumps([(e["state"], e["kind"], e["reason"]) for e in episodes], indent=1)
    # the wrappers asleep beside the busy children do not hide that the job holds the CPUs
    assert ep["state"] == "cpu-starved" and ep["kind"] in ("own", "others"), explain
    assert ep["duration_s"] >= RECORD_S - 6, explain
    assert job.pid in ep["processes"], explain
    assert not [e for e in episodes if e["state"] == "undiagnosed-stall"], explain


@pytest.fixture
def probed(data_file, tmp_path, monkeypatch):
    """The data's device probed, as a user who ran `gpudisk-top probe` once has it (in a
    state directory of this test's own, which every gpudisk-top it starts reads): without
    a probe the what-if caps the device at the rate it was seen doing (issue 38), and a
    disk seen only at this job's own queue promises no more reads, so no gain."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    done = subprocess.run([sys.executable, "-m", "gpudisk_top", "probe", "--seconds", "4",
                           "--json", data_file], capture_output=True, text=True, timeout=120,
                          cwd=standin.ROOT)
    assert done.returncode == 0, done.stderr
    return data_file


def test_a_latency_job_beside_busy_loops_names_both_causes(tmp_path, probed):
    data_file = probed
    reads = realdisk.starving_reads(data_file, 4, 128)
    run = Run(tmp_path, "disk", 4, data_file, reads=reads, others=cpu_hogs(os.cpu_count() or 2))
    assert run.starved_share() >= 0.6, run.explain()
    ep = longest(run)
    assert ep["state"] in ("disk-starved", "cpu-starved"), run.explain()
    assert ep["duration_s"] >= RECORD_S - 6, run.explain()
    assert ep["whatif"], run.explain()
    # the other cause, where its fix is worth it, is named beside the verdict's
    fixes = {w["fix"]: w for w in ep["whatif"]}
    if ep["state"] == "disk-starved" and fixes.get("others", {}).get("speedup", 0) >= 1.05:
        assert "also: the CPUs are taken by" in ep["reason"], run.explain()
