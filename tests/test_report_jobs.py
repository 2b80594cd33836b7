"""`report`, `export` and the replay of a shared node's recording (issue 37): every job
that ran, each with its identity, first and last seen, state shares, episodes and GPU time
lost by cause; `report --job ID` for one; the same per-job figures from the recorder's
summaries and from a replay of the raw samples; recordings made before jobs were told
apart report one job "unknown" whose figures are the node's.

The two-job recording is real: `record` on stand-in GPUs (tests/standin.py) whose compute
processes are two real processes, each rewriting its own progress file at its own rate
(job A at its healthy rate, job B at a tenth of it), each GPU following its own job's
progress, GPU 2 with no process (idle).  A long recording of two jobs is made in-process
from the simulator's demo scenario, its GPU processes tagged as two Slurm jobs (the second
ending part-way), for windows over many summary blocks."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

import standin
from cli_run import gdt, one_line_error
from recording_helpers import origin
from slack import slack

from gpudisk_top.record import Recorder, Recording, make_header
from gpudisk_top.report import summary
from gpudisk_top.report.export import write_jsonl, write_perfetto
from gpudisk_top.report.text import render
from gpudisk_top.session.replay import Replay, ReplayFeed
from gpudisk_top.sim import Simulator, builtin
from gpudisk_top.verdict.detect import STARVED_STATES
from gpudisk_top.verdict.ledger import CAUSES

HERE = Path(__file__).resolve().parent
OLD = sorted(glob.glob(str(HERE / "fixtures" / "recordings" / "*.gdtrec"))
             + glob.glob(str(HERE / "fixtures" / "real" / "*.gdtrec")))
HEALTHY_STEPS_S = 50.0
RECORD_S = 16
REL = 1e-6

# a process that makes `rate` steps a second, as a job's trainer rewrites its progress
# file (tests/standin.py: its GPU's utilization is that rate against the healthy one)
PROGRESS = r'''
import os, sys, time
path, rate = sys.argv[1], float(sys.argv[2])
t0 = time.time()
while True:
    now = time.time()
    with open(path + ".tmp", "w") as f:
        f.write(f"{rate * (now - t0)} {now}")
    os.replace(path + ".tmp", path)
    time.sleep(0.05)
'''


@pytest.fixture(scope="module")
def two_jobs(tmp_path_factory):
    """(recording, pid of job A, pid of job B): A at its healthy rate on GPU 0, B at a
    tenth of it on GPU 1, GPU 2 idle; `record -i 1` for RECORD_S seconds."""
    tmp = tmp_path_factory.mktemp("two-jobs")
    progress = {k: str(tmp / f"{k}.progress") for k in "ab"}
    jobs = {k: subprocess.Popen([sys.executable, "-c", PROGRESS, progress[k], str(rate)])
            for k, rate in (("a", HEALTHY_STEPS_S), ("b", HEALTHY_STEPS_S / 10))}
    rec = str(tmp / "two.gdtrec")
    try:
        deadline = time.monotonic() + 10 * slack()
        while not all(os.path.exists(p) for p in progress.values()):
            assert time.monotonic() < deadline, "the jobs made no progress"
            time.sleep(0.05)
        time.sleep(1.2)           # a second of progress: the first reading has a rate
        done = standin.run(["record", "-o", rec, "-i", "1", "--duration", str(RECORD_S)],
                           timeout=RECORD_S + 60 * slack(), gpus=3,
                           processes={0: [jobs["a"].pid], 1: [jobs["b"].pid]},
                           progress={0: progress["a"], 1: progress["b"]},
                           healthy_steps_s=HEALTHY_STEPS_S)
        assert done.returncode == 0, done.stderr
    finally:
        for p in jobs.values():
            p.kill()
            p.wait()
    return rec, jobs["a"].pid, jobs["b"].pid


def _report(rec: str, *args: str) -> dict:
    done = gdt("report", rec, "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _by_id(data: dict) -> dict:
    return {j["id"]: j for j in data["jobs"]}


def _same_job(a: dict, b: dict) -> None:
    """Two reports' figures of one job agree (summaries and a replay)."""
    for key in ("id", "source", "name", "gpus", "first_s", "last_s", "ended", "intervals"):
        assert a[key] == b[key], (key, a[key], b[key])
    assert a["states"].keys() == b["states"].keys()
    for state, sec in a["states"].items():
        assert sec == pytest.approx(b["states"][state], rel=REL), state
    assert a["lost_gpu_s"] == pytest.approx(b["lost_gpu_s"], rel=REL, abs=1e-9)
    for cause in CAUSES:
        assert a["ledger"]["by_cause"][cause] == pytest.approx(
            b["ledger"]["by_cause"][cause], rel=REL, abs=1e-9), cause
    assert a["ledger"]["by_device"].keys() == b["ledger"]["by_device"].keys()
    assert [(e["id"], e["state"], e["start"], e["end"]) for e in a["episodes"]] == \
        [(e["id"], e["state"], e["start"], e["end"]) for e in b["episodes"]]
    for x, y in zip(a["episodes"], b["episodes"]):
        assert x["lost_gpu_s"] == pytest.approx(y["lost_gpu_s"], rel=REL, abs=1e-9)


