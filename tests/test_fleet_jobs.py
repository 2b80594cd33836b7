"""The fleet finds a training job by its own identity (issue 37): the job series of the
nodes' exporters (gpudisk_top_job_*: job_id, job_name, job_source), a row a node and job,
a job of several nodes by its id (Slurm, torch elastic), a pod's or a process tree's id
one node's, the hand-written job label a fallback for older exporters; the job view shows
every node of one job and its straggler.  Untrusted: a job's name is bounded and escaped,
a bad series of one node never breaks another's rows.

The model's tests read Prometheus's answer shape made by tests/fleet_series.py; the
end-to-end tests run a real Prometheus and VictoriaMetrics (tests/fleet_harness.py)
scraping exporters that write the job series as `serve` exposes them, their targets
without any job label."""

from __future__ import annotations

import json
import time

import pytest

from slack import slack

from fleet_harness import backend_params, wait_until
from fleet_series import P, job_exposition, node_exposition, vector_answer
from gpudisk_top.fleet import queries, text
from gpudisk_top.fleet.nodejobs import MAX_JOBS, gpu_list
from gpudisk_top.fleet.promapi import PromClient, parse_answer
from gpudisk_top.fleet.table import build_view
from gpudisk_top.fleet.labels import BY_ID, BY_NODE
from fleet_series import job_table_series, lost_series, node_series

NOW = 1_700_000_000.0


def view_of(*series, ledger=None, job_label: str = "training_job", **kw):
    table = parse_answer(vector_answer([s for part in series for s in part], NOW), "test")
    lost = None if ledger is None else parse_answer(vector_answer(ledger, NOW), "test")
    return build_view(table, None, NOW, job_label=job_label, ledger=lost, **kw)


def rows_by(view) -> dict[tuple[str, str], object]:
    return {(r.node, r.job_id): r for r in view.rows}


def two_jobs_on_one_node_one_on_two():
    """n1: slurm 1001 on GPUs 0-3 disk-starved on sda (the node's verdict), slurm 2002 on
    4-7 healthy; n2: slurm 1001 on GPUs 0-7 waiting on its peer (the local straggler
    state); no target has the job label."""
    util1 = {g: 0.05 if g < 4 else 0.95 for g in range(8)}
    return (node_series("n1", NOW, state="disk-starved", training_job=None,
                        verdict_gpus=[0, 1, 2, 3], devices="sda", util=util1),
            job_table_series("n1", "slurm:1001", name="slurm 1001 (train.py)", gpus="0-3",
                             state="disk-starved", starved=4),
            job_table_series("n1", "slurm:2002", name="slurm 2002 (eval.py)", gpus="4-7"),
            node_series("n2", NOW, state="straggler", training_job=None,
                        util={g: 0.2 for g in range(8)}),
            job_table_series("n2", "slurm:1001", name="slurm 1001 (train.py)",
                             state="straggler"))


def test_a_row_a_node_and_job_each_with_its_own_state_gpus_and_utilization():
    view = view_of(*two_jobs_on_one_node_one_on_two())
    rows = rows_by(view)
    assert set(rows) == {("n1", "slurm:1001"), ("n1", "slurm:2002"), ("n2", "slurm:1001")}
    a, b = rows["n1", "slurm:1001"], rows["n1", "slurm:2002"]
    assert (a.state, a.gpus_total, a.gpus_starved, a.devices) == ("disk-starved", 4, 4, ["sda"])
    assert a.gpu_util_pct == pytest.approx(5.0) and sorted(a.gpu_util_by_gpu) == [0, 1, 2, 3]
    # the node's verdict is slurm 1001's: the other job has none of its devices or since
    assert (b.state, b.gpus_total, b.gpus_starved, b.devices, b.since_s) == (
        "healthy", 4, 0, [], None)
    assert b.gpu_util_pct == pytest.approx(95.0) and a.since_s == NOW - 600
    assert (a.job_name, a.job_source) == ("slurm 1001 (train.py)", "slurm")
    # the starved job first, then by node
    assert [(r.node, r.job_id) for r in view.rows][0] == ("n1", "slurm:1001")


