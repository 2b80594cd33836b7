"""The shared timeline: one column per interval, the same x-axis for GPUs and disks.

A bounded ring of compact per-interval values that the dashboard's timeline draws and
the report charts: GPU utilization per GPU, the switchable disk metrics per device, and
the detector's state.  UI-free.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from gpudisk_top.model.mounts import like_disk
from gpudisk_top.model.vocab import TIMELINE, mb_s

# How each disk metric the timeline can show (vocab.TIMELINE) comes from a device's DiskRates
_FROM_RATES = {
    "util_pct": lambda r: r.util_pct,
    "r_await_ms": lambda r: r.r_await_ms,
    "iops": lambda r: r.r_s + r.w_s,
    "mb_s": lambda r: mb_s(r.rkb_s + r.wkb_s),
    "aqu_sz": lambda r: r.aqu_sz,
}
_VALUES = tuple(_FROM_RATES[m.field] for m in TIMELINE)    # in Column.disk's order
_INDEX = {m.field: i for i, m in enumerate(TIMELINE)}
# ... and from a mount's like_disk() numbers (a mount has no %util)
_FROM_MOUNT = {
    "util_pct": None,
    "r_await_ms": lambda d: d["r_await_ms"],
    "iops": lambda d: d["r_s"],
    "mb_s": lambda d: mb_s(d["rkb_s"]),
    "aqu_sz": lambda d: d["aqu_sz"],
}
_MOUNT_VALUES = tuple(_FROM_MOUNT[m.field] for m in TIMELINE)


@dataclass(slots=True)
class Column:
    wall_s: float
    interval_s: float
    state: str                     # the reported (confirmed) state
    raw_state: str                 # this interval alone
    episode: int | None            # id of the open episode, if any
    gpu_util: dict[int, float | None] = field(default_factory=dict)
    # device -> the values of vocab.TIMELINE's metrics, in its order
    disk: dict[str, tuple[float, ...]] = field(default_factory=dict)
    # job id -> (state, raw_state, episode id) of each job's own verdict (Verdict.jobs),
    # so that one job's timeline can be drawn (the dashboard's `j`)
    jobs: dict[str, tuple[str, str, int | None]] = field(default_factory=dict)

    def metric(self, device: str, metric: str) -> float | None:
        """A TIMELINE metric (by field) of a device; None where the device had no rates."""
        values = self.disk.get(device)
        return None if values is None else values[_INDEX[metric]]

    def of_job(self, job_id: str) -> "Column":
        """This interval as one job's verdict saw it: its state, raw state and episode
        (idle where the job did not run); the GPU and disk values are the node's."""
        state, raw_state, episode = self.jobs.get(job_id, ("idle", "idle", None))
        return Column(self.wall_s, self.interval_s, state, raw_state, episode,
                      self.gpu_util, self.disk, self.jobs)


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
        jobs = {v.job.id: (v.state, v.raw_state, v.episode.id if v.episode is not None else None)
                for v in verdict.jobs}
        # the jobs' states mostly hold from one interval to the next: the column before's
        # dict is shared then (a few hundred bytes a column less, eight jobs an hour)
        last = self.columns[-1].jobs if self.columns else None
        col.jobs = last if last == jobs else jobs
        for g in model.gpus:
            col.gpu_util[g.index] = None if g.lost else g.util_pct
        for name, r in model.disks.items():
            col.disk[name] = tuple(value(r) for value in _VALUES)
        for mp, v in model.mounts.items():    # a network or FUSE mount: a row like a disk's
            d = like_disk(v)
            col.disk[mp] = tuple(None if value is None else value(d) for value in _MOUNT_VALUES)
        return self.add(col)

    def add(self, col: Column) -> Column:
        """Append a column built elsewhere (the fleet view's, from Prometheus)."""
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
