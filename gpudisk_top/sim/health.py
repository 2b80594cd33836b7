"""Simulated device health: what collect/health.py's poller would hand over for the
simulated disks, on the simulator's clock.

    poller = SimulatedPoller(DriveGen(scenario.disks, seed, busy_ms, start_wall_s).read, 600)
    sample.health = poller.at(sample.wall_s)   # a new HealthSnapshot when a poll is due

SimulatedPoller is the poller's cadence on simulated time (a poll at the first sample,
then at the first sample interval_s or more after the last poll; the samples between
share the snapshot, by reference, as the Sampler's do) with the real poller's snapshot
rule (collect/health.py next_snapshot).  Whatever makes the readings is a function
read(k, wall_s) -> {device: DiskHealth} (k: the polls before this one): DriveGen's, the
simulator's own, or a test's.

DriveGen gives each simulated disk a drive of its class, with numbers of the order a
real one reports (smartctl -x on data-centre drives): an NVMe drive its composite
temperature with WCTEMP 75 °C and CCTEMP 80 °C, a few % of its endurance used, 100 %
spare over a 10 % threshold, no media errors, some unsafe shutdowns and error-log
entries; a SATA SSD or a hard disk its ATA attributes (no reallocated, pending or
offline-uncorrectable sectors), its temperature and SCT's limits; each its power-on
hours, which grow with the simulated time.  A virtual disk is unreadable, with the
reason the real collector gives (there is no SMART behind virtio or Xen).  A scenario's
HealthSpec (sim/scenario.py; `health = { ... }` of a disk in TOML) overrides any of it.

The temperature follows the disk's load a little: between two polls it moves toward
idle_temp_c + busy_temp_rise_c x the disk's %util over that stretch, with a time
constant of minutes (a drive's case heats and cools slowly), plus a fraction of a
degree of noise, reported in whole degrees as drives do.  The %util is the simulated
disk's own busy-time counter (diskstats' io_ticks) read at the poll, so the samples
between polls cost nothing.  Numbers drawn per disk and per poll come from a random
stream of their own, seeded from the simulator's seed: the other counters are the same
with or without health, and the same seed gives the same readings.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping

from gpudisk_top.collect.health import DEFAULT_INTERVAL_S, next_snapshot
from gpudisk_top.collect.health_sysfs import VIRTIO_NO_SMART, XEN_NO_SMART
from gpudisk_top.collect.sample import HEALTH_SIMULATED, DiskHealth, HealthSnapshot
from gpudisk_top.sim.scenario import DiskSpec, HealthSpec

Readings = Callable[[int, float], Mapping[str, DiskHealth]]

# a drive's case and the air around it warm up and cool down over minutes
THERMAL_TIME_CONSTANT_S = 300.0
# A poll due at t is taken by the first sample at or after it; sample times are sums of
# floats, so "at" allows for their rounding.
_DUE_SLACK_S = 1e-6

# Per class: the protocol smartctl reports, temperatures (°C: idle, the rise at 100 %
# util, the drive's warning and critical limits), the ranges a drive's counters are
# drawn from at the start, and its firmware.  Orders of magnitude from data-centre
# drives' smartctl -x: a PCIe 4 NVMe (WCTEMP/CCTEMP 75/80), a SATA SSD (SCT limits
# 70/75), a 7200 rpm disk (SCT 60/65).
_CLASSES = {
    "NVMe": dict(protocol="NVMe", idle_temp_c=(34, 40), busy_temp_rise_c=24.0,
                 warning_temp_c=75.0, critical_temp_c=80.0, percentage_used_pct=(1, 8),
                 power_on_hours=(3000, 26000), unsafe_shutdowns=(3, 40),
                 error_log_entries=(0, 24), firmware="GDC5902Q"),
    "SSD": dict(protocol="ATA", idle_temp_c=(28, 33), busy_temp_rise_c=14.0,
                warning_temp_c=70.0, critical_temp_c=75.0, percentage_used_pct=(1, 12),
                power_on_hours=(3000, 30000), firmware="JXTC404Q"),
    "HDD": dict(protocol="ATA", idle_temp_c=(31, 36), busy_temp_rise_c=10.0,
                warning_temp_c=60.0, critical_temp_c=65.0, power_on_hours=(9000, 52000),
                firmware="SN04"),
}


def unreadable_reason(disk: DiskSpec) -> str | None:
    """Why the collector could not read this simulated disk's health: its HealthSpec's
    reason, else the collector's own for a virtual disk (Xen or virtio), else None."""
    if disk.health is not None and disk.health.unreadable_reason is not None:
        return disk.health.unreadable_reason
    if disk.dev_class == "virtual":
        return XEN_NO_SMART if disk.name.startswith("xvd") else VIRTIO_NO_SMART
    return None