def test_one_job_on_two_nodes_by_its_id_and_its_straggler():
    view = view_of(*two_jobs_on_one_node_one_on_two())
    job = view.job("slurm:1001")
    assert job is not None and job.by == BY_ID and job.id == "slurm:1001"
    assert [r.node for r in job.nodes] == ["n1", "n2"]
    assert job.straggler.node == "n1" and [r.node for r in job.waiting] == ["n2"]
    assert job.reason.startswith("n1 holds job slurm 1001 (train.py) back: disk-starved on sda")
    # found by its name too; the other job is one node's
    assert view.job("slurm 1001 (train.py)") is job
    other = view.job("slurm:2002")
    assert [r.node for r in other.nodes] == ["n1"] and other.straggler is None
    doc = json.loads(text.render_json(view))
    assert {j["job"]: (j["by"], j["nodes"], j["straggler"]) for j in doc["jobs"]} == {
        "slurm:1001": ("job_id", ["n1", "n2"], "n1"), "slurm:2002": ("job_id", ["n1"], None)}
    assert {(n["node"], n["job_id"], n["job_source"]) for n in doc["nodes"]} == {
        ("n1", "slurm:1001", "slurm"), ("n1", "slurm:2002", "slurm"), ("n2", "slurm:1001", "slurm")}


def test_the_job_view_has_every_node_of_the_job_and_only_them():
    view = view_of(*two_jobs_on_one_node_one_on_two())
    view.only_job("slurm:1001")
    assert [(r.node, r.job_id) for r in view.rows] == [("n1", "slurm:1001"), ("n2", "slurm:1001")]
    out = text.render_text(view, job="slurm:1001")
    assert "slurm 1001 (train.py) [slurm:1001]: 2 nodes, straggler n1: " in out, out
    state = {ln.split()[0]: ln for ln in out.splitlines() if ln.startswith("n")}
    assert "straggler" in state["n1"] and "waiting" in state["n2"], out


def test_ids_of_one_node_are_not_one_job_across_nodes():
    """pid:4121 on two nodes is two process trees; a pod's UID is its pod's; 'unknown'
    (processes of another PID namespace) is no job shared by the nodes that say it."""
    series = []
    for node in ("a", "b"):
        series += [node_series(node, NOW, training_job=None),
                   job_table_series(node, "pid:4121", name="pid 4121 (train.py)",
                                    source="launcher"),
                   job_table_series(node, "unknown", source="unknown", gpus="")]
    view = view_of(*series)
    keys = sorted(j.job for j in view.jobs)
    assert keys == ["pid:4121@a", "pid:4121@b", "unknown@a", "unknown@b"]
    assert all(len(j.nodes) == 1 and j.by == BY_NODE for j in view.jobs)
    # a torch elastic run spans nodes, as a Slurm job does
    view = view_of(node_series("a", NOW, training_job=None),
                   job_table_series("a", "torchelastic:r7", source="torchelastic"),
                   node_series("b", NOW, training_job=None),
                   job_table_series("b", "torchelastic:r7", source="torchelastic"))
    assert [(j.job, len(j.nodes)) for j in view.jobs] == [("torchelastic:r7", 2)]


