"""`gpudisk-top fleet` end to end: a real Prometheus (Debian's package) on loopback scrapes
`serve --demo` nodes every second (tests/fleet_harness.py: a disk-starved node and two
whose GPUs wait on peers in job llama; a cpu-starved, a healthy, one this test kills and
a target nobody serves in job bert); `fleet --once --json` through the real CLI lists
them with the right states and order, the killed one as stale, and names llama's
straggler.  Error paths: Prometheus down, a server that never answers, bad options.

The tests of the query contract (the table, a stale node, a job's filter, the timeline's
range query, a job's targets all down) run on both backends: Prometheus, and
VictoriaMetrics single-node scraping the same targets from the same config (Debian's
victoria-metrics): the fleet's queries, unchanged, must mean the same on MetricsQL.  The
servers evaluate examples/fleet-rules.yml (Prometheus's rule_files; vmalert beside
VictoriaMetrics), so the CLI reads the recorded form, and one test reads both forms side
by side; the whole-job-down test runs without rules (the raw form, as a server without
them)."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time
import urllib.request

import pytest

from fleet_harness import EXPECTED, ROOT, Fleet, backend_params, gpudisk, wait_until

FLEET_RULES = f"{ROOT}/examples/fleet-rules.yml"


def fleet_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(gpudisk("fleet", *args), capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def once_json(base: str, *args: str) -> dict:
    proc = fleet_cli("--prometheus", base, "--once", "--json", *args)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module", params=backend_params())
def fleet(request, tmp_path_factory):
    with Fleet(tmp_path_factory.mktemp("fleet"), backend=request.param,
               rules=FLEET_RULES) as fleet:
        def states():
            from gpudisk_top.fleet.promapi import PromClient
            from gpudisk_top.fleet.source import FleetSource

            view = FleetSource(PromClient(fleet.base)).refresh(spark=False)
            # the records of every live node (the rules' first evaluations may hold some)
            return view.recorded and all(r.gpus_total for r in view.rows if not r.stale) \
                and {fleet.name_of(r.node): r.state for r in view.rows} == EXPECTED
        # generous: seven nodes and a Prometheus starting on two busy cores
        wait_until(states, 90, f"the fleet in states {EXPECTED}")
        yield fleet


def names(fleet, doc) -> list[str]:
    return [fleet.name_of(n["node"]) for n in doc["nodes"]]


def test_once_json_lists_every_node_in_order_with_its_state(fleet):
    doc = once_json(fleet.base)
    assert doc["error"] is None and doc["prometheus"] == fleet.base
    assert doc["recording_rules"] is True
    assert {fleet.name_of(n["node"]): n["state"] for n in doc["nodes"]} == EXPECTED
    order = names(fleet, doc)
    assert set(order[:2]) == {"disk", "cpu"} and order[2] == "down"
    assert order[3:] == ["peer1", "peer2", "healthy", "stopped"] or \
        order[3:] == ["peer1", "peer2", "stopped", "healthy"]   # the same tier, by name
    disk = doc["nodes"][order.index("disk")]
    assert disk["devices"] == ["sda"] and disk["gpus_starved"] == disk["gpus_total"] == 8
    assert disk["evidence"][0]["aqu_sz"] > 10 and disk["stale"] is False
    assert disk["evidence_text"].startswith("sda r_await ")
    # one instant query, the sparkline's and the GPU time lost's, from the records (no
    # series a GPU)
    assert doc["cost"]["queries"] == 3 and all(n["gpu_util_by_gpu"] == {} for n in doc["nodes"])


def test_a_node_that_stops_is_shown_stale(fleet):
    killed_at = time.time()
    fleet.stop("stopped")

    def stale():
        doc = once_json(fleet.base)
        return doc if any(fleet.name_of(n["node"]) == "stopped" and n["state"] == "stale"
                          for n in doc["nodes"]) else None
    doc = wait_until(stale, 30, "the stopped node shown stale")
    node = next(n for n in doc["nodes"] if fleet.name_of(n["node"]) == "stopped")
    assert node["stale"] is True and node["since_s"] is None and node["gpus_total"] == 0
    # nothing of its last live values read as bad data (MetricsQL's `or` once answered
    # its gpus_starved with its last-sample timestamp: queries.py)
    assert node["bad_series"] == 0 and node["evidence_text"] == ""
    assert killed_at - 10 < node["last_seen_s"] <= killed_at + 2
    # starved, then the nodes not reporting, then those waiting, then the healthy
    order = names(fleet, doc)
    assert set(order[:2]) == {"disk", "cpu"} and set(order[2:4]) == {"down", "stopped"}
    assert order[4:] == ["peer1", "peer2", "healthy"]
    text = fleet_cli("--prometheus", fleet.base, "--once").stdout
    line = next(ln for ln in text.splitlines() if ln.startswith(fleet.instance("stopped")))
    assert " stale " in line and " ago" in line


def test_the_job_view_names_the_straggler(fleet):
    doc = once_json(fleet.base, "--job", "llama")
    assert sorted(names(fleet, doc)) == ["disk", "peer1", "peer2"]
    (job,) = doc["jobs"]
    assert job["job"] == "llama" and job["straggler"] == fleet.instance("disk")
    assert job["reason"].startswith(f"{fleet.instance('disk')} holds training_job=llama "
                                    "back: disk-starved on sda (r_await ")
    assert "2 of 2 other nodes wait (2 by their own verdict)" in job["reason"]
    assert job["waiting"] == [fleet.instance("peer1"), fleet.instance("peer2")]
    # the JSON's reason has no local clock: since_s has the time
    assert " since " not in job["reason"] and job["since_s"] == next(
        n["since_s"] for n in doc["nodes"] if n["node"] == fleet.instance("disk"))
    text = fleet_cli("--prometheus", fleet.base, "--once", "--job", "llama").stdout
    assert f"llama: 3 nodes, straggler {fleet.instance('disk')}: " in text, text
    # one node labelled straggler, the others waiting on it, in the table as in its line
    state = {fleet.name_of(ln.split()[0]): ln.split()[1] for ln in text.splitlines()
             if ln.split() and ln.split()[0] in {fleet.instance(n) for n in EXPECTED}}
    assert state == {"disk": "straggler", "peer1": "waiting", "peer2": "waiting"}, text
    assert "query cost: 3 queries" in text
    bert = once_json(fleet.base, "--match", "training_job=bert")["jobs"][0]
    assert bert["job"] == "bert" and bert["straggler"] is None


def test_the_recording_rules_answer_the_table_as_the_raw_series(fleet):
    """The recorded form (examples/fleet-rules.yml) gives the rows the raw form gives,
    from fewer series and without the hour's samples of every node."""
    from gpudisk_top.fleet import queries
    from gpudisk_top.fleet.model import build_view
    from gpudisk_top.fleet.promapi import PromClient
    from gpudisk_top.fleet.source import has_rules

    client = PromClient(fleet.base)
    now = time.time()
    answers = {form: client.instant(queries.table_query(recorded=form)) for form in (False, True)}
    assert all(a.ok and has_rules(a) for a in answers.values())
    assert len(answers[True].series) < len(answers[False].series)
    raw, rec = (build_view(answers[form], None, now).rows for form in (False, True))
    assert [r.node for r in rec] == [r.node for r in raw]
    for a, b in zip(raw, rec):
        assert (b.state, b.stale, b.gpus_total, b.gpus_starved, b.devices, b.last_seen_s is None) \
            == (a.state, a.stale, a.gpus_total, a.gpus_starved, a.devices, a.last_seen_s is None)
        assert [e.device for e in b.evidence] == [e.device for e in a.evidence]
        if a.gpu_util_pct is not None:       # the records are the last evaluation's (1 s)
            assert b.gpu_util_pct == pytest.approx(a.gpu_util_pct, abs=15), a.node
        assert b.gpu_util_by_gpu == {} and len(a.gpu_util_by_gpu) == a.gpus_total
        assert b.bad_series == a.bad_series == 0


