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
once each.

usage: python bench/bench_fleet.py [--nodes 64] [--refreshes 20] [--json OUT]
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
from gpudisk_top.fleet.promapi import PromClient  # noqa: E402
from gpudisk_top.fleet.source import FleetSource  # noqa: E402

SCENARIOS = ("disk-starved-sata", "cpu-starved-cached", "healthy-cached")


def prom_stats(base: str, expr: str) -> dict:
    data = urllib.parse.urlencode({"query": expr, "stats": "all"}).encode()
    with urllib.request.urlopen(f"{base}/api/v1/query", data=data, timeout=10) as r:
        stats = json.load(r)["data"].get("stats", {})
    return {"eval_ms": stats.get("timings", {}).get("evalTotalTime", 0) * 1000,
            "samples": stats.get("samples", {}).get("totalQueryableSamples")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--refreshes", type=int, default=20)
    ap.add_argument("--every", type=float, default=1.0, help="seconds between refreshes")
    ap.add_argument("--json", metavar="OUT")
    args = ap.parse_args()
    nodes = [(f"n{i}", SCENARIOS[i % 3], f"job{i // 8}", False) for i in range(args.nodes)]
    with tempfile.TemporaryDirectory() as tmp, \
            Fleet(tmp, nodes=nodes, interval_s=5, scrape_s=5, demo_start_s=60) as fleet:
        source = FleetSource(PromClient(fleet.base, timeout_s=10))
        wait_until(lambda: len([r for r in source.refresh(spark=False).rows
                                if not r.stale]) == args.nodes, 120, "every node live")
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
        }
    print(json.dumps(out, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