# ---------------------------------------------------------------------------- a real node
def test_the_report_lists_each_job_with_its_own_figures(two_jobs):
    rec, pid_a, pid_b = two_jobs
    data = _report(rec)
    jobs = _by_id(data)
    a, b = jobs[f"pid:{pid_a}"], jobs[f"pid:{pid_b}"]
    assert set(jobs) == {a["id"], b["id"]}
    assert (a["gpus"], b["gpus"]) == ([0], [1])
    assert (a["pids"], b["pids"]) == ([pid_a], [pid_b])
    assert a["source"] == b["source"] == "process" and str(pid_b) in b["name"]
    for j in (a, b):
        assert data["start_s"] <= j["first_s"] < j["last_s"] <= data["end_s"]
        assert j["last_s"] == data["end_s"] and not j["ended"]     # both ran to the end
        assert sum(j["state_share_pct"].values()) == pytest.approx(100.0)
    starved = {k: sum(v for s, v in j["state_share_pct"].items() if s in STARVED_STATES)
               for k, j in (("a", a), ("b", b))}
    assert starved["b"] >= 50 and starved["a"] <= 50, (a["states"], b["states"])
    # episodes carry their job, each listed under it; B's lost what its GPU did not use
    assert data["episodes"] and all(e["job_id"] in jobs for e in data["episodes"])
    assert [e["id"] for e in b["episodes"]] == [e["id"] for e in data["episodes"]
                                                if e["job_id"] == b["id"]]
    assert all(e["job_name"] == b["name"] for e in data["episodes"] if e["job_id"] == b["id"])
    assert b["lost_gpu_s"] > 5 * a["lost_gpu_s"] and b["lost_gpu_s"] > 0
    assert sum(e["lost_gpu_s"] for e in b["episodes"]) <= b["lost_gpu_s"] + 1e-9
    # the node's ledger is its jobs' (cause by cause) and the idle GPU's, apart
    for cause in CAUSES:
        assert data["ledger"]["by_cause"][cause] == pytest.approx(
            a["ledger"]["by_cause"][cause] + b["ledger"]["by_cause"][cause], abs=1e-9)
    assert data["ledger"]["idle_gpu_s"] > 0
    assert a["ledger"]["idle_gpu_s"] == b["ledger"]["idle_gpu_s"] == 0
    # a GPU's time in each state is its job's
    for gpu, job in (("0", a), ("1", b)):
        for state, sec in job["states"].items():
            assert data["states"][gpu][state] == pytest.approx(sec, abs=1.0), (gpu, state)
    assert data["states"]["2"]["idle"] > 0


