"""One node's timeline from the fleet: build_timeline() turns one node's range query
(queries.timeline_query) into a NodeTimeline, the opened node's window as a
model.history.History of Columns, the very objects the local dashboard's timeline draws:
the UI hands (history, gpus, disks, named) to ui.widgets.timeline.Timeline.show() and gets
the same rows, glyphs, shading and time axis.  One column per step_s (1 s when the window
fits the width, as the local timeline's one column per sample).  A column where the node
did not report has state "" (drawn blank) and no GPU or disk values.  No I/O, no clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpudisk_top.fleet.edge import check_value, gpu_index, label_list
from gpudisk_top.fleet.promapi import QueryResult
from gpudisk_top.fleet.queries import GPU_UTIL, P, TIMELINE_DISK
from gpudisk_top.fleet.view import QueryCost
from gpudisk_top.verdict.detect import STATES
from gpudisk_top.model.history import Column, History
from gpudisk_top.model.present import natural_key
from gpudisk_top.model.vocab import TIMELINE, VERDICT_INFO

# each exporter family of the timeline: the TIMELINE row it adds to
_TL_DISK = {m.prom_name: TIMELINE[row] for m, row in TIMELINE_DISK}
_SUMMED = ("iops", "mb_s")          # the local timeline's: reads + writes


@dataclass
class NodeTimeline:
    """One node's window, drawn as the local timeline draws its own (see the module's
    docstring).  history: a History with one Column per step from start_s to end_s;
    gpus: its GPU indexes; disks: (device, display name) as Timeline.show() takes them;
    named: the devices the latest verdict names (their rows first); error: the range
    query's one-line error (then the history is empty); cost: that query's."""

    node: str
    start_s: float
    end_s: float
    step_s: float
    history: History
    gpus: list[int] = field(default_factory=list)
    disks: list[tuple[str, str]] = field(default_factory=list)
    named: list[str] = field(default_factory=list)
    error: str | None = None
    cost: QueryCost = field(default_factory=QueryCost)

    @property
    def times(self) -> list[float]:
        return [c.wall_s for c in self.history.columns]

    @property
    def states(self) -> list[str]:
        return [c.state for c in self.history.columns]


def timeline_window(now_s: float, window_s: float, step_s: float) -> tuple[float, float]:
    """(start_s, end_s): whole steps, the end at or before now_s, so that the columns of
    two refreshes line up."""
    end = math.floor(now_s / step_s) * step_s
    n = max(1, int(round(window_s / step_s)))
    return end - (n - 1) * step_s, end


def build_timeline(result: QueryResult, node: str, start_s: float, end_s: float,
                   step_s: float) -> NodeTimeline:
    """One node's NodeTimeline from queries.timeline_query's range answer."""
    n = max(1, int(round((end_s - start_s) / step_s)) + 1)
    history = History(capacity=n)
    tl = NodeTimeline(node=node, start_s=start_s, end_s=end_s, step_s=step_s,
                      history=history, error=None if result.ok else result.error,
                      cost=QueryCost().add(result))
    if not result.ok:
        return tl
    state: list[str] = [""] * n
    state_rank: list[int] = [99] * n
    latest_devices: tuple[float, list[str]] = (-math.inf, [])
    gpu: dict[int, list[list[float]]] = {}
    disk: dict[str, dict[str, list[float | None]]] = {}
    order = {s: i for i, s in enumerate(reversed(STATES))}    # the worst wins a tie

    def index(t: float) -> int | None:
        if not start_s - step_s < t < end_s + step_s:       # NaN and ±inf too
            return None
        i = int(round((t - start_s) / step_s))
        return i if 0 <= i < n else None

    for s in result.series:
        name, lab = s.name, s.labels
        if name == P + VERDICT_INFO:
            st = lab.get("state", "")
            for t, _v in s.values:
                i = index(t)
                if i is not None and order.get(st, 99) < state_rank[i]:
                    state[i], state_rank[i] = st, order.get(st, 99)
                if t > latest_devices[0]:
                    latest_devices = (t, label_list(lab.get("devices")))
        elif name == GPU_UTIL.prom_name:
            g = gpu_index(lab.get("gpu"))
            if g is None:
                continue
            cells = gpu.setdefault(g, [[] for _ in range(n)])
            for t, v in s.values:
                i = index(t)
                if i is not None and math.isfinite(v) and check_value(name, v, t):
                    cells[i].append(GPU_UTIL.from_base(v))
        elif name in _TL_DISK:
            # the row's unit from the family's base unit (bytes/s become the row's MB/s)
            row_metric = _TL_DISK[name]
            metric = row_metric.field
            rows = disk.setdefault(lab.get("device", ""), {})
            cells = rows.setdefault(metric, [None] * n)
            for t, v in s.values:
                i = index(t)
                if i is not None and math.isfinite(v) and check_value(name, v, t):
                    add = row_metric.from_base(v)
                    cells[i] = add if cells[i] is None or metric not in _SUMMED else cells[i] + add
    fields = [m.field for m in TIMELINE]
    for i in range(n):
        col = Column(wall_s=start_s + i * step_s, interval_s=step_s, state=state[i],
                     raw_state=state[i], episode=None)
        for g, cells in gpu.items():
            if cells[i]:
                col.gpu_util[g] = sum(cells[i]) / len(cells[i])
        for dev, rows in disk.items():
            values = tuple(rows.get(f, [None] * n)[i] for f in fields)
            if any(v is not None for v in values):
                col.disk[dev] = values
        history.add(col)
    tl.gpus = sorted(gpu)
    tl.disks = [(d, d) for d in sorted(disk, key=natural_key)]
    tl.named = [d for d in latest_devices[1] if d in disk]
    return tl
