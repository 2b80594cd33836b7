"""`gpudisk-top export`: CSV and JSON Lines read back to the model's own rates; the Perfetto
output checked against the Chrome trace-event format."""

from __future__ import annotations

import csv
import json
import math

import pytest

from gpudisk_top.commands import export as export_cmd
from gpudisk_top.errors import UsageError
from gpudisk_top.model.disk import RATE_FIELDS
from gpudisk_top.model.select import DeviceFilter
from gpudisk_top.model.snapshot import Model
from gpudisk_top.output.once import selected_disks
from gpudisk_top.report.export import GPU_COLUMNS
from recording_helpers import call, run_command, sim_samples, write_recording


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    samples = sim_samples("demo", 160)    # healthy, disk-starved, healthy again
    path = write_recording(tmp_path_factory.mktemp("x") / "demo.gdtrec", samples)
    # the model's own rates, straight from the samples (not through the reader)
    models = [Model.new(s, last) for last, s in zip(samples, samples[1:])]
    return path, models


def _num(text: str):
    return None if text == "" else float(text)


def test_csv_round_trip(recorded, tmp_path):
    path, models = recorded
    out = tmp_path / "rates.csv"
    assert call(export_cmd, path, "--format", "csv", "-o", str(out)) == 0
    rows = list(csv.DictReader(open(out)))
    by_key = {(float(r["wall_s"]), r["kind"], r["name"]): r for r in rows}
    disks = gpus = 0
    for m in models:
        host = by_key[(m.wall_s, "host", "demo-node")]
        assert float(host["interval_s"]) == m.interval_s
        assert _num(host["host_psi_io_some_pct"]) == m.host.psi_io_some_pct
        assert _num(host["host_cpu_iowait_pct"]) == m.host.cpu_iowait_pct
        for g in m.gpus:
            row = by_key[(m.wall_s, "gpu", str(g.index))]
            for column, attr in GPU_COLUMNS:
                assert _num(row[column]) == getattr(g, attr), column
            gpus += 1
        for name in selected_disks(m, DeviceFilter()):
            row = by_key[(m.wall_s, "disk", name)]
            for c in RATE_FIELDS:
                assert float(row[f"disk_{c}"]) == getattr(m.disks[name], c), (name, c)
            assert row["gpu_util_pct"] == "" and row["host_ncpu"] == ""
            disks += 1
    assert len(rows) == len(models) * (1 + 8) + disks and gpus == len(models) * 8
    assert {r["state"] for r in rows} >= {"healthy", "disk-starved"}


def test_jsonl_round_trip(recorded, tmp_path):
    path, models = recorded
    out = tmp_path / "rates.jsonl"
    assert call(export_cmd, path, "-f", "jsonl", "-o", str(out), "-d", "sdb,nvme?n1") == 0
    lines = [json.loads(x) for x in open(out)]
    assert len(lines) == len(models)
    for obj, m in zip(lines, models):
        assert obj["wall_s"] == m.wall_s and obj["interval_s"] == m.interval_s
        assert [d["name"] for d in obj["disks"]] == ["nvme0n1", "nvme1n1", "nvme2n1", "nvme3n1",
                                                    "nvme4n1", "nvme5n1", "nvme6n1", "nvme7n1", "sdb"]
        for d in obj["disks"]:
            assert {k: d[k] for k in RATE_FIELDS} == m.disks[d["name"]].as_dict()
        assert [g["util_pct"] for g in obj["gpus"]] == [g.util_pct for g in m.gpus]
        assert obj["host"]["psi_io_some_pct"] == m.host.psi_io_some_pct
        assert obj["verdict"]["state"] in ("healthy", "disk-starved")


def test_perfetto_is_valid_trace_event_json(recorded, tmp_path):
    path, models = recorded
    out = tmp_path / "trace.json"
    assert call(export_cmd, path, "--format", "perfetto", "-o", str(out)) == 0
    trace = json.load(open(out))
    assert trace["displayTimeUnit"] in ("ms", "ns") and trace["baseTimeNanoseconds"] == 0
    events = trace["traceEvents"]
    assert isinstance(events, list) and events
    last_ts: dict = {}
    open_b: dict = {}
    counters, slices = set(), []
    for e in events:
        assert isinstance(e["ph"], str) and isinstance(e["name"], str)
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "process_sort_index", "thread_name")
            assert isinstance(e["args"], dict)
            continue
        assert isinstance(e["ts"], int) and e["ts"] > 1.7e15      # wall-clock microseconds
        track = (e["pid"], e["tid"], e["name"]) if e["ph"] == "C" else (e["pid"], e["tid"])
        assert e["ts"] >= last_ts.get(track, 0), track             # monotonic per track
        last_ts[track] = e["ts"]
        if e["ph"] == "C":
            assert e["args"] and all(isinstance(v, (int, float)) and math.isfinite(v)
                                     for v in e["args"].values())
            counters.add(e["name"])
        elif e["ph"] == "X":
            assert isinstance(e["dur"], int) and e["dur"] >= 0
            slices.append(e)
        elif e["ph"] in "BE":
            open_b[track] = open_b.get(track, 0) + (1 if e["ph"] == "B" else -1)
            assert open_b[track] >= 0
        else:
            raise AssertionError(f"unexpected phase {e['ph']}")
    assert all(v == 0 for v in open_b.values())
    assert {f"GPU {i}" for i in range(8)} <= counters and {"sdb", "nvme2n1", "host"} <= counters
    assert [s["name"] for s in slices] == ["disk-starved"]
    s = slices[0]
    assert s["dur"] == pytest.approx(60e6, abs=3e6) and "sdb" in s["args"]["devices"]
    first = min(e["ts"] for e in events if e["ph"] == "C")
    assert first == round((models[0].wall_s - models[0].interval_s) * 1e6)


def test_export_refuses_to_overwrite_the_recording(recorded):
    path, _ = recorded
    with pytest.raises(UsageError, match="overwrite the recording"):
        call(export_cmd, path, "-f", "csv", "-o", path)


def test_export_to_stdout_as_a_command(recorded):
    path, _ = recorded
    out = run_command("export", path, "-f", "jsonl", "-o", "-", "--to", "+5s")
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 5


def test_unknown_format_is_a_usage_error(recorded):
    path, _ = recorded
    with pytest.raises(UsageError, match="invalid choice"):
        call(export_cmd, path, "-f", "xml", "-o", "x")