def test_the_hand_written_job_label_is_the_fallback_of_older_exporters():
    """Nodes without job series keep their job label's group; a node whose exporter names
    one job of one node (a pod) and whose target has the label is in the label's group;
    a node of two such jobs cannot say which the label means: each is its own."""
    view = view_of(node_series("old1", NOW, training_job="bert"),
                   node_series("old2", NOW, training_job="bert"),
                   node_series("pod1", NOW, training_job="bert"),
                   job_table_series("pod1", "k8s:0c1d", name="pod team/bert-2", source="k8s"),
                   node_series("two", NOW, training_job="bert"),
                   job_table_series("two", "k8s:aa", source="k8s", gpus="0-3"),
                   job_table_series("two", "k8s:bb", source="k8s", gpus="4-7"))
    bert = view.job("bert")
    assert bert.by == "training_job" and bert.id == ""
    assert [(r.node, r.job_id) for r in bert.nodes] == [
        ("old1", ""), ("old2", ""), ("pod1", "k8s:0c1d")]
    assert {j.job for j in view.jobs} == {"bert", "k8s:aa@two", "k8s:bb@two"}
    assert len([r for r in view.rows if r.node == "two"]) == 2
    assert "bert: 3 nodes" in text.render_text(view)


def test_a_node_with_no_job_is_one_row_and_a_jobs_end_removes_its_row():
    view = view_of(node_series("idle", NOW, training_job=None, state="idle"),
                   node_series("n", NOW, training_job=None),
                   job_table_series("n", "slurm:5", gpus="0-3"),
                   job_table_series("n", "slurm:6", gpus="4-7"),
                   [({"instance": "n", "job": "gpudisk-top", "job_id": "slurm:6",
                      "job_name": "", "job_source": "slurm",
                      "__name__": P + "job_ended_timestamp_seconds"}, NOW - 30)])
    assert sorted(rows_by(view)) == [("idle", ""), ("n", "slurm:5")]


def test_each_jobs_lost_gpu_time_is_its_own_counters():
    lost = [lost_series("n1", "disk-starved", 4000.0, training_job=None),
            ({"instance": "n1", "job": "gpudisk-top", "job_id": "slurm:1001",
              "job_name": "x", "job_source": "slurm", "cause": "disk-starved"}, 4000.0),
            ({"instance": "n2", "job": "gpudisk-top", "job_id": "slurm:1001",
              "job_name": "x", "job_source": "slurm", "cause": "straggler"}, 700.0),
            lost_series("n2", "straggler", 700.0, training_job=None)]
    for labels, _ in lost:
        labels.pop("training_job", None)
    view = view_of(*two_jobs_on_one_node_one_on_two(), ledger=lost)
    rows = rows_by(view)
    assert rows["n1", "slurm:1001"].lost_by_cause["disk-starved"] == 4000.0
    # slurm 2002 exports no counter: nothing known of it
    assert rows["n1", "slurm:2002"].lost_by_cause is None
    job = view.job("slurm:1001")
    assert (job.lost_by_cause["disk-starved"], job.lost_by_cause["straggler"]) == (4000.0, 700.0)
    # the fleet's total is the nodes' own counters, each GPU-second once
    assert view.lost_by_cause["disk-starved"] == 4000.0 and view.lost_by_cause["straggler"] == 700.0


def test_job_names_are_bounded_and_escaped_and_a_bad_id_is_dropped_alone():
    hostile = "evil\x1b[2J\nname\"}{" + "x" * 10_000
    view = view_of(node_series("n", NOW, training_job=None),
                   job_table_series("n", "slurm:1", name=hostile, gpus="0-3"),
                   job_table_series("n", 'x",job="injected', name="inj", gpus="4-5"),
                   job_table_series("n", "slurm:2", name="fine", gpus="6-7"),
                   node_series("m", NOW, training_job=None),
                   job_table_series("m", "slurm:3", name="m's", gpus="0-7"))
    rows = rows_by(view)
    assert sorted(rows) == [("m", "slurm:3"), ("n", "slurm:1"), ("n", "slurm:2")]
    bad = rows["n", "slurm:1"]
    assert len(bad.job_name) <= 120 and bad.job_name.startswith("evil\x1b[2J\nname")
    # the injected id's three series dropped and said on that node's rows only
    assert bad.bad_series == 3 and rows["n", "slurm:2"].bad_series == 3
    assert rows["m", "slurm:3"].bad_series == 0 and rows["m", "slurm:3"].doubts == {}
    out = text.render_text(view)
    assert "\x1b" not in out and "x" * 200 not in out
    assert all("\n" not in ln for ln in out.splitlines())
    line = next(ln for ln in out.splitlines() if ln.startswith("n ") and "\\x1b" in ln)
    assert "\\x0a" in line and len(line) < 400, line
    json.loads(text.render_json(view))