def test_the_opened_nodes_timeline_from_one_range_query(fleet):
    from gpudisk_top.fleet.promapi import PromClient
    from gpudisk_top.fleet.source import FleetSource

    source = FleetSource(PromClient(fleet.base))
    tl = wait_until(lambda: (lambda t: t if sum(1 for s in t.states if s) >= 5 else None)(
        source.node_timeline(fleet.instance("disk"), window_s=120, width=60)), 30,
        "five reported columns")
    assert tl.step_s == 2.0 and len(tl.history) == 60 and source.cost.queries >= 1
    assert tl.states[-1] == "disk-starved" and tl.named == ["sda"] and tl.gpus == list(range(8))
    assert tl.history.columns[-1].metric("sda", "aqu_sz") > 10


# the ledger's acceptance: four nodes, two jobs, each node losing GPU time to its own cause
LEDGER_NODES = (("disk", "disk-starved-sata", "llama", False),
                ("peer", "straggler", "llama", False),
                ("cpu", "cpu-starved-cached", "bert", False),
                ("healthy", "healthy-cached", "bert", False))
COUNTER_RE = re.compile(r'^gpudisk_top_gpu_seconds_total\{cause="([a-z-]+)"\} (\S+)$', re.M)


def node_counters(fleet) -> dict[str, dict[str, float]]:
    """Each node's own gpudisk_top_gpu_seconds_total by cause, read from its /metrics."""
    out = {}
    for name in fleet.ports:
        with urllib.request.urlopen(f"http://{fleet.instance(name)}/metrics", timeout=5) as r:
            out[name] = {c: float(v) for c, v in COUNTER_RE.findall(r.read().decode())}
    return out


