"""The simulator: a scripted GPU training node that yields raw Samples, as the Sampler does.

    sim = Simulator(builtin("disk-starved-sata"), seed=1)
    last = None
    for _ in range(60):
        sample = sim.sample()           # one interval later on the virtual clock
        model = Model.new(sample, last)
        last = sample

Everything the real collectors would read is produced as raw counters and read through
the real code where there is one: the disk counters are printed as /proc/diskstats text
and parsed by gpudisk_top.collect.diskstats.parse; the GPUs are a FakeNvml the simulator
drives, read by the real GpuCollector.  Host and process counters are built directly as
HostRaw and ProcIoRaw.  Same scenario and seed: byte-identical diskstats text and equal
Samples (one random.Random(seed); no wall clock, no global random).

Each Sample carries the disks' health (Sample.health) as collect/health.py's poller would
hand it over: read every health_interval_s of simulated time (sim/health.py: each disk a
drive of its class, or the scenario's HealthSpec); nothing real is read.

The interval may change between samples (the dashboard's `+`/`-` set `interval_s`): the
scenario's clock then goes on from where it was, by the new interval, as a real node's
would; it never jumps or runs back.
"""

from __future__ import annotations

import bisect
import math
import random
import threading

import pynvml

from gpudisk_top.collect import diskstats
from gpudisk_top.collect.gpu import GpuCollector, Resolved
from gpudisk_top.collect.gpu_fields import THROTTLE_FIELDS
from gpudisk_top.collect.health import DEFAULT_INTERVAL_S as DEFAULT_HEALTH_INTERVAL_S
from gpudisk_top.collect.sample import Sample
from gpudisk_top.collect.sample_source import SourceDefaults
from gpudisk_top.sim.diskgen import DiskCounterGen
from gpudisk_top.sim.fake_nvml import SAMPLES_PER_S, FakeGpu, FakeNvml
from gpudisk_top.sim.health import DriveGen, Readings, SimulatedPoller
from gpudisk_top.sim.hostgen import HostCounters, ProcCounters
from gpudisk_top.sim.load import IntervalLoad, LoadModel
from gpudisk_top.sim.scenario import Phase, Scenario

DEFAULT_START_WALL_S = 1767225600.0   # 2026-01-01 00:00:00 UTC
DEFAULT_START_MONO_S = 86400.0 * 3    # the node has been up three days
KIB = 1024
GIB_KB = 1024 * 1024
_IDLE_GPU_MEM_BYTES = 4 * 2**20
_CLOCK_EVENT_GPU_IDLE = 0x1
# a throttle reason (collect/gpu_fields.py) -> the stand-in's field id for it
_THROTTLE_FIELD_IDS = {reason: getattr(pynvml, const) for reason, const in THROTTLE_FIELDS}


