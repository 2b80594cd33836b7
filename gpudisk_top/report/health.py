"""The report's device health: each disk's health readings over the window, judged and
compared by model/health.py (classify, trend, minutes_above_warning, health_of).

A disk's readings in a window are the one its first sample carried (read at or before
the window's start) and each new one the poller made after, oldest first: from the
recorded summaries where report adds whole blocks up (record/derived.py keeps each new
reading once), from the samples where it replays them.  Both feed a HealthSeries, which
keeps each reading once however it came.

The JSON (`report --json`, key "health"; README "Report JSON") is an API: keys are
added, never renamed or removed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gpudisk_top.collect.sample import DiskHealth
from gpudisk_top.model.health import (STATUS_RANK, health_of, minutes_above_warning, trend,
                                      view_of)
from gpudisk_top.record.derived import NewReadings


class HealthSeries:
    """Each disk's distinct readings over a stretch of samples, oldest first."""

    def __init__(self) -> None:
        self.readings: dict[str, list[DiskHealth]] = {}
        self._new = NewReadings()

    def add(self, readings: Iterable[DiskHealth]) -> None:
        for h in readings:
            seq = self.readings.setdefault(h.device, [])
            if not seq or (seq[-1] is not h and seq[-1] != h):
                seq.append(h)

    def add_sample(self, sample) -> None:
        """The readings a replayed sample carries (one identity test while the poller's
        snapshot is the one before)."""
        self.add(self._new.new_in(sample.health))

    def merge(self, other: "HealthSeries") -> None:
        """Add a later stretch's readings."""
        for seq in other.readings.values():
            self.add(seq)

    def __bool__(self) -> bool:
        return bool(self.readings)


def _reading_json(h: DiskHealth) -> dict:
    """A reading as the report writes it: its fields, status and reasons."""
    out = view_of(h).as_json()
    del out["since_start"]
    return out


def health_section(series: HealthSeries) -> list[dict]:
    """Per disk the window's first and last reading, the status of the last and the
    worst over the window, and the trend from the first readable reading to the last
    (None with fewer than two): trend() and minutes_above_warning() (model/health.py).
    Worst first, then by name."""
    out = []
    for dev, seq in series.readings.items():
        first, last = seq[0], seq[-1]
        views = [view_of(h) for h in seq]
        status, reasons = views[-1].status, views[-1].reasons
        worst = max(views, key=lambda v: STATUS_RANK[v.status])
        readable = [h for h in seq if h.readable]
        gained = None
        if len(readable) >= 2:
            gained = trend(readable[0], readable[-1]).as_json()
            gained["minutes_above_warning"] = minutes_above_warning(seq)
        out.append({
            "device": dev, "model": last.model, "serial": last.serial, "source": last.source,
            "status": status, "reasons": list(reasons),
            "worst_status": worst.status, "worst_reasons": list(worst.reasons),
            "readings": len(seq), "first": _reading_json(first), "last": _reading_json(last),
            "trend": gained,
        })
    out.sort(key=lambda d: (-STATUS_RANK[d["worst_status"]], d["device"]))
    return out


def _during(seq: list[DiskHealth], start_s: float, end_s: float) -> list[DiskHealth]:
    """The readings in effect at some time of [start_s, end_s]: the last one read at or
    before start_s and those read after it up to end_s."""
    before = [h for h in seq if h.read_wall_s <= start_s]
    return before[-1:] + [h for h in seq if start_s < h.read_wall_s <= end_s]


def episode_health(series: HealthSeries, devices: Mapping, episode: dict) -> list[dict]:
    """The devices an episode names whose disk was warning or failing while it lasted
    (health_of: a partition's disk, a dm/md device's worst member), each with the worst
    status and its reasons: [{"device", "disk", "status", "reasons"}]."""
    if not series or not episode.get("devices"):
        return []
    start, end = episode["start_s"], episode["end_s"]
    worst = {}
    for dev, seq in series.readings.items():
        views = [view_of(h) for h in _during(seq, start, end)]
        if views:
            worst[dev] = max(views, key=lambda v: STATUS_RANK[v.status])
    out = []
    for name in episode["devices"]:
        view = health_of(worst, devices, name)
        if view is not None and view.status in ("warning", "failing"):
            out.append({"device": name, "disk": view.device, "status": view.status,
                        "reasons": list(view.reasons)})
    return out
