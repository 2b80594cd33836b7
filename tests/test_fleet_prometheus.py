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

from fleet_harness import EXPECTED, ROOT, Fleet, backend_params, wait_until
from cli_run import gdt
from slack import slack

FLEET_RULES = f"{ROOT}/examples/fleet-rules.yml"


def fleet_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return gdt("fleet", *args, timeout=timeout)


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
    from gpudisk_top.fleet.table import build_view
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
    """The nodes' own counters read every 0.2 s on a thread: what they held when (each
    read with the monotonic times it began and ended: a counter's value read between the
    two was its value at some moment between them)."""

    def __init__(self, fleet) -> None:
        self.fleet, self.reads, self.stop = fleet, [], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.2):
            try:
                t = time.monotonic()
                counters = node_counters(self.fleet)
                self.reads.append((t, time.monotonic(), counters))
            except OSError:
                pass

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)

    def at(self, t: float, name: str, cause: str, after: bool) -> float:
        """At most the node's counter at t: the last read ended by t (after: at least it,
        the first read begun at t or later)."""
        reads = [r for r in self.reads if name in r[2] and cause in r[2][name]]
        pick = ([r for r in reads if r[0] >= t][:1] or reads[-1:]) if after else \
            ([r for r in reads if r[1] <= t][-1:] or reads[:1])
        return pick[0][2][name][cause]


def server_increase(samples: list, at_s: float, backend: str, window_s: float = 86400.0):
    """increase(counter[window]) evaluated at at_s over a counter's samples [(t_s, value)]
    that began inside the window, as each server computes it: Prometheus 2.42's
    extrapolatedRate (promql/functions.go: from the first sample to the last, extrapolated
    towards the window's ends by at most 1.1 mean intervals, and no further back than the
    counter's zero); VictoriaMetrics 1.79's rollupDelta (no extrapolation; a counter begun
    inside the window counts from 0 unless its first value exceeds 10 times its first
    step and one).  None where Prometheus has too few samples."""
    values = [v for _, v in samples]
    if backend == "victoriametrics":
        step = values[1] - values[0] if len(values) > 1 else 10.0
        step = step or 10.0
        before = 0.0 if abs(values[0]) < 10 * (abs(step) + 1) else values[0]
        return values[-1] - before
    if len(samples) < 2:
        return None
    ms = [round(t * 1000) for t, _ in samples]
    at_ms = round(at_s * 1000)
    result = values[-1] - values[0] + sum(a for a, b in zip(values, values[1:]) if b < a)
    to_start = (ms[0] - (at_ms - round(window_s * 1000))) / 1000
    to_end = (at_ms - ms[-1]) / 1000
    sampled = (ms[-1] - ms[0]) / 1000
    mean = sampled / (len(samples) - 1)
    if result > 0 and values[0] >= 0:
        to_start = min(to_start, sampled * (values[0] / result))
    threshold = mean * 1.1
    span = sampled + (to_start if to_start < threshold else mean / 2) \
        + (to_end if to_end < threshold else mean / 2)
    return result * (span / sampled)