def test_bad_job_series_are_bounded():
    assert gpu_list("0-3,6") == [0, 1, 2, 3, 6] and gpu_list("0,1") == [0, 1]
    assert gpu_list("") == [] and gpu_list("3-1") is None and gpu_list("0-99999999") is None
    assert gpu_list("a") is None and gpu_list("²") is None
    many = [job_table_series("n", f"slurm:{i}", gpus=str(i % 8)) for i in range(MAX_JOBS + 10)]
    view = view_of(node_series("n", NOW, training_job=None), *many,
                   job_table_series("n", "slurm:x", gpus="0", state="healthy"),
                   [({"instance": "n", "job": "gpudisk-top", "job_id": "slurm:0",
                      "job_name": "", "job_source": "slurm", "__name__": P + "job_state",
                      "state": "disk-starved", "fleet_job_state": "1"}, 1.0)])
    assert len(view.rows) == MAX_JOBS
    assert all("jobs" in r.doubts for r in view.rows)
    zero = rows_by(view)["n", "slurm:0"]
    assert zero.state == "bad-data" and "2 states at once" in zero.doubts["job_state"]


def test_the_table_asks_for_the_job_series_in_its_one_query():
    for recorded in (False, True):
        q = queries.table_query(recorded=recorded)
        assert "job_info" in q and "job_gpus_starved" in q and "job_ended" in q
        assert f'{P}job_state == 1' in q and queries.JOB_STATE_LABEL in q
    assert "job_gpu_lost_seconds_total" in queries.ledger_query()
    assert "job_gpu_lost_seconds_total" in queries.ledger_query(recorded=True)


# ---------------------------------------------------------------------------- through a real server
HOSTILE_NAME = "pod evil\x1b[31m\nname\"}{" + "y" * 10_000
INJECTED_ID = 'x",job="evil'
E2E_NODES = (("n1", None, None, False), ("n2", None, None, False),
             ("old1", None, "bert", False), ("old2", None, "bert", False))


def e2e_exposition(name: str, started: float) -> bytes:
    """n1: slurm 1001 on GPUs 0-3, disk-starved (the node's verdict), slurm 2002 on 4-7
    healthy; n2: slurm 1001 on GPUs 0-5 waiting on its peer, a pod of a hostile name on
    6-7 and a job whose id is a label injection; old1 and old2: exporters that name no
    job (cpu-starved, healthy), their targets labelled training_job=bert."""
    now = time.time()
    grown = now - started
    common = dict(since_s=started - 600, last_s=now)
    if name == "n1":
        return node_exposition(
            state="disk-starved", verdict_gpus=[0, 1, 2, 3], devices="sda", kind="saturated",
            util={g: 0.05 if g < 4 else 0.95 for g in range(8)},
            lost={"disk-starved": 4 * grown}, **common, jobs=[
                job_exposition("slurm:1001", "slurm 1001 (train.py)", "slurm", [0, 1, 2, 3],
                               "disk-starved", 4, {"disk-starved": 4 * grown}),
                job_exposition("slurm:2002", "slurm 2002 (eval.py)", "slurm", [4, 5, 6, 7],
                               "healthy", 0, {"disk-starved": 0.0})])
    if name == "n2":
        return node_exposition(
            state="straggler", verdict_gpus=list(range(6)),
            util={g: 0.2 if g < 6 else 0.9 for g in range(8)},
            lost={"straggler": 6 * grown}, **common, jobs=[
                job_exposition("slurm:1001", "slurm 1001 (train.py)", "slurm", list(range(6)),
                               "straggler", 0, {"straggler": 6 * grown}),
                job_exposition("k8s:ab12", HOSTILE_NAME, "k8s", [6, 7], "healthy"),
                job_exposition(INJECTED_ID, "inj", "slurm", [6], "healthy")])
    if name == "old1":
        return node_exposition(state="cpu-starved", verdict_gpus=list(range(8)),
                               util=dict.fromkeys(range(8), 0.3), **common)
    return node_exposition(**common)


