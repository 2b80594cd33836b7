"""The fleet's data side without a server: Prometheus's own answers, captured from a real
Prometheus scraping a simulated fleet (tests/fixtures/fleet/capture.py writes them; see
its docstring for the layout), through promapi's parser into build_view/build_timeline;
the straggler rule, the queries' text, FleetSource's query cadence, and PromClient's
failures as one-line values (a local socket that refuses, never answers, or answers
something else)."""

from __future__ import annotations

import json
import math
import os
import re
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from fleet_harness import DripServer
from gpudisk_top.errors import UsageError
from gpudisk_top.fleet import promapi, queries
from gpudisk_top.fleet.labels import (format_filters, label_value, node_name, parse_filter_text,
                                      parse_pairs)
from gpudisk_top.fleet.jobs import judge_job
from gpudisk_top.fleet.table import SPARK_POINTS, build_view
from gpudisk_top.fleet.timeline import build_timeline
from gpudisk_top.fleet.view import DeviceEvidence, NodeRow, QueryCost
from gpudisk_top.fleet.promapi import PromClient, QueryResult, Series, check_url, parse_answer
from gpudisk_top.fleet.source import FleetSource
from gpudisk_top.verdict.detect import OWN_CAUSE_STATES, STARVED_STATES
from gpudisk_top.model.present import natural_key
from gpudisk_top.model.timefmt import age, clock_hm, duration

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "fleet")


def fixture(name: str):
    with open(os.path.join(FIXTURES, name)) as f:
        return json.load(f)


META = fixture("meta.json")
NAME = {instance: name for name, instance in META["nodes"].items()}


def answer(name: str) -> QueryResult:
    return parse_answer(fixture(name), "Prometheus at http://test")


def table_view(**kw):
    return build_view(answer("table.json"), answer("spark.json"), META["table_at_s"],
                      ledger=answer("ledger.json"), **kw)


# ---------------------------------------------------------------------------- the table
def test_the_captured_queries_are_the_ones_sent_now():
    """The fixtures answer today's queries: recapture them when a query changes."""
    assert META["table_query"] == queries.table_query()
    assert META["spark_query"] == queries.spark_query("instance")
    assert META["timeline_query"] == queries.timeline_query("instance", META["nodes"]["disk"])


def test_every_node_has_its_state_stopped_is_stale_and_never_seen_is_down():
    view = table_view()
    assert view.error is None and view.data_wall_s == META["table_at_s"]
    assert {NAME[r.node]: r.state for r in view.rows} == META["expected"]
    by = {NAME[r.node]: r for r in view.rows}
    assert by["stopped"].stale and by["down"].stale and not by["disk"].stale
    assert by["stopped"].last_seen_s is not None and by["stopped"].last_seen_s <= META["table_at_s"]
    assert by["down"].last_seen_s is None and by["down"].gpus_total == 0
    assert by["stopped"].labels == {"instance": META["nodes"]["stopped"], "job": "gpudisk-top",
                                    "training_job": "bert"}


def test_order_starved_first_then_stale_then_waiting_then_healthy():
    rows = table_view().rows
    names = [NAME[r.node] for r in rows]
    assert set(names[:2]) == {"disk", "cpu"}
    assert set(names[2:4]) == {"stopped", "down"}
    assert names[4:] == ["peer1", "peer2", "healthy"]
    # within the starved: more GPUs starved first, then the longest starved
    a, b = rows[:2]
    assert (-a.gpus_starved, a.since_s) <= (-b.gpus_starved, b.since_s)


def test_a_disk_starved_node_carries_its_device_and_evidence():
    disk = next(r for r in table_view().rows if NAME[r.node] == "disk")
    assert (disk.kind, disk.devices, disk.gpus) == ("saturated", ["sda"], list(range(8)))
    assert disk.gpus_starved == disk.gpus_total == 8
    assert 40 < disk.gpu_util_pct < 70 and sorted(disk.gpu_util_by_gpu) == list(range(8))
    (ev,) = disk.evidence
    assert (ev.device, ev.mountpoint, ev.dev_class) == ("sda", "/data", "SSD")
    assert ev.r_await_ms > 2 and ev.aqu_sz > 10 and ev.util_pct > 90
    assert ev.rkb_s > 100_000                       # a SATA SSD's ~540 MB/s
    assert disk.evidence_text.startswith("sda r_await ") and "aqu-sz " in disk.evidence_text
    assert disk.since_s < META["table_at_s"] - 2        # --demo-start: a past


def test_the_local_straggler_state_names_its_waiting_gpu():
    """Its verdict names the GPU that waits, but the exporter counts no GPU starved: it
    waits on a peer, not on its own node (OWN_CAUSE_STATES)."""
    peer = next(r for r in table_view().rows if NAME[r.node] == "peer1")
    assert (peer.state, peer.gpus, peer.gpus_starved, peer.evidence) == ("straggler", [5], 0, [])
    assert peer.waits() and not peer.starved


def test_sparkline_a_value_a_minute_the_newest_last():
    view = table_view()
    spark = {s.labels["instance"]: s.values[-1][1] for s in answer("spark.json").series}
    for r in view.rows:
        if r.node in spark:
            assert len(r.spark_pct) == SPARK_POINTS
            assert r.spark_pct[-1] == pytest.approx(spark[r.node] * 100)
            assert r.spark_pct[:-1] == [None] * (SPARK_POINTS - 1)
        else:
            assert r.spark_pct == []