@pytest.mark.parametrize("backend", backend_params())
def test_each_nodes_lost_gpu_time_is_its_own_counters_increase(tmp_path, backend):
    """`fleet --once --json` over 4 `serve --demo` nodes: each node's GPU-seconds lost in
    the last 24 h by cause, each job's and the fleet's, come from the nodes' own counters.
    The raw increase() (the query the CLI makes without the rules) equals each counter's
    increase (they start at 0 inside the window) up to the server's last scrape of it: at
    least the value that scrape took (itself checked against the node's own counter at
    that moment), less, on Prometheus, its first scrape's value (increase() cannot know
    when a counter began); at most what the counter held when the query was answered
    (and, on Prometheus, its extrapolation past the last scrape).  That last scrape is at
    most a scrape interval and the scrape's own time old (on VictoriaMetrics, its latency
    offset and a second's ingestion more).  The CLI's figures, read from the recording
    rules' record (rules loaded), are a record's values, and each record is exactly the
    increase() its server computes at the record's own time from the server's own
    samples written by then (server_increase), so however late a loaded vmalert
    evaluates, writes or is read back, nothing is off by a guess."""
    from gpudisk_top.fleet import queries
    from gpudisk_top.fleet.table import build_view
    from gpudisk_top.fleet.promapi import PromClient
    from gpudisk_top.verdict.ledger import LOST_CAUSES

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
            # what the server holds of each counter: every sample (the fleet is minutes
            # old), the last of them the value its last scrape took, with that scrape's time
            held = {(fleet.name_of(s.labels["instance"]), s.labels["cause"]): s.values
                    for s in client.instant("gpudisk_top_gpu_seconds_total[24h]").series}
            asked, asked_wall = time.monotonic(), time.time()
            raw = build_view(client.instant(queries.table_query()), None, time.time(),
                             ledger=client.instant(queries.ledger_query()))
            answered = time.monotonic()
            time.sleep(0.5)
        finally:
            log.close()
    assert doc["recording_rules"] is True
    # A server at t holds the samples written by then: a scrape's are stamped at its
    # start and written at its end (its timeout: a scrape interval here), and on
    # VictoriaMetrics those before t less -search.latencyOffset (a scrape interval here)
    # and a second's ingestion
    unseen_s = 2 * fleet.scrape_s + (fleet.scrape_s + 5.0 if backend == "victoriametrics" else 0.0)
    # the raw form: the nodes' own counters, to the server's last scrape of them
    lost_raw = {fleet.name_of(r.node): r.lost_by_cause for r in raw.rows}
    assert set(lost_raw) == {"disk", "peer", "cpu", "healthy"}
    wall_to_mono = asked - asked_wall
    ages = []
    for name, by_cause in lost_raw.items():
        assert set(by_cause) == set(LOST_CAUSES)
        for cause in LOST_CAUSES:
            if (name, cause) not in held:     # a cause never counted: no series yet
                assert by_cause[cause] == 0, (name, cause, by_cause[cause])
                continue
            samples = held[name, cause]
            (_, first), (scraped_at, scraped) = samples[0], samples[-1]
            ages.append(asked_wall - scraped_at)
            # that scrape took the node's own counter as it was then
            at = scraped_at + wall_to_mono
            assert (log.at(at, name, cause, after=False) - 1e-6 <= scraped
                    <= log.at(at + fleet.scrape_s, name, cause, after=True) + 1e-6), (
                name, cause, scraped)
            lo, hi = scraped, log.at(answered, name, cause, after=True)
            if backend == "prometheus" and len(samples) > 1:
                # Prometheus's increase() counts from the first sample (it cannot know
                # when a counter began) and extrapolates, at the series' mean rate, to the
                # query's time: 1.1 times the mean scrape interval at most
                # (server_increase); VictoriaMetrics counts from 0 and does not
                lo -= first
                hi += (scraped - first) * 1.1 / (len(samples) - 1)
            assert lo - 1e-6 <= by_cause[cause] <= hi + 1e-6, (name, cause, lo, by_cause[cause], hi)
    # the server's last scrapes were as fresh as its settings make them
    print(f"{backend}: the last scrape {max(ages):.2f} s old at most when asked")
    assert 0 <= min(ages) and max(ages) <= unseen_s, ages
    # the recorded form: a record's value, and that record the raw increase() at its time
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
            samples = held.get((name, cause), [])
            if value == 0 and not samples:   # a cause never counted: no raw series yet
                continue
            # the rule saw the samples written by `at`: some prefix of the server's own
            could = [server_increase(samples[:j], at, backend)
                     for j in range(1, len(samples) + 1) if samples[j - 1][0] <= at]
            assert any(c is not None and c == pytest.approx(value, rel=1e-9, abs=1e-9)
                       for c in could), (name, cause, at, value, could[-5:])
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


# issue 35 item 3: exporters that claim what cannot be, and a scrape config's mistake
DOUBTED_NODES = (("honest", None, "llama", False), ("rogue", None, "llama", False),
                 ("doubled", None, "llama", False), ("odd", None, "bert", False),
                 ("shards", None, "bert", False))
ROGUE_GPU_S_PER_S = 200_000.0      # 8 GPUs' whole day (691,200 GPU-s) within 4 s
HONEST_GPU_S_PER_S = 2.0           # 2 GPUs starved
SHARDS = 10_000


