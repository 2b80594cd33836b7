"""Issue 35 item 3: what the fleet believes of its nodes' series (fleet/trust.py,
fleet/ledger.py), on Prometheus's own answer shape (parse_answer of the JSON a server
gives), through build_view, the --once text and JSON.

- a node's GPU time lost is at most its own GPUs times the 24-hour window: a rogue node's
  41,300 GPU-h is not counted (its row says so, '?' in its column), the honest ones are;
- one series a node, cause and job: 10,000 label sets of one counter, or a node scraped by
  two Prometheus jobs, count once (and are said); a node's time in two jobs is added;
- a node scraped by two jobs is one node (8 GPUs, not 16);
- a target with two verdicts is bad data, not healthy, and waits on nobody;
- a lone surrogate in a label is shown escaped, the text is UTF-8;
- a refresh whose table query failed sends no other query (a hung server costs one
  --timeout, not three), and says so.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time

import pytest

from fleet_harness import ROOT, gpudisk
from fleet_series import lost_series, node_series, vector_answer
from gpudisk_top.fleet import ledger as fleet_ledger
from gpudisk_top.fleet import trust
from gpudisk_top.fleet.table import build_view
from gpudisk_top.fleet.promapi import PromClient, parse_answer
from gpudisk_top.fleet.source import FleetSource
from gpudisk_top.fleet.text import device_text, lost_cell, render_json, render_text
from slack import slack

NOW = 1_796_229_200.0
DAY = 86400


def vector(series):
    """Prometheus's answer holding `series` now, as the fleet parses it."""
    return parse_answer(vector_answer(series, NOW))


def node(instance, **kw):
    """The raw table query's series of one node now (tests/fleet_series.py)."""
    return node_series(instance, NOW, **kw)


def lost(instance, cause, value, job="gpudisk-top", training_job="llama", **extra):
    """One series of the raw ledger query's answer, `extra` its other labels."""
    return lost_series(instance, cause, value, job=job, training_job=training_job, extra=extra)


def view_of(table, ledger):
    return build_view(vector(table), None, NOW, ledger=vector(ledger))


def rows_of(view):
    return {r.node: r for r in view.rows}


HONEST = [*node("a:9400"), *node("b:9400")]
HONEST_LOST = [lost("a:9400", "disk-starved", 450.0), lost("b:9400", "cpu-starved", 900.0)]


# ---------------------------------------------------------------------------- the bound
def test_a_rogue_node_is_bounded_by_its_own_gpus_and_said():
    view = view_of([*HONEST, *node("rogue:9400")],
                   [*HONEST_LOST, lost("rogue:9400", "cpu-starved", 41_300 * 3600.0)])
    rows = rows_of(view)
    rogue = rows["rogue:9400"]
    assert rogue.lost_by_cause is None and lost_cell(rogue) == "?"
    assert "41300.00 GPU-h claimed, more than its 8 GPUs' 24 h (192.00 GPU-h)" in \
        rogue.doubts[fleet_ledger.LOST_REFUSED]
    assert "lost 24 h not counted" in device_text(rogue)
    # the honest nodes, their job and the fleet: as if the rogue said nothing
    assert rows["a:9400"].lost_gpu_s == 450.0 and rows["b:9400"].lost_gpu_s == 900.0
    assert view.lost_by_cause["disk-starved"] == 450.0
    assert view.lost_by_cause["cpu-starved"] == 900.0
    assert view.job("llama").lost_gpu_s == 1350.0
    doc = json.loads(render_json(view))
    node_doc = next(n for n in doc["nodes"] if n["node"] == "rogue:9400")
    assert node_doc["lost_24h_gpu_s"] is None and "lost_24h" in node_doc["doubts"]
    assert doc["lost_24h"]["gpu_s"] == 1350.0


def test_a_node_at_its_gpus_whole_day_is_counted():
    """The bound is the node's: 8 GPUs lost for the whole day is true and counted; a
    1-GPU node claiming the same is not."""
    whole = 8 * DAY
    view = view_of([*node("big:9400"), *node("small:9400", gpus=1)],
                   [lost("big:9400", "disk-starved", whole),
                    lost("small:9400", "disk-starved", whole)])
    rows = rows_of(view)
    assert rows["big:9400"].lost_gpu_s == whole and not rows["big:9400"].doubts
    assert rows["small:9400"].lost_by_cause is None
    assert "its 1 GPUs' 24 h" in rows["small:9400"].doubts["lost_24h"]
    assert view.lost_by_cause["disk-starved"] == whole


