"""Per-interval rates out of a recording: CSV, JSON Lines, or a Chrome trace for Perfetto.

Every rate comes from Replay.models(), so the numbers are exactly what the model
computes from the raw counters (floats are written with repr(), which reads back equal).
The first sample of each recorder run has no interval and gives no row.  Intervals come
in recorded order; where the wall clock went back, a Perfetto trace puts the stretch that
follows on tracks of its own (a counter track's times must increase), and nothing is
left out.  The recording given is of one source (Recording.choose_source()).

On a node of several jobs (issue 37) a JSON Lines row's "verdict" is the node's (its
worst job's, with job_id and job_name) and "jobs" each job's, as `--once --json` has them
(model/vocab.py job_json; "ledger" null: a row is one interval, `report` counts the
ledger); a Perfetto trace puts each job's episodes on a track of its own.
"""

from __future__ import annotations

import csv
import json

from gpudisk_top.verdict.ledger import CAUSES, Ledger
from gpudisk_top.model.select import DeviceFilter
from gpudisk_top.model.metric import Family
from gpudisk_top.model.vocab import (DISK, GPU, HOST, episode_json, iso_time, job_json,
                                     verdict_json)
from gpudisk_top.output.once import disk_json, gpus_json, selected_disks
from gpudisk_top.record.reader import Recording
from gpudisk_top.session.replay import Replay
from gpudisk_top.textsafe import printable

FORMATS = ("csv", "jsonl", "perfetto")


def _csv_columns(family: Family) -> tuple[tuple[str, str], ...]:
    """(column, attribute) of each of the family's metrics the CSV has.  GPU, disk and
    host metrics share names ("util_pct"), so a column has its kind as a prefix."""
    return tuple((family.qualified(m), m.field) for m in family if m.csv)


GPU_COLUMNS, DISK_COLUMNS, HOST_COLUMNS = _csv_columns(GPU), _csv_columns(DISK), _csv_columns(HOST)
CSV_COLUMNS = (("time", "wall_s", "interval_s", "state", "kind", "name")
               + tuple(c for c, _ in GPU_COLUMNS + DISK_COLUMNS + HOST_COLUMNS))
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
    # every cell through printable: a host or device name with a newline or an escape is
    # shown escaped (one row a line, nothing sent to the terminal that cats the file)
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    rows = 0
    blank = {c: "" for c in CSV_COLUMNS}
    for model, verdict in _intervals(rec, start_s, end_s, thresholds):
        base = {"time": iso_time(model.wall_s), "wall_s": repr(model.wall_s),
                "interval_s": repr(model.interval_s), "state": verdict.state}
        host = model.host
        if host is not None:
            row = dict(blank, **base, kind="host", name=rec.header.get("host_name") or "")
            for column, attr in HOST_COLUMNS:
                row[column] = _cell(getattr(host, attr))
            w.writerow(map(printable, row.values()))
            rows += 1
        for g in model.gpus:
            row = dict(blank, **base, kind="gpu", name=str(g.index))
            for column, attr in GPU_COLUMNS:
                row[column] = _cell(getattr(g, attr))
            w.writerow(map(printable, row.values()))
            rows += 1
        for name in selected_disks(model, dev_filter):
            r = model.disks[name]
            row = dict(blank, **base, kind="disk", name=name)
            for column, attr in DISK_COLUMNS:
                row[column] = repr(getattr(r, attr))
            w.writerow(map(printable, row.values()))
            rows += 1
    return rows


def _cell(value) -> str:
    if value is None:
        return ""
    return repr(value) if isinstance(value, float) else str(value)


def write_jsonl(out, rec: Recording, start_s=None, end_s=None, thresholds=None,
                dev_filter: DeviceFilter | None = None) -> int:
    """One JSON object per interval: time, wall_s, interval_s, verdict, jobs, gpus, disks,
    host, each as in `--once --json` (jobs: each job's, its ledger null).  Returns the
    number of lines."""
    from gpudisk_top.model.host import host_as_json

    dev_filter = dev_filter or DeviceFilter()
    n = 0
    for model, verdict in _intervals(rec, start_s, end_s, thresholds):
        obj = {
            "time": iso_time(model.wall_s), "wall_s": model.wall_s, "interval_s": model.interval_s,
            "verdict": verdict_json(verdict),
            "jobs": [job_json(jv, None) for jv in verdict.jobs or ()],
            "gpus": gpus_json(model),
            "disks": [disk_json(model, name) for name in selected_disks(model, dev_filter)],
            "host": host_as_json(model.host) if model.host is not None else {},
        }
        out.write(json.dumps(obj, separators=(",", ":"), allow_nan=False, default=str) + "\n")
        n += 1
    return n