def test_json_is_strict_and_has_the_documented_keys():
    doc = json.loads(json.dumps(table_view().to_json(), allow_nan=False))
    assert set(doc) == {"wall_s", "prometheus", "group_by", "job_label", "error",
                        "data_wall_s", "recording_rules", "lost_24h", "nodes", "jobs", "cost",
                        "doubts"}
    assert doc["recording_rules"] is False and doc["doubts"] == []
    assert set(doc["nodes"][0]) == {
        "node", "labels", "state", "kind", "devices", "gpus", "gpus_starved", "gpus_total",
        "gpu_util_pct", "since_s", "last_seen_s", "stale", "evidence", "spark_pct",
        "gpu_util_by_gpu", "evidence_text", "members", "bad_series", "lost_24h_gpu_s",
        "lost_24h_by_cause", "doubts", "job_id", "job_name", "job_source", "busy_sources",
        "busy_tag"}
    assert all(n["doubts"] == {} for n in doc["nodes"])     # a real fleet doubts nothing
    # the disk table's names, and beside them the first version's (an API: kept)
    ev = doc["nodes"][0]["evidence"][0]
    assert set(ev) == {"device", "mountpoint", "dev_class", "r_await_ms", "aqu_sz", "util_pct",
                       "rkb_s", "read_await_ms", "queue_size", "read_kb_s"}
    assert (ev["read_await_ms"], ev["queue_size"], ev["read_kb_s"]) == (
        ev["r_await_ms"], ev["aqu_sz"], ev["rkb_s"])
    assert set(doc["jobs"][0]) == {"job", "nodes", "straggler", "waiting", "reason", "since_s",
                                   "lost_24h_gpu_s", "lost_24h_by_cause", *"by id name source".split()}
    assert doc["cost"] == {"queries": 2, "series": len(answer("table.json").series) + 5,
                           "elapsed_ms": 0.0}


def test_group_by_another_label_gathers_its_targets():
    """--by training_job: one row per job; its state the worst of its nodes'."""
    rows = {r.node: r for r in table_view(group_by="training_job").rows}
    assert set(rows) == {"llama", "bert"}
    assert rows["llama"].state == "disk-starved" and rows["llama"].gpus_total == 24
    assert rows["llama"].gpus_starved == 8           # the disk's; its peers wait, not starve
    assert rows["bert"].state == "cpu-starved" and rows["bert"].gpus_total == 16
    assert rows["llama"].labels == {"job": "gpudisk-top", "training_job": "llama"}
    instances = META["nodes"]
    assert rows["llama"].members == sorted((instances[n] for n in ("disk", "peer1", "peer2")),
                                           key=natural_key)
    assert len(rows["bert"].members) == 4                # the stale and the down ones too


# ---------------------------------------------------------------------------- jobs
def test_the_job_view_names_the_straggler_and_why():
    view = table_view()
    llama, bert = view.job("llama"), view.job("bert")
    assert NAME[llama.straggler.node] == "disk" and view.jobs[0] is llama
    assert [NAME[r.node] for r in llama.nodes] == ["disk", "peer1", "peer2"]
    assert llama.reason.startswith(f"{llama.straggler.node} holds training_job=llama back: "
                                   "disk-starved on sda (r_await ")
    assert llama.reason.endswith("2 of 2 other nodes wait (2 by their own verdict)")
    assert llama.since_s == llama.straggler.since_s
    assert bert.straggler is None
    # the model's text has no clock (--json's since_s has the time); the text and the
    # screens put one in
    cpu = bert.nodes[0]
    assert bert.reason == (f"{META['nodes']['cpu']} is cpu-starved, but only 0 of 1 other "
                           "nodes wait; 2 stopped reporting")
    assert bert.since_s == cpu.since_s
    assert bert.describe(clock_hm) == (
        f"{META['nodes']['cpu']} is cpu-starved since "
        f"{time.strftime('%H:%M', time.localtime(cpu.since_s))}, but only 0 of 1 other nodes "
        "wait; 2 stopped reporting")


def test_the_job_query_alone_gives_the_same_job():
    view = build_view(answer("table-llama.json"), None, META["table_at_s"])
    assert sorted(NAME[r.node] for r in view.rows) == ["disk", "peer1", "peer2"]
    assert [j.job for j in view.jobs] == ["llama"] and view.jobs[0].straggler is view.rows[0]


def row(node, state, util=None, since=None, stale=False, job="j", devices=()):
    return NodeRow(node=node, labels={"training_job": job}, state=state, gpu_util_pct=util,
                   since_s=since, stale=stale, devices=list(devices))


def test_straggler_rule_of_several_starved_the_lowest_utilization_then_longest():
    """Two of five starved (fewer than half: no shared cause): the one with the lowest
    GPU utilization, then the longest starved."""
    a = row("a", "disk-starved", 40, since=100)
    b = row("b", "cpu-starved", 30, since=200)
    waiting = [row(n, "healthy", 20) for n in "cde"]
    g = judge_job("j", [a, b, *waiting])
    # a, starved itself, is not counted among those that wait
    assert g.straggler is b and g.reason.endswith("3 of 4 other nodes wait (GPU 20%)")
    a.gpu_util_pct = 30
    assert judge_job("j", [a, b, *waiting]).straggler is a     # a tie: the longest starved


