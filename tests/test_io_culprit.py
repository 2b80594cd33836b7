"""Who is loading the disk: a real job starved by another process's reads, named with its
share, and the I/O view's numbers against pidstat -d (sysstat) over the same 20 s.

The volume is a loop device on this machine's disk whose reads are capped at 3000 IOPS for
one cgroup, as a cloud volume's provisioned IOPS are for the whole node (tests/realdisk.py).
The job is tests/jobs/loader_job.py in `disk` mode, two workers and 4 reads a sample: it
needs 1600 reads a second at full speed, well under the cap, so alone it keeps its
stand-in GPU busy.  Beside it fio (not the job: its own process at queue depth 32, as a
backup or another user's job) reads the same volume; the job's reads wait behind fio's,
and the GPU, whose utilization follows the job's real steps, starves.  The verdict must
name fio as the one loading the volume with its share; the recording must carry fio's
read rate as pidstat measures it; the I/O view must list it first.  Everything but the
GPU is real: the disk, /proc, the recorder, the report.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

import realdisk
import standin

from gpudisk_top.record import Recording
from gpudisk_top.session.replay import Replay
from gpudisk_top.collect.source import LIVE, Source

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOB = os.path.join(ROOT, "tests", "jobs", "loader_job.py")
RECORD_S = 30
PIDSTAT_AT_S, PIDSTAT_S = 6, 20      # pidstat runs 20 one-second intervals from 6 s in
CAP_IOPS = 3000


def pidstat_kb_rd_s(text: str, pid: int) -> float:
    """pidstat -d's "Average:" kB_rd/s for pid."""
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "Average:" and len(fields) >= 5 and fields[2] == str(pid):
            return float(fields[3])
    raise AssertionError(f"no Average line for {pid} in:\n{text}")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    for tool in ("fio", "pidstat"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (Debian: fio, sysstat)")
    tmp = tmp_path_factory.mktemp("culprit")
    rec, progress = str(tmp / "run.gdtrec"), str(tmp / "progress")
    with realdisk.loop_device(256, "culprit") as (dev, path):
        cap = realdisk.IopsCap.for_disk_of(path, CAP_IOPS)
        job = fio = None
        try:
            job = subprocess.Popen([sys.executable, JOB, "disk", "--workers", "2", "--reads", "4",
                                    "--seconds", str(RECORD_S + 10), "--data", dev,
                                    "--progress", progress], preexec_fn=cap.enter_self)
            fio = subprocess.Popen(["fio", "--name=backup", f"--filename={dev}", "--readonly",
                                    "--rw=randread", "--bs=4k", "--direct=1", "--ioengine=libaio",
                                    "--iodepth=32", "--thread", "--time_based",
                                    f"--runtime={RECORD_S + 10}"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   preexec_fn=cap.enter_self)
            recorder = standin.popen(["record", "-o", rec, "-i", "1", "--duration", str(RECORD_S)],
                                     gpus=1, processes={0: [job.pid]}, progress=progress,
                                     healthy_steps_s=50.0)
            time.sleep(PIDSTAT_AT_S)
            pidstat_start = time.time()
            pidstat = subprocess.run(["pidstat", "-d", "-p", str(fio.pid), "1", str(PIDSTAT_S)],
                                     capture_output=True, text=True, timeout=PIDSTAT_S + 30,
                                     env=dict(os.environ, LC_ALL="C"))
            assert recorder.wait(RECORD_S + 60) == 0, recorder.stderr.read()
        finally:
            for p in (fio, job):
                if p is not None:
                    p.kill()
                    p.wait()
            cap.remove()
    report = subprocess.run([sys.executable, "-m", "gpudisk_top", "report", rec, "--json"],
                            capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert report.returncode == 0, report.stderr
    return {"rec": rec, "fio": fio.pid, "job": job.pid, "pidstat": pidstat.stdout,
            "pidstat_start": pidstat_start, "report": json.loads(report.stdout),
            "device": os.path.basename(dev)}


def test_the_io_view_numbers_match_pidstat(run):
    """fio's read rate as recorded (read_bytes per interval, the I/O view's read/s) against
    pidstat -d 1 over the same 30 s: within 5%."""
    theirs = pidstat_kb_rd_s(run["pidstat"], run["fio"])
    lo, hi = run["pidstat_start"], run["pidstat_start"] + PIDSTAT_S + 1
    kb, seconds = 0.0, 0.0
    rows = []
    for model, _verdict in Replay(Recording.open(run["rec"])).models():
        if lo + 1 <= model.wall_s <= hi:
            view = model.procs.get(run["fio"])
            assert view is not None and view.read_kb_s is not None, sorted(model.procs)
            kb += view.read_kb_s * model.interval_s
            seconds += model.interval_s
            rows.append(view)
    assert seconds >= PIDSTAT_S - 2
    ours = kb / seconds
    assert theirs > 1000, run["pidstat"]          # the load was there
    assert abs(ours - theirs) <= 0.05 * theirs, (ours, theirs, run["pidstat"])
    assert rows[-1].name == "fio" and run["device"] in (rows[-1].devices or ())
    print(f"fio kB_rd/s: ours {ours:.0f}, pidstat {theirs:.0f} ({(ours / theirs - 1) * 100:+.1f}%)")


def test_the_verdict_names_the_process_loading_the_disk(run):
    episodes = [e for e in run["report"]["episodes"] if e["state"] == "disk-starved"]
    assert episodes, json.dumps(run["report"]["episodes"], indent=1)
    longest = max(episodes, key=lambda e: e["duration_s"])
    assert longest["duration_s"] >= RECORD_S / 2, longest
    assert run["device"] in longest["devices"], longest
    assert run["job"] in longest["processes"], longest
    # "...; 4% of its reads from pid J (python) ...; read by pid F (fio), 95% of its reads"
    m = re.search(rf"pid {run['fio']} \(fio\), (\d+)% of its reads", longest["reason"])
    assert m, longest["reason"]
    assert int(m.group(1)) >= 50, longest["reason"]


def test_the_io_view_lists_the_culprit_first(run):
    """The replay screen at the end of the recording, `i` pressed: fio's line first, marked."""
    from gpudisk_top.ui.replay_app import ReplayApp
    from screen_text import screen_text

    rec = Recording.open(run["rec"])

    async def shoot() -> str:
        app = ReplayApp(rec, Source(LIVE, "h", "replay", kernel="k"),
                        start_index=len(rec) - 2, show_self=False)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            await pilot.press("i")
            await pilot.pause()
            return screen_text(app)

    screen = asyncio.run(shoot())
    lines = screen.splitlines()
    head = next(i for i, line in enumerate(lines) if line.lstrip().startswith("PID"))
    first = lines[head + 1].split()
    assert first[0] in ("▲", str(run["fio"])), screen
    assert str(run["fio"]) in first[:2] and "fio" in lines[head + 1], screen
