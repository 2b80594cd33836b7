"""Each job of a shared node as Prometheus series (issue 37, exporter/jobseries.py).

The first tests feed the exporter what the step hands it (the node's verdict carrying each
job's, the loss with each job's part) and read the exposition back through
prometheus_client's own parser: bounds (1,000 short-lived jobs), retention, counters that
only grow, a hostile name.  The last ones run the real `serve` on a real port with real
processes as the GPU processes of two jobs (tests/standin.py), scraped over HTTP: a job
that ends loses its state at once and every series after the retention; a name made of
quotes, backslashes, a newline, braces and 10 KB leaves the exposition whole; a restarted
`serve` never counts a job's lost time twice."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import replace

import pytest
from prometheus_client.parser import text_string_to_metric_families

import standin
from model_factory import gpu, model, verdict
from slack import slack
from gpudisk_top.collect.jobid import bounded_name
from gpudisk_top.exporter.jobseries import MAX_JOBS, NAME_MAX_CHARS, JobBook, name_label
from gpudisk_top.exporter.server import MetricsServer
from gpudisk_top.model.jobs import JobInfo
from gpudisk_top.textsafe import printable
from gpudisk_top.verdict.detect import STATES
from gpudisk_top.verdict.jobs import node_verdict, severity
from gpudisk_top.verdict.ledger import CAUSE_OF_STATE, CAUSES, IntervalLoss

JOB_LABELS = {"job_id", "job_name", "job_source"}
JOB_FAMILIES = {"gpudisk_top_job_info", "gpudisk_top_job_state", "gpudisk_top_job_gpus_starved",
                "gpudisk_top_job_gpu_lost_seconds", "gpudisk_top_job_episodes",
                "gpudisk_top_job_ended_timestamp_seconds"}
LOADER_JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jobs", "loader_job.py")


# ---------------------------------------------------------------------------- fed directly
def interval(i: int, jobs: list[tuple[str, str, tuple[int, ...], str]], episodes=()):
    """(model, node verdict, loss) of the i-th interval of a node whose jobs are
    (id, name, gpus, state): each job's verdict and its loss part (every GPU of a starved
    job loses the whole interval; a healthy one loses nothing)."""
    gpus = sorted(g for _, _, gs, _ in jobs for g in gs)
    m = model(i, gpus=[gpu(g, 10.0, pids=[1000 + g]) for g in gpus])
    infos = [JobInfo(jid, "process", name, gs, tuple(1000 + g for g in gs))
             for jid, name, gs, _ in jobs]
    m.jobs = infos
    verdicts, parts = [], []
    for info, (_, _, gs, state) in zip(infos, jobs):
        verdicts.append(replace(verdict(state, wall_s=m.wall_s), job=info, gpus=list(gs)))
        cause = CAUSE_OF_STATE.get(state)
        lost = len(gs) * 1.0 if cause not in (None, "healthy") else 0.0
        parts.append(IntervalLoss(m.wall_s, 1.0, state, cause=cause, job_gpus=len(gs),
                                  unused_gpu_s=lost, lost_gpu_s=lost, job_id=info.id))
    v = node_verdict(verdicts) if verdicts else verdict("idle", wall_s=m.wall_s)
    loss = IntervalLoss(m.wall_s, 1.0, v.state, parts=tuple(parts))
    return m, v, list(episodes), loss


def scrape_text(text: str) -> dict:
    """{(sample name, frozenset(labels)): value}, through prometheus_client's parser
    (which raises on an exposition it cannot read)."""
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def job_samples(samples: dict, name: str, job_id: str) -> dict:
    return {ls: v for (n, ls), v in samples.items()
            if n == name and ("job_id", job_id) in ls}


def lost_of(samples: dict, job_id: str) -> float:
    """A job's GPU time lost, every cause (healthy too: the unused time) summed."""
    return sum(job_samples(samples, "gpudisk_top_job_gpu_lost_seconds_total", job_id).values())


def feed(server: MetricsServer, i: int, jobs, episodes=()) -> None:
    m, v, eps, loss = interval(i, jobs, episodes)
    server.update(m, v, eps, loss=loss)


class Ep:
    def __init__(self, state, job_id):
        self.state, self.job_id = state, job_id