# ------------------------------------------------------------------------------ perfetto
PID_GPUS, PID_DISKS, PID_HOST, PID_EPISODES = 1, 2, 3, 4
PID_STRETCH = 10          # the pids of the n-th stretch of a clock that went back: + 10 n
GPU_ARGS = ("util_pct", "mem_util_pct", "power_w")
DISK_ARGS = ("r_await_ms", "w_await_ms", "rkb_s", "wkb_s", "aqu_sz", "util_pct")
HOST_ARGS = ("cpu_iowait_pct", "cpu_idle_pct", "psi_io_some_pct", "psi_cpu_some_pct")


# the stall ledger's counter track (GPU-seconds lost by cause, cumulative)
LEDGER_TRACK = "GPU time lost (GPU-s)"
# the episodes' tracks (threads of the episodes' process): the node's (episodes of no
# job), then one per job in the order its first episode comes; jobs past MAX_JOB_TRACKS
# share the node's track (their job named in each slice's args)
TID_NODE = 1
MAX_JOB_TRACKS = 64
TRACK_NAME_CHARS = 120


def _us(wall_s: float) -> int:
    return int(round(wall_s * 1e6))


def write_perfetto(out, rec: Recording, start_s=None, end_s=None, thresholds=None,
                   dev_filter: DeviceFilter | None = None) -> int:
    """A Chrome trace-event JSON object: a counter track ("ph": "C") per GPU, per disk and
    for the host, one of the GPU time lost by cause since the window's start (the stall
    ledger, verdict/ledger.py: GPU-seconds, to the end of the interval at its ts) beside the
    episodes, and a complete slice ("ph": "X") per starvation episode, on its job's track
    ("job NAME [ID]"; the node's "episodes" for one of no job).  `ts` is
    wall-clock microseconds since the Unix epoch; a counter's value is the rate over the
    interval that starts at its ts.  Returns the number of events."""
    dev_filter = dev_filter or DeviceFilter()
    source = rec.source
    host = source.host_name or rec.header.get("host_name") or "?"
    label = f"gpudisk-top {host}" + {"simulated": " (SIMULATED)",
                                     "unknown": " (SOURCE UNKNOWN)"}.get(source.kind, "")
    out.write('{"traceEvents":[\n')
    count = 0
    first = True

    def emit(event: dict) -> None:
        nonlocal first, count
        out.write(("" if first else ",\n") + json.dumps(event, separators=(",", ":"),
                                                       allow_nan=False, default=str))
        first = False
        count += 1

    def name_processes(stretch: int, since: str | None) -> None:
        tail = "" if stretch == 0 else f" (clock stretch {stretch + 1}, from {since})"
        for pid, what, sort in ((PID_GPUS, "GPUs", 1), (PID_DISKS, "disks", 2),
                                (PID_HOST, "host", 3), (PID_EPISODES, "starvation episodes", 0)):
            emit({"ph": "M", "name": "process_name", "pid": pid + PID_STRETCH * stretch, "tid": 0,
                  "args": {"name": f"{label}: {what}{tail}"}})
            emit({"ph": "M", "name": "process_sort_index", "pid": pid + PID_STRETCH * stretch,
                  "tid": 0, "args": {"sort_index": sort + 4 * stretch}})
        emit({"ph": "M", "name": "thread_name", "pid": PID_EPISODES + PID_STRETCH * stretch,
              "tid": 1, "args": {"name": "episodes"}})

    name_processes(0, None)
    last_ts = None
    stretch = 0               # a new one each time the clock went back
    replay = Replay(rec, thresholds)
    ranges = rec.ranges(start_s, end_s)
    range_starts = {lo for lo, _ in ranges}
    new_range = False
    ep_stretch: dict[int, int] = {}   # id(episode) -> the stretch where it was seen first
    ledger = Ledger()
    for i, model, verdict, loss in replay.run(ranges, start_s):
        ledger.add(loss)
        new_range = new_range or i in range_starts
        if verdict.episode is not None:
            ep_stretch.setdefault(id(verdict.episode), stretch)
        if model.interval_s <= 0:
            continue
        ts = _us(model.wall_s - model.interval_s)
        if last_ts is not None and ts <= last_ts:
            if new_range:
                # the clock went back: later intervals go on tracks of their own
                stretch += 1
                name_processes(stretch, iso_time(model.wall_s))
                if verdict.episode is not None:
                    ep_stretch[id(verdict.episode)] = stretch
            else:
                ts = last_ts + 1   # a late sample: its interval began before the last one's
        new_range = False
        last_ts = ts
        base = PID_STRETCH * stretch
        for g in model.gpus:
            args = {k: getattr(g, k) for k in GPU_ARGS if getattr(g, k) is not None}
            if args:
                emit({"ph": "C", "name": f"GPU {g.index}", "pid": PID_GPUS + base, "tid": 0, "ts": ts,
                      "args": args})
        for name in selected_disks(model, dev_filter):
            r = model.disks[name]
            emit({"ph": "C", "name": model.devices[name].display_name, "pid": PID_DISKS + base,
                  "tid": 0, "ts": ts, "args": {k: getattr(r, k) for k in DISK_ARGS}})
        if model.host is not None:
            args = {k: getattr(model.host, k) for k in HOST_ARGS if getattr(model.host, k) is not None}
            if args:
                emit({"ph": "C", "name": "host", "pid": PID_HOST + base, "tid": 0, "ts": ts,
                      "args": args})
        emit({"ph": "C", "name": LEDGER_TRACK, "pid": PID_EPISODES + base, "tid": 0, "ts": ts,
              "args": {c: ledger.by_cause[c] for c in CAUSES}})
    job_tid: dict[str, int] = {}      # job id -> its track
    named: set[tuple[int, int]] = set()  # (pid, tid) whose track name was emitted
    for e in replay.episodes:
        # its lost time as the replay's step counted it (warm-up included), by its id
        led = replay.stepper.ledger
        ej = episode_json(e, led.lost_of(e.id),
                          [led.lost_of_phase(e.id, k) for k in range(len(e.phases))])
        start_us = _us(ej["start_s"])
        pid = PID_EPISODES + PID_STRETCH * ep_stretch.get(id(e), 0)
        tid = TID_NODE
        if e.job_id is not None:
            if e.job_id not in job_tid and len(job_tid) < MAX_JOB_TRACKS:
                job_tid[e.job_id] = TID_NODE + 1 + len(job_tid)
            tid = job_tid.get(e.job_id, TID_NODE)
        if tid != TID_NODE and (pid, tid) not in named:
            named.add((pid, tid))
            name = printable(f"job {e.job_name or e.job_id} [{e.job_id}]")
            emit({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                  "args": {"name": name[:TRACK_NAME_CHARS]}})
        emit({"ph": "X", "name": e.state, "cat": "starvation", "pid": pid, "tid": tid,
              "ts": start_us, "dur": max(0, _us(ej["end_s"]) - start_us),
              "args": {k: ej[k] for k in ("id", "job_id", "job_name", "gpus", "devices",
                                        "processes", "reason", "advice", "lost_gpu_s")}})
    other = {"source": source.label, "source_kind": source.kind, "host_name": host,
             "recording": rec.path, "ts": "wall-clock microseconds since the Unix epoch"}
    if rec.left_out:
        other["left_out"] = rec.left_out
    # baseTimeNanoseconds: PyTorch profiler traces (torch >= 2.4) write ts relative to it;
    # ours are absolute, so their base is 0 and tools that align traces by it line up
    out.write('\n],"displayTimeUnit":"ms","baseTimeNanoseconds":0,"otherData":'
              + json.dumps(other, default=str) + "}\n")
    return count


WRITERS = {"csv": write_csv, "jsonl": write_jsonl, "perfetto": write_perfetto}