def test_the_bound_is_the_nodes_sum_of_causes_not_each_series():
    """Five causes each under 8 GPUs' day, together above it: not counted."""
    causes = ("disk-starved", "cpu-starved", "checkpoint-stall", "straggler", "undiagnosed")
    view = view_of(node("r:9400"), [lost("r:9400", c, 6 * DAY) for c in causes])
    assert view.rows[0].lost_by_cause is None and view.lost_by_cause == dict.fromkeys(
        view.lost_by_cause, 0.0)


def test_10000_series_of_one_counter_count_once_within_the_bound():
    series = [lost("r:9400", "disk-starved", 140_000.0 + i, shard=str(i)) for i in range(10_000)]
    view = view_of([*HONEST, *node("r:9400")], [*HONEST_LOST, *series])
    r = rows_of(view)["r:9400"]
    assert r.lost_gpu_s == 140_000.0 + 9_999          # the largest, once
    assert r.lost_gpu_s <= 8 * DAY * fleet_ledger.SLACK
    assert "10,000 series of 1 counter, each counted once" in r.doubts["lost_24h_series"]
    assert view.lost_by_cause["disk-starved"] == 450.0 + r.lost_gpu_s


def test_a_node_without_a_row_is_bounded_by_the_fleets_largest_and_said():
    """A node stopped for more than the table's hour has no row and no GPUs now: the
    largest node's GPUs bound it, and the view says what was not counted."""
    view = view_of(HONEST, [*HONEST_LOST, lost("gone:9400", "disk-starved", 1e9),
                            lost("old:9400", "straggler", 300.0)])
    assert view.lost_by_cause["disk-starved"] == 450.0       # gone's not counted
    assert view.lost_by_cause["straggler"] == 300.0          # old's is
    assert len(view.doubts) == 1 and view.doubts[0].startswith("gone:9400: lost 24 h not")
    assert "the fleet's largest node's 8 GPUs'" in view.doubts[0]
    text = render_text(view)
    assert "  not counted or doubted: gone:9400: lost 24 h not counted" in text
    assert json.loads(render_json(view))["doubts"] == view.doubts


@pytest.mark.parametrize("value, why", [(-5.0, "no time"), (float("nan"), "no time"),
                                        (float("inf"), "no time")])
def test_a_value_that_is_no_time_is_left_out_and_said(value, why):
    view = view_of(HONEST, [*HONEST_LOST, lost("a:9400", "cpu-starved", value)])
    a = rows_of(view)["a:9400"]
    assert a.lost_by_cause["cpu-starved"] == 0.0 and a.lost_gpu_s == 450.0
    assert why in a.doubts["lost_24h_series"] and "1 series left out" in device_text(a)


def test_a_node_that_moved_jobs_counts_in_each():
    """Two series of one node and cause under two values of the job label are its time in
    each job (not duplicates): both count, each to its job, within the node's bound."""
    view = view_of(node("m:9400", training_job="bert"),
                   [lost("m:9400", "disk-starved", 100.0, training_job="llama"),
                    lost("m:9400", "disk-starved", 200.0, training_job="bert")])
    assert view.rows[0].lost_gpu_s == 300.0 and not view.rows[0].doubts
    assert view.job("bert").lost_gpu_s == 200.0
    assert view.lost_by_cause["disk-starved"] == 300.0


# ---------------------------------------------------------------------------- the targets
def test_a_node_scraped_by_two_jobs_is_one_node():
    """A static job and a PodMonitor scrape one exporter: every series twice, one instance.
    One node of 8 GPUs, 8 starved, its lost time once, and the row says why."""
    table = [*HONEST, *node("d:9400", state="disk-starved"),
             *node("d:9400", state="disk-starved", job="monitoring/pods")]
    led = [*HONEST_LOST, lost("d:9400", "disk-starved", 450.0),
           lost("d:9400", "disk-starved", 451.0, job="monitoring/pods")]
    view = view_of(table, led)
    d = rows_of(view)["d:9400"]
    assert (d.gpus_starved, d.gpus_total, d.state) == (8, 8, "disk-starved")
    assert d.lost_gpu_s == 451.0 and view.lost_by_cause["disk-starved"] == 450.0 + 451.0
    assert d.doubts[trust.SCRAPES] == ("scraped by 2 jobs (gpudisk-top, monitoring/pods): "
                                       "counted once")
    line = next(x for x in render_text(view).splitlines() if x.startswith("d:9400"))
    assert " 8/8 " in line and "scraped by 2 jobs" in line and " 0.13 " in line


