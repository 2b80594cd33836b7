#!/usr/bin/env python3
"""The cost of the fleet view's refresh: N simulated nodes (`serve --demo
disk-starved-sata,cpu-starved-cached,healthy-cached --nodes N`, 8 nodes a training job)
behind a real Prometheus (tests/fleet_harness.py), and FleetSource.refresh() as the fleet
screen calls it every 5 s.

Measured per refresh, medians over --refreshes (after two to warm up):
  series     what the table's one instant query returned
  round trip the query's wall time (Prometheus's evaluation + HTTP)
  cpu        this process's CPU for the refresh (HTTP, JSON, build_view): its share of a
             core at a refresh every 5 s is cpu / 5 s.  The fleet screen draws on top.
  prometheus Prometheus's own figures for the same query (stats=all): its evaluation
             time and the samples it touched
and the sparkline query (sent once a minute) and one node's 5-minute timeline (on Enter)
once each.  With --rules the server evaluates examples/fleet-rules.yml (Prometheus's
rule_files; vmalert beside VictoriaMetrics) and the table's two forms are measured side by
side, each --refreshes times, interleaved: `raw` (every GPU's series, the hour's samples
of every node's last-sample timestamp) and `recorded` (the rules' series); the refreshes
then read the recorded form, as the fleet does where the rules are loaded.
--backend victoriametrics runs the same against VictoriaMetrics single-node (no
`prometheus` figures: it does not give them).

usage: python bench/bench_fleet.py [--nodes 64] [--refreshes 20] [--backend B] [--rules]
                                   [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from fleet_harness import Fleet, wait_until  # noqa: E402

from gpudisk_top.fleet import queries  # noqa: E402
from gpudisk_top.fleet.table import build_view  # noqa: E402
from gpudisk_top.fleet.promapi import PromClient  # noqa: E402
from gpudisk_top.fleet.source import FleetSource  # noqa: E402

SCENARIOS = ("disk-starved-sata", "cpu-starved-cached", "healthy-cached")


def measure_forms(client, fleet, n: int, every_s: float) -> dict:
    """The table query's raw and recorded forms, n times each, interleaved: medians of
    the series, the round trip and this process's CPU to build the view from it."""
    got = {False: [], True: []}
    for _ in range(n):
        for recorded in (False, True):
            expr = queries.table_query(recorded=recorded)
            c0 = time.process_time()
            result = client.instant(expr)
            build_view(result, None, time.time())
            got[recorded].append((len(result.series), result.elapsed_s * 1000,
                                  (time.process_time() - c0) * 1000))
        time.sleep(every_s)
    out = {}
    for recorded, rows in got.items():
        expr = queries.table_query(recorded=recorded)
        out["recorded" if recorded else "raw"] = {
            "series": statistics.median(r[0] for r in rows),
            "round_trip_ms": round(statistics.median(r[1] for r in rows), 2),
            "cpu_ms": round(statistics.median(r[2] for r in rows), 2),
            "prometheus": prom_stats(fleet.base, expr)}
    return out


def prom_stats(base: str, expr: str) -> dict:
    """Prometheus's own figures for the query (stats=all); VictoriaMetrics gives none."""
    data = urllib.parse.urlencode({"query": expr, "stats": "all", "nocache": "1"}).encode()
    with urllib.request.urlopen(f"{base}/api/v1/query", data=data, timeout=30) as r:
        stats = json.load(r)["data"].get("stats", {})
    if not stats:
        return {}
    return {"eval_ms": stats.get("timings", {}).get("evalTotalTime", 0) * 1000,
            "samples": stats.get("samples", {}).get("totalQueryableSamples")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--refreshes", type=int, default=20)
    ap.add_argument("--every", type=float, default=1.0, help="seconds between refreshes")
    ap.add_argument("--backend", choices=("prometheus", "victoriametrics"),
                    default="prometheus")
    ap.add_argument("--rules", action="store_true",
                    help="load examples/fleet-rules.yml and measure both forms")
    ap.add_argument("--interval", type=float, default=5.0,
                    help="the nodes' sampling and the scrape interval, seconds")
    ap.add_argument("--wait", type=float, default=600,
                    help="seconds to wait for every node live before measuring")
    ap.add_argument("--json", metavar="OUT")
    args = ap.parse_args()
    nodes = [(f"n{i}", SCENARIOS[i % 3], f"job{i // 8}", False) for i in range(args.nodes)]
    rules = os.path.join(ROOT, "examples", "fleet-rules.yml") if args.rules else None
    with tempfile.TemporaryDirectory() as tmp, \
            Fleet(tmp, nodes=nodes, interval_s=args.interval, scrape_s=args.interval,
                  demo_start_s=60, backend=args.backend, rules=rules) as fleet:
        source = FleetSource(PromClient(fleet.base, timeout_s=30))

        def ready():
            view = source.refresh(spark=False)
            live = [r for r in view.rows if not r.stale]
            return len(live) == args.nodes and (not args.rules or (
                view.recorded and all(r.gpus_total for r in live)))
        try:
            wait_until(ready, args.wait, "every node live"
                       + (", its records there" if rules else ""))
        except AssertionError as err:
            # a loaded machine: nodes whose sampling stalls leave out their series for a
            # while; measured as they are, and said (nodes_live)
            print(f"note: {err}; measuring the fleet as it is", file=sys.stderr)
        forms = {}
        if args.rules:
            forms = measure_forms(source.client, fleet, args.refreshes, args.every)
        for _ in range(2):
            source.refresh(spark=False)
        series, wall_ms, cpu_ms = [], [], []
        for _ in range(args.refreshes):
            c0 = time.process_time()
            view = source.refresh(spark=False)
            cpu_ms.append((time.process_time() - c0) * 1000)
            wall_ms.append(view.cost.elapsed_ms)
            series.append(view.cost.series)
            time.sleep(args.every)
        c0 = time.process_time()
        spark = source.client.instant(source.spark_expr)
        spark_cpu = (time.process_time() - c0) * 1000
        c0 = time.process_time()
        tl = source.node_timeline(view.rows[0].node, window_s=300, width=150)
        tl_cpu = (time.process_time() - c0) * 1000
        out = {
            "nodes": args.nodes,
            "table": {"series": statistics.median(series),
                      "round_trip_ms": round(statistics.median(wall_ms), 2),
                      "cpu_ms": round(statistics.median(cpu_ms), 2),
                      "pct_of_a_core_at_5s": round(statistics.median(cpu_ms) / 5000 * 100, 3),
                      "prometheus": prom_stats(fleet.base, source.table_expr)},
            "spark": {"series": len(spark.series), "round_trip_ms": round(spark.elapsed_s * 1000, 2),
                      "cpu_ms": round(spark_cpu, 2),
                      "prometheus": prom_stats(fleet.base, source.spark_expr)},
            "timeline": {"series": tl.cost.series, "round_trip_ms": round(tl.cost.elapsed_ms, 2),
                         "cpu_ms": round(tl_cpu, 2), "columns": len(tl.history),
                         "step_s": tl.step_s,
                         "prometheus": prom_stats(fleet.base, queries.timeline_query(
                             "instance", view.rows[0].node))},
            "states": {s: sum(r.state == s for r in view.rows)
                       for s in sorted({r.state for r in view.rows})},
            "backend": args.backend, "recorded": view.recorded, "forms": forms,
            "nodes_live": sum(not r.stale for r in view.rows), "interval_s": args.interval,
        }
    print(json.dumps(out, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