def test_summaries_and_a_replay_give_the_same_jobs(two_jobs):
    rec, _a, _b = two_jobs
    with Recording.open(rec) as r:
        start = r.start_s
        windows = [(None, None), (start + 4.5, None), (start + 3.0, start + 11.0)]
        for lo, hi in windows:
            fast = summary.build(r, lo, hi)
            slow = summary.build(r, lo, hi, recompute=True)
            assert fast.data["derived"].startswith("recorded summaries")
            assert slow.data["derived"] == summary.RECOMPUTED
            assert [j["id"] for j in fast.data["jobs"]] == [j["id"] for j in slow.data["jobs"]]
            for x, y in zip(fast.data["jobs"], slow.data["jobs"]):
                _same_job(x, y)
            assert fast.data["states"] == slow.data["states"]


def test_report_job_is_that_jobs_report(two_jobs):
    rec, pid_a, pid_b = two_jobs
    whole = _report(rec)
    b_id = f"pid:{pid_b}"
    # the shortest prefix of B's id that A's id does not start with
    prefix = next(b_id[:k] for k in range(5, len(b_id) + 1)
                  if not f"pid:{pid_a}".startswith(b_id[:k]))
    for spec in (b_id, _by_id(whole)[b_id]["name"], prefix):
        one = _report(rec, "--job", spec)
        assert one["job"]["id"] == b_id and [j["id"] for j in one["jobs"]] == [b_id]
        assert one["episodes"] == [e for e in whole["episodes"] if e["job_id"] == b_id]
        assert list(one["states"]) == ["1"] and [g["index"] for g in one["gpus"]] == [1]
        assert one["ledger"]["lost_gpu_s"] == pytest.approx(_by_id(whole)[b_id]["lost_gpu_s"])
        assert one["ledger"]["idle_gpu_s"] == 0
    text = gdt("report", rec, "--job", b_id).stdout
    assert f"job {b_id} only" in text and f"mean of job {b_id}'s GPUs" in text
    assert f"pid:{pid_a}" not in text


def test_an_unknown_job_is_a_one_line_error_naming_the_recordings_jobs(two_jobs):
    rec, pid_a, pid_b = two_jobs
    line = one_line_error(gdt("report", rec, "--job", "slurm:1"), 2, "--job 'slurm:1'")
    assert f"pid:{pid_a}" in line and f"pid:{pid_b}" in line
    line = one_line_error(gdt("report", rec, "--job", "x\x1b[2J\ny"), 2)
    assert "\x1b" not in line and "\\x1b" in line
    one_line_error(gdt("report", rec, "--job", "pid:"), 2, "names 2 jobs")


def test_the_text_report_has_a_block_per_job(two_jobs):
    rec, pid_a, pid_b = two_jobs
    text = gdt("report", rec, "--no-charts").stdout
    assert "Jobs (2; report --job ID for one):" in text
    for pid in (pid_a, pid_b):
        assert f"  pid:{pid}  pid {pid} " in text
    assert f"job: pid:{pid_b} pid {pid_b}" in text      # under its episodes