def test_each_job_has_its_series_and_the_node_keeps_its_own():
    server = MetricsServer(None)
    jobs = [("slurm:1001", "slurm 1001 (train.py)", (0, 1, 2, 3), "disk-starved"),
            ("pid:4121", "pid 4121 (eval.py)", (4,), "healthy")]
    for i in range(1, 4):
        feed(server, i, jobs, [Ep("disk-starved", "slurm:1001")])
    s = scrape_text(server.render_text())
    info = job_samples(s, "gpudisk_top_job_info", "slurm:1001")
    assert list(info) == [frozenset({("job_id", "slurm:1001"), ("gpus", "0-3"),
                                     ("job_name", "slurm 1001 (train.py)"),
                                     ("job_source", "process")})]
    state = {dict(ls)["state"]: v for ls, v in
             job_samples(s, "gpudisk_top_job_state", "slurm:1001").items()}
    assert state == {st: (1.0 if st == "disk-starved" else 0.0) for st in STATES}
    assert list(job_samples(s, "gpudisk_top_job_gpus_starved", "slurm:1001").values()) == [4]
    assert list(job_samples(s, "gpudisk_top_job_gpus_starved", "pid:4121").values()) == [0]
    lost = {dict(ls)["cause"]: v for ls, v in
            job_samples(s, "gpudisk_top_job_gpu_lost_seconds_total", "slurm:1001").items()}
    assert set(lost) == set(CAUSES) and lost["disk-starved"] == 12.0
    assert lost_of(s, "pid:4121") == 0.0
    eps = {dict(ls)["state"]: v for ls, v in
           job_samples(s, "gpudisk_top_job_episodes_total", "slurm:1001").items()}
    assert eps["disk-starved"] == 1 and sum(eps.values()) == 1
    # the node's families as before: its state the worst job's, its ledger the jobs' sum
    assert s[("gpudisk_top_state", frozenset({("state", "disk-starved")}))] == 1
    assert s[("gpudisk_top_gpus_starved", frozenset())] == 4
    for cause in CAUSES:
        node = s[("gpudisk_top_gpu_seconds_total", frozenset({("cause", cause)}))]
        jobs_sum = sum(v for (n, ls), v in s.items()
                       if n == "gpudisk_top_job_gpu_lost_seconds_total" and ("cause", cause) in ls)
        assert jobs_sum == pytest.approx(node)
    # Prometheus's own labels are never set
    for (n, ls), _ in s.items():
        if n.startswith("gpudisk_top_job_"):
            assert JOB_LABELS <= {k for k, _ in ls} and not {"job", "instance"} & dict(ls).keys()


def test_an_ended_job_loses_its_state_at_once_and_every_series_after_the_retention():
    book = JobBook(retention_s=5.0)
    a = ("pid:1", "a", (0,), "cpu-starved")
    b = ("pid:2", "b", (1,), "healthy")
    for i in range(1, 4):
        book.update(*interval(i, [a, b]))
    before = {j.id: j for j in book.series()[0]}
    for i in range(4, 9):            # a ended: 1 s intervals, 5 s of retention
        book.update(*interval(i, [b]))
        jobs = {j.id: j for j in book.series()[0]}
        assert jobs["pid:1"].state is None and jobs["pid:1"].gpus_starved == 0
        assert jobs["pid:1"].ended_wall_s == model(3).wall_s
        assert jobs["pid:1"].lost_by_cause == before["pid:1"].lost_by_cause   # kept, not reset
    book.update(*interval(9, [b]))
    assert [j.id for j in book.series()[0]] == ["pid:2"]
    # a job seen again within the retention goes on counting where it was
    book = JobBook(retention_s=5.0)
    for i in range(1, 4):
        book.update(*interval(i, [a, b]))
    book.update(*interval(4, [b]))
    book.update(*interval(5, [a, b]))
    jobs = {j.id: j for j in book.series()[0]}
    assert jobs["pid:1"].state == "cpu-starved" and dict(jobs["pid:1"].lost_by_cause)["cpu-starved"] == 4.0


def test_a_thousand_short_lived_jobs_stay_bounded():
    book = JobBook(retention_s=300.0)
    for i in range(1, 1001):          # one single-GPU run a second, each its own job
        book.update(*interval(i, [(f"pid:{10_000 + i}", f"run {i}", (0,), "healthy"),
                                  ("slurm:7", "the long one", (1,), "disk-starved")]))
    jobs, left_out = book.series()
    assert len(jobs) == MAX_JOBS
    assert jobs[0].id == "slurm:7"                  # the worst state first, never left out
    assert [j.id for j in jobs[1:3]] == ["pid:11000", "pid:10999"]   # then the latest
    assert len(book._tracks) <= book.max_kept + 2 and left_out == len(book._tracks) - MAX_JOBS
    server = MetricsServer(None)
    server._jobs = book
    feed(server, 1001, [("slurm:7", "the long one", (1,), "disk-starved")])
    s = scrape_text(server.render_text())
    assert len({dict(ls)["job_id"] for (n, ls), _ in s.items()
                if n == "gpudisk_top_job_info"}) == MAX_JOBS
    assert s[("gpudisk_top_jobs_left_out", frozenset())] > 0