def test_by_cluster_a_doubled_node_counts_once_among_others():
    table = [(dict(l, cluster="c1"), v) for l, v in
             [*node("x:1", state="disk-starved"), *node("x:1", state="disk-starved", job="pods"),
              *node("y:1")]]
    view = build_view(vector(table), None, NOW, group_by="cluster")
    row = view.rows[0]
    assert (row.node, row.gpus_total, row.gpus_starved) == ("c1", 16, 8)
    assert row.members == ["x:1", "y:1"] and "scraped by 2 jobs" in row.doubts[trust.SCRAPES]


def test_two_verdicts_for_one_target_are_bad_data_not_healthy():
    view = view_of([*HONEST, *node("v:9400", gpus=2, state="disk-starved",
                                   verdicts=("healthy", "disk-starved"))], HONEST_LOST)
    v = rows_of(view)["v:9400"]
    assert v.state == trust.BAD_DATA and not v.starved and not v.waits()
    assert v.doubts[trust.VERDICTS] == "2 verdicts at once: disk-starved, healthy"
    assert device_text(v) == ("bad data from its exporter (2 verdicts at once: disk-starved, "
                              "healthy)")
    # shown with the nodes that give no data, before the healthy ones
    assert [r.node for r in view.rows] == ["v:9400", "a:9400", "b:9400"]
    line = next(x for x in render_text(view).splitlines() if x.startswith("v:9400"))
    assert "bad-data" in line and "healthy" not in line.split("bad data")[0]


def test_the_same_verdict_twice_is_one_verdict():
    view = view_of(node("s:9400", state="disk-starved", verdicts=("disk-starved",) * 2), [])
    assert view.rows[0].state == "disk-starved" and not view.rows[0].doubts


def test_the_exporters_own_doubts_read_as_one_text():
    assert trust.doubts_text({"scrapes": "scraped by 2 jobs", "series": "2 series dropped",
                              "state": "2 verdicts at once: a, b"}) == (
        "bad data from its exporter (2 series dropped; 2 verdicts at once: a, b); "
        "scraped by 2 jobs")
    assert trust.doubts_text({}) == ""


# ---------------------------------------------------------------------------- the edge
def test_a_lone_surrogate_in_a_label_is_shown_escaped():
    body = json.dumps(vector_answer(node("s:9400", training_job="\udcff\udcfeq"), NOW))
    assert "\\udcff" in body                          # the JSON escape a server sends
    table = parse_answer(json.loads(body))
    view = build_view(table, None, NOW)
    assert view.rows[0].labels["training_job"] == "\\udcff\\udcfeq"
    text = render_text(view)
    text.encode("utf-8")                              # strict: no UnicodeEncodeError
    assert "  \\udcff\\udcfeq: 1 node" in text


def test_fleet_once_with_a_surrogate_label_prints_utf8(tmp_path):
    """The real command line on a UTF-8 terminal's strict stdout."""
    import subprocess

    sys.path.insert(0, f"{ROOT}/tests/faults")
    from cases_r35_fleet import Stand, _fleet

    table, led, _ = _fleet("surrogate", time.time())
    with Stand(table, led) as stand:
        proc = subprocess.run(gpudisk("fleet", "--prometheus", stand.url, "--once"),
                              capture_output=True, cwd=ROOT, timeout=60,
                              env={**os.environ, "PYTHONIOENCODING": "utf-8:strict"})
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    assert "\\udcff\\udcfeq: 1 node" in proc.stdout.decode("utf-8")


def test_a_refresh_gives_up_at_a_hung_servers_first_deadline():
    """A socket that accepts and never answers: the refresh (--once forces the sparkline
    and the ledger) ends at one query's deadline, and its error says no other was sent."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        source = FleetSource(PromClient(f"http://127.0.0.1:{s.getsockname()[1]}",
                                        timeout_s=1.0))
        t0 = time.monotonic()
        view = source.refresh(spark=True)
        took = time.monotonic() - t0
    assert view.error.endswith("timed out after 1 s (no other query sent)")
    assert view.cost.queries == 1
    assert 1.0 <= took < 1.0 + 0.9 * slack(), took
