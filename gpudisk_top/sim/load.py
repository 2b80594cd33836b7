"""One interval of load: from a phase's knobs to what every disk and process does.

Flows of requests land on disks: the job's reads that miss the page cache, the writeback
of Dirty pages (checkpoints), unrelated processes, and background noise.  A disk serves
at most its IOPS and MB/s, so demand beyond that is scaled down (what a saturated disk
does to everyone on it).  Latency, queue and %util then come from the phase when it sets
them, else from the load:
  await  = unloaded latency / (1 - 0.9 * load)   (grows tenfold at saturation)
  aqu-sz = (r/s * r_await + w/s * w_await) / 1000   (Little's law)
  %util  = max(load, 1 - exp(-aqu-sz))    (busy whenever >= 1 request is queued)
Every rate carries the scenario's relative noise, drawn from the simulator's seeded rng.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from gpudisk_top.sim.diskgen import DiskRatesIn
from gpudisk_top.sim.scenario import DiskSpec, DiskState, Phase, Scenario

_BACKGROUND_KB = 16.0   # logs and metadata: small requests


@dataclass
class _Flow:
    owner: str               # "job-read", "writeback", "other:<name>", "background"
    read_mb_s: float = 0.0
    write_mb_s: float = 0.0
    request_kb: float = 128.0


@dataclass
class IntervalLoad:
    """What the simulator needs from one interval, all rates per second."""

    disks: dict[str, DiskRatesIn] = field(default_factory=dict)
    job_rchar_mb_s: float = 0.0          # what the loaders got: cache hits + disk reads
    job_disk_read_mb_s: float = 0.0      # the part the disk delivered (read_bytes)
    job_wchar_mb_s: float = 0.0          # checkpoint write() rate (also write_bytes)
    writeback_mb_s: float = 0.0          # Dirty written to disk this interval
    others_read_mb_s: dict[str, float] = field(default_factory=dict)
    others_write_mb_s: dict[str, float] = field(default_factory=dict)


class LoadModel:
    """Turns phases into IntervalLoads; keeps the one state that spans intervals: Dirty."""

    def __init__(self, scenario: Scenario, rng: random.Random) -> None:
        self.sc = scenario
        self.rng = rng
        self.noise = scenario.noise_pct / 100.0
        self.dirty_mb = 20.0
        self._disks = {d.name: d for d in scenario.disks}

    def jitter(self, value: float, rel: float | None = None) -> float:
        """value times (1 + N(0, rel)), never negative; rel defaults to the scenario noise."""
        rel = self.noise if rel is None else rel
        if not value or not rel:
            return value
        return value * max(0.0, 1.0 + self.rng.gauss(0.0, rel))

    def read_disk(self, phase: Phase) -> str | None:
        job = self.sc.job
        return phase.read_disk or (job.dataset_disk if job else None)

    def write_disk(self, phase: Phase) -> str | None:
        job = self.sc.job
        if phase.write_disk:
            return phase.write_disk
        return (job.checkpoint_disk or job.dataset_disk) if job else None

    def step(self, phase: Phase, interval_s: float) -> IntervalLoad:
        """The load of one interval of `phase`."""
        out = IntervalLoad()
        running = self.sc.job is not None and phase.job_running
        flows: dict[str, list[_Flow]] = {name: [] for name in self._disks}

        want_mb_s = self.jitter(phase.read_mb_s) if running else 0.0
        miss_mb_s = want_mb_s * (1.0 - phase.cache_hit_pct / 100.0)  # exactly 0 at 100 %
        cached_mb_s = want_mb_s - miss_mb_s
        read_disk = self.read_disk(phase)
        if running and read_disk:
            flows[read_disk].append(_Flow("job-read", read_mb_s=miss_mb_s,
                                          request_kb=phase.read_request_kb))
        # Checkpoints write() into the page cache; the kernel writes Dirty back at the
        # disk's full speed above the background threshold, and trickles it below (the
        # 30 s dirty_expire).
        out.job_wchar_mb_s = self.jitter(phase.write_mb_s) if running else 0.0
        self.dirty_mb += out.job_wchar_mb_s * interval_s
        write_disk = self.write_disk(phase)
        if write_disk:
            if self.dirty_mb > self.sc.host.dirty_background_mb:
                wb_mb_s = self.dirty_mb / interval_s
            else:
                wb_mb_s = self.dirty_mb * 0.1 / interval_s
            flows[write_disk].append(_Flow("writeback", write_mb_s=wb_mb_s,
                                           request_kb=phase.write_request_kb))
        for other in self.sc.others:
            override = phase.others.get(other.name)
            r = override.read_mb_s if override and override.read_mb_s is not None else other.read_mb_s
            w = override.write_mb_s if override and override.write_mb_s is not None else other.write_mb_s
            flows[other.disk].append(_Flow(f"other:{other.name}", read_mb_s=self.jitter(r),
                                           write_mb_s=self.jitter(w), request_kb=other.request_kb))

        delivered: dict[str, float] = {}
        for name, disk in self._disks.items():
            out.disks[name] = self._serve(disk, flows[name], phase, read_disk, write_disk, delivered)

        disk_read = delivered.get("job-read:r", 0.0)
        out.job_disk_read_mb_s = disk_read
        out.job_rchar_mb_s = cached_mb_s + disk_read
        out.writeback_mb_s = delivered.get("writeback:w", 0.0)
        self.dirty_mb = max(0.0, self.dirty_mb - out.writeback_mb_s * interval_s)
        for other in self.sc.others:
            out.others_read_mb_s[other.name] = delivered.get(f"other:{other.name}:r", 0.0)
            out.others_write_mb_s[other.name] = delivered.get(f"other:{other.name}:w", 0.0)
        return out

    def _state(self, name: str, phase: Phase, read_disk: str | None,
               write_disk: str | None) -> DiskState:
        given = phase.disks.get(name) or DiskState()
        state = DiskState(given.read_latency_ms, given.write_latency_ms, given.queue_depth,
                          given.util_pct)
        if name == read_disk:
            if state.read_latency_ms is None:
                state.read_latency_ms = phase.read_latency_ms
            if state.queue_depth is None:
                state.queue_depth = phase.queue_depth
            if state.util_pct is None:
                state.util_pct = phase.disk_util_pct
        if name == write_disk and state.write_latency_ms is None:
            state.write_latency_ms = phase.write_latency_ms
        return state

    def _serve(self, disk: DiskSpec, flows: list[_Flow], phase: Phase, read_disk: str | None,
               write_disk: str | None, delivered: dict[str, float]) -> DiskRatesIn:
        read_mb = sum(f.read_mb_s for f in flows)
        write_mb = sum(f.write_mb_s for f in flows)
        iops = sum((f.read_mb_s + f.write_mb_s) * 1024.0 / f.request_kb for f in flows)
        load = max(read_mb / disk.max_read_mb_s + write_mb / disk.max_write_mb_s,
                   iops / disk.max_iops)
        scale = 1.0 / load if load > 1.0 else 1.0
        load = min(load, 1.0)
        r_s = w_s = read_kb = write_kb = 0.0
        for f in flows:
            delivered[f.owner + ":r"] = f.read_mb_s * scale
            delivered[f.owner + ":w"] = f.write_mb_s * scale
            r_s += f.read_mb_s * scale * 1024.0 / f.request_kb
            w_s += f.write_mb_s * scale * 1024.0 / f.request_kb
            read_kb += f.read_mb_s * scale * 1024.0
            write_kb += f.write_mb_s * scale * 1024.0
        bg_r, bg_w = self.jitter(disk.background_r_s, 0.3), self.jitter(disk.background_w_s, 0.3)
        r_s, w_s = r_s + bg_r, w_s + bg_w
        read_kb, write_kb = read_kb + bg_r * _BACKGROUND_KB, write_kb + bg_w * _BACKGROUND_KB

        state = self._state(disk.name, phase, read_disk, write_disk)
        factor = 1.0 / (1.0 - 0.9 * load)
        queue_await = (state.queue_depth * 1000.0 / (r_s + w_s)
                       if state.queue_depth is not None and r_s + w_s > 0 else None)
        r_await = _first(state.read_latency_ms, queue_await, disk.read_latency_ms * factor)
        w_await = _first(state.write_latency_ms, queue_await, disk.write_latency_ms * factor)
        r_await, w_await = self.jitter(r_await), self.jitter(w_await)
        if state.queue_depth is not None:
            aqu = self.jitter(state.queue_depth)
        else:
            aqu = (r_s * r_await + w_s * w_await) / 1000.0
        if state.util_pct is not None:
            util = self.jitter(state.util_pct, self.noise / 2)
        else:
            util = 100.0 * max(load, 1.0 - math.exp(-aqu))
        flushing = delivered.get("writeback:w", 0.0) > 0 and disk.name == write_disk
        f_s = 0.02 * w_s + (0.5 if flushing else 0.0)
        return DiskRatesIn(
            r_s=r_s, read_kb_s=read_kb, read_await_ms=r_await,
            read_merge_pct=disk.read_merge_pct,
            w_s=w_s, write_kb_s=write_kb, write_await_ms=w_await,
            f_s=f_s, flush_await_ms=w_await * 0.5,
            aqu_sz=aqu, util_pct=min(util, 100.0),
            in_flight=int(aqu + self.rng.random()),
        )


def _first(*values: float | None) -> float:
    for v in values:
        if v is not None:
            return v
    return 0.0
