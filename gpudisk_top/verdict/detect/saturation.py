"""Is a block device saturated?  Never by %util alone.

%util is the share of time with at least one request in flight: an NVMe, a RAID set or a
virtio disk serves many requests at once and shows 100 % long before it is full (this
project's CI disk sits near 88 % under a load that saturates it).  So saturation combines:
  - latency against the device's own baseline, learned while it is lightly loaded
    (defaults per class until then);
  - the queue (aqu-sz) against a per-class size;
  - throughput against the highest this device has shown, or against its ceiling as
    `gpudisk-top probe` measured it (4 KiB random reads at queue depth 32, 1 MiB
    sequential reads), when it has been probed;
  - io pressure: PSI "some" for the host, io.pressure for our container;
  - %util, only on a rotating disk, which serves one request at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import compress

from gpudisk_top.verdict.ceiling import vet
from gpudisk_top.verdict.detect.thresholds import Thresholds
from gpudisk_top.model.disk import DiskRates
from gpudisk_top.model.vocab import DISK, DISK_MB, HOST, mb_s

BASELINE_ALPHA = 0.1       # EWMA weight of a new light-load latency observation
BASELINE_MIN_OBS = 10      # light-load intervals before the learned baseline is trusted
LIGHT_QUEUE = 1.0          # aqu-sz under which a device is "lightly loaded"
LIGHT_MIN_IOPS = 5.0       # and doing at least this many requests per second
BUSY_QUEUE = 0.9           # aqu-sz of a device with a request in flight nearly all the time


@dataclass
class DeviceHistory:
    baseline_read_ms: float | None = None
    baseline_obs: int = 0
    peak_kb_s: float = 0.0
    peak_iops: float = 0.0
    intervals: int = 0
    peak_read_r_s: float = 0.0     # the most it has read, for holding a stored probe to
    peak_read_kb_s: float = 0.0    # (verdict/ceiling.py)


@dataclass(slots=True)
class Saturation:
    """One device over one interval: the verdict and the numbers behind it."""

    name: str
    saturated: bool
    signals: list[str] = field(default_factory=list)
    await_ms: float = 0.0          # reads' (writes' for a device that only writes)
    w_await_ms: float = 0.0
    baseline_ms: float = 0.0
    aqu_sz: float = 0.0
    util_pct: float = 0.0
    read_kb_s: float = 0.0
    write_kb_s: float = 0.0
    iops: float = 0.0
    pressure_pct: float | None = None
    peak_iops: float = 0.0         # the most this device has done in one interval so far
    ceiling_iops: float | None = None  # what `gpudisk-top probe` measured it can do, where
    ceiling_mib_s: float | None = None   # believed (verdict/ceiling.py); else None and
    probed_read_ms: float | None = None  # probe_doubt says why
    probe_doubt: str | None = None
    r_s: float = 0.0
    rareq_kb: float = 0.0
    peak_read_r_s: float = 0.0     # the most it has read in one interval so far (now too):
    peak_read_kb_s: float = 0.0    # what an unprobed device was seen doing (the what-if)

    def write_evidence(self, display_name: str) -> str:
        return (f"{display_name} writing {DISK_MB['wmb_s'].text(mb_s(self.write_kb_s))} MB/s, "
                f"w_await {DISK['w_await_ms'].text(self.w_await_ms)} ms, "
                f"aqu-sz {DISK['aqu_sz'].text(self.aqu_sz)}")

    def latency(self, display_name: str, baseline: bool = True) -> str:
        """'sdb r_await 45.12 ms (baseline 0.50 ms), aqu-sz 31.00': each figure read as
        the disk table reads it (vocab.DISK's Metric.text)."""
        ms = DISK["r_await_ms"].text
        base = f" (baseline {ms(self.baseline_ms)} ms)" if baseline else ""
        head = f"{display_name} " if display_name else ""
        return (f"{head}r_await {ms(self.await_ms)} ms{base}, "
                f"aqu-sz {DISK['aqu_sz'].text(self.aqu_sz)}")

    def evidence(self, display_name: str) -> str:
        parts = [self.latency(display_name)]
        if self.pressure_pct is not None and self.pressure_pct >= 1:
            parts.append(f"io pressure {HOST['psi_io_some_pct'].text(self.pressure_pct)}%")
        if "util" in self.signals:
            parts.append(f"%util {DISK['util_pct'].text(self.util_pct)}")
        return ", ".join(parts)


# the signals a Saturation names, in the order assess() tests them
_SIGNALS = ("latency", "queue", "peak", "pressure", "util")


def _read_await(r: DiskRates) -> float:
    # reads feed a training job; fall back to writes for a device that only writes
    if r.r_s > 0:
        return r.r_await_ms
    return r.w_await_ms if r.w_s > 0 else 0.0


class SaturationTracker:
    """Learns each device's light-load latency and peak throughput, and judges saturation."""

    def __init__(self, thresholds: Thresholds) -> None:
        self.t = thresholds
        self.history: dict[str, DeviceHistory] = {}
        # dev_class -> (baseline_ms, latency_floor_ms, queue_size): the thresholds are
        # not changed in place, and this runs for every device every second
        self._per_class: dict[str, tuple[float, float, float]] = {}

    def _class_values(self, dev_class: str) -> tuple[float, float, float]:
        values = self._per_class.get(dev_class)
        if values is None:
            values = self._per_class[dev_class] = tuple(
                self.t.for_class(table, dev_class)
                for table in ("baseline_ms", "latency_floor_ms", "queue_size"))
        return values

    def baseline_ms(self, name: str, dev_class: str, probed_ms: float | None = None) -> float:
        """The device's light-load read latency: learned from its own quiet intervals,
        else what `probe` measured at queue depth 1, else the class default."""
        return self._baseline(self.history.get(name),
                              probed_ms or self._class_values(dev_class)[0])

    def _baseline(self, h: DeviceHistory | None, default_ms: float) -> float:
        if h is None or h.baseline_read_ms is None or h.baseline_obs < BASELINE_MIN_OBS:
            return default_ms
        # a learned baseline far above the class default would hide a device that is
        # always busy; never trust one more than latency_factor times the default
        return min(h.baseline_read_ms, default_ms * self.t.latency_factor)

    def assess(self, name: str, r: DiskRates, dev_class: str, rotational: bool | None,
               pressure_pct: float | None, ceiling_iops: float | None = None,
               ceiling_mib_s: float | None = None,
               probed_read_ms: float | None = None) -> Saturation:
        """Judge one interval, then learn from it (so a surge is judged against the past).
        A stored probe's figures count only where the device has not contradicted them.
        (This runs for every device every second: each figure is taken once.)"""
        t = self.t
        h = self.history.get(name)
        if h is None:
            h = self.history[name] = DeviceHistory()
        r_s, rkb_s, aqu_sz = r.r_s, r.rkb_s, r.aqu_sz
        peak_read_r_s, peak_read_kb_s = max(h.peak_read_r_s, r_s), max(h.peak_read_kb_s, rkb_s)
        ceiling_iops, ceiling_mib_s, probed_read_ms, doubt = vet(
            name, ceiling_iops, ceiling_mib_s, probed_read_ms, peak_read_r_s, peak_read_kb_s)
        await_ms = _read_await(r)
        default_ms, floor, queue_size = self._class_values(dev_class)
        baseline = self._baseline(h, probed_read_ms or default_ms)
        kb_s, iops = rkb_s + r.wkb_s, r_s + r.w_s
        latency = await_ms >= t.latency_factor * baseline and await_ms >= floor
        queue = aqu_sz >= queue_size
        # peak, pressure and %util speak of this device only while it has requests in
        # flight: PSI is host-wide, and a trickle is always "at its peak"
        busy = aqu_sz >= BUSY_QUEUE
        at_peak = pressure = util = False
        if busy:
            # at its ceiling in either dimension: requests a second (small random reads)
            # or bytes a second (large sequential ones); a device that once streamed
            # 2 GB/s is still at its ceiling doing 4 KiB reads as fast as it ever has
            at_peak = h.intervals >= 3 and (
                kb_s >= t.peak_fraction * max(h.peak_kb_s, kb_s)
                or iops >= t.peak_fraction * max(h.peak_iops, iops))
            # or at the ceiling the probe measured, from the first interval on
            at_peak = at_peak or (
                (ceiling_iops is not None and iops >= t.peak_fraction * ceiling_iops)
                or (ceiling_mib_s is not None and kb_s >= t.peak_fraction * ceiling_mib_s * 1024))
            pressure = pressure_pct is not None and pressure_pct >= t.io_pressure_pct
            # the rotational flag of a virtual disk means nothing (virtio often sets it)
            rotating = dev_class == "HDD" or (dev_class == "unknown" and rotational is True)
            util = rotating and r.util_pct >= t.hdd_util_pct
        slow = await_ms >= 1.5 * baseline
        # a device without a request in flight most of the time is not saturated, however
        # slow its few requests are (a trickle of flushed writes at 1 ms)
        saturated = busy and (
            (latency and (queue or at_peak or pressure or util
                          or await_ms >= 2 * t.latency_factor * baseline))
            or (queue and (at_peak or pressure or util or slow))
            or (util and slow))
        sat = Saturation(name=name, saturated=saturated,
                         signals=list(compress(_SIGNALS, (latency, queue, at_peak, pressure,
                                                          util))),
                         await_ms=await_ms, w_await_ms=r.w_await_ms, baseline_ms=baseline,
                         aqu_sz=aqu_sz, util_pct=r.util_pct, read_kb_s=rkb_s,
                         write_kb_s=r.wkb_s, iops=iops, pressure_pct=pressure_pct,
                         peak_iops=max(h.peak_iops, iops), r_s=r_s, rareq_kb=r.rareq_kb,
                         peak_read_r_s=peak_read_r_s, peak_read_kb_s=peak_read_kb_s,
                         ceiling_iops=ceiling_iops, ceiling_mib_s=ceiling_mib_s,
                         probed_read_ms=probed_read_ms, probe_doubt=doubt)
        self._learn(h, r, await_ms, kb_s, iops)
        return sat

    def _learn(self, h: DeviceHistory, r: DiskRates, await_ms: float, kb_s: float,
               iops: float) -> None:
        h.intervals += 1
        h.peak_kb_s = max(h.peak_kb_s, kb_s)
        h.peak_iops = max(h.peak_iops, iops)
        h.peak_read_r_s = max(h.peak_read_r_s, r.r_s)
        h.peak_read_kb_s = max(h.peak_read_kb_s, r.rkb_s)
        if r.aqu_sz < LIGHT_QUEUE and r.r_s >= LIGHT_MIN_IOPS and await_ms > 0:
            if h.baseline_read_ms is None:
                h.baseline_read_ms = await_ms
            else:
                h.baseline_read_ms += BASELINE_ALPHA * (await_ms - h.baseline_read_ms)
            h.baseline_obs += 1