class CounterLog:
    """The nodes' own counters read every 0.2 s on a thread: what they held when."""

    def __init__(self, fleet) -> None:
        self.fleet, self.reads, self.stop = fleet, [], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.2):
            try:
                t = time.monotonic()
                self.reads.append((t, node_counters(self.fleet)))
            except OSError:
                pass

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)

    def at(self, t: float, name: str, cause: str, after: bool) -> float:
        """The node's counter at the last read before t (after: the first read after)."""
        reads = [r for r in self.reads if name in r[1] and cause in r[1][name]]
        pick = ([r for r in reads if r[0] >= t][:1] or reads[-1:]) if after else \
            ([r for r in reads if r[0] <= t][-1:] or reads[:1])
        return pick[0][1][name][cause]


@pytest.mark.parametrize("backend", backend_params())
def test_each_nodes_lost_gpu_time_is_its_own_counters_increase(tmp_path, backend):
    """`fleet --once --json` over 4 `serve --demo` nodes: each node's GPU-seconds lost in
    the last 24 h by cause, each job's and the fleet's, come from the nodes' own counters.
    The raw increase() (the query the CLI makes without the rules) equals each counter's
    increase (they start at 0 inside the window): at most what the counter held when the
    query was answered, at least what it held two scrape intervals before it was asked (a
    server holds a counter up to its last scrape), less, on Prometheus, its first scrape's
    value (increase() cannot know when a counter began).  The CLI's figures, read from the
    recording rules' record (rules loaded), are a record's values, and each record is the
    same increase() as the server answers it at the record's own time (less the data a
    server may not yet show then: its latency offset and a scrape's write), so however
    late a loaded vmalert evaluates, writes or is read back, nothing is off by a guess."""
    from gpudisk_top.fleet import queries
    from gpudisk_top.fleet.model import build_view
    from gpudisk_top.fleet.promapi import PromClient
    from gpudisk_top.model.ledger import LOST_CAUSES

    with Fleet(tmp_path, nodes=LEDGER_NODES, backend=backend, rules=FLEET_RULES) as fleet:
        def ready():
            doc = once_json(fleet.base)
            lost = {fleet.name_of(n["node"]): n["lost_24h_by_cause"] for n in doc["nodes"]}
            return doc if (doc["recording_rules"] and len(lost) == 4 and all(lost.values())
                           and lost["disk"]["disk-starved"] > 0) else None
        wait_until(ready, 90, "every node's lost GPU time, recorded")
        log = CounterLog(fleet)
        try:
            time.sleep(3)
            client = PromClient(fleet.base)
            doc = once_json(fleet.base)
            # every record of the last 5 minutes, with its own time
            records = {(fleet.name_of(s.labels["instance"]), s.labels["cause"]): s.values
                       for s in client.instant(f"{queries.REC_NODE_LOST}[5m]").series}
            asked = time.monotonic()
            raw = build_view(client.instant(queries.table_query()), None, time.time(),
                             ledger=client.instant(queries.ledger_query()))
            answered = time.monotonic()
            # each counter's first sample on the server: what Prometheus's increase() does
            # not count beyond half a scrape interval (it cannot know when it began);
            # VictoriaMetrics counts a counter's first value from 0
            first = {(fleet.name_of(s.labels["instance"]), s.labels["cause"]): s.value
                     for s in client.instant("min_over_time(gpudisk_top_gpu_seconds_total"
                                             "[24h])").series}
            # what the server answers for the raw increase() over the records' times
            t_end = max(t for values in records.values() for t, _ in values)
            span_s = 60.0
            increase = {(fleet.name_of(s.labels["instance"]), s.labels["cause"]): s.values
                        for s in client.range(queries.ledger_query(), t_end - span_s, t_end,
                                              0.25).series}
            time.sleep(0.5)
        finally:
            log.close()
    assert doc["recording_rules"] is True
    # the raw form: the nodes' own counters
    lost_raw = {fleet.name_of(r.node): r.lost_by_cause for r in raw.rows}
    assert set(lost_raw) == {"disk", "peer", "cpu", "healthy"}
    for name, by_cause in lost_raw.items():
        assert set(by_cause) == set(LOST_CAUSES)
        for cause in LOST_CAUSES:
            lo = log.at(asked - 2 * fleet.scrape_s, name, cause, after=False)
            if backend == "prometheus":
                lo -= first[name, cause]
            hi = log.at(answered, name, cause, after=True)
            assert lo - 1e-6 <= by_cause[cause] <= hi + 1e-6, (name, cause, lo, by_cause[cause], hi)
    # the recorded form: a record's value, and that record the raw increase() at its time.
    # A rule evaluated at t sees the samples written by then: on VictoriaMetrics those
    # before t less -search.latencyOffset (a scrape interval here) and a second's
    # ingestion; a scrape's samples are stamped at its start and written at its end
    unseen_s = 2 * fleet.scrape_s + (fleet.scrape_s + 5.0 if backend == "victoriametrics" else 0.0)
    lost = {fleet.name_of(n["node"]): n["lost_24h_by_cause"] for n in doc["nodes"]}
    assert set(lost) == {"disk", "peer", "cpu", "healthy"}
    for name, by_cause in lost.items():
        assert set(by_cause) == set(LOST_CAUSES)
        for cause in LOST_CAUSES:
            value = by_cause[cause]
            times = [t for t, v in records.get((name, cause), [])
                     if v == pytest.approx(value, rel=1e-9, abs=1e-6)]
            assert times, (name, cause, value, records.get((name, cause)))
            at = max(times)
            seen = [v for t, v in increase.get((name, cause), []) if at - unseen_s <= t <= at]
            if value == 0 and not seen:      # a cause never counted: no raw series yet
                continue
            assert seen, (name, cause, at, increase.get((name, cause)))
            assert min(seen) - 1e-6 <= value <= max(seen) + 1e-6, (name, cause, value, seen)
    # each node's own cause, and nothing lost on the healthy one
    assert lost["disk"]["disk-starved"] > 0 and lost["peer"]["straggler"] > 0
    assert lost["cpu"]["cpu-starved"] > 0 and sum(lost["healthy"].values()) == 0
    # a job's total is its nodes' sum, the fleet's every node's, by cause
    jobs = {j["job"]: j for j in doc["jobs"]}
    for job, names in (("llama", ("disk", "peer")), ("bert", ("cpu", "healthy"))):
        for cause in LOST_CAUSES:
            assert jobs[job]["lost_24h_by_cause"][cause] == pytest.approx(
                sum(lost[n][cause] for n in names))
        assert jobs[job]["lost_24h_gpu_s"] == pytest.approx(
            sum(sum(lost[n].values()) for n in names))
    total = doc["lost_24h"]
    assert total["window_s"] == 86400 and total["by_cause"] == pytest.approx(
        {c: sum(lost[n][c] for n in lost) for c in LOST_CAUSES})
    assert total["gpu_s"] == pytest.approx(sum(total["by_cause"].values()))