def test_export_rows_and_traces_carry_the_jobs(two_jobs, tmp_path):
    rec, pid_a, pid_b = two_jobs
    out = tmp_path / "rows.jsonl"
    with Recording.open(rec) as r, open(out, "w") as f:
        write_jsonl(f, r)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows
    for row in rows:
        ids = [j["id"] for j in row["jobs"]]
        assert ids == [f"pid:{pid_a}", f"pid:{pid_b}"]
        states = {j["id"]: j["verdict"]["state"] for j in row["jobs"]}
        assert row["verdict"]["job_id"] in ids
        assert row["verdict"]["state"] == states[row["verdict"]["job_id"]]
        assert [j["gpus"] for j in row["jobs"]] == [[0], [1]]
    trace = tmp_path / "trace.json"
    with Recording.open(rec) as r, open(trace, "w") as f:
        write_perfetto(f, r)
    events = json.loads(trace.read_text())["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    assert slices and all(e["args"]["job_id"] == f"pid:{pid_b}" for e in slices)
    tracks = {e["tid"]: e["args"]["name"] for e in events
              if e["ph"] == "M" and e["name"] == "thread_name"}
    assert tracks[slices[0]["tid"]] == f"job {slices[0]['args']['job_name']} [pid:{pid_b}]"
    assert slices[0]["tid"] != 1          # not the node's track


def test_the_replay_feed_gives_what_the_live_feed_gives(two_jobs):
    """The replay screen's Update: the node's verdict with every job's, as the live
    Feed's (the same Stepper), and the jobs' episodes with their job."""
    rec, pid_a, pid_b = two_jobs
    with Recording.open(rec) as r:
        replayed = [(m.wall_s, v) for m, v in Replay(r, warmup_s=None).models()]
        feed = ReplayFeed(r)
        update = feed.seek(0)
        updates = [update]
        while (update := feed.step()) is not None:
            updates.append(update)
    assert len(updates) == len(replayed)
    for u, (wall, v) in zip(updates, replayed):
        assert u.model.wall_s == wall
        assert [(j.job.id, j.state) for j in u.verdict.jobs] == \
            [(j.job.id, j.state) for j in v.jobs]
        assert u.verdict.job.id == v.job.id
    assert {e.job_id for e in updates[-1].episodes} <= {f"pid:{pid_a}", f"pid:{pid_b}"}


# ---------------------------------------------------------------------------- many blocks
EVIL = "train\x1b[2J\nname " + "x" * 200


def _tagged(samples, ended_at: int):
    """The demo's GPU processes as two Slurm jobs: GPUs 0-3 job 1001, GPUs 4-7 job 1002
    (a name with an escape, a newline and 200 more characters), which ends at sample
    `ended_at` (its GPUs have no process after)."""
    for k, s in enumerate(samples):
        gpus = s.gpu.gpus or []
        for g in gpus:
            if g.index >= 4 and k >= ended_at:
                s.gpu.gpus[g.index] = replace(g, processes=[])
                continue
            job = ("slurm:1001", "slurm", "slurm 1001 (train.py)") if g.index < 4 else \
                ("slurm:1002", "slurm", EVIL)
            for p in g.processes or ():
                raw = s.procs.get(p.pid)
                if raw is not None:
                    s.procs[p.pid] = replace(raw, job=job)
        yield s


@pytest.fixture(scope="module")
def long_two_jobs(tmp_path_factory):
    path = tmp_path_factory.mktemp("long") / "long.gdtrec"
    sim = Simulator(builtin("demo"), seed=5)
    samples = [sim.sample() for _ in range(1500)]
    with Recorder(str(path), make_header(origin(), 1.0), sync_interval_s=None) as rec:
        for s in _tagged(samples, ended_at=1000):
            rec.append(s)
    return str(path)


@pytest.mark.parametrize("window", [(None, None), (95.5, None), (130.0, 1100.0)])
def test_many_blocks_both_ways_the_same_jobs(long_two_jobs, window):
    with Recording.open(long_two_jobs) as r:
        lo = None if window[0] is None else r.start_s + window[0]
        hi = None if window[1] is None else r.start_s + window[1]
        fast = summary.build(r, lo, hi)
        slow = summary.build(r, lo, hi, recompute=True)
    assert fast.data["derived"].startswith("recorded summaries")
    ids = [j["id"] for j in fast.data["jobs"]]
    assert ids == ["slurm:1001", "slurm:1002"] == [j["id"] for j in slow.data["jobs"]]
    for x, y in zip(fast.data["jobs"], slow.data["jobs"]):
        _same_job(x, y)
    f, s = fast.data["ledger"], slow.data["ledger"]
    for cause in CAUSES:
        assert f["by_cause"][cause] == pytest.approx(s["by_cause"][cause], rel=REL, abs=1e-9)
        assert f["by_cause"][cause] == pytest.approx(
            sum(j["ledger"]["by_cause"][cause] for j in fast.data["jobs"]), rel=REL, abs=1e-9)
    assert fast.data["states"].keys() == slow.data["states"].keys()
    for g, per in fast.data["states"].items():
        assert per == pytest.approx(slow.data["states"][g], abs=1e-3), g
    ended = fast.data["jobs"][1]
    if window[1] is None:
        assert ended["ended"] and ended["last_s"] < fast.data["end_s"]
    assert ended["name"] == EVIL[:119] + "…"          # bounded, never escaped in JSON
    text = render(fast, charts=True)
    assert "\x1b" not in text and "\\x1b[2J\\x0aname" in text


def test_old_recordings_report_one_unknown_job_whose_figures_are_the_nodes():
    assert OLD
    for path in OLD:
        with Recording.open(path) as r:
            data = summary.build(r).data
        jobs = data["jobs"]
        if not jobs:        # no GPU process recorded
            assert not data["episodes"], path
            continue
        assert [j["id"] for j in jobs] == ["unknown"], path
        job, node = jobs[0], data["ledger"]
        assert job["source"] == "unknown"
        assert job["lost_gpu_s"] == pytest.approx(node["lost_gpu_s"], rel=REL, abs=1e-9), path
        for cause in CAUSES:
            assert job["ledger"]["by_cause"][cause] == pytest.approx(
                node["by_cause"][cause], rel=REL, abs=1e-9), (path, cause)
        assert [e["id"] for e in job["episodes"]] == [e["id"] for e in data["episodes"]], path
        assert all(e["job_id"] == "unknown" for e in data["episodes"]), path
        assert [e["lost_gpu_s"] for e in job["episodes"]] == \
            pytest.approx([e["lost_gpu_s"] for e in data["episodes"]]), path


def test_a_sweep_of_short_jobs_is_bounded_and_replayed(tmp_path):
    """A new job on every GPU each second (a sweep of short runs): a summary block keeps no
    rows past MAX_BLOCK_JOBS, says how many it saw, and the report replays the window;
    every job is listed once, the text words MAX of them and counts the rest."""
    from gpudisk_top.record.v2.summary import MAX_BLOCK_JOBS
    from gpudisk_top.report.jobs import TEXT_JOBS

    sim = Simulator(builtin("healthy-cached"), seed=1)
    samples = [sim.sample() for _ in range(90)]
    for k, s in enumerate(samples):
        for g in s.gpu.gpus or []:
            for p in g.processes or ():
                raw = s.procs.get(p.pid)
                if raw is not None:
                    s.procs[p.pid] = replace(raw, job=(f"pid:{k}-{g.index}", "process", "run"))
    path = str(tmp_path / "sweep.gdtrec")
    with Recorder(path, make_header(origin(), 1.0), sync_interval_s=None) as rec:
        for s in samples:
            rec.append(s)
    with Recording.open(path) as r:
        blocks = [b for _g, b, _s in r.summaries()]
        assert blocks[0].jobs is None and blocks[0].jobs_over > MAX_BLOCK_JOBS
        result = summary.build(r)
    gpus = len(samples[0].gpu.gpus)
    assert result.data["derived"] == summary.RECOMPUTED
    assert len(result.data["jobs"]) == len({j["id"] for j in result.data["jobs"]}) == 90 * gpus
    text = render(result, charts=False)
    assert f"... and {90 * gpus - TEXT_JOBS} more jobs" in text


@pytest.mark.parametrize("bad", [{"id": "pid:1\nverdict: healthy"}, {"source": "nope"},
                                 {"name": 7}, {"gpus": [-1]}, {"pids": ["1"]},
                                 {"codes": [[[0, 2]], [[0, 2]], [[0, 2]], [[0, 2]]]},
                                 {"cgroup": "x" * 5000}])
def test_a_summary_blocks_job_rows_are_read_as_untrusted(bad):
    """A recording's job rows that no recorder writes make the block unreadable (the
    report replays its samples), never a job with a forged id or a crash."""
    from gpudisk_top.record.v2.summary import JobRows, SummaryBlock, decode_blocks, encode_blocks
    from gpudisk_top.record.v2.summary import Stretch

    row = JobRows("pid:1", "process", "run", None, [0], [1], [1, 1, 1], [1, 1, 1], [0, 0, 0],
                  [1, 1, 1], [None, None, None])
    block = SummaryBlock(0, 3, [1] * 3, [1] * 3, [0] * 3, [1] * 3, Stretch(), [], [],
                         [None] * 3, [row])
    good = decode_blocks(encode_blocks([block]))[0]
    assert good.jobs[0] == row
    d = block.to_json()
    d["jobs"][0].update(bad)
    with pytest.raises(ValueError):
        SummaryBlock.from_json(d)