@pytest.mark.parametrize("backend", backend_params())
def test_jobs_found_by_their_id_through_a_real_server(tmp_path, backend):
    """A real server (the recording rules loaded) scrapes four exporters: two that name
    their jobs, their targets without any job label, and two older ones whose targets
    carry training_job=bert.  `fleet --once --json`: a row a node and job (two jobs on
    n1, two on n2), slurm 1001 one job on n1 and n2 with n1 its straggler, bert the older
    nodes' job by the label, the pod a job of n2 alone; each job row's GPUs, utilization
    (the recorded form reads its GPUs' series) and lost time its own; the hostile name
    bounded and escaped, the injected id dropped on n2's rows alone; --job slurm:1001 its
    two nodes only; the raw form the same rows."""
    from fleet_harness import AnswerServer, Fleet
    from test_fleet_prometheus import FLEET_RULES, fleet_cli, once_json

    started = time.time()
    with Fleet(tmp_path, nodes=E2E_NODES, backend=backend, rules=FLEET_RULES) as fleet:
        servers = [AnswerServer((lambda n: lambda: e2e_exposition(n, started))(name),
                                "text/plain; version=0.0.4", port=fleet.ports[name],
                                lifetime_s=240) for name, *_ in E2E_NODES]
        try:
            def ready():
                doc = once_json(fleet.base)
                keys = {(fleet.name_of(n["node"]), n["job_id"]): n for n in doc["nodes"]}
                lost = (keys.get(("n2", "slurm:1001")) or {}).get("lost_24h_gpu_s") or 0
                # every job row's lost time by cause answered (a busy CI machine scrapes
                # one node's counters twice before another's: n2's alone was not enough)
                by_cause = [(keys.get(k) or {}).get("lost_24h_by_cause") or {}
                            for k in (("n1", "slurm:1001"), ("n2", "slurm:1001"))]
                counted = (by_cause[0].get("disk-starved") or 0) > 0 \
                    and (by_cause[1].get("straggler") or 0) > 0
                return doc if (doc["recording_rules"] and len(keys) == 6 and lost > 0
                               and counted
                               and all(n["gpu_util_pct"] is not None for n in doc["nodes"])) \
                    else None
            doc = wait_until(ready, 120, "six rows, the jobs' lost time counted")
            job_doc = once_json(fleet.base, "--job", "slurm:1001")
            out = fleet_cli("--prometheus", fleet.base, "--once").stdout
            client = PromClient(fleet.base)
            raw = build_view(client.instant(queries.table_query()), None, time.time())
        finally:
            for srv in servers:
                srv.close()
    rows = {(fleet.name_of(n["node"]), n["job_id"]): n for n in doc["nodes"]}
    assert set(rows) == {("n1", "slurm:1001"), ("n1", "slurm:2002"), ("n2", "slurm:1001"),
                         ("n2", "k8s:ab12"), ("old1", ""), ("old2", "")}
    # found without a label on the targets
    assert all("training_job" not in n["labels"] for (node, _), n in rows.items()
               if node in ("n1", "n2"))
    a, b = rows["n1", "slurm:1001"], rows["n1", "slurm:2002"]
    assert (a["state"], a["gpus_total"], a["gpus_starved"], a["devices"]) == (
        "disk-starved", 4, 4, ["sda"])
    assert (b["state"], b["gpus_total"], b["devices"]) == ("healthy", 4, [])
    assert a["gpu_util_pct"] == pytest.approx(5) and b["gpu_util_pct"] == pytest.approx(95)
    assert rows["n2", "slurm:1001"]["gpu_util_pct"] == pytest.approx(20)
    jobs = {j["job"]: j for j in doc["jobs"]}
    assert set(jobs) == {"slurm:1001", "slurm:2002", f"k8s:ab12@{fleet.instance('n2')}", "bert"}
    slurm = jobs["slurm:1001"]
    assert (slurm["by"], slurm["name"], slurm["source"]) == ("job_id", "slurm 1001 (train.py)",
                                                            "slurm")
    assert [fleet.name_of(n) for n in slurm["nodes"]] == ["n1", "n2"]
    assert fleet.name_of(slurm["straggler"]) == "n1"
    assert slurm["reason"].startswith(f"{fleet.instance('n1')} holds job slurm 1001 "
                                      "(train.py) back: disk-starved on sda")
    bert = jobs["bert"]
    assert bert["by"] == "training_job" and sorted(map(fleet.name_of, bert["nodes"])) == [
        "old1", "old2"]
    # each job's lost time its own counters'; the job's the sum over its nodes
    assert a["lost_24h_by_cause"]["disk-starved"] > 0 and a["lost_24h_by_cause"]["straggler"] == 0
    assert rows["n2", "slurm:1001"]["lost_24h_by_cause"]["straggler"] > 0
    assert slurm["lost_24h_by_cause"]["disk-starved"] == pytest.approx(
        a["lost_24h_by_cause"]["disk-starved"])
    assert slurm["lost_24h_by_cause"]["straggler"] == pytest.approx(
        rows["n2", "slurm:1001"]["lost_24h_by_cause"]["straggler"])
    # the hostile name: bounded in the JSON, escaped in the text; the injected id's
    # series dropped on n2's rows, no other node's
    pod = rows["n2", "k8s:ab12"]
    assert len(pod["job_name"]) <= 120 and pod["job_name"].startswith("pod evil\x1b[31m\nname")
    assert pod["bad_series"] == rows["n2", "slurm:1001"]["bad_series"] > 0
    assert all(n["bad_series"] == 0 for (node, _), n in rows.items() if node != "n2")
    assert "\x1b" not in out and "y" * 200 not in out and "pod evil\\x1b[31m" in out
    # the job view: its two nodes
    assert [(fleet.name_of(n["node"]), n["job_id"]) for n in job_doc["nodes"]] == [
        ("n1", "slurm:1001"), ("n2", "slurm:1001")]
    assert [j["job"] for j in job_doc["jobs"]] == ["slurm:1001"]
    # the raw form (no records) reads the same rows
    assert {(fleet.name_of(r.node), r.job_id): (r.state, r.gpus_total)
            for r in raw.rows} == {k: (n["state"], n["gpus_total"]) for k, n in rows.items()}


