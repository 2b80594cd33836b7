"""The shared timeline: one column per interval, the same x-axis for GPUs and disks.

A bounded ring of compact per-interval values that the dashboard's timeline draws and
the report charts: GPU utilization per GPU, the switchable disk metrics per device, and
the detector's state.  UI-free.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

# the disk metrics the timeline can show: key -> (label, unit, attribute or function)
DISK_METRICS = ("util_pct", "r_await_ms", "iops", "mb_s", "aqu_sz")
METRIC_LABELS = {"util_pct": "%util", "r_await_ms": "r_await ms", "iops": "IOPS",
                 "mb_s": "MB/s", "aqu_sz": "aqu-sz"}


@dataclass(slots=True)
class Column:
    wall_s: float
    interval_s: float
    state: str                     # the reported (confirmed) state
    raw_state: str                 # this interval alone
    episode: int | None            # id of the open episode, if any
    gpu_util: dict[int, float | None] = field(default_factory=dict)
    # device -> (util_pct, r_await_ms, iops, mb_s, aqu_sz)
    disk: dict[str, tuple[float, float, float, float, float]] = field(default_factory=dict)

    def metric(self, device: str, metric: str) -> float | None:
        values = self.disk.get(device)
        return None if values is None else values[DISK_METRICS.index(metric)]


class History:
    """The latest `capacity` intervals."""

    def __init__(self, capacity: int = 3600) -> None:
        self.capacity = capacity
        self.columns: deque[Column] = deque(maxlen=capacity)
        self.total = 0  # columns ever appended: the absolute index of the next one

    def append(self, model, verdict) -> Column:
        col = Column(wall_s=model.wall_s, interval_s=model.interval_s, state=verdict.state,
                     raw_state=verdict.raw_state,
                     episode=verdict.episode.id if verdict.episode is not None else None)
        for g in model.gpus:
            col.gpu_util[g.index] = None if g.lost else g.util_pct
        for name, r in model.disks.items():
            col.disk[name] = (r.util_pct, r.r_await_ms, r.r_s + r.w_s,
                              (r.rkb_s + r.wkb_s) / 1024, r.aqu_sz)
        self.columns.append(col)
        self.total += 1
        return col

    def __len__(self) -> int:
        return len(self.columns)

    def last(self, n: int) -> list[Column]:
        if n <= 0:
            return []
        cols = self.columns
        return list(cols)[-n:] if n < len(cols) else list(cols)

    def clear(self) -> None:
        self.columns.clear()
        self.total = 0

    @property
    def first(self) -> int:
        """The absolute index of the oldest column kept."""
        return self.total - len(self.columns)