class SimulatedPoller:
    """collect/health.py's HealthPoller on a simulated clock.  read(k, wall_s) makes the
    k-th poll's readings (k from 0); at(wall_s) is the snapshot a sample taken at wall_s
    carries: a new one when a poll is due (at the first sample, then interval_s of
    simulated time after the last poll), else the last one, the same object."""

    def __init__(self, read: Readings, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        if not (math.isfinite(interval_s) and interval_s > 0):
            raise ValueError(f"interval_s must be > 0, not {interval_s}")
        self.read = read
        self.interval_s = interval_s
        self.latest: HealthSnapshot | None = None
        self._due_s = -math.inf

    @property
    def polls(self) -> int:
        return self.latest.polls if self.latest is not None else 0

    def at(self, wall_s: float) -> HealthSnapshot:
        if wall_s + _DUE_SLACK_S >= self._due_s:
            self.latest = next_snapshot(self.latest, dict(self.read(self.polls, wall_s)), wall_s)
            self._due_s = wall_s + self.interval_s
        return self.latest


class DriveGen:
    """The simulated drives of a scenario's disks.  busy_ms(name): the disk's busy time
    counter now (ms, not wrapped), read at each poll for its %util since the last.
    start_wall_s: the simulated clock's start (power-on hours grow from it); uptime_s:
    how long the node has been up then (a drive above its warning temperature at rest
    has been so all that time)."""

    def __init__(self, disks: list[DiskSpec], seed: int, busy_ms: Callable[[str], float],
                 start_wall_s: float, uptime_s: float = 0.0) -> None:
        # a stream of its own: the simulator's other numbers do not move with health
        self._rng = random.Random(f"gpudisk-top simulated health {seed}")
        self._busy_ms = busy_ms
        self._start_wall_s = start_wall_s
        self._drives = [_Drive(d, self._rng, uptime_s) for d in disks]
        self._last_wall_s = start_wall_s
        self._last_busy = {d.name: busy_ms(d.name) for d in disks}

    def read(self, k: int, wall_s: float) -> dict[str, DiskHealth]:
        """Every disk's reading at wall_s (k, the poll's number, is not needed: the drives
        keep their own state from poll to poll)."""
        span_s = max(0.0, wall_s - self._last_wall_s)
        hours = (wall_s - self._start_wall_s) / 3600.0
        out = {}
        for drive in self._drives:
            name = drive.name
            busy = self._busy_ms(name)
            util = (busy - self._last_busy[name]) / (span_s * 1000.0) if span_s > 0 else 0.0
            self._last_busy[name] = busy
            out[name] = drive.read(wall_s, span_s, hours, min(1.0, max(0.0, util)), self._rng)
        self._last_wall_s = wall_s
        return out


def _pick(given, span, rng: random.Random):
    """The HealthSpec's value, else one drawn from the class's range (always drawn, so a
    disk's override leaves the other disks' numbers as they were)."""
    drawn = rng.randint(*span) if isinstance(span, tuple) else span
    return drawn if given is None else given


class _Drive:
    """One simulated drive: its fixed numbers, and its temperature and time above the
    warning temperature, which carry from poll to poll."""

    def __init__(self, disk: DiskSpec, rng: random.Random, uptime_s: float) -> None:
        self.name = disk.name
        self.model = disk.model
        self.why_not = unreadable_reason(disk)
        spec = disk.health or HealthSpec()
        self.spec = spec
        cls = _CLASSES.get(disk.dev_class)
        # drawn for every disk, readable or not, in the scenario's order
        self.serial = f"SIM{rng.randrange(10**9):09d}"
        if cls is None:
            return
        self.protocol = cls["protocol"]
        self.firmware = cls["firmware"]
        self.idle_c = float(_pick(spec.idle_temp_c, cls["idle_temp_c"], rng))
        self.rise_c = _pick(spec.busy_temp_rise_c, cls["busy_temp_rise_c"], rng)
        self.warning_c = _pick(spec.warning_temp_c, cls["warning_temp_c"], rng)
        self.critical_c = _pick(spec.critical_temp_c, cls["critical_temp_c"], rng)
        self.power_on_h = _pick(spec.power_on_hours, cls["power_on_hours"], rng)
        nvme = self.protocol == "NVMe"
        self.used_pct = _pick(spec.percentage_used_pct, cls.get("percentage_used_pct"), rng)
        self.spare_pct = _pick(spec.available_spare_pct, 100 if nvme else None, rng)
        self.spare_min_pct = _pick(spec.available_spare_threshold_pct, 10 if nvme else None, rng)
        self.media_errors = _pick(spec.media_errors, 0 if nvme else None, rng)
        self.unsafe = _pick(spec.unsafe_shutdowns, cls.get("unsafe_shutdowns"), rng)
        self.error_log = _pick(spec.error_log_entries, cls.get("error_log_entries", 0), rng)
        self.reallocated = _pick(spec.reallocated_sectors, None if nvme else 0, rng)
        self.pending = _pick(spec.pending_sectors, None if nvme else 0, rng)
        self.offline_unc = _pick(spec.offline_uncorrectable, None if nvme else 0, rng)
        self.passed = True if spec.smart_passed is None else spec.smart_passed
        self.temp_c: float | None = None   # its temperature, as the last poll left it
        # NVMe's lifetime minutes at or above WCTEMP: a drive hot at rest has been hot
        # as long as the node has been up
        self.warning_min = ((uptime_s / 60.0 if self.idle_c >= self.warning_c else 0.0)
                            if nvme else None)
        self.critical_min = 0.0 if nvme else None

    def read(self, wall_s: float, span_s: float, hours: float, util: float,
             rng: random.Random) -> DiskHealth:
        if self.why_not is not None:
            return DiskHealth(device=self.name, read_wall_s=wall_s, source=HEALTH_SIMULATED,
                              unreadable_reason=self.why_not)
        h = DiskHealth(device=self.name, read_wall_s=wall_s, source=HEALTH_SIMULATED,
                       model=self.model, serial=self.serial)
        target_c = self.idle_c + self.rise_c * util
        if self.temp_c is None:
            self.temp_c = target_c   # the node has run like this a while before the start
        else:
            self.temp_c = target_c + (self.temp_c - target_c) * math.exp(
                -span_s / THERMAL_TIME_CONSTANT_S)
        temp_c = float(round(self.temp_c + rng.gauss(0.0, 0.4)))
        if self.warning_min is not None and temp_c >= self.warning_c:
            self.warning_min += span_s / 60.0
        if self.critical_min is not None and temp_c >= self.critical_c:
            self.critical_min += span_s / 60.0
        spec, nvme = self.spec, self.protocol == "NVMe"
        h.readable = True
        h.protocol = self.protocol
        h.firmware = self.firmware
        h.smart_passed = self.passed
        h.critical_warning = 0 if nvme else None
        h.temperature_c = temp_c
        h.warning_temp_c = float(self.warning_c)
        h.critical_temp_c = float(self.critical_c)
        h.warning_temp_time_min = None if self.warning_min is None else int(self.warning_min)
        h.critical_temp_time_min = None if self.critical_min is None else int(self.critical_min)
        h.percentage_used_pct = None if self.used_pct is None else float(self.used_pct)
        h.available_spare_pct = None if self.spare_pct is None else float(self.spare_pct)
        h.available_spare_threshold_pct = (None if self.spare_min_pct is None
                                           else float(self.spare_min_pct))
        h.media_errors = _grown(self.media_errors, spec.media_errors_per_h, hours)
        h.unsafe_shutdowns = self.unsafe
        h.error_log_entries = self.error_log
        h.reallocated_sectors = _grown(self.reallocated, spec.reallocated_per_h, hours)
        h.pending_sectors = _grown(self.pending, spec.pending_per_h, hours)
        h.offline_uncorrectable = self.offline_unc
        h.power_on_hours = int(self.power_on_h + hours)
        h.thermal_throttle_s = 0 if nvme else None
        return h


def _grown(start: int | None, per_h: float, hours: float) -> int | None:
    """A lifetime counter `hours` into the simulation: start plus what it gained."""
    if start is None:
        return None if not per_h else math.floor(per_h * hours)
    return start + math.floor(per_h * hours)
