"""Issue 38's incident, replayed for real: a neighbour's fio in the middle of a starved job.

A loader job (tests/jobs/loader_job.py `disk`: 2 workers of 4 KiB O_DIRECT reads of a
file on this machine's disk) feeds a stand-in GPU that follows its progress; it starts
starved on its own reads (latency-bound).  gpudisk-top records it, with no probe of the
disk stored (as in the incident: the neighbour fix is measured by the job's own pace
before fio came, verdict/detect/before.py, which no probe changes).  After FIO_AFTER_S a fio (random 4 KiB
O_DIRECT reads of the same file, 64 KiB each as the incident's fio read, at queue depth 8:
the job slowed to a few steps a second, not to one, whose stand-in figure, 0-4 %, says too
little to judge a ratio by; a session of its own) takes the disk
for FIO_S, and is stopped; the job goes on alone.  Then `report --json` and the text
report of the recording:

  - the job's disk-starved episode has a phase with fio among its culprits, its share of
    the reads and the seconds it was named (the report before: `culprits: []`, fio
    nowhere, the episode described by its last interval);
  - each phase's lost GPU-seconds (the ledger's, Ledger.lost_of_phase) are within 10 %
    of what the job's own progress log says it lost over that phase's span;
  - the best fix of fio's phase is the neighbour fix, within 25 % of the gain measured
    by stopping fio (the job's steps a second after fio stopped, against while it ran);
  - the text report names fio in that phase.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

import realdisk
import standin
from cgjobs import HEALTHY_STEPS_S, LOADER_JOB, report_json
from slack import slack
from gpudisk_top.verdict.detect import Thresholds

pytestmark = [pytest.mark.integration]

FIO_AFTER_S = 14     # the job alone: its first phase, the episode opened
FIO_S = 20           # fio on the disk
AFTER_S = 12         # the job alone again: the gain of stopping fio, measured
RECORD_S = FIO_AFTER_S + FIO_S + AFTER_S
DATA_MIB = 256
WORKERS = 2
PROGRESS_DIR = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None


def _windows(truth: list[dict]):
    """(start, end, steps a second) of each truth line: the job writes one for each
    stretch of at least a second since the one before (`wall` its end; a slow step makes
    it longer), with the steps made in it."""
    for before, t in zip(truth, truth[1:]):
        lo, hi = before["wall"], t["wall"]
        if hi > lo:
            yield lo, hi, t["steps"] / (hi - lo)


def _lost_s(truth: list[dict], a: float, b: float) -> float:
    """The GPU-seconds the job lost over [a, b] by its own truth lines: each stretch's
    shortfall from the healthy rate, weighted by its overlap with [a, b]."""
    lost = 0.0
    for lo, hi, rate in _windows(truth):
        overlap = min(hi, b) - max(lo, a)
        if overlap > 0:
            lost += overlap * max(0.0, 1.0 - rate / HEALTHY_STEPS_S)
    return lost


def _steps_s(truth: list[dict], a: float, b: float) -> float:
    """The job's steps a second over the truth stretches inside [a, b]."""
    inside = [(hi - lo, rate) for lo, hi, rate in _windows(truth) if a <= lo and hi <= b]
    assert inside, (a, b)
    return sum(d * r for d, r in inside) / sum(d for d, _ in inside)


@pytest.fixture(scope="module")
def incident(tmp_path_factory):
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed (Debian: fio)")
    tmp = tmp_path_factory.mktemp("incident")
    data = realdisk.random_file(os.path.join(realdisk.BASE, f"gdt-incident-{os.getpid()}.bin"),
                                DATA_MIB)
    # a state directory of its own, with no probe stored in it: as in the incident
    env = {"XDG_STATE_HOME": str(tmp / "state")}
    job = fio = recorder = None
    try:
        # starved on this disk whatever it is: three times what two workers at QD1 can
        # read at the healthy rate (whatif_harness.py's rule)
        qd1 = max(realdisk.qd1_reads_per_s(data, 0.5) for _ in range(3))
        reads = max(128, math.ceil(3.0 * qd1 * WORKERS / (HEALTHY_STEPS_S * 8)))
        progress = os.path.join(PROGRESS_DIR or str(tmp), f"incident-{os.getpid()}.progress")
        truth = str(tmp / "truth.jsonl")
        job = subprocess.Popen([sys.executable, LOADER_JOB, "disk", "--workers", str(WORKERS),
                                "--seconds", str(RECORD_S + 30), "--data", data,
                                "--progress", progress, "--truth", truth,
                                "--reads", str(reads)], start_new_session=True)
        time.sleep(2 * slack())           # its workers started
        rec = str(tmp / "incident.gdtrec")
        recorder = standin.popen(["record", "-o", rec, "-i", "1", "--duration", str(RECORD_S)],
                                 gpus=1, processes={0: [job.pid]}, progress=progress,
                                 healthy_steps_s=HEALTHY_STEPS_S, env=env)
        time.sleep(FIO_AFTER_S)
        fio_on = time.time()
        fio = subprocess.Popen(["fio", "--name=neighbour", f"--filename={data}", "--readonly",
                                "--rw=randread", "--bs=64k", "--direct=1", "--ioengine=libaio",
                                "--iodepth=8", "--thread", "--time_based",
                                f"--runtime={RECORD_S + 60}", "--output=/dev/null"],
                               start_new_session=True, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL)
        time.sleep(FIO_S)
        os.killpg(fio.pid, signal.SIGKILL)
        fio.wait()
        fio_off = time.time()
        out, err = recorder.communicate(timeout=RECORD_S + 120 * slack())
        assert recorder.returncode == 0, err
        with open(truth) as f:
            lines = [json.loads(line) for line in f if line.strip()]
        text = subprocess.run([sys.executable, "-m", "gpudisk_top", "report", rec, "--no-charts"],
                              capture_output=True, text=True, timeout=120, cwd=standin.ROOT)
        assert text.returncode == 0, text.stderr
        return {"report": report_json(rec), "text": text.stdout, "truth": lines,
                "fio_on": fio_on, "fio_off": fio_off, "fio_pid": fio.pid, "job": job.pid,
                "reads": reads, "qd1": qd1}
    finally:
        for p in (fio, job):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        if recorder is not None and recorder.poll() is None:
            recorder.kill()
            recorder.wait()
        os.unlink(data)