def doubted_exposition(name: str, started: float) -> bytes:
    """A node's /metrics: node_series's disk-starved node of 2 GPUs and its lost-time
    counter growing from `started` (the rogue's far past its GPUs' day; the shards' under
    SHARDS label sets of one counter; the odd one with a second verdict, healthy)."""
    from fleet_harness import exposition, node_series

    now = time.time()
    text = exposition(node_series(name, now)).decode()
    grown = now - started
    if name == "rogue":
        lines = [f'gpudisk_top_gpu_seconds_total{{cause="disk-starved"}} {grown * ROGUE_GPU_S_PER_S}']
    elif name == "shards":
        lines = [f'gpudisk_top_gpu_seconds_total{{cause="disk-starved",shard="{i}"}} '
                 f'{grown * HONEST_GPU_S_PER_S}' for i in range(SHARDS)]
    else:
        lines = [f'gpudisk_top_gpu_seconds_total{{cause="disk-starved"}} {grown * HONEST_GPU_S_PER_S}']
    if name == "odd":
        lines.append('gpudisk_top_verdict_info{state="healthy",kind="",devices="",gpus=""} 1')
    return (text + "\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("backend", backend_params())
def test_rogue_doubled_and_contradictory_exporters_through_a_real_server(tmp_path, backend):
    """A real server scrapes five exporters (the recording rules loaded): an honest node, a
    rogue one whose counter grows far past its 2 GPUs' day, one scraped by a second job (a
    PodMonitor's, the same address), one exporting two verdicts, one exporting one counter
    under 10,000 label sets.  In the recorded form (the CLI) and the raw one alike: the
    rogue's lost time is not counted, and says why; the doubled node is one node of 2 GPUs
    whose time counts once; the shards count once; the odd node is bad-data, not
    healthy; the fleet's total is what the honest counters allow."""
    from gpudisk_top.fleet import queries
    from gpudisk_top.fleet.table import build_view
    from gpudisk_top.fleet.promapi import PromClient
    from fleet_harness import AnswerServer

    started = time.time()
    with Fleet(tmp_path, nodes=DOUBTED_NODES, backend=backend, rules=FLEET_RULES,
               extra_jobs={"monitoring/pods": ["doubled"]}) as fleet:
        servers = [AnswerServer((lambda n: lambda: doubted_exposition(n, started))(name),
                                "text/plain; version=0.0.4", port=fleet.ports[name],
                                lifetime_s=240)
                   for name, *_ in DOUBTED_NODES]
        try:
            def ready():
                doc = once_json(fleet.base)
                rows = {fleet.name_of(n["node"]): n for n in doc["nodes"]}
                return doc if (doc["recording_rules"] and len(rows) == 5
                               and "lost_24h" in rows["rogue"]["doubts"]
                               and (rows["honest"]["lost_24h_gpu_s"] or 0) > 4) else None
            doc = wait_until(ready, 120, "the rogue's time refused, the honest counted")
            client = PromClient(fleet.base)
            raw = build_view(client.instant(queries.table_query()), None, time.time(),
                             ledger=client.instant(queries.ledger_query()))
            text = fleet_cli("--prometheus", fleet.base, "--once").stdout
            grown_s = time.time() - started
        finally:
            for srv in servers:
                srv.close()
    honest_most = grown_s * HONEST_GPU_S_PER_S      # what a counter held when last read
    bound = 2 * 86400 * 1.1                         # a node of 2 GPUs, its day
    for form, rows, total in (
            ("recorded", {fleet.name_of(n["node"]): n for n in doc["nodes"]},
             doc["lost_24h"]["gpu_s"]),
            ("raw", {fleet.name_of(r.node): r.to_json() for r in raw.rows},
             sum(raw.lost_by_cause.values()))):
        rogue, doubled, odd, shards = (rows[n] for n in ("rogue", "doubled", "odd", "shards"))
        assert rogue["lost_24h_gpu_s"] is None, (form, rogue)
        assert "more than its 2 GPUs' 24 h" in rogue["doubts"]["lost_24h"], form
        assert (doubled["gpus_total"], doubled["gpus_starved"]) == (2, 2), (form, doubled)
        assert doubled["doubts"]["scrapes"].startswith("scraped by 2 jobs"), form
        for row in (doubled, shards, rows["honest"]):
            # one counter's increase, not two nor 10,000 (on Prometheus, less its first
            # scrape's value; its extrapolation a scrape interval at most)
            assert 0 < row["lost_24h_gpu_s"] <= honest_most + 2 * HONEST_GPU_S_PER_S, (form, row)
        assert "10,000 series of 1 counter" in shards["doubts"]["lost_24h_series"], form
        assert odd["state"] == "bad-data" and "2 verdicts at once" in odd["doubts"]["state"]
        assert total <= 4 * (honest_most + 2 * HONEST_GPU_S_PER_S) < bound, (form, total)
    line = {fleet.name_of(ln.split()[0]): ln for ln in text.splitlines()
            if ln.split() and ln.split()[0] in {fleet.instance(n) for n, *_ in DOUBTED_NODES}}
    assert "lost 24 h not counted" in line["rogue"] and re.search(r" ago +\? ", line["rogue"])
    assert " 2/2 " in line["doubled"] and "scraped by 2 jobs" in line["doubled"]
    assert "bad-data" in line["odd"] and "bad data from its exporter" in line["odd"]


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
                           "connection refused (no other query sent)\n")


def test_a_prometheus_that_never_answers_times_out_shown_not_raised():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)                     # accepts (the kernel does), never answers
        port = s.getsockname()[1]
        started = time.monotonic()
        proc = fleet_cli("--prometheus", f"http://127.0.0.1:{port}", "--once", "--json",
                         "--timeout", "1")
        assert time.monotonic() - started < 30
        took = time.monotonic() - started
    assert proc.returncode == 1 and proc.stdout == "" and "Traceback" not in proc.stderr
    # one query's deadline, not the three --once asks for (issue 35): the rest unsent
    assert proc.stderr == (f"gpudisk-top: error: Prometheus at http://127.0.0.1:{port}: "
                           "timed out after 1 s (no other query sent)\n")
    assert took < 1.0 + 2.0 * slack(), took


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