class Simulator(SourceDefaults):
    """Raw Samples of `scenario`, one per `interval_s` of virtual time: a SampleSource
    (collect/sample_source.py) that scans no node, waits for no health reading (its
    health is read on its own clock) and has no notes.

    ticks_start: start every 32-bit disk tick counter there (e.g. just below 2**32, to
    see them wrap); by default each starts at a seeded random value.

    interval_s may be set between samples (Feed.set_interval does): the next interval is
    that long and starts where the last one ended.

    health_interval_s: simulated seconds between two readings of the disks' health (the
    real poller's default); 0: none (Sample.health None, as with --health-interval 0).
    health_readings(k, wall_s) -> {device: DiskHealth}: the k-th poll's readings instead
    of the simulated drives' (a test's real drives).

    Raises ValueError for an interval that is not a finite number above 0, or a
    health_interval_s below 0.
    """

    def __init__(self, scenario: Scenario, seed: int = 0, interval_s: float = 1.0,
                 start_wall_s: float = DEFAULT_START_WALL_S,
                 start_mono_s: float = DEFAULT_START_MONO_S,
                 ticks_start: int | None = None,
                 health_interval_s: float = DEFAULT_HEALTH_INTERVAL_S,
                 health_readings: Readings | None = None) -> None:
        _check_interval(interval_s)
        if not (math.isfinite(health_interval_s) and health_interval_s >= 0):
            raise ValueError(f"health_interval_s must be >= 0, not {health_interval_s}")
        scenario.timeline()  # validates: raises ScenarioError
        self.scenario = scenario
        self.seed = seed
        self.start_wall_s = start_wall_s
        self.start_mono_s = start_mono_s
        self.index = 0           # samples taken so far
        # The clock: (first sample index, scenario seconds where its interval starts,
        # interval_s), one entry per interval length used.  Times within an entry are
        # t0 + k * interval_s (never a running sum), so a steady interval gives exactly
        # the numbers it always gave.  The lock: the dashboard sets interval_s from its
        # own thread while the sampling thread reads the clock.
        self._clock: list[tuple[int, float, float]] = [(0, 0.0, interval_s)]
        self._clock_lock = threading.Lock()
        self._rng = random.Random(seed)
        self._load = LoadModel(scenario, self._rng)
        self._disks = DiskCounterGen(scenario.disks, self._rng, ticks_start)
        self._devices = self._disks.devices()
        self._text = self._disks.text()
        self.health: SimulatedPoller | None = None
        if health_interval_s > 0:
            if health_readings is None:
                health_readings = DriveGen(scenario.disks, seed, self._disks.busy_ms,
                                           start_wall_s, uptime_s=start_mono_s).read
            self.health = SimulatedPoller(health_readings, health_interval_s)
        self._host = HostCounters.booted(scenario.host.ncpu, start_mono_s)
        self._mono_s = start_mono_s
        self._job_gpus = self._job_gpu_list()
        self._ranks, self._workers = self._job_procs()
        self._others = {o.name: ProcCounters(o.pid, 1, None, o.name, o.cmdline or o.name,
                                             devices=(scenario.disk(o.disk).mount_device,))
                        for o in scenario.others}
        self._names: dict[int, tuple[str, str]] = {
            p.pid: (p.name, p.cmdline) for p in self._ranks + self._workers}
        self._job_was_running = True
        self._job_visible = scenario.job is None or scenario.job.visible
        gpus = scenario.gpus
        self.nvml = FakeNvml(
            gpus=[FakeGpu(name=gpus.model, mem_total_bytes=gpus.memory_mib * 2**20,
                          power_mw=int(gpus.idle_power_w * 1000),
                          power_limit_mw=int(gpus.power_limit_w * 1000),
                          gpm_supported=gpus.has_gpm(g))
                  for g in range(gpus.count)],
            start_us=round(start_wall_s * 1e6))
        self.gpu_collector = GpuCollector(nvml=self.nvml, resolve_pid=self._resolve,
                                          clock=lambda: self._mono_s, pcie_background=False)

    # ------------------------------------------------------------------ the clock
    @property
    def interval_s(self) -> float:
        """The length of the next interval."""
        return self._clock[-1][2]

    @interval_s.setter
    def interval_s(self, interval_s: float) -> None:
        _check_interval(interval_s)
        with self._clock_lock:
            first, _, current_s = self._clock[-1]
            if interval_s == current_s:
                return
            entry = (self.index, self._time_s(self.index), interval_s)
            if first == self.index:      # no interval was taken at the length it replaces
                self._clock[-1] = entry
            else:
                self._clock.append(entry)

    def _entry(self, i: int) -> tuple[int, float, float]:
        """The clock entry that interval i (the one sample i ends) belongs to."""
        k = bisect.bisect_right(self._clock, i, key=lambda e: e[0]) - 1
        return self._clock[max(0, k)]

    def _time_s(self, i: int, part: float = 0.0) -> float:
        """Scenario seconds `part` of the way through interval i (0: where it starts,
        which is where interval i - 1 ended)."""
        first, t0_s, dt = self._entry(i)
        return t0_s + (i - first + part) * dt

    @property
    def elapsed_s(self) -> float:
        """Scenario seconds at the last sample (0 before the first)."""
        return self._time_s(self.index)

    # ------------------------------------------------------------------ public
    def sample(self) -> Sample:
        """Advance the virtual clock by interval_s and return everything read then."""
        with self._clock_lock:   # interval i is this sample's: a new interval_s is the next's
            i = self.index
            self.index = i + 1
        dt = self._entry(i)[2]
        phase = self.phase_at(i)
        end_s = self._time_s(i, 1.0)
        wall_s = self.start_wall_s + end_s
        self._mono_s = self.start_mono_s + end_s
        running = self.scenario.job is not None and phase.job_running
        if running and not self._job_was_running:
            for proc in self._ranks + self._workers:
                proc.reset()  # the job started again: new processes, counters from zero
        self._job_was_running = running

        load = self._load.step(phase, dt)
        self._disks.advance(load.disks, dt)
        self._text = self._disks.text()
        self._drive_gpus(phase, load, running, wall_s, dt)
        gpu = self.gpu_collector.collect()
        self._advance_procs(phase, load, running, dt)
        self._advance_host(phase, load, running, dt)
        procs = {p.pid: p.raw() for p in self._others.values()}
        if running and self._job_visible:
            procs.update((p.pid, p.raw()) for p in self._ranks + self._workers)
        # the health poller's latest snapshot, a new one only when a poll is due
        health = self.health.at(wall_s) if self.health is not None else None
        return Sample(mono_s=self._mono_s, wall_s=wall_s, disks=diskstats.parse(self._text),
                      devices=dict(self._devices), gpu=gpu, host=self._host.raw(), procs=procs,
                      health=health)

    def samples_until(self, t_s: float) -> int:
        """How many samples bring the clock to t_s scenario seconds (the last one at or
        before it) at the current interval_s; 0 when it is there already."""
        return max(0, math.floor((t_s - self.elapsed_s) / self.interval_s + 1e-9))

    def diskstats_text(self) -> str:
        """/proc/diskstats as of the last sample (before the first: the starting counters)."""
        return self._text

    def phase_at(self, i: int) -> Phase:
        """The phase of the interval that sample i (0-based) ends: the one playing at the
        interval's midpoint (intervals not yet taken: at the current interval_s)."""
        return self.scenario.phase_at_time(self._time_s(i, 0.5))

    def label_at(self, i: int) -> str | None:
        """The state a detector should report for the interval ending at sample i."""
        return self.phase_at(i).label

    def labels(self, n: int | None = None) -> list[str | None]:
        """label_at(i) for the first n samples; by default one pass through the scenario."""
        if n is None:
            n = math.ceil(self.scenario.duration_s / self.interval_s - 1e-9)
        return [self.label_at(i) for i in range(n)]

    @property
    def job_pids(self) -> list[int]:
        """Host PIDs of the job's GPU processes (one per rank)."""
        return [p.pid for p in self._ranks]

    def close(self) -> None:
        self.gpu_collector.close()

    # ------------------------------------------------------------------ the job
    def _job_gpu_list(self) -> list[int]:
        job = self.scenario.job
        if job is None:
            return []
        return list(job.gpus) if job.gpus is not None else list(range(self.scenario.gpus.count))

    def _job_procs(self) -> tuple[list[ProcCounters], list[ProcCounters]]:
        job = self.scenario.job
        if job is None:
            return [], []
        sc = self.scenario
        data_dev = sc.disk(job.dataset_disk).mount_device
        ckpt_dev = sc.disk(job.checkpoint_disk or job.dataset_disk).mount_device
        nranks = len(self._job_gpus) if job.one_process_per_gpu else 1
        ranks, workers = [], []
        for r in range(nranks):
            pid = job.pid + r * (job.workers + 1)
            ranks.append(ProcCounters(pid, job.launcher_pid, pid, job.name, job.cmdline,
                                      devices=tuple(sorted({data_dev, ckpt_dev}))))
            for w in range(job.workers):
                workers.append(ProcCounters(pid + 1 + w, pid, pid, job.name, job.cmdline,
                                            devices=(data_dev,)))
        return ranks, workers

    def _rank_of_gpu(self, gpu: int) -> ProcCounters | None:
        if not self._ranks or gpu not in self._job_gpus:
            return None
        return self._ranks[self._job_gpus.index(gpu)] if len(self._ranks) > 1 else self._ranks[0]

    def _resolve(self, pid: int) -> Resolved:
        if not self._job_visible and pid in self._names:
            # what the real resolver gives for a host PID absent from our /proc
            return None, None, None, None, False
        name, cmdline = self._names.get(pid, (None, None))
        return pid, pid, name, cmdline, True

    # ------------------------------------------------------------------ GPUs
    def _gpu_util(self, phase: Phase, gpu: int, running: bool) -> float:
        if gpu in phase.gpu_util_by_gpu:
            return phase.gpu_util_by_gpu[gpu]
        if not running or gpu in self._job_gpus:
            return phase.gpu_util_pct
        return 0.0

    def _sm_active(self, phase: Phase, gpu: int, running: bool) -> float | None:
        """The GPU's SM activity where the phase sets one, else None (it follows the
        utilization): the job's GPUs' (every GPU's when no job runs), as _gpu_util."""
        if gpu in phase.gpu_sm_active_by_gpu:
            return phase.gpu_sm_active_by_gpu[gpu]
        if phase.gpu_sm_active_pct is not None and (not running or gpu in self._job_gpus):
            return phase.gpu_sm_active_pct
        return None

    def _throttle(self, phase: Phase, gpu: int, running: bool) -> dict[int, float]:
        """The stand-in's throttle_pct of a GPU (field id -> % of the time held): the
        phase's shares for that GPU, else the job's GPUs' (every GPU's when no job runs),
        as _gpu_util."""
        shares = phase.gpu_throttle_by_gpu.get(gpu)
        if shares is None:
            shares = phase.gpu_throttle_pct if not running or gpu in self._job_gpus else {}
        return {_THROTTLE_FIELD_IDS[r]: pct for r, pct in shares.items()}

    def _drive_gpus(self, phase: Phase, load: IntervalLoad, running: bool, wall_s: float,
                    dt: float) -> None:
        spec = self.scenario.gpus
        job = self.scenario.job
        noise = self._load.noise
        t0_s = wall_s - dt
        steps = max(1, round(dt * SAMPLES_PER_S))
        pcie_kb_s = int(load.job_rchar_mb_s * KIB / max(1, len(self._job_gpus))) if running else 0
        utils = [self._gpu_util(phase, g, running) for g in range(spec.count)]
        sm_active = [self._sm_active(phase, g, running) for g in range(spec.count)]
        for g, util in enumerate(utils):
            if g in phase.gpu_power_by_gpu:
                power_w = phase.gpu_power_by_gpu[g]
            elif phase.gpu_power_w is not None and (not running or g in self._job_gpus):
                power_w = phase.gpu_power_w
            else:
                # busy H100s draw ~85 % of their limit on dense training
                span_w = 0.85 * spec.power_limit_w - spec.idle_power_w
                power_w = spec.idle_power_w + util / 100.0 * span_w
            power_w = min(self._load.jitter(power_w, noise / 2), spec.power_limit_w)
            rank = self._rank_of_gpu(g) if running else None
            used = job.gpu_mem_mib * 2**20 if rank is not None else _IDLE_GPU_MEM_BYTES
            self.nvml.set_state(
                g, power_mw=int(power_w * 1000), mem_used_bytes=used,
                temp_c=int(30 + 45 * power_w / spec.power_limit_w),
                sm_clock_mhz=1980 if util > 1 else 345,
                clocks_event_reasons=0 if util > 1 else _CLOCK_EVENT_GPU_IDLE,
                pcie_rx_kb_s=pcie_kb_s if rank is not None else 0,
                throttle_pct=self._throttle(phase, g, running),
                processes=[(rank.pid, used)] if rank is not None else [])
        # One utilization sample per driver sampling period, each with its own noise
        # (spread like a binomial share: none at 0 % or 100 %, most at 50 %).
        for step in range(1, steps + 1):
            for g, util in enumerate(utils):
                sd = noise * 100.0 * math.sqrt(util * (100.0 - util)) / 50.0
                value = min(100.0, max(0.0, util + self._rng.gauss(0.0, sd))) if sd else util
                mem = phase.gpu_mem_util_pct if phase.gpu_mem_util_pct is not None else 0.4 * util
                # SM activity None follows the utilization (stand-in's rule)
                sm = None if sm_active[g] is None else min(value, sm_active[g])
                self.nvml.set_state(g, util_pct=value, mem_util_pct=mem, sm_active_pct=sm)
            self.nvml.advance_to(t0_s + step * dt / steps)

    # ------------------------------------------------------------------ host and processes
    def _advance_procs(self, phase: Phase, load: IntervalLoad, running: bool, dt: float) -> None:
        jitter = self._load.jitter
        for other in self.scenario.others:
            self._others[other.name].add(
                dt, rchar_mb_s=load.others_read_mb_s[other.name],
                read_mb_s=load.others_read_mb_s[other.name],
                wchar_mb_s=load.others_write_mb_s[other.name],
                write_mb_s=load.others_write_mb_s[other.name],
                cpu_pct=jitter(_other_cpu_pct(phase, other.name, other.cpu_pct)))
        if not running:
            return
        readers = self._workers or self._ranks
        weights = [max(0.05, 1.0 + self._rng.gauss(0.0, self._load.noise)) for _ in readers]
        total = sum(weights)
        for proc, weight in zip(readers, weights):
            share = weight / total
            proc.add(dt, rchar_mb_s=load.job_rchar_mb_s * share,
                     read_mb_s=load.job_disk_read_mb_s * share)
        for proc in self._workers:
            proc.add(dt, cpu_pct=jitter(phase.loader_cpu_pct))
        for r, proc in enumerate(self._ranks):
            # rank 0 saves the checkpoint; write_bytes is charged when a page is dirtied
            wchar = load.job_wchar_mb_s if r == 0 else 0.0
            proc.add(dt, wchar_mb_s=wchar, write_mb_s=wchar, cpu_pct=jitter(phase.job_cpu_pct))

    def _process_cpu_pct(self, phase: Phase, running: bool) -> float:
        """The processes' CPU, in % of one CPU, as the phase asks for it."""
        total = sum(_other_cpu_pct(phase, o.name, o.cpu_pct) for o in self.scenario.others)
        if running:
            total += len(self._ranks) * phase.job_cpu_pct + len(self._workers) * phase.loader_cpu_pct
        return total

    def _advance_host(self, phase: Phase, load: IntervalLoad, running: bool, dt: float) -> None:
        host, jitter = self.scenario.host, self._load.jitter
        busy = phase.host_cpu_pct
        if busy is None:
            busy = min(100.0, self._process_cpu_pct(phase, running) / host.ncpu + 2.0)
        self._host.add_cpu(dt, jitter(busy), jitter(phase.iowait_pct))
        self._host.add_psi(dt, "io", jitter(phase.io_psi_some_pct), jitter(phase.io_psi_full_pct))
        self._host.add_psi(dt, "cpu", jitter(phase.cpu_psi_some_pct), 0.0)
        self._host.add_psi(dt, "memory", jitter(phase.memory_psi_some_pct),
                           jitter(phase.memory_psi_some_pct) * 0.3)
        dirty_mb = phase.dirty_mb if phase.dirty_mb is not None else self._load.dirty_mb
        dirty_kb = int(jitter(dirty_mb * KIB, 0.02) + jitter(8 * KIB, 0.5))
        # pages under writeback: about a quarter second of what the disk writes back
        writeback_kb = int(min(dirty_kb, load.writeback_mb_s * KIB * 0.25))
        cached_gib = phase.cached_gib if phase.cached_gib is not None else host.cached_gib
        total_kb = int(host.mem_total_gib * GIB_KB)
        self._host.meminfo_kb = {
            "MemTotal": total_kb,
            "MemAvailable": max(0, total_kb - int(host.anon_gib * GIB_KB) - dirty_kb),
            "Buffers": 2 * GIB_KB,
            "Cached": int(jitter(cached_gib * GIB_KB, 0.001)) + dirty_kb,
            "Dirty": dirty_kb,
            "Writeback": writeback_kb,
        }


def _check_interval(interval_s: float) -> None:
    if not (math.isfinite(interval_s) and interval_s > 0):
        raise ValueError(f"interval_s must be > 0, not {interval_s}")


def _other_cpu_pct(phase: Phase, name: str, default_pct: float) -> float:
    """An unrelated process's CPU (% of one CPU) in `phase`: its override, else its default."""
    override = phase.others.get(name)
    return override.cpu_pct if override and override.cpu_pct is not None else default_pct
