"""Per-interval rates out of a recording: CSV, JSON Lines, or a Chrome trace for Perfetto.

Every rate comes from Replay.models(), so the numbers are exactly what the model
computes from the raw counters (floats are written with repr(), which reads back equal).
The first sample of each recorder run has no interval and gives no row.
"""

from __future__ import annotations

import csv
import json
from dataclasses import fields

from gpudisk_top.model.disk import RATE_FIELDS
from gpudisk_top.model.host import HostView
from gpudisk_top.model.select import DeviceFilter
from gpudisk_top.output.once import disk_json, gpus_json, selected_disks, verdict_json
from gpudisk_top.record.header import iso
from gpudisk_top.record.reader import Recording
from gpudisk_top.record.replay import Replay
from gpudisk_top.report.summary import episode_json

FORMATS = ("csv", "jsonl", "perfetto")

GPU_COLUMNS = ("util_pct", "mem_util_pct", "mem_used_mib", "mem_total_mib", "power_w",
               "power_avg_w", "temp_c", "sm_clock_mhz", "pcie_rx_kb_s", "pcie_tx_kb_s")
HOST_COLUMNS = tuple(f.name for f in fields(HostView)
                     if f.name not in ("cgroup_path", "cgroup_io"))
# GPU, disk and host columns share names ("util_pct"), so each has its kind as a prefix
CSV_COLUMNS = (("time", "wall_s", "interval_s", "state", "kind", "name")
               + tuple(f"gpu_{c}" for c in GPU_COLUMNS) + tuple(f"disk_{c}" for c in RATE_FIELDS)
               + tuple(f"host_{c}" for c in HOST_COLUMNS))
assert len(set(CSV_COLUMNS)) == len(CSV_COLUMNS)


def _intervals(rec, start_s, end_s, thresholds):
    for model, verdict in Replay(rec, thresholds).models(start_s, end_s):
        if model.interval_s > 0:
            yield model, verdict


def write_csv(out, rec: Recording, start_s=None, end_s=None, thresholds=None,
              dev_filter: DeviceFilter | None = None) -> int:
    """One row per interval and GPU, disk and host (`kind`), columns CSV_COLUMNS (gpu_*,
    disk_* and host_* hold the attributes of the JSON output of that name), empty where a
    column does not apply or the value is n/a.  Returns the number of rows."""
    dev_filter = dev_filter or DeviceFilter()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    rows = 0
    blank = {c: "" for c in CSV_COLUMNS}
    for model, verdict in _intervals(rec, start_s, end_s, thresholds):
        base = {"time": iso(model.wall_s), "wall_s": repr(model.wall_s),
                "interval_s": repr(model.interval_s), "state": verdict.state}
        host = model.host
        if host is not None:
            row = dict(blank, **base, kind="host", name=rec.header.get("host_name") or "")
            for c in HOST_COLUMNS:
                row[f"host_{c}"] = _cell(getattr(host, c))
            w.writerow(row.values())
            rows += 1
        for g in model.gpus:
            row = dict(blank, **base, kind="gpu", name=str(g.index))
            for c in GPU_COLUMNS:
                row[f"gpu_{c}"] = _cell(getattr(g, c))
            w.writerow(row.values())
            rows += 1
        for name in selected_disks(model, dev_filter):
            r = model.disks[name]
            row = dict(blank, **base, kind="disk", name=name)
            for c in RATE_FIELDS:
                row[f"disk_{c}"] = repr(getattr(r, c))
            w.writerow(row.values())
            rows += 1
    return rows


def _cell(value) -> str:
    if value is None:
        return ""
    return repr(value) if isinstance(value, float) else str(value)


def write_jsonl(out, rec: Recording, start_s=None, end_s=None, thresholds=None,
                dev_filter: DeviceFilter | None = None) -> int:
    """One JSON object per interval: time, wall_s, interval_s, verdict, gpus, disks, host,
    each as in `--once --json`.  Returns the number of lines."""
    from gpudisk_top.model.host import host_as_json

    dev_filter = dev_filter or DeviceFilter()
    n = 0
    for model, verdict in _intervals(rec, start_s, end_s, thresholds):
        obj = {
            "time": iso(model.wall_s), "wall_s": model.wall_s, "interval_s": model.interval_s,
            "verdict": verdict_json(verdict),
            "gpus": gpus_json(model),
            "disks": [disk_json(model, name) for name in selected_disks(model, dev_filter)],
            "host": host_as_json(model.host) if model.host is not None else {},
        }
        out.write(json.dumps(obj, separators=(",", ":"), allow_nan=False, default=str) + "\n")
        n += 1
    return n


