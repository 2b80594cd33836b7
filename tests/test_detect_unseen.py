"""A stalled job whose processes cannot be seen names no cause (verdict/detect/unseen.py):
through the simulator, a job in a PID namespace we cannot see while another process
takes the host's CPUs, and a job whose I/O cannot be read (as non-root).  The same with
real processes: tests/test_unseen_real.py."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from gpudisk_top.model.snapshot import Model
from gpudisk_top.sim import Simulator, builtin, loads_toml
from gpudisk_top.verdict.detect import one_interval
from gpudisk_top.verdict.detect.unseen import UNSEEN

HOST = Path(__file__).parent / "corpus" / "cpu-starved-host.toml"


def _models(scenario, n: int = 120) -> list[tuple[str, Model]]:
    sim = Simulator(scenario, seed=0)
    samples = [sim.sample() for _ in range(n + 1)]
    return [(sim.label_at(i), Model.new(samples[i], samples[i - 1])) for i in range(1, n + 1)]


def _no_io(model: Model) -> Model:
    """The model as a non-root user reads it: the job's processes (another user's) with
    their CPU time and run-queue wait, but no I/O counters, open files or delays."""
    for pid, v in list(model.procs.items()):
        if v.root_pid is not None:
            model.procs[pid] = replace(v, read_kb_s=None, write_kb_s=None, rchar_kb_s=None,
                                       wchar_kb_s=None, io_wait_pct=None, devices=None,
                                       reads_s=None, blocked_on=None, direct_reads=None,
                                       data_kb=None)
    return model


def test_an_unseen_job_on_a_busy_host_is_not_blamed_on_the_hosts_cpus():
    # cpu-starved-host with the job in a PID namespace we cannot see: the host is 99 %
    # busy, but whose CPUs those are cannot be told (the job's own 8 ranks and 48
    # workers are most of them); it said "cpu-starved: the host's CPUs are taken by
    # other processes" (issue 38)
    text = HOST.read_text().replace("[job]\n", "[job]\nvisible = false\n", 1)
    starved = [m for label, m in _models(loads_toml(text, str(HOST))) if label == "cpu-starved"]
    assert len(starved) >= 60
    for m in starved[5:]:
        v = one_interval(m)
        assert v.state == "undiagnosed-stall" and v.kind == UNSEEN, (v.state, v.reason)
        assert "the job's processes cannot be seen from here (another PID namespace" in v.reason
        assert "so no cause is named" in v.reason
        assert re.search(r"CPU idle \d% \(iowait counted as idle\), the job's share of the "
                         r"busy ones unknown", v.reason), v.reason
        # the figures that can still be said, as figures
        assert "the busiest processes seen from here: pid 31337 (ffmpeg)" in v.reason
        assert "taken by" not in v.reason and "taken by" not in v.advice
        assert v.culprits == [] and v.whatif == []
        assert "--pid=host" in v.advice and "--procfs /host/proc" in v.advice
    # seen, the same intervals are the others' CPUs: the rule stands where it can be told
    assert one_interval(_models(loads_toml(HOST.read_text(), str(HOST)))[80][1]).state \
        == "cpu-starved"


def test_a_saturated_disk_is_still_said_of_an_unseen_job_as_no_proven_cause():
    # its saturation is the device's own evidence: it needs no process (and the corpus'
    # disk-starved-not-visible holds it over the whole scenario)
    text = (Path(__file__).parent / "corpus" / "disk-starved-not-visible.toml").read_text()
    got = [one_interval(m) for label, m in _models(loads_toml(text)) if label == "disk-starved"]
    assert {v.state for v in got[5:]} == {"disk-starved"}
    assert all("not a proven cause" in v.reason for v in got[5:])


def test_a_job_whose_reads_cannot_be_read_is_not_judged_by_its_cpu_alone():
    # as non-root a root job's loaders show their CPU time and run-queue wait but not
    # their reads: loaders blocked on reads look asleep.  Under half their time on a CPU
    # or waiting for one, the reads may be the larger part: no cause is named
    got = [one_interval(_no_io(m)) for label, m in _models(builtin("disk-starved-sata"))
           if label == "disk-starved"]
    assert got
    for v in got[5:]:
        assert v.state == "undiagnosed-stall" and v.kind == UNSEEN, (v.state, v.reason)
        assert v.reason.count("the job's reads cannot be seen from here (not root") == 1
        assert "DataLoader workers each:" in v.reason          # what can still be said
        assert "as root" in v.advice and v.whatif == []


def test_loaders_on_a_cpu_most_of_the_time_are_cpu_starved_even_unread():
    # ... over half: whatever their reads take (at most the rest), the CPUs are the
    # larger part, and the verdict says what it could not read
    got = [one_interval(_no_io(m)) for label, m in _models(builtin("cpu-starved-cached"))
           if label == "cpu-starved"]
    assert got
    for v in got[5:]:
        assert v.state == "cpu-starved", (v.state, v.reason)
        assert "their reads cannot be read (not root): at most" in v.reason
