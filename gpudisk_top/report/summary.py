"""The postmortem of a recording window, in one pass over Replay.models().

build() returns a Summary: `data` is the JSON report (an API: keys are added, never
renamed or removed; README "Report JSON"), `series` what the text report charts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpudisk_top import __version__
from gpudisk_top.model.detect import STARVED_STATES, STATES, Episode
from gpudisk_top.model.detect.classify import gpu_ranges
from gpudisk_top.model.select import DeviceFilter
from gpudisk_top.record.header import iso
from gpudisk_top.record.reader import Recording
from gpudisk_top.record.replay import Replay

GPU_STATES = STATES + ("lost",)
BUCKETS = 240          # chart resolution: time buckets over the window


@dataclass
class _Disk:
    name: str
    r_ios: float = 0.0         # requests over the window (rate x seconds)
    w_ios: float = 0.0
    r_wait: float = 0.0        # sum of await x requests: iostat's await over the window
    w_wait: float = 0.0
    rkb: float = 0.0
    wkb: float = 0.0
    util: float = 0.0          # sum of %util x seconds
    seconds: float = 0.0
    worst_ms: float = 0.0
    worst_at: float | None = None
    buckets_wait: list[float] = field(default_factory=lambda: [0.0] * BUCKETS)
    buckets_ios: list[float] = field(default_factory=lambda: [0.0] * BUCKETS)


@dataclass
class Series:
    """Bucketed over [start_s, end_s] for the charts."""

    start_s: float
    end_s: float
    gpu_util_sum: list[float] = field(default_factory=lambda: [0.0] * BUCKETS)
    gpu_util_n: list[int] = field(default_factory=lambda: [0] * BUCKETS)
    gpu_util_min: list[float | None] = field(default_factory=lambda: [None] * BUCKETS)
    disks: dict[str, _Disk] = field(default_factory=dict)

    def bucket(self, wall_s: float) -> int:
        span = self.end_s - self.start_s
        if span <= 0:
            return 0
        return min(BUCKETS - 1, max(0, int((wall_s - self.start_s) / span * BUCKETS)))

    def times(self) -> list[float]:
        span = self.end_s - self.start_s
        return [self.start_s + (i + 0.5) * span / BUCKETS for i in range(BUCKETS)]


@dataclass
class Summary:
    data: dict
    series: Series
    episodes: list[Episode]
    warnings: list[str]


def _gpu_state(g, verdict) -> str:
    if g.lost:
        return "lost"
    if verdict.state in STARVED_STATES:
        if g.index in verdict.gpus or (not verdict.gpus and g.processes):
            return verdict.state
    return "healthy" if g.processes else "idle"


def episode_json(e: Episode) -> dict:
    end = e.end_wall_s if e.end_wall_s is not None else e.last_wall_s
    return {
        "id": e.id, "state": e.state,
        "start": iso(e.start_wall_s), "end": iso(end),
        "start_s": e.start_wall_s, "end_s": end,
        "duration_s": round(e.duration_s(), 3),
        "gpus": list(e.gpus), "devices": list(e.devices), "processes": list(e.processes),
        "reason": e.reason, "advice": e.advice,
        "min_util_pct": None if e.min_util_pct is None else round(e.min_util_pct, 1),
        "intervals": e.intervals,
    }


def build(rec: Recording, start_s: float | None = None, end_s: float | None = None,
          thresholds=None, dev_filter: DeviceFilter | None = None) -> Summary:
    """One pass over the window.  The caller checks that it holds samples."""
    dev_filter = dev_filter or DeviceFilter()
    lo = rec.seek(start_s) if start_s is not None else 0
    win_start = rec.wall_s(lo) if start_s is None else start_s
    win_end = rec.end_s if end_s is None else min(end_s, rec.end_s)
    series = Series(start_s=win_start if start_s is not None else rec.wall_s(lo), end_s=win_end)
    states: dict[int, dict[str, float]] = {}
    gpu_info: dict[int, dict] = {}
    disks: dict[str, _Disk] = series.disks
    selected: dict[str, bool] = {}
    samples = 0
    first_s = last_s = None
    covered_s = 0.0
    devices_seen: dict = {}
    clip = start_s is not None
    replay = Replay(rec, thresholds)
    for model, verdict in replay.models(start_s, end_s):
        samples += 1
        wall = model.wall_s
        if first_s is None:
            first_s = wall
        last_s = wall
        for g in model.gpus:
            if g.index not in gpu_info:
                gpu_info[g.index] = {"index": g.index, "name": g.name, "uuid": g.uuid}
                states[g.index] = dict.fromkeys(GPU_STATES, 0.0)
        if model.interval_s <= 0:
            continue
        dt_s = model.interval_s
        if clip and wall - dt_s < start_s:
            dt_s = max(0.0, wall - start_s)
        covered_s += dt_s
        for g in model.gpus:
            states[g.index][_gpu_state(g, verdict)] += dt_s
        b = series.bucket(wall)
        utils = [g.util_pct for g in model.gpus if g.util_pct is not None and not g.lost
                 and (g.processes or verdict.state == "idle")]
        if utils:
            series.gpu_util_sum[b] += sum(utils)
            series.gpu_util_n[b] += len(utils)
            low = min(utils)
            cur = series.gpu_util_min[b]
            series.gpu_util_min[b] = low if cur is None else min(cur, low)
        devices = model.devices
        if devices is not devices_seen:
            devices_seen = devices
            selected.clear()
        for name, r in model.disks.items():
            ok = selected.get(name)
            if ok is None:
                info = devices.get(name)
                ok = info is not None and dev_filter.selected(info, model.sample.disks.get(name))
                selected[name] = ok
            if not ok:
                continue
            d = disks.get(name)
            if d is None:
                d = disks[name] = _Disk(name)
            rios, wios = r.r_s * dt_s, r.w_s * dt_s
            d.r_ios += rios
            d.w_ios += wios
            d.r_wait += r.r_await_ms * rios
            d.w_wait += r.w_await_ms * wios
            d.rkb += r.rkb_s * dt_s
            d.wkb += r.wkb_s * dt_s
            d.util += r.util_pct * dt_s
            d.seconds += dt_s
            worst = max(r.r_await_ms if r.r_s > 0 else 0.0, r.w_await_ms if r.w_s > 0 else 0.0)
            if worst > d.worst_ms:
                d.worst_ms, d.worst_at = worst, wall
            d.buckets_wait[b] += r.r_await_ms * rios + r.w_await_ms * wios
            d.buckets_ios[b] += rios + wios
    episodes = replay.episodes
    header = rec.header
    last_devices = devices_seen or {}
    data = {
        "version": __version__,
        "file": rec.path,
        "format_version": rec.version,
        "source": header.get("source", "live"),
        "simulated": bool(header.get("simulated", False)),
        "host_name": header.get("host_name"),
        "kernel": header.get("kernel"),
        "recorded_by": header.get("tool_version"),
        "samples": samples,
        "start": iso(first_s) if first_s is not None else None,
        "end": iso(last_s) if last_s is not None else None,
        "start_s": first_s,
        "end_s": last_s,
        "duration_s": round(covered_s, 3),
        "interval_s": header.get("interval_s"),
        "gpus": [gpu_info[i] for i in sorted(gpu_info)],
        "states": {str(i): {k: round(v, 3) for k, v in states[i].items()} for i in sorted(states)},
        "episodes": [episode_json(e) for e in episodes],
        "devices": _devices_json(disks, last_devices),
        "warnings": list(rec.warnings),
    }
    return Summary(data=data, series=series, episodes=episodes, warnings=list(rec.warnings))


def _mean(total: float, n: float) -> float | None:
    return round(total / n, 3) if n > 0 else None


def _devices_json(disks: dict[str, _Disk], infos: dict) -> list[dict]:
    out = []
    for d in disks.values():
        ios = d.r_ios + d.w_ios
        info = infos.get(d.name)
        out.append({
            "name": d.name,
            "display_name": info.display_name if info else d.name,
            "class": info.dev_class if info else "unknown",
            "mountpoints": list(info.mountpoints) if info else [],
            "await_ms": _mean(d.r_wait + d.w_wait, ios),
            "r_await_ms": _mean(d.r_wait, d.r_ios),
            "w_await_ms": _mean(d.w_wait, d.w_ios),
            "worst_await_ms": round(d.worst_ms, 3),
            "worst_at": iso(d.worst_at) if d.worst_at is not None else None,
            "r_s": _mean(d.r_ios, d.seconds),
            "w_s": _mean(d.w_ios, d.seconds),
            "rkb_s": _mean(d.rkb, d.seconds),
            "wkb_s": _mean(d.wkb, d.seconds),
            "util_pct": _mean(d.util, d.seconds),
        })
    # worst first: iostat's await over the window, then the worst interval
    out.sort(key=lambda x: (-(x["await_ms"] or 0.0), -x["worst_await_ms"], x["name"]))
    return out


def describe_gpus(indexes: list[int]) -> str:
    return gpu_ranges(indexes) if indexes else "-"


def finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)