def test_a_node_waiting_on_an_undiagnosed_stall_is_not_the_straggler():
    """(a): a is disk-starved; b, c, d wait on it with their GPUs idle, nothing saturated
    there (their local state undiagnosed-stall, GPUs at 30 %, under a's 55 %).  The
    straggler is a, the node starved by its own cause, never a peer that waits."""
    a = row("a", "disk-starved", 55, since=100, devices=["sda"])
    peers = [row(n, "undiagnosed-stall", 30, since=110) for n in "bcd"]
    g = judge_job("j", [a, *peers])
    assert g.straggler is a
    assert g.reason == "a holds training_job=j back: disk-starved on sda; 3 of 3 other nodes wait (GPU 30%)"
    assert all(p.waits() and not p.starved for p in peers) and not a.waits()


def test_every_node_starved_is_a_shared_cause_not_a_straggler():
    """(b): all four nodes disk-starved on the same NFS mount: no node holds the others
    back (the rules' FleetNodesStarved fires, JobStraggler does not)."""
    nodes = [row(n, "disk-starved", u, since=100, devices=["/mnt/ds"])
             for n, u in zip("abcd", (40, 35, 45, 50))]
    g = judge_job("j", nodes)
    assert g.straggler is None and g.since_s is None
    assert g.reason == "4 of 4 nodes starved (a shared cause: 4 disk-starved on /mnt/ds)"
    assert sum(n.starved for n in nodes) == 4 and not any(n.waits() for n in nodes)


@pytest.mark.parametrize("states, straggler", [
    # half of the running nodes starved, two at least: a shared cause (FleetNodesStarved)
    (("disk-starved", "cpu-starved", "healthy", "straggler"), None),
    # exactly one starved of two: JobStraggler's
    (("checkpoint-stall", "straggler"), "n0"),
    # idle nodes are not running: 2 of 3 running starved
    (("disk-starved", "disk-starved", "straggler", "idle", "idle"), None),
    # undiagnosed-stall is not starved: one starved of four
    (("disk-starved", "undiagnosed-stall", "undiagnosed-stall", "undiagnosed-stall"), "n0"),
])
def test_the_straggler_rule_agrees_with_the_alert_rules(states, straggler):
    nodes = [row(f"n{i}", st, 20, since=100) for i, st in enumerate(states)]
    g = judge_job("j", nodes)
    assert (g.straggler.node if g.straggler else None) == straggler, g.reason
    if straggler is None:
        assert " nodes starved (a shared cause: " in g.reason


def test_an_undiagnosed_stall_is_a_candidate_only_when_none_is_starved():
    a = row("a", "undiagnosed-stall", 10, since=100)
    peers = [row(n, "straggler", 90) for n in "bc"]
    g = judge_job("j", [a, *peers])
    assert g.straggler is a and "a holds training_job=j back: undiagnosed-stall;" in g.reason


def test_own_cause_states_are_the_alert_rules_starved_states():
    """One definition (verdict/detect/states.py OWN_CAUSE_STATES): the fleet model's, the
    exporter's gpudisk_top_gpus_starved and the fleet alert rules' regex agree."""
    yaml = pytest.importorskip("yaml")
    with open(os.path.join(ROOT, "examples", "prometheus-rules.yml")) as f:
        groups = {g["name"]: g["rules"] for g in yaml.safe_load(f)["groups"]}
    fleet = {r.get("record") or r.get("alert"): r["expr"] for r in groups["gpudisk-top-fleet"]}
    regex = "|".join(OWN_CAUSE_STATES)
    for name in ("gpudisk_top:node_starved:bool", "JobStraggler"):
        assert re.findall(r'state=~"([^"]*)"', fleet[name]) == [regex], name
    assert set(OWN_CAUSE_STATES) < STARVED_STATES
    assert {"straggler", "undiagnosed-stall"}.isdisjoint(OWN_CAUSE_STATES)


def test_straggler_rule_needs_half_of_the_others_waiting():
    a = row("a", "checkpoint-stall", 40, since=100)
    busy = [row(f"n{i}", "healthy", 95) for i in range(3)]
    g = judge_job("j", [a, *busy])
    assert g.straggler is None and "only 0 of 3 other nodes wait" in g.reason
    busy[0].state, busy[1].gpu_util_pct = "straggler", 12
    g = judge_job("j", [a, *busy])
    assert g.straggler is a
    assert g.reason.endswith("2 of 3 other nodes wait (1 by their own verdict, GPU 12%)")


@pytest.mark.parametrize("nodes, reason", [
    ([row("a", "disk-starved", 10)], "one node"),
    ([row("a", "disk-starved", 10), row("b", "healthy", 95)],
     "a is disk-starved, but only 0 of 1 other nodes wait"),
    ([row("a", "healthy", 95), row("b", "idle", 0)], "no node starved of data; 1 of 2 wait"),
    ([row("a", "healthy", 95), row("b", "stale", stale=True)],
     "no node starved of data; 1 stopped reporting"),
])
def test_no_straggler(nodes, reason):
    g = judge_job("j", nodes)
    assert g.straggler is None and g.reason == reason


# ---------------------------------------------------------------------------- timeline
def timeline():
    t = META["timeline"]
    return build_timeline(answer("timeline-disk.json"), META["nodes"]["disk"],
                          t["start"], t["end"], t["step"])