def _episode(incident) -> dict:
    eps = [e for e in incident["report"]["episodes"] if e["state"] == "disk-starved"
           and e["start_s"] < incident["fio_on"] and e["end_s"] > incident["fio_off"]]
    assert eps, json.dumps(incident["report"]["episodes"], indent=1)[:4000]
    return eps[0]


def _ours(c: dict, incident) -> bool:
    """A culprit that is this test's fio (a shared machine may run another)."""
    return c["name"] == "fio" and incident["fio_pid"] in c["pids"]


def _fio_phase(ep: dict, incident) -> tuple[int, dict]:
    """The phase whose cause is this test's fio: the one it was named in longest."""
    def seconds(p):
        return max((c["seconds"] for c in p["culprits"] if _ours(c, incident)), default=0)
    n = max(range(len(ep["phases"])), key=lambda k: seconds(ep["phases"][k]))
    if seconds(ep["phases"][n]) > 0:
        return n, ep["phases"][n]
    raise AssertionError(json.dumps(ep["phases"], indent=1)[:4000])


def test_the_report_names_fio_in_its_own_phase(incident):
    ep = _episode(incident)
    n, phase = _fio_phase(ep, incident)
    # the job alone first: fio's phase is not the first, and it is of fio's time
    assert n >= 1, json.dumps(ep["phases"], indent=1)[:3000]
    fio = [c for c in phase["culprits"] if _ours(c, incident)]
    fio_s = incident["fio_off"] - incident["fio_on"]
    assert sum(c["read_share_pct"] for c in fio) >= 50, fio
    # named for most of its run: the node scan (every 5 s) finds a new reader, it is
    # followed from the sample after, and a phase begins after 3 intervals of it
    assert max(c["seconds"] for c in fio) >= 0.4 * fio_s, (fio, fio_s)
    assert phase["start_s"] >= incident["fio_on"] - 2 and phase["end_s"] <= incident["fio_off"] + 8, \
        (phase["start"], phase["end"], incident["fio_on"], incident["fio_off"])
    # summed over the episode too, whatever its last interval named
    assert any(_ours(c, incident) for c in ep["culprits_summed"]), ep["culprits_summed"]
    # the text report says it in that phase's line
    line = next((l for l in incident["text"].splitlines() if l.strip().startswith(f"phase {n + 1} ")),
                None)
    assert line is not None and "(fio)" in line and "of its reads for" in line, incident["text"]


def test_the_ledger_splits_the_lost_time_by_phase_as_the_job_lost_it(incident):
    ep = _episode(incident)
    truth = incident["truth"]
    assert len(ep["phases"]) >= 2
    # an episode opens on its third starved interval and begins at the first: the two
    # before were counted when it was not known yet (not to it)
    counted_from = ep["start_s"] + (Thresholds().enter_intervals - 1) * 1.0
    # the stand-in GPU reads the job's progress over its last 1-2 s (tests/standin.py), so
    # at a phase's edge, where the job's pace jumps, its figure lags by up to an interval:
    # one GPU-second beside the 10 %
    for p in ep["phases"]:
        mine = _lost_s(truth, max(p["start_s"], counted_from), p["end_s"])
        assert p["lost_gpu_s"] == pytest.approx(mine, rel=0.10, abs=1.0), \
            (p["start"], p["end"], p["lost_gpu_s"], mine)
    assert sum(p["lost_gpu_s"] for p in ep["phases"]) == pytest.approx(ep["lost_gpu_s"], rel=1e-6)
    # the report's by-episode rows split it alike
    row = next(r for r in incident["report"]["ledger"]["by_episode"] if r["id"] == ep["id"])
    assert [r["lost_gpu_s"] for r in row["phases"]] == [p["lost_gpu_s"] for p in ep["phases"]]


def test_the_neighbour_fix_is_the_best_of_fios_phase_and_its_gain_is_measured(incident):
    ep = _episode(incident)
    _n, phase = _fio_phase(ep, incident)
    assert phase["whatif"], phase
    best = phase["whatif"][0]
    assert best["fix"] == "neighbour", json.dumps(phase["whatif"], indent=1)
    assert incident["fio_pid"] in best["pids"], best
    assert best["confidence"] == "measured" and "without it the job's GPUs were at" in best["basis"]
    # the predictions that rest on the device's curve say it was not probed
    assert all("no probe of" in w["basis"] for w in phase["whatif"][1:]
               if w["fix"] in ("workers", "storage")), phase["whatif"]
    truth = incident["truth"]
    during = _steps_s(truth, incident["fio_on"] + 2, incident["fio_off"])
    after = _steps_s(truth, incident["fio_off"] + 2, incident["fio_off"] + AFTER_S)
    measured = after / max(during, 0.1)
    assert best["speedup"] == pytest.approx(measured, rel=0.25), \
        (best["speedup"], measured, during, after, best["basis"])
    print(f"fio's phase: neighbour fix x{best['speedup']:.2f} predicted, x{measured:.2f} "
          f"measured ({during:.1f} -> {after:.1f} steps/s; {incident['reads']} reads a step, "
          f"QD1 {incident['qd1']:.0f} r/s)")