def test_real_serve_exporters_one_run_on_two_nodes_and_two_jobs_on_one(tmp_path):
    """Two real `serve` exporters (stand-in GPUs, real processes as their GPU processes,
    tests/standin.py), scraped by a real Prometheus, their targets without any job label:
    on node a, a torch elastic run's rank (GPU 0) and a process of its own (GPU 1); on node
    b, another rank of the same run (GPUs 0-1).  `fleet --once --json` finds the run as one
    job of both nodes by its id, and node a's two jobs as two rows."""
    import standin
    from fleet_harness import PROMETHEUS, Fleet
    from test_fleet_prometheus import once_json
    from test_job_metrics import end, sleeper

    if PROMETHEUS is None:
        pytest.skip("Debian's prometheus is not installed")
    env = {"TORCHELASTIC_RUN_ID": "run-37"}
    rank_a, alone, rank_b = sleeper(env=env), sleeper(), sleeper(env=env)
    serving = []
    try:
        with Fleet(tmp_path, nodes=(("a", None, None, False), ("b", None, None, False))) as fleet:
            for name, processes in (("a", {0: [rank_a.pid], 1: [alone.pid]}),
                                    ("b", {0: [rank_b.pid], 1: [rank_b.pid]})):
                proc = standin.popen(["serve", "--listen", fleet.instance(name), "-i", "0.5"],
                                     gpus=2, processes=processes, healthy_steps_s=50.0)
                serving.append(proc)
                line = proc.stderr.readline()
                assert "serving http://" in line, line

            def ready():
                doc = once_json(fleet.base)
                return doc if len([n for n in doc["nodes"] if n["job_id"]]) == 3 else None
            doc = wait_until(ready, 90 * slack(), "three rows of a node and job")
    finally:
        for proc in serving:
            proc.terminate()
            proc.communicate(timeout=30)
        for p in (rank_a, alone, rank_b):
            end(p)
    rows = {(fleet.name_of(n["node"]), n["job_id"]): n for n in doc["nodes"]}
    run = "torchelastic:run-37"
    assert set(rows) == {("a", run), ("a", f"pid:{alone.pid}"), ("b", run)}
    assert rows["a", run]["gpus_total"] == 1 and rows["b", run]["gpus_total"] == 2
    assert rows["a", f"pid:{alone.pid}"]["job_source"] == "process"
    jobs = {j["job"]: j for j in doc["jobs"]}
    assert jobs[run]["by"] == "job_id" and sorted(map(fleet.name_of, jobs[run]["nodes"])) == [
        "a", "b"]
    assert jobs[f"pid:{alone.pid}@{fleet.instance('a')}"]["by"] == "node"
    assert all("training_job" not in n["labels"] for n in doc["nodes"])


