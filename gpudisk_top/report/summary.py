"""The postmortem of a recording window, in one pass over Replay.models().

build() returns a Summary: `data` is the JSON report (an API: keys are added, never
renamed or removed; README "Report JSON"), `series` what the text report charts.
"""

from __future__ import annotations

import math
import os
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
CHUNK_S = 3600.0       # the report replays the window in pieces this long (see build())


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


@dataclass
class _Partial:
    """What one chunk's pass accumulates; partials are summed in chunk order."""

    samples: int = 0
    first_s: float | None = None
    last_s: float | None = None
    covered_s: float = 0.0
    gpu_info: dict = field(default_factory=dict)
    states: dict = field(default_factory=dict)
    series: Series | None = None
    episodes: list[Episode] = field(default_factory=list)
    open_at_end: bool = False           # its last episode was still open at the chunk's end
    devices: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _pass(rec: Recording, start_s, end_s, clip_s, series: Series, thresholds,
          dev_filter: DeviceFilter) -> _Partial:
    """Replay [start_s, end_s] (detector warmed up before start_s) into a _Partial;
    intervals that begin before clip_s count only from clip_s."""
    part = _Partial(series=series)
    states, gpu_info, disks = part.states, part.gpu_info, series.disks
    selected: dict[str, bool] = {}
    devices_seen: dict = {}
    known_warnings = len(rec.warnings)
    replay = Replay(rec, thresholds)
    for model, verdict in replay.models(start_s, end_s, close=False):
        part.samples += 1
        wall = model.wall_s
        if part.first_s is None:
            part.first_s = wall
        part.last_s = wall
        for g in model.gpus:
            if g.index not in gpu_info:
                gpu_info[g.index] = {"index": g.index, "name": g.name, "uuid": g.uuid}
                states[g.index] = dict.fromkeys(GPU_STATES, 0.0)
        if model.interval_s <= 0:
            continue
        dt_s = model.interval_s
        if clip_s is not None and wall - dt_s < clip_s:
            dt_s = max(0.0, wall - clip_s)
        part.covered_s += dt_s
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
    det = replay.detector
    if det is not None and part.last_s is not None:
        part.open_at_end = bool(det.episodes) and det.episodes[-1].end_wall_s is None
        det.close(part.last_s)
        first = start_s if start_s is not None else float("-inf")
        part.episodes = [e for e in det.episodes if e.end_wall_s >= first]
    part.devices = devices_seen or {}
    part.warnings = rec.warnings[known_warnings:]
    return part


def _merge_episodes(parts: list[_Partial], bounds: list[float]) -> list[Episode]:
    """Episodes of consecutive chunks as one list.  A chunk's detector was warmed up before
    its start, so an episode that went on across a boundary shows in both chunks: the
    earlier one closed at its last sample, the later one begun before the boundary.  They
    are joined; an episode that ended within the warm-up belongs to the chunk before."""
    merged: list[Episode] = []
    carried_open = False
    for k, part in enumerate(parts):
        boundary = bounds[k]
        for e in part.episodes:
            if k > 0 and e.end_wall_s is not None and e.end_wall_s < boundary:
                continue                                   # the chunk before reported it
            if k > 0 and e.start_wall_s < boundary:
                last = merged[-1] if merged else None
                if carried_open and last is not None and last.state == e.state:
                    last.end_wall_s = e.end_wall_s
                    last.last_wall_s = e.last_wall_s
                    last.intervals += e.intervals
                    for attr in ("gpus", "devices", "processes"):
                        have = getattr(last, attr)
                        have.extend(x for x in getattr(e, attr) if x not in have)
                    last.gpus.sort()
                    last.reason, last.advice = e.reason or last.reason, e.advice or last.advice
                    if e.min_util_pct is not None:
                        last.min_util_pct = e.min_util_pct if last.min_util_pct is None \
                            else min(last.min_util_pct, e.min_util_pct)
                    carried_open = False
                    continue
                # the chunk before had not opened it yet (too few intervals before its end):
                # keep the start the warmed-up detector found, after what is already listed
                if last is not None and last.end_wall_s is not None:
                    e.start_wall_s = max(e.start_wall_s, last.end_wall_s)
            merged.append(e)
            carried_open = False
        carried_open = part.open_at_end
    for i, e in enumerate(merged, 1):
        e.id = i
    return merged


def chunks_of(rec: Recording, start_s: float | None, end_s: float | None,
              chunk_s: float) -> list[tuple[float | None, float | None]]:
    """[start, end] of each chunk: fixed lengths from the window's start, so the result
    does not depend on how many processes compute it."""
    first = rec.wall_s(rec.seek(start_s)) if start_s is not None else rec.start_s
    last = rec.end_s if end_s is None else min(end_s, rec.end_s)
    bounds = []
    t = first
    while True:
        nxt = t + chunk_s
        if nxt >= last:
            bounds.append((t, end_s))
            break
        bounds.append((t, math.nextafter(nxt, -math.inf)))
        t = nxt
    bounds[0] = (start_s, bounds[0][1])
    return bounds