def test_timeline_is_the_local_timelines_history_one_column_a_step():
    tl = timeline()
    t = META["timeline"]
    assert tl.error is None and len(tl.history) == int((t["end"] - t["start"]) / t["step"]) + 1
    assert tl.times[0] == t["start"] and tl.times[-1] == t["end"]
    assert all(b - a == t["step"] for a, b in zip(tl.times, tl.times[1:]))
    assert tl.gpus == list(range(8)) and tl.disks == [("nvme0n1", "nvme0n1"), ("sda", "sda")]
    assert tl.named == ["sda"]
    # before the node's first scrape: blank columns; then the starved ones
    first = tl.history.columns[0]
    assert (first.state, first.gpu_util, first.disk) == ("", {}, {})
    reported = [c for c in tl.history.columns if c.state]
    assert reported and all(c.state == "disk-starved" for c in reported)
    last = tl.history.columns[-1]
    assert set(last.gpu_util) == set(range(8)) and all(30 < v < 80 for v in last.gpu_util.values())
    assert last.metric("sda", "util_pct") > 90 and last.metric("sda", "aqu_sz") > 10
    assert last.metric("sda", "r_await_ms") > 2
    assert 400 < last.metric("sda", "mb_s") < 700             # MiB/s read + written
    assert last.metric("sda", "iops") > 1000                  # reads + writes per second


def test_timeline_draws_in_the_local_timeline_widget():
    """The very Columns the dashboard's Timeline draws: its state row has a D per
    starved column and a blank where the node did not report."""
    from gpudisk_top.ui.widgets.timeline import Timeline

    cols = list(timeline().history.columns)
    spans = Timeline.shade_spans(cols)
    text = "".join(t for t, _style in Timeline.state_line(cols, spans)[1:])
    assert text.startswith(" ") and text.endswith("DDDD") and set(text) == {" ", "D"}


def test_timeline_of_a_failed_query_is_empty_with_its_error():
    tl = build_timeline(QueryResult.failed("Prometheus at x: connection refused"),
                        "n", 0.0, 60.0, 1.0)
    assert tl.error.endswith("connection refused") and len(tl.history) == 0


def test_timeline_step_is_whole_seconds_a_column_at_least_one():
    assert queries.timeline_step_s(300, 400) == 1.0
    assert queries.timeline_step_s(3600, 120) == 30.0
    assert queries.timeline_step_s(3600, 7) == 515.0


# ---------------------------------------------------------------------------- queries
def test_filters_go_into_every_selector_quoted():
    f = {"training_job": 'a"b\\c', "cluster": "x"}
    for recorded in (False, True):
        q = queries.table_query(f, recorded=recorded)
        selectors = re.findall(r'\{(?:[^{}"]|"(?:[^"\\]|\\.)*")*\}', q)
        assert len(selectors) == 11 + 2 * recorded, selectors  # the name regex, the jobs' states, the evidence,
        # its verdict, both up, the hour's last sample twice, the last sample, the records,
        # the GPUs' busy tiers (+ per-GPU, job_info)
        for sel in selectors:            # every one of them, each with both labels
            assert 'cluster="x",' in sel and 'training_job="a\\"b\\\\c"' in sel, sel
        assert ("[1h]" in q) is not recorded
        sel = 'cluster="x",training_job="a\\"b\\\\c"'
        assert 'up{' + sel + '} == 0' in q
    assert queries.spark_query("host", {"a": "b"}) == \
        'avg by (host) (gpudisk_top_gpu_utilization_ratio{a="b"})[60m:60s]'
    assert queries.timeline_query("instance", "n:1").endswith(',instance="n:1"}')


def test_a_whole_failing_exporter_job_is_asked_for_in_the_same_query():
    """The exporters' own job's failing targets come through whether or not any node of
    it was ever seen (a whole job down showed "no node"); other jobs' only when they held
    a gpudisk-top node in the hour.  Still one instant query."""
    q = queries.table_query()
    assert 'label_replace((up{job="gpudisk-top"} == 0) or (up == 0 and on (job) ' in q
    q = queries.table_query({"training_job": "llama"}, exporter_job="node-exporters")
    assert '(up{job="node-exporters",training_job="llama"} == 0) or ' in q
    # a --match on job is the user's: kept, not replaced by the exporter job
    assert '(up{job="x"} == 0) or ' in queries.table_query({"job": "x"})
    source = FleetSource(CannedClient(), exporter_job="gpu-nodes")
    assert '(up{job="gpu-nodes"} == 0)' in source.table_expr
    source.retarget(filters={"a": "b"})
    assert '(up{a="b",job="gpu-nodes"} == 0)' in source.table_expr
    with pytest.raises(ValueError, match="--exporter-job"):
        FleetSource(CannedClient(), exporter_job="")


@pytest.mark.parametrize("name", ["", "1a", "a-b", "__name__", "a b"])
def test_bad_label_names_are_refused(name):
    with pytest.raises(ValueError):
        queries.check_label(name)


# ---------------------------------------------------------------------------- answers
def test_a_prometheus_error_is_one_line():
    r = answer("error-parse.json")
    assert not r.ok and r.series == [] and r.error == (
        'Prometheus at http://test: bad_data: invalid parameter "query": 1:5: parse error: '
        "unclosed left parenthesis")
    view = build_view(r, None, 0.0)
    assert view.error == r.error and view.rows == [] and view.data_wall_s is None