class _Source:
    """The face of a FleetSource the screen reads (its url, labels, filters): the views are
    applied by the test."""

    url, group_by, job_label, filters = "http://prometheus:9090", "instance", "training_job", {}

    def retarget(self, **_):
        pass


async def test_the_screen_has_a_row_a_node_and_job_and_the_job_view_every_node():
    """At 80x24: n1's two jobs are two rows, each named (the hostile name escaped); the
    cursor moves over both; J picks slurm 1001's view: its two nodes, n1 the straggler."""
    from screen_text import screen_text
    from gpudisk_top.ui.fleet_app import FleetApp
    from gpudisk_top.ui.screens.fleet_job import JobScreen
    from gpudisk_top.ui.widgets.fleet_table import FleetTable

    series = two_jobs_on_one_node_one_on_two()
    series += (job_table_series("n2", "k8s:ab", name="pod \x1b[31mevil\nx", source="k8s",
                                gpus=""),)
    view = view_of(*series)
    app = FleetApp(_Source(), autostart=False)
    async with app.run_test(size=(80, 24)) as pilot:
        app.apply(view)
        await pilot.pause()
        table = app.query_one(FleetTable)
        assert table.order[:2] == [r.key for r in view.rows[:2]] and len(table.order) == 4
        shown = screen_text(app)
        # a name that does not fit gives way to the id (escaped, as every name)
        assert "\x1b" not in shown and " k8s:ab " in shown, shown
        assert sum(" n1 " in ln and " slurm:" in ln for ln in shown.splitlines()) == 2, shown
        await pilot.press("down")
        await pilot.pause()
        assert table.cursor == view.rows[1].key
        app.open_job("slurm:1001")
        await pilot.pause()
        await pilot.pause()
        assert isinstance(app.screen, JobScreen)
        shown = screen_text(app)
        assert "slurm 1001 (train.py) [slurm:1001]" in shown and "STRAGGLER n1" in shown, shown
        job_table = app.screen.query_one(FleetTable)
        assert job_table.order == [r.key for r in view.job("slurm:1001").nodes]