def test_counters_only_grow_when_the_steppers_episode_list_forgets():
    book = JobBook()
    job = [("pid:1", "a", (0,), "disk-starved")]
    book.update(*interval(1, job, [Ep("disk-starved", "pid:1"), Ep("disk-starved", "pid:1")]))
    book.update(*interval(2, job, [Ep("disk-starved", "pid:1")]))    # an old one dropped
    assert dict(book.series()[0][0].episodes)["disk-starved"] == 2


HOSTILE = ('x"} 1\n# TYPE gpudisk_top_state counter\ngpudisk_top_evil{a="1"} 9\n\\'
           + "\x1b]0;owned\x07" + "{}" * 5000)     # 10 KB of braces after it


def test_a_hostile_job_name_breaks_neither_the_exposition_nor_another_job():
    server = MetricsServer(None)
    jobs = [("k8s:0f0e", HOSTILE, (0,), "disk-starved"), ("pid:7", "pid 7 (train.py)", (1,),
                                                          "healthy")]
    feed(server, 1, jobs)
    text = server.render_text()
    families = {f.name for f in text_string_to_metric_families(text)}
    assert "gpudisk_top_evil" not in families and "\x1b" not in text
    s = scrape_text(text)
    (labels,) = job_samples(s, "gpudisk_top_job_info", "k8s:0f0e")
    name = dict(labels)["job_name"]
    assert name == name_label(HOSTILE) and len(name) == NAME_MAX_CHARS
    assert name.startswith(printable(HOSTILE)[:40]) and "\n" not in name
    assert [dict(ls)["job_name"] for ls in job_samples(s, "gpudisk_top_job_info", "pid:7")] == \
        ["pid 7 (train.py)"]
    assert s[("gpudisk_top_state", frozenset({("state", "disk-starved")}))] == 1
    assert len([1 for (n, ls), _ in s.items() if n == "gpudisk_top_job_state"]) == 2 * len(STATES)


# ---------------------------------------------------------------------------- real serve
def start_serve(tmp_path, gpus: int, processes, *args, progress=None):
    """`serve` on a free port with stand-in GPUs; (process, metrics URL)."""
    proc = standin.popen(["serve", "--listen", "127.0.0.1:0", *args], gpus=gpus,
                         processes=processes, progress=progress, healthy_steps_s=50.0,
                         exited_leave=True)
    line = proc.stderr.readline()
    assert "serving http://" in line, line + proc.stderr.read() if proc.poll() is not None else line
    return proc, line.split("serving ", 1)[1].split()[0]


def stop(proc) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30 * slack())
    assert proc.returncode == 0, err
    return err


def scrape_url(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10 * slack()) as r:
        return scrape_text(r.read().decode("utf-8"))


def wait_scrape(url: str, until, timeout_s: float) -> dict:
    """Scrape every 0.1 s until until(samples) holds; the samples.  AssertionError past
    timeout_s (times slack())."""
    deadline = time.monotonic() + timeout_s * slack()
    while True:
        s = scrape_url(url)
        if until(s):
            return s
        assert time.monotonic() < deadline, "never held; last scrape:\n" + "\n".join(
            f"{n} {dict(ls)} {v}" for (n, ls), v in s.items() if "job" in n)
        time.sleep(0.1)


def job_ids(s: dict, family: str = "gpudisk_top_job_info") -> set[str]:
    return {dict(ls)["job_id"] for (n, ls), _ in s.items() if n == family}