@pytest.mark.parametrize("doc, why", [
    ([1, 2], "not Prometheus's JSON"), ({"status": "success"}, "not in Prometheus's shape"),
    ({"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}}]}},
     "not in Prometheus's shape"),
    ({"status": "error"}, "error: no reason given"),
])
def test_answers_that_are_not_prometheus_are_errors(doc, why):
    r = parse_answer(doc)
    assert not r.ok and why in r.error and "\n" not in r.error


def test_nan_and_inf_are_not_numbers_in_the_view():
    lab = {"instance": "n", "job": "j"}
    table = QueryResult(ok=True, result_type="vector", series=[
        Series(dict(lab, __name__="gpudisk_top_verdict_info", state="healthy"), 1.0),
        Series(dict(lab, __name__="gpudisk_top_state_since_timestamp_seconds"), math.nan),
        Series(dict(lab, __name__="gpudisk_top_gpu_utilization_ratio", gpu="0"), math.inf),
        Series(dict(lab, __name__="gpudisk_top_gpu_utilization_ratio", gpu="1"), 0.5)])
    (r,) = build_view(table, None, 0.0).rows
    assert r.since_s is None and r.gpu_util_pct == 50.0 and r.gpus_total == 2
    assert r.bad_series == 1          # +Inf is no utilization (NaN is "no value")
    json.dumps(build_view(table, None, 0.0).to_json(), allow_nan=False)


# ---------------------------------------------------------------------------- source
class CannedClient:
    base_url = "http://canned"

    def __init__(self):
        self.sent: list[str] = []
        self.table = answer("table.json")

    def instant(self, expr, at_s=None):
        kind = ("spark" if expr.startswith(("avg by", "(sum by")) else
                "ledger" if expr.startswith(("increase(", queries.REC_NODE_LOST)) else "table")
        self.sent.append(kind)
        return {"spark": answer("spark.json"), "ledger": answer("ledger.json"),
                "table": self.table}[kind]

    def range(self, expr, start_s, end_s, step_s):
        self.sent.append(("range", expr, end_s - start_s, step_s))
        return answer("timeline-disk.json")


def test_one_instant_query_a_refresh_the_sparkline_once_a_minute():
    clock = [1000.0]
    client = CannedClient()
    source = FleetSource(client, clock=lambda: clock[0])
    views = []
    for _ in range(12):                            # a minute at 5 s
        views.append(source.refresh(now_s=META["table_at_s"]))
        clock[0] += 5
    # the first asks for the recording rules' series, and the answer (the fixture's,
    # without them) has it asked again in the raw form
    assert client.sent == ["table", "table", "spark", "ledger"] + ["table"] * 11
    assert views[0].cost.queries == 4 and all(v.cost.queries == 1 for v in views[1:])
    assert not any(v.recorded for v in views) and not source.recorded
    assert all(len(v.rows[0].spark_pct) == SPARK_POINTS for v in views)   # kept between
    assert all(v.lost_by_cause == views[0].lost_by_cause is not None for v in views)  # kept
    source.refresh()
    assert client.sent[-3:] == ["table", "spark", "ledger"]
    assert source.refreshes == 13 and source.cost.queries == 18
    assert source.cost.series == (14 * len(client.table.series) + 2 * 5
                                  + 2 * len(answer("ledger.json").series))


def test_a_failed_refresh_keeps_the_last_rows_and_says_why():
    client = CannedClient()
    source = FleetSource(client, clock=lambda: 0.0)
    good = source.refresh(now_s=100.0)
    client.table = QueryResult.failed("Prometheus at http://canned: timed out after 3 s")
    bad = source.refresh(now_s=105.0)
    # the refresh gave up at the table's failure, and says so
    assert bad.error.endswith("timed out after 3 s (no other query sent)")
    assert bad.rows is good.rows and client.sent[-1] == "table"
    assert bad.data_wall_s == 100.0 and bad.wall_s == 105.0


def test_node_timeline_asks_for_that_node_only():
    client = CannedClient()
    source = FleetSource(client, filters={"training_job": "llama"})
    tl = source.node_timeline(META["nodes"]["disk"], window_s=600, width=100, now_s=1000.0)
    (_, expr, span, step), = [s for s in client.sent if isinstance(s, tuple)]
    assert step == 6.0 and span == 600 - 6 and tl.step_s == 6.0 and tl.end_s == 996.0
    assert f'instance="{META["nodes"]["disk"]}"' in expr and 'training_job="llama"' in expr
    assert source.cost.queries == 1


def test_a_row_of_several_targets_has_no_one_timeline():
    """--by training_job: a row gathers several nodes; opening it would draw their GPUs
    and disks as one node's.  Refused with why, no query sent."""
    client = CannedClient()
    source = FleetSource(client, group_by="training_job")
    source.refresh(now_s=META["table_at_s"], spark=False)
    tl = source.node_timeline("llama", window_s=60, width=60, now_s=1000.0)
    assert tl.error.startswith("training_job=llama gathers 3 scrape targets (")
    assert "group the rows by instance" in tl.error and len(tl.history) == 0
    assert not any(isinstance(s, tuple) for s in client.sent)


def test_the_no_label_row_asks_for_the_targets_without_the_label():
    """The '(no cluster)' row stands for the targets without the label: its timeline asks
    for cluster="" (those), not for the placeholder's text."""
    assert node_name({"instance": "a"}, "cluster") == "(no cluster)"
    assert label_value("(no cluster)", "cluster") == "" and label_value("x", "cluster") == "x"
    client = CannedClient()
    source = FleetSource(client, group_by="cluster")
    source.node_timeline("(no cluster)", window_s=60, width=60, now_s=1000.0)
    (_, expr, _, _), = [s for s in client.sent if isinstance(s, tuple)]
    assert expr.endswith(',cluster=""}') and "(no cluster)" not in expr


def test_query_cost_adds_up():
    c = QueryCost().add(QueryResult(ok=True, series=[Series({})] * 3, elapsed_s=0.002))
    assert (c + c).text() == "2 queries, 6 series, 4 ms"


# ---------------------------------------------------------------------------- the client
@pytest.mark.parametrize("url", ["127.0.0.1:9090", "ftp://h", "http://", "http://h:99999",
                                 "http://h:9090/?x=1", "http://h:0"])
def test_check_url_refuses_what_is_not_a_server(url):
    with pytest.raises(UsageError):
        check_url(url)


def test_check_url_keeps_a_path_prefix_and_hides_a_password():
    assert check_url("https://h/prometheus/") == "https://h/prometheus"
    c = PromClient("http://me:secret@h:9090")
    assert c.base_url == "http://h:9090" and "secret" not in repr(c)


@pytest.mark.parametrize("url", [
    "alice:s3cret@h:9090",                   # not a URL
    "http://alice:s3cret@host:99999",        # the port out of range
    "http://alice:s3cret@host:port",         # the port not a number
    "http://alice:s3cret@[::1:9090",         # a broken IPv6 address
    "ftp://alice:s3cret@h",                  # not http
    "http://alice:s3cret@",                  # no host
    "http://alice:s3cret@h:9090/?x=1",       # a query
    "http://alice:s3cret@h:0",               # port 0
    "http://alice:s3/cret@h:9090",           # a / in the password (not escaped)
    "http://alice:s3cret@h:9090/\udcff",     # not UTF-8
])
def test_a_bad_url_never_shows_its_password(url):
    with pytest.raises(UsageError) as err:
        check_url(url)
    message = str(err.value)
    assert "cret" not in message and "\n" not in message
    assert message.startswith("--prometheus '") and "***@" in message


def test_redact_hides_the_user_info_only():
    assert promapi.redact("http://u:p@h:1/x?y=@z") == "http://***@h:1/x?y=@z"
    assert promapi.redact("https://h/prometheus") == "https://h/prometheus"
    assert promapi.redact("u:p@h") == "***@h"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_refused_is_one_line():
    port = _free_port()
    r = PromClient(f"http://127.0.0.1:{port}", timeout_s=2).instant("up")
    assert (r.ok, r.error) == (False, f"Prometheus at http://127.0.0.1:{port}: connection refused")


def test_a_server_that_never_answers_times_out_as_a_value():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)                     # the kernel accepts; nobody ever answers
        port = s.getsockname()[1]
        started = time.monotonic()
        r = PromClient(f"http://127.0.0.1:{port}", timeout_s=0.5).instant("up")
        assert time.monotonic() - started < 5
    assert not r.ok and r.error == f"Prometheus at http://127.0.0.1:{port}: timed out after 0.5 s"


