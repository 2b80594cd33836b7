"""The report's device health: each disk's health readings over the window, judged and
compared by model/health.py (classify, trend, minutes_above_warning, health_of).

A disk's readings in a window are the one its first sample carried (read at or before
the window's start) and each new one the poller made after, oldest first (split where
another drive took the slot: collect.sample.same_drive): from the
recorded summaries where report adds whole blocks up (record/derived.py keeps each new
reading once), from the samples where it replays them.  Both feed a HealthSeries, which
keeps each reading once however it came.

The JSON (`report --json`, key "health"; README "Report JSON") is an API: keys are
added, never renamed or removed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gpudisk_top.collect.sample import DiskHealth, is_new, same_drive
from gpudisk_top.model.health import (STATUS_RANK, health_of, minutes_above_warning, trend,
                                      view_of)
from gpudisk_top.model.vocab import iso_time
from gpudisk_top.record.derived import NewReadings


class HealthSeries:
    """Each disk's distinct readings over a stretch of samples, oldest first."""

    def __init__(self) -> None:
        self.readings: dict[str, list[DiskHealth]] = {}
        self._new = NewReadings()

    def add(self, readings: Iterable[DiskHealth]) -> None:
        for h in readings:
            seq = self.readings.setdefault(h.device, [])
            if not seq or is_new(h, seq[-1]):
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


def drives(seq: list[DiskHealth]) -> list[list[DiskHealth]]:
    """One disk's readings split where the drive in its slot changed (same_drive: another
    serial number), oldest first.  A reading that names no drive (unreadable) stays
    with the drive before it."""
    runs: list[list[DiskHealth]] = []
    ref: DiskHealth | None = None      # the run's latest reading that names its drive
    for h in seq:
        names = h.serial is not None or h.model is not None
        if runs and not (names and ref is not None and not same_drive(ref, h)):
            runs[-1].append(h)
        else:
            runs.append([h])
        if names:
            ref = h
    return runs


def _drive_json(seq: list[DiskHealth]) -> dict:
    """One drive's readings in the window: the status of its last, the worst, and the
    trend from its first readable reading to its last (None with fewer than two)."""
    first, last = seq[0], seq[-1]
    views = [view_of(h) for h in seq]
    worst = max(views, key=lambda v: STATUS_RANK[v.status])
    readable = [h for h in seq if h.readable]
    gained = None
    t = trend(readable[0], readable[-1]) if len(readable) >= 2 else None
    if t is not None:
        gained = t.as_json()
        gained["minutes_above_warning"] = minutes_above_warning(seq)
    return {"model": last.model, "serial": last.serial, "source": last.source,
            "status": views[-1].status, "reasons": list(views[-1].reasons),
            "worst_status": worst.status, "worst_reasons": list(worst.reasons),
            "readings": len(seq), "first": _reading_json(first), "last": _reading_json(last),
            "trend": gained}


def health_section(series: HealthSeries) -> list[dict]:
    """Per disk the window's first and last reading, the status of the last and the
    worst over the window, and the trend from the first readable reading to the last
    (None with fewer than two): trend() and minutes_above_warning() (model/health.py).
    Where the drive in the slot was replaced in the window (another serial number), all
    of that is the last drive's, and `replaced` lists the earlier ones, each with
    `replaced_at` and `replaced_at_s` (the new drive's first reading): two drives'
    counters are never compared.  Worst first, then by name."""
    out = []
    for dev, seq in series.readings.items():
        *earlier, current = drives(seq)
        entry = {"device": dev, **_drive_json(current), "replaced": []}
        for old, new in zip(earlier, [*earlier[1:], current]):
            at = new[0].read_wall_s
            entry["replaced"].append({**_drive_json(old), "replaced_at": iso_time(at),
                                      "replaced_at_s": at})
        out.append(entry)
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
