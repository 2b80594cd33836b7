"""The detector on recordings of real jobs (tests/fixtures/real/, made on this project's
CI-class machine by tests/corpus/record_real.py): real processes, the real disk and CPUs,
other real load beside them, labelled from what the job itself logged each second.

Every recording must read right: each starved stretch detected within 3 intervals in
its own state, no episode of a state the labels never ask for (0 alarms on the healthy
and idle ones), and every starved episode naming the job's process and, for storage,
its device; `report --json` of the recording says the same."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from corpus.corpus import real_recordings
from corpus.score import precision_recall, run_real
from gpudisk_top.verdict.detect import STARVED_STATES
from recording_helpers import ROOT

REAL = real_recordings()
RUNS = {name: run_real(name, rec, truth) for name, rec, truth in REAL}


def test_there_are_real_recordings_of_every_kind():
    labels = {lab for _, _, truth in REAL for _, lab in truth["labels"]}
    assert {"healthy", "idle", "disk-starved", "cpu-starved"} <= labels, labels
    names = {name for name, _, _ in REAL}
    assert any("hogs" in n or "others" in n or "load" in n for n in names)   # other load beside


@pytest.mark.parametrize("name", sorted(RUNS))
def test_real_recording_reads_right(name):
    run = RUNS[name]
    assert run.labels, "no interval matched the job's log"
    assert run.problems == [], run.problems


@pytest.mark.parametrize("name", sorted(RUNS))
def test_report_of_a_real_recording_names_the_job_and_its_device(name):
    rec = next(r for n, r, _ in REAL if n == name)
    truth = next(t for n, _, t in REAL if n == name)
    proc = subprocess.run([sys.executable, "-m", "gpudisk_top", "report", rec, "--json"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    asked = {lab for _, lab in truth["labels"] if lab in STARVED_STATES}
    starved = [e for e in out["episodes"] if e["state"] in STARVED_STATES]
    assert {e["state"] for e in starved} <= asked, starved
    if asked:
        assert starved, out["episodes"]
    for e in starved:
        assert truth["job_pid"] in e["processes"], e
        if e["state"] == "disk-starved" and truth["device"]:
            assert truth["device"] in e["devices"], e


def test_real_precision_and_recall_per_state():
    """On the episode timeline (episodes start where their first interval did, as replay
    and report show them); the live state lags each onset by the 3 intervals an episode
    needs, which short stretches (a checkpoint's few seconds) feel most."""
    pairs = [(lab, got) for r in RUNS.values() for lab, got in zip(r.labels, r.timeline)]
    for state, (p, r, n) in precision_recall(pairs).items():
        if n >= 10:
            assert p is not None and p >= 0.9 and r >= 0.85, (state, p, r, n)