# ------------------------------------------------------------------------------ perfetto
PID_GPUS, PID_DISKS, PID_HOST, PID_EPISODES = 1, 2, 3, 4
GPU_ARGS = ("util_pct", "mem_util_pct", "power_w")
DISK_ARGS = ("r_await_ms", "w_await_ms", "rkb_s", "wkb_s", "aqu_sz", "util_pct")
HOST_ARGS = ("cpu_iowait_pct", "cpu_idle_pct", "psi_io_some_pct", "psi_cpu_some_pct")


def _us(wall_s: float) -> int:
    return int(round(wall_s * 1e6))


def write_perfetto(out, rec: Recording, start_s=None, end_s=None, thresholds=None,
                   dev_filter: DeviceFilter | None = None) -> int:
    """A Chrome trace-event JSON object: a counter track ("ph": "C") per GPU, per disk and
    for the host, and a complete slice ("ph": "X") per starvation episode.  `ts` is
    wall-clock microseconds since the Unix epoch; a counter's value is the rate over the
    interval that starts at its ts.  Returns the number of events."""
    dev_filter = dev_filter or DeviceFilter()
    host = rec.header.get("host_name") or "?"
    label = f"gpudisk-top {host}" + (" (SIMULATED)" if rec.header.get("simulated") else "")
    meta = []
    for pid, what, sort in ((PID_GPUS, "GPUs", 1), (PID_DISKS, "disks", 2), (PID_HOST, "host", 3),
                            (PID_EPISODES, "starvation episodes", 0)):
        meta.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                     "args": {"name": f"{label}: {what}"}})
        meta.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                     "args": {"sort_index": sort}})
    meta.append({"ph": "M", "name": "thread_name", "pid": PID_EPISODES, "tid": 1,
                 "args": {"name": "episodes"}})
    out.write('{"traceEvents":[\n')
    count = 0
    first = True

    def emit(event: dict) -> None:
        nonlocal first, count
        out.write(("" if first else ",\n") + json.dumps(event, separators=(",", ":"),
                                                       allow_nan=False, default=str))
        first = False
        count += 1

    for event in meta:
        emit(event)
    last_ts = None
    replay = Replay(rec, thresholds)
    for model, _verdict in replay.models(start_s, end_s):
        if model.interval_s <= 0:
            continue
        ts = _us(model.wall_s - model.interval_s)
        if last_ts is not None and ts <= last_ts:
            continue  # the clock went backwards: keep every track's ts increasing
        last_ts = ts
        for g in model.gpus:
            args = {k: getattr(g, k) for k in GPU_ARGS if getattr(g, k) is not None}
            if args:
                emit({"ph": "C", "name": f"GPU {g.index}", "pid": PID_GPUS, "tid": 0, "ts": ts,
                      "args": args})
        for name in selected_disks(model, dev_filter):
            r = model.disks[name]
            emit({"ph": "C", "name": model.devices[name].display_name, "pid": PID_DISKS, "tid": 0,
                  "ts": ts, "args": {k: getattr(r, k) for k in DISK_ARGS}})
        if model.host is not None:
            args = {k: getattr(model.host, k) for k in HOST_ARGS if getattr(model.host, k) is not None}
            if args:
                emit({"ph": "C", "name": "host", "pid": PID_HOST, "tid": 0, "ts": ts, "args": args})
    for e in replay.episodes:
        ej = episode_json(e)
        start_us = _us(ej["start_s"])
        emit({"ph": "X", "name": e.state, "cat": "starvation", "pid": PID_EPISODES, "tid": 1,
              "ts": start_us, "dur": max(0, _us(ej["end_s"]) - start_us),
              "args": {k: ej[k] for k in ("id", "gpus", "devices", "processes", "reason", "advice")}})
    other = {"source": rec.header.get("source"), "host_name": host,
             "recording": rec.path, "ts": "wall-clock microseconds since the Unix epoch"}
    # baseTimeNanoseconds: PyTorch profiler traces (torch >= 2.4) write ts relative to it;
    # ours are absolute, so their base is 0 and tools that align traces by it line up
    out.write('\n],"displayTimeUnit":"ms","baseTimeNanoseconds":0,"otherData":'
              + json.dumps(other, default=str) + "}\n")
    return count


WRITERS = {"csv": write_csv, "jsonl": write_jsonl, "perfetto": write_perfetto}