def sleeper(env=None, argv=None) -> subprocess.Popen:
    return subprocess.Popen(argv or ["sleep", "600"], env=dict(os.environ, **(env or {})),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def end(proc) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_serve_two_real_jobs_one_ends_its_series_go_after_the_retention(tmp_path):
    """Two real jobs: a loader_job making real progress under a script whose name holds
    quotes, braces and a backslash (GPU 0), and a stalled process whose torch elastic run id
    holds a newline, quotes and 10 KB (GPUs 1-2).  Scraped over HTTP: both jobs, their
    names as escaped labels, the node's state the worst of theirs, the node's ledger their
    sum; the stalled one ends: its state goes at once, everything after 3 s."""
    weird = tmp_path / 'we"ird}{x=\\1.py'
    shutil.copy(LOADER_JOB, weird)
    data = tmp_path / "data"
    data.write_bytes(b"\0" * 2**20)
    progress = tmp_path / "a.progress"
    a = sleeper(argv=[sys.executable, str(weird), "healthy", "--workers", "1", "--seconds", "600",
                      "--data", str(data), "--progress", str(progress)])
    run_id = 'r"}\n# TYPE x counter\nx{a="1"} 9\n\\' + "z" * 10_000
    b = sleeper(env={"TORCHELASTIC_RUN_ID": run_id})
    retention_s = 3.0
    proc = None
    try:
        proc, url = start_serve(tmp_path, 3, {0: [a.pid], 1: [b.pid], 2: [b.pid]},
                                "-i", "0.25", "--job-retention", str(retention_s),
                                progress={0: str(progress)})
        a_id, b_id = f"pid:{a.pid}", None
        s = wait_scrape(url, lambda s: len(job_ids(s, "gpudisk_top_job_state")) == 2
                        and lost_of(s, a_id) > 0, 30)
        (b_id,) = job_ids(s) - {a_id}
        assert b_id.startswith("torchelastic:r_") and len(b_id) < 100
        names = {dict(ls)["job_id"]: dict(ls) for (n, ls), _ in s.items()
                 if n == "gpudisk_top_job_info"}
        assert names[a_id]["job_name"] == f"pid {a.pid} ({weird.name})"
        assert names[a_id]["job_source"] == "process" and names[a_id]["gpus"] == "0"
        assert names[b_id]["job_name"] == name_label(bounded_name(f"torchrun {run_id} (sleep)"))
        assert names[b_id]["job_name"].startswith('torchrun r"}\\x0a# TYPE x counter')
        assert "\n" not in names[b_id]["job_name"] and names[b_id]["gpus"] == "1-2"
        assert names[b_id]["job_source"] == "torchelastic"
        assert "x" not in {f.name for f in text_string_to_metric_families(
            urllib.request.urlopen(url).read().decode())}
        # one state each, the node's the worst of them
        states = {}
        for (n, ls), v in s.items():
            if n == "gpudisk_top_job_state" and v == 1:
                states.setdefault(dict(ls)["job_id"], []).append(dict(ls)["state"])
        assert sorted(states) == sorted([a_id, b_id]) and all(len(x) == 1 for x in states.values())
        (node_state,) = [dict(ls)["state"] for (n, ls), v in s.items()
                         if n == "gpudisk_top_state" and v == 1]
        assert severity(node_state) == max(severity(x[0]) for x in states.values())
        for cause in CAUSES:
            node = s[("gpudisk_top_gpu_seconds_total", frozenset({("cause", cause)}))]
            assert sum(v for (n, ls), v in s.items() if n == "gpudisk_top_job_gpu_lost_seconds_total"
                       and ("cause", cause) in ls) == pytest.approx(node, abs=1e-9)

        # b ends: its state at once, its info and counters for the retention, then nothing
        b_lost = lost_of(s, b_id)
        end(b)
        ended_at = time.monotonic()
        s = wait_scrape(url, lambda s: b_id not in job_ids(s, "gpudisk_top_job_state"), 10)
        assert b_id in job_ids(s) and lost_of(s, b_id) >= b_lost
        assert b_id in job_ids(s, "gpudisk_top_job_ended_timestamp_seconds")
        s = wait_scrape(url, lambda s: b_id not in job_ids(s), retention_s + 15)
        gone_s = time.monotonic() - ended_at
        assert gone_s >= retention_s - 0.5           # kept the retention (on the samples' clock)
        assert a_id in job_ids(s, "gpudisk_top_job_state")     # the other goes on
        assert not [k for k in s if b_id in dict(k[1]).values()]
        err = stop(proc)
        proc = None
        assert "Traceback" not in err
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.communicate()
        end(a)
        end(b)


def test_a_restarted_serve_never_counts_a_jobs_lost_time_twice(tmp_path):
    """A stalled job on 2 GPUs (its GPUs at 0 %: every second of every GPU unused).  The
    first `serve` counts it; a second one, started after, counts from 0: its count never
    exceeds 2 GPUs x the time since it started (which the first one's count, carried over,
    would)."""
    b = sleeper()
    job = f"pid:{b.pid}"
    proc = None
    try:
        t0 = time.monotonic()
        proc, url = start_serve(tmp_path, 2, {0: [b.pid], 1: [b.pid]}, "-i", "0.25")
        wait_scrape(url, lambda s: lost_of(s, job) > 0, 30)
        startup_s = time.monotonic() - t0
        # long enough that a count carried over could not hide under the bound below
        s = wait_scrape(url, lambda s: lost_of(s, job) > 2 * (3 * startup_s + 2), 60)
        first = lost_of(s, job)
        stop(proc)
        proc = None

        t1 = time.monotonic()
        proc, url = start_serve(tmp_path, 2, {0: [b.pid], 1: [b.pid]}, "-i", "0.25")
        s = wait_scrape(url, lambda s: lost_of(s, job) > 0, 30)
        bound = 2 * (time.monotonic() - t1)
        second = lost_of(s, job)
        assert 0 < second <= bound, (second, bound, first)
        assert first + second > bound           # a count carried over would have shown
        s = wait_scrape(url, lambda s: lost_of(s, job) > second, 10)
        assert lost_of(s, job) <= 2 * (time.monotonic() - t1)
        stop(proc)
        proc = None
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.communicate()
        end(b)


def test_record_listen_exports_the_jobs_too(tmp_path):
    """`record --listen` feeds the same exporter (exporter/hooks.py) from its own step."""
    a = sleeper()
    proc = None
    try:
        proc = standin.popen(["record", "-o", str(tmp_path / "rec.gdtrec"), "-i", "0.25",
                              "--listen", "127.0.0.1:0"], gpus=1, processes={0: [a.pid]},
                             exited_leave=True)
        url = None
        deadline = time.monotonic() + 30 * slack()
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            assert line, proc.stderr.read()
            if "serving http://" in line:
                url = line.split("serving ", 1)[1].split()[0]
        s = wait_scrape(url, lambda s: f"pid:{a.pid}" in job_ids(s, "gpudisk_top_job_state"), 30)
        assert lost_of(s, f"pid:{a.pid}") >= 0
        stop(proc)
        proc = None
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.communicate()
        end(a)


def test_a_real_prometheus_scrapes_each_job_and_keeps_its_own_labels(tmp_path):
    """Prometheus's own parser (stricter than prometheus_client's) takes the exposition
    with a hostile job name whole: the target stays up, every job's series arrive with
    their job_id, job_name and job_source, and Prometheus's `job` and `instance` are its
    own (no exported_job: nothing of ours collides with them)."""
    from fleet_harness import PROMETHEUS, free_ports, wait_until

    if PROMETHEUS is None:
        pytest.skip("Debian's prometheus is not installed")
    run_id = 'r"}\n# TYPE x counter\nx{a="1"} 9\n\\' + "\x1b[2J" + "z" * 10_000
    a, b = sleeper(env={"TORCHELASTIC_RUN_ID": run_id}), sleeper()
    proc = prom = None
    try:
        proc, url = start_serve(tmp_path, 2, {0: [a.pid], 1: [b.pid]}, "-i", "0.5")
        target = url.split("//", 1)[1].split("/", 1)[0]
        port = free_ports(1)
        conf = tmp_path / "prometheus.yml"
        conf.write_text("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                        "scrape_configs:\n  - job_name: gpudisk-top\n    static_configs:\n"
                        f"      - targets: ['{target}']\n")
        base = f"http://127.0.0.1:{port}"
        prom = subprocess.Popen([PROMETHEUS, f"--config.file={conf}",
                                 f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                 f"--web.listen-address=127.0.0.1:{port}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                cwd=tmp_path)

        def query(q: str) -> list:
            import json
            import urllib.parse
            with urllib.request.urlopen(f"{base}/api/v1/query?query={urllib.parse.quote(q)}",
                                        timeout=5) as r:
                return json.load(r)["data"]["result"]

        def both():
            try:
                found = query("gpudisk_top_job_state == 1")
            except OSError:
                return None
            return found if len(found) == 2 else None

        found = wait_until(both, 60 * slack(), "Prometheus to scrape both jobs")
        labels = {r["metric"]["job_id"]: r["metric"] for r in found}
        assert set(labels) == {f"pid:{b.pid}", next(k for k in labels if k.startswith("torch"))}
        hostile = next(v for k, v in labels.items() if k.startswith("torchelastic:"))
        assert hostile["job_name"] == name_label(bounded_name(f"torchrun {run_id} (sleep)"))
        assert hostile["job"] == "gpudisk-top" and hostile["instance"] == target
        assert not any(k.startswith("exported_") for r in found for k in r["metric"])
        assert [r["value"][1] for r in query('up{job="gpudisk-top"}')] == ["1"]
        assert query("x") == []                     # nothing injected
    finally:
        for p in (prom, proc):
            if p is not None and p.poll() is None:
                p.terminate()
                p.communicate(timeout=30)
        end(a)
        end(b)