@pytest.mark.parametrize("backend", backend_params())
def test_a_whole_exporter_job_down_is_shown_down(tmp_path, backend):
    """Every target of the exporters' Prometheus job fails its scrapes and none was ever
    seen: each is shown down (not "no node"), from the same one instant query;
    --exporter-job names another job."""
    nodes = (("a", None, "llama", False), ("b", None, "llama", False))
    with Fleet(tmp_path, nodes=nodes, backend=backend) as fleet:
        def down():
            doc = once_json(fleet.base)
            return doc if len(doc["nodes"]) == 2 else None
        doc = wait_until(down, 30, "both targets down")
        assert {n["node"]: n["state"] for n in doc["nodes"]} == {
            fleet.instance("a"): "down", fleet.instance("b"): "down"}
        assert all(n["stale"] and n["last_seen_s"] is None for n in doc["nodes"])
        # the table's one query, asked again in the raw form (no recording rules here),
        # the sparkline and the GPU time lost
        assert doc["cost"]["queries"] == 4 and doc["recording_rules"] is False
        assert once_json(fleet.base, "--exporter-job", "other")["nodes"] == []


def test_prometheus_down_is_one_line_exit_1():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = fleet_cli("--prometheus", f"http://127.0.0.1:{port}", "--once")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == (f"gpudisk-top: error: Prometheus at http://127.0.0.1:{port}: "
                           "connection refused\n")