_FORK_STATE: tuple | None = None     # (recording, series bounds, thresholds, filter) for workers


def _chunk_worker(job: tuple) -> _Partial:
    rec, bounds, thresholds, dev_filter = _FORK_STATE
    start, end, clip = job
    return _pass(rec, start, end, clip, Series(*bounds), thresholds, dev_filter)


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def build(rec: Recording, start_s: float | None = None, end_s: float | None = None,
          thresholds=None, dev_filter: DeviceFilter | None = None, jobs: int = 1,
          chunk_s: float = CHUNK_S) -> Summary:
    """The report over [start_s, end_s].  The window is cut into chunk_s pieces, each
    replayed with the detector warmed up WARMUP_S before it (the same numbers whatever
    `jobs`); with jobs > 1 the pieces are computed by that many processes.  The caller
    checks that the window holds samples."""
    global _FORK_STATE
    dev_filter = dev_filter or DeviceFilter()
    lo = rec.seek(start_s) if start_s is not None else 0
    win_start = start_s if start_s is not None else rec.wall_s(lo)
    win_end = rec.end_s if end_s is None else min(end_s, rec.end_s)
    bounds = (win_start, win_end)
    chunks = chunks_of(rec, start_s, end_s, chunk_s)
    work = [(s, e, start_s if k == 0 else None) for k, (s, e) in enumerate(chunks)]
    jobs = max(1, min(jobs, len(work)))
    if jobs == 1:
        parts = [_pass(rec, s, e, clip, Series(*bounds), thresholds, dev_filter) for s, e, clip in work]
    else:
        import multiprocessing

        _FORK_STATE = (rec, bounds, thresholds, dev_filter)
        try:
            with multiprocessing.get_context("fork").Pool(jobs) as pool:
                parts = pool.map(_chunk_worker, work, chunksize=1)
        finally:
            _FORK_STATE = None
    boundaries = [s if s is not None else win_start for s, _ in chunks]
    episodes = _merge_episodes(parts, boundaries)
    return _summary(rec, parts, episodes, bounds)


def _summary(rec: Recording, parts: list[_Partial], episodes: list[Episode], bounds) -> Summary:
    series = Series(*bounds)
    states: dict[int, dict[str, float]] = {}
    gpu_info: dict[int, dict] = {}
    samples, covered = 0, 0.0
    first_s = last_s = None
    devices: dict = {}
    for part in parts:
        samples += part.samples
        covered += part.covered_s
        if part.first_s is not None and first_s is None:
            first_s = part.first_s
        if part.last_s is not None:
            last_s = part.last_s
        for i, info in part.gpu_info.items():
            gpu_info.setdefault(i, info)
            per = states.setdefault(i, dict.fromkeys(GPU_STATES, 0.0))
            for k, v in part.states[i].items():
                per[k] += v
        ps = part.series
        for b in range(BUCKETS):
            series.gpu_util_sum[b] += ps.gpu_util_sum[b]
            series.gpu_util_n[b] += ps.gpu_util_n[b]
            if ps.gpu_util_min[b] is not None:
                cur = series.gpu_util_min[b]
                series.gpu_util_min[b] = ps.gpu_util_min[b] if cur is None else min(cur, ps.gpu_util_min[b])
        for name, d in ps.disks.items():
            into = series.disks.setdefault(name, _Disk(name))
            for attr in ("r_ios", "w_ios", "r_wait", "w_wait", "rkb", "wkb", "util", "seconds"):
                setattr(into, attr, getattr(into, attr) + getattr(d, attr))
            if d.worst_ms > into.worst_ms:
                into.worst_ms, into.worst_at = d.worst_ms, d.worst_at
            into.buckets_wait = [a + b for a, b in zip(into.buckets_wait, d.buckets_wait)]
            into.buckets_ios = [a + b for a, b in zip(into.buckets_ios, d.buckets_ios)]
        devices = part.devices or devices
        for w in part.warnings:
            if w not in rec.warnings:
                rec.warnings.append(w)
    header = rec.header
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
        "duration_s": round(covered, 3),
        "interval_s": header.get("interval_s"),
        "gpus": [gpu_info[i] for i in sorted(gpu_info)],
        "states": {str(i): {k: round(v, 3) for k, v in states[i].items()} for i in sorted(states)},
        "episodes": [episode_json(e) for e in episodes],
        "devices": _devices_json(series.disks, devices),
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