def test_the_timeout_is_a_deadline_for_the_whole_answer():
    """A server that sends its answer a byte at a time: every socket read returns well
    within the timeout, yet the query ends at its deadline."""
    with DripServer(every_s=0.1) as drip:
        started = time.monotonic()
        r = PromClient(drip.url, timeout_s=1).instant("up")
        took = time.monotonic() - started
    assert r.error == f"Prometheus at http://127.0.0.1:{drip.port}: timed out after 1 s"
    assert 0.9 < took < 2.0, took


def test_an_answer_larger_than_the_cap_is_refused(monkeypatch):
    monkeypatch.setattr(promapi, "MAX_ANSWER_BYTES", 1000)
    with DripServer(every_s=0.01, head=b"[" * 5000) as drip:
        r = PromClient(drip.url, timeout_s=5).instant("up")
    assert r.error == f"Prometheus at http://127.0.0.1:{drip.port}: the answer is larger than 1000 bytes"


class _Handler(BaseHTTPRequestHandler):
    replies: dict = {}

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.server.seen.append((self.path, self.rfile.read(length),
                                 self.headers.get("Authorization")))
        status, body, *headers = self.replies[self.path]
        self.send_response(status)
        for name, value in (headers[0] if headers else {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST

    def log_message(self, *args):
        pass


@pytest.fixture
def http_server():
    server = HTTPServer(("127.0.0.1", 0), _Handler)
    server.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_a_redirect_is_refused_not_followed(http_server):
    """urllib would follow a 302 as a GET (the query dropped) and send the basic auth on to
    wherever it points: refused, the final URL named (its user-info redacted)."""
    port = http_server.server_address[1]
    base = f"http://127.0.0.1:{port}"
    _Handler.replies = {
        "/old/api/v1/query": (302, b"", {"Location": f"{base}/new/api/v1/query"}),
        "/new/api/v1/query": (200, json.dumps(fixture("table.json")).encode()),
        "/away/api/v1/query": (301, b"", {"Location": "http://x:secret@elsewhere/api"}),
        "/rel/api/v1/query": (307, b"", {"Location": "/new/api/v1/query"}),
    }
    r = PromClient(f"http://u:pw@127.0.0.1:{port}/old", timeout_s=2).instant("up")
    assert r.error == (f"Prometheus at {base}/old: redirected to {base}/new/api/v1/query "
                       "(HTTP 302): give the final URL")
    assert [path for path, *_ in http_server.seen] == ["/old/api/v1/query"]   # not followed
    r = PromClient(f"{base}/away", timeout_s=2).instant("up")
    assert r.error.endswith("redirected to http://***@elsewhere/api (HTTP 301): give the "
                            "final URL") and "secret" not in r.error
    r = PromClient(f"{base}/rel", timeout_s=2).instant("up")
    assert "redirected to " + base + "/new/api/v1/query (HTTP 307)" in r.error
    assert [path for path, *_ in http_server.seen].count("/new/api/v1/query") == 0


def test_http_errors_and_foreign_answers_are_one_line(http_server):
    port = http_server.server_address[1]
    _Handler.replies = {
        "/a/api/v1/query": (503, b"<html>\nbusy\n</html>"),
        "/b/api/v1/query": (422, json.dumps({"status": "error", "errorType": "execution",
                                             "error": "query timed out\nin query execution"}).encode()),
        "/c/api/v1/query": (200, b"<html>grafana</html>"),
        "/d/api/v1/query_range": (200, json.dumps(fixture("timeline-disk.json")).encode()),
    }
    where = f"Prometheus at http://127.0.0.1:{port}"
    r = PromClient(f"http://127.0.0.1:{port}/a").instant("up")
    assert r.error == f"{where}/a: HTTP 503 Service Unavailable"
    r = PromClient(f"http://127.0.0.1:{port}/b").instant("up")
    assert r.error == f"{where}/b: execution: query timed out in query execution"
    r = PromClient(f"http://127.0.0.1:{port}/c").instant("up")
    assert r.error == f"{where}/c: the answer is not Prometheus's JSON (is this the " \
                      "Prometheus server's URL?)"
    r = PromClient(f"http://u:p%40ss@127.0.0.1:{port}/d", timeout_s=2).range("up", 10, 70, 5)
    assert r.ok and r.result_type == "matrix" and len(r.series) == 23
    path, body, auth = http_server.seen[-1]
    assert auth == "Basic dTpwQHNz"                       # base64 of u:p@ss
    assert body == b"query=up&start=10.000&end=70.000&step=5&timeout=2s&nocache=1"


# ---------------------------------------------------------------------------- --once text
def test_once_text_names_every_node_its_job_lines_and_the_cost():
    from gpudisk_top.fleet.text import lost_line, render_text

    view = table_view()
    lines = render_text(view).splitlines()
    row = {NAME[ln.split()[0]]: ln for ln in lines if ln.split() and ln.split()[0] in NAME}
    assert set(row) == set(META["nodes"])
    assert " disk-starved " in row["disk"] and row["disk"].endswith(" (saturated)") and " %util " in row["disk"]
    assert " stale " in row["stopped"] and " ago" in row["stopped"]
    assert " down " in row["down"] and row["down"].endswith(" never             -")
    # a node whose own detector says straggler waits on its job's straggler, and says on
    # which; "straggler" is left to the node that holds the job back
    disk = META["nodes"]["disk"]
    for peer in ("peer1", "peer2"):
        assert " waiting " in row[peer] and " straggler " not in row[peer], row[peer]
        assert row[peer].endswith(f"waiting on {disk}"), row[peer]
    assert row["cpu"].endswith("GPU 0-7 (no device: the job's own loaders)"), row["cpu"]
    assert any(ln.startswith("  llama: 3 nodes, straggler ") for ln in lines)
    assert lines[-2] == lost_line(view.lost_by_cause) and lines[-2].startswith(
        "GPU time lost, last 24 h: ")
    assert lines[-1].startswith("query cost: 2 queries, ")
    assert all(ln == ln.rstrip() for ln in lines)


def test_once_text_of_a_job_labels_its_straggler_and_those_waiting_on_it():
    """`fleet --once --job llama`: the job view's labels, one straggler, the others
    waiting on it; their evidence as in the whole table."""
    from gpudisk_top.fleet.text import render_text

    view = table_view()
    whole = render_text(view).splitlines()
    lines = render_text(view, job="llama").splitlines()
    row = {NAME[ln.split()[0]]: ln for ln in lines if ln.split() and ln.split()[0] in NAME}
    llama = {"disk", "peer1", "peer2"}
    assert [NAME[r.node] for r in view.job("llama").waiting] == ["peer1", "peer2"]
    assert row["disk"].split()[1] == "straggler"
    assert [row[p].split()[1] for p in ("peer1", "peer2")] == ["waiting", "waiting"]
    assert sum(ln.split()[1:2] == ["straggler"] for ln in lines if ln.split()[:1]
               and ln.split()[0] in NAME and NAME[ln.split()[0]] in llama) == 1
    same = {NAME[ln.split()[0]]: ln for ln in whole if ln.split() and ln.split()[0] in NAME}
    for n in llama:
        assert row[n].endswith(same[n].split("ago", 1)[1].strip()), (row[n], same[n])
    assert view.job("bert").waiting == [] and view.job("bert").role(view.job("bert").nodes[0]) is None


def test_once_text_escapes_what_came_from_prometheus():
    from gpudisk_top.fleet.text import render_text

    view = table_view()
    view.rows[0].node = "evil\x1b]2;title\x07"
    text = render_text(view)
    assert "\x1b" not in text and "evil\\x1b]2;title\\x07" in text


def test_retarget_asks_other_rows_and_the_sparkline_again():
    clock = [0.0]
    client = CannedClient()
    source = FleetSource(client, clock=lambda: clock[0])
    source.refresh(now_s=META["table_at_s"])
    source.refresh(now_s=META["table_at_s"])
    with pytest.raises(ValueError):
        source.retarget(group_by="a-b")
    assert source.group_by == "instance"
    source.retarget(group_by="training_job", filters={"training_job": "llama"})
    assert 'training_job="llama"' in source.table_expr and "by (training_job)" in source.spark_expr
    view = source.refresh(now_s=META["table_at_s"])
    assert client.sent == ["table", "table", "spark", "ledger", "table", "table", "spark",
                           "ledger"]
    assert view.group_by == "training_job" and {r.node for r in view.rows} == {"llama", "bert"}


# ---------------------------------------------------------------------------- labels
def test_one_syntax_for_match_and_the_screen_filter():
    """--match's words and the screen's line go through the same pair parser
    (fleet/labels.py): the same quoting, the same refusals."""
    assert parse_pairs(["training_job=llama", 'rack="row 3"', "x="]) == {
        "training_job": "llama", "rack": "row 3", "x": ""}
    assert parse_filter_text('training_job=llama rack="row 3",x=') == {
        "training_job": "llama", "rack": "row 3", "x": ""}
    assert parse_filter_text("") == {}
    assert parse_filter_text(format_filters({"rack": "row 3", "a": "x"})) == {"rack": "row 3",
                                                                            "a": "x"}
    for bad in ("llama", "=x", "1a=b", "__name__=x", "a=1 a=2", "a=\udcff"):
        with pytest.raises(ValueError) as screen:
            parse_filter_text(bad)
        with pytest.raises(ValueError) as match:
            parse_pairs(bad.split(), "--match")
        assert str(screen.value).startswith("filter ")
        assert str(match.value).startswith("--match ") and "\n" not in str(match.value)


def fleet_cli(*args) -> subprocess.CompletedProcess:
    """The CLI with argv as bytes, as a shell passes $'\\xff' (no server is reached)."""
    argv = [a if isinstance(a, bytes) else a.encode() for a in args]
    return subprocess.run([sys.executable.encode(), b"-m", b"gpudisk_top", b"fleet", *argv],
                          capture_output=True, timeout=60, cwd=ROOT,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("args, says", [
    ([b"--match", b"training_job=\xff"], b"--match 'training_job=\\udcff': the value is not UTF-8"),
    ([b"--job", b"ll\xffama"], b"--job 'll\\udcffama': not UTF-8"),
    ([b"--exporter-job", b"\xff"], b"--exporter-job '\\udcff': not UTF-8"),
    ([b"--match", b'rack="row 3"', b"--match", b"rack=x"], b"rack: given twice"),
])
def test_a_value_that_is_not_utf8_is_bad_usage_in_one_line(args, says):
    proc = fleet_cli(b"--prometheus", b"http://127.0.0.1:9", b"--once", *args)
    assert proc.returncode == 2 and proc.stdout == b"", proc.stderr
    assert proc.stderr.startswith(b"gpudisk-top: error: ") and proc.stderr.count(b"\n") == 1
    assert says in proc.stderr, proc.stderr


def test_a_password_in_a_bad_url_is_never_printed():
    proc = fleet_cli(b"--prometheus", b"http://alice:s3cret@host:99999", b"--once")
    assert proc.returncode == 2 and b"s3cret" not in proc.stderr + proc.stdout
    assert proc.stderr == (b"gpudisk-top: error: --prometheus 'http://***@host:99999': the "
                           b"port is not a number from 1 to 65535\n")


# ---------------------------------------------------------------------------- formats
def test_times_and_evidence_have_one_format_each():
    assert [duration(s) for s in (None, 45, 119.6, 725, 3 * 3600 + 300, 2 * 86400 + 4 * 3600)] == [
        "", "45 s", "2 min", "12 min", "3 h 05 min", "2 d 4 h"]
    assert [age(s) for s in (None, 45, 725, 3 * 3600, 2 * 86400)] == ["?", "45s", "12m", "3h", "2d"]
    assert clock_hm(None) == "?"
    # the figures as the node's own disk table and --once read them (iostat's 2 decimals)
    ev = DeviceEvidence("sdb", r_await_ms=48.2, aqu_sz=3.25, util_pct=99.6, rkb_s=1024)
    assert ev.text == "sdb r_await 48.20 ms, aqu-sz 3.25, %util 99.60"
    assert ev.short == "r_await 48.20 ms, aqu-sz 3.25"
    assert DeviceEvidence("md0", rkb_s=2048).text == "md0 read 2.00 MB/s"
    assert DeviceEvidence("md0", rkb_s=2048).short == ""