def test_a_prometheus_that_never_answers_times_out_shown_not_raised():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)                     # accepts (the kernel does), never answers
        port = s.getsockname()[1]
        started = time.monotonic()
        proc = fleet_cli("--prometheus", f"http://127.0.0.1:{port}", "--once", "--json",
                         "--timeout", "1")
        assert time.monotonic() - started < 30
    assert proc.returncode == 1 and proc.stdout == "" and "Traceback" not in proc.stderr
    assert proc.stderr == (f"gpudisk-top: error: Prometheus at http://127.0.0.1:{port}: "
                           "timed out after 1 s\n")


@pytest.mark.parametrize("args, message", [
    (["--prometheus", "127.0.0.1:9090", "--once"], "not a URL"),
    (["--prometheus", "http://h:9090", "--once", "--match", "training_job"], "give LABEL=VALUE"),
    (["--prometheus", "http://h:9090", "--once", "--match", "1x=y"], "not a Prometheus label"),
    (["--prometheus", "http://h:9090", "--once", "--by", "a-b"], "--by 'a-b'"),
    (["--prometheus", "http://h:9090", "--once", "--exporter-job", ""], "--exporter-job"),
    (["--prometheus", "http://h:9090", "--json"], "--json needs --once"),
    (["--prometheus", "http://h:9090", "--once", "-i", "0.1"], "between 1 and 3600"),
    (["--prometheus", "http://h:9090", "--once", "--job", "a", "--match", "training_job=b"],
     "ask for different jobs"),
    (["--once"], "--prometheus"),
    (["--prometheus", "http://h:9090"], "needs a terminal"),
])
def test_bad_usage_is_one_line_exit_2(args, message):
    proc = fleet_cli(*args)
    assert proc.returncode == 2 and proc.stdout == "" and message in proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("gpudisk-top: error: ")
