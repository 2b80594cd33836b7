"""`report`'s devices: those the episodes blame first, and a "worst" that is the worst of
the await it sits under.

Before, devices were ranked by await, so the demo's backup HDD (sde, busy with a restic
job no episode blames) came before sdb, the disk the disk-starved episode blames; and
"worst" was the larger of an interval's r_await and w_await: one second's w_await of a
few writes, while the await column (reads and writes together) and the chart of it never
reached that figure.  Checked on the shipped demo recording against `export`'s CSV (the
model's per-interval numbers) and the report's own chart.
"""

from __future__ import annotations

import csv
import datetime
import json
import os

import pytest

from gpudisk_top.commands import export as export_cmd
from gpudisk_top.commands import report as report_cmd
from gpudisk_top.record import Recording
from gpudisk_top.report import summary
from gpudisk_top.report.series import BUCKETS
from gpudisk_top.report.text import chart_plan
from recording_helpers import call

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(ROOT, "examples", "demo-simulated.gdtrec")


def _report_json(capsys, *args) -> dict:
    assert call(report_cmd, DEMO, *args, "--json") == 0
    return json.loads(capsys.readouterr().out)


def _csv_awaits(tmp_path, *args) -> dict[str, list[tuple[float, float]]]:
    """Per device, (wall_s, await) of every interval as `export` writes it: iostat's await
    from r/s, r_await, w/s, w_await (every request's wait over every request)."""
    out = tmp_path / "demo.csv"
    assert call(export_cmd, DEMO, "--format", "csv", "-o", str(out), *args) == 0
    per: dict[str, list[tuple[float, float]]] = {}
    with open(out, newline="") as f:
        for row in csv.DictReader(f):
            if row["kind"] != "disk" or not row["disk_r_s"]:
                continue
            r_s, w_s = float(row["disk_r_s"]), float(row["disk_w_s"])
            if r_s + w_s <= 0:
                continue
            wait = r_s * float(row["disk_r_await_ms"]) + w_s * float(row["disk_w_await_ms"])
            per.setdefault(row["name"], []).append((float(row["wall_s"]), wait / (r_s + w_s)))
    return per


def test_the_devices_the_episodes_blame_come_first(capsys):
    d = _report_json(capsys)
    names = [x["name"] for x in d["devices"]]
    assert [e["devices"] for e in d["episodes"][:2]] == [["sdb"], ["nvme2n1"]]
    # sdb: the 60 s disk-starved episode; nvme2n1: the 15 s checkpoint stall; then the
    # rest by await, the busy backup HDD among them (before: sde, sdf, sdb, nvme2n1, ...)
    assert names[:3] == ["sdb", "nvme2n1", "sde"], names
    sdb, nvme = d["devices"][:2]
    assert sdb["blamed_by"] == [1] and sdb["blamed_s"] == d["episodes"][0]["duration_s"] > 50
    assert nvme["blamed_by"] == [2] and 10 < nvme["blamed_s"] < sdb["blamed_s"]
    rest = d["devices"][2:]
    assert all(x["blamed_s"] == 0 and x["blamed_by"] == [] for x in rest)
    assert sdb["await_ms"] < rest[0]["await_ms"]              # not ranked by await any more
    awaits = [x["await_ms"] or 0.0 for x in rest]
    assert awaits == sorted(awaits, reverse=True)
    # the text report: the same order, the blamed time beside each
    assert call(report_cmd, DEMO) == 0
    text = capsys.readouterr().out.splitlines()
    head = next(i for i, line in enumerate(text) if line.startswith("Devices"))
    rows = [line.split() for line in text[head + 2:head + 7]]
    assert [r[0] for r in rows] == names[:5]
    assert rows[0][2] == "1m" and rows[1][2] == "15s" and rows[2][2] == "-"


def test_worst_is_the_worst_interval_of_the_await_column(capsys, tmp_path):
    """Every device's worst equals the largest per-interval await of `export`'s CSV, at
    its time; sdb's equals the largest point of its await chart."""
    d = _report_json(capsys)
    per = _csv_awaits(tmp_path)
    checked = 0
    for x in d["devices"]:
        if x["name"] not in per:
            continue
        wall_s, worst = max(per[x["name"]], key=lambda p: (p[1], -p[0]))
        assert x["worst_await_ms"] == pytest.approx(worst, abs=1e-3), x
        at = datetime.datetime.fromisoformat(x["worst_at"]).timestamp()
        assert at == pytest.approx(wall_s), x
        # the window's await is a mean of the same intervals: never above the worst
        assert x["await_ms"] <= x["worst_await_ms"] + 1e-3
        checked += 1
    assert checked >= 10
    sde = next(x for x in d["devices"] if x["name"] == "sde")
    # sde's single writes wait 12 ms, longer than any interval's await (before: 14.00)
    assert sde["w_await_ms"] > sde["worst_await_ms"]


def test_worst_is_the_top_of_the_await_chart(capsys, tmp_path):
    """A window of fewer samples than the chart has points (one interval a point): the
    blamed disk's chart peaks at its worst, and the text report prints that figure."""
    with Recording.open(DEMO) as rec:
        start_s = rec.wall_s(40)
        result = summary.build(rec, start_s=start_s)
    assert result.data["samples"] < BUCKETS
    sdb = next(x for x in result.data["devices"] if x["name"] == "sdb")
    chart = next(c for c in chart_plan(result) if c.device == "sdb")
    assert max(chart.ys) == pytest.approx(sdb["worst_await_ms"], abs=1e-3)
    per = _csv_awaits(tmp_path, "--from", f"@{start_s}")
    assert max(a for _, a in per["sdb"]) == pytest.approx(sdb["worst_await_ms"], abs=1e-3)
    assert call(report_cmd, DEMO, "--from", f"@{start_s}") == 0
    row = next(line.split() for line in capsys.readouterr().out.splitlines()
               if line.startswith("sdb "))
    assert row[6] == f"{sdb['worst_await_ms']:.2f}"
