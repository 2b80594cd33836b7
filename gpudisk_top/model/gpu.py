"""GPU views from raw NVML snapshots: utilization over exactly the sampling interval, MiB, W.

A GPU's busy figure (GpuView.util_pct, the one every verdict, timeline and surface
reads) comes from the best tier the GPU gave for the interval, chosen here and nowhere
else: GPM SM activity (busy_source "gpm-sm-active", collect/gpu_gpm.py) where the GPU
has GPM, else utilization.gpu (busy_source "utilization").  utilization.gpu is kept
beside it (gpu_util_pct): a one-thread kernel reads 100% there and 3% SM activity.

nvidia-smi's utilization.gpu is "the percent of time over the past sample period during
which one or more kernels was executing".  NVML keeps one such sample every ~1/6 s, so the
utilization of our interval is the mean of the samples stamped inside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudisk_top.collect.gpu_fields import THROTTLE_REASONS as DURATION_REASONS
from gpudisk_top.collect.gpu_gpm import share_pct
from gpudisk_top.collect.sample import (MAPPED_BY_DEVICE_FILE, UNAVAILABLE_PREFIX, GpuRaw,
                                        GpuSnapshot, UtilWindow, window_values)

MIB = 2**20  # nvidia-smi's memory.used is in MiB
BUSY_GPM = "gpm-sm-active"
BUSY_UTILIZATION = "utilization"
# where a GPU's throttling comes from: the share of the interval each reason held (NVML's
# clock-event durations, collect/gpu_fields.py), or the reasons holding at the instant
# of the read (the bit mask) where the GPU counts no duration
THROTTLE_DURATIONS = "durations"
THROTTLE_MASK = "mask"

# nvmlClocksEventReason* bits (nvml.h), named as nvidia-smi -q names them, in snake case.
THROTTLE_REASONS = (
    (0x0001, "gpu_idle"),
    (0x0002, "applications_clocks"),
    (0x0004, "sw_power_cap"),
    (0x0008, "hw_slowdown"),
    (0x0010, "sync_boost"),
    (0x0020, "sw_thermal"),
    (0x0040, "hw_thermal"),
    (0x0080, "hw_power_brake"),
    (0x0100, "display_clocks"),
    (0x0200, "board_limit"),       # ThrottleReasons only, before the rename
    (0x0400, "reliability"),
)


@dataclass
class GpuProcessView:
    pid: int                       # host PID, as NVML gave it
    local_pid: int | None
    ns_pid: int | None
    name: str | None
    cmdline: str | None
    gpu_mem_mib: float | None
    mapped: bool
    mapped_by: str | None = None   # collect.sample.MAPPED_BY_*: how local_pid was found
    # NVML's per-process sample (collect/gpu_procutil.py): its share over NVML's own
    # sample period, not over the interval, and how old it is at the interval's end
    sm_util_pct: float | None = None
    mem_util_pct: float | None = None
    util_age_s: float | None = None

    def pid_label(self) -> str:
        """The PID as tables show it: NVML's (host) PID; "host=local" when it was found in
        a container's PID namespace by its device file; "host*" when not found here."""
        if not self.mapped:
            return f"{self.pid}*"
        if self.mapped_by == MAPPED_BY_DEVICE_FILE and self.local_pid != self.pid:
            return f"{self.pid}={self.local_pid}"
        return f"{self.pid}"


@dataclass
class GpuView:
    """One GPU over one interval.  None means n/a (unsupported, or not read)."""

    index: int
    name: str | None
    uuid: str | None
    pci_bus_id: str | None
    lost: bool
    error: str | None
    util_pct: float | None
    mem_util_pct: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None
    power_w: float | None
    power_limit_w: float | None
    temp_c: int | None
    sm_clock_mhz: int | None
    pcie_rx_kb_s: int | None
    pcie_tx_kb_s: int | None
    throttle_reasons: list[str] = field(default_factory=list)
    processes: list[GpuProcessView] = field(default_factory=list)
    util_source: str | None = None  # utilization.gpu's: "samples" | "rates" | None
    power_avg_w: float | None = None  # from the energy counter over the window
    busy_source: str = BUSY_UTILIZATION  # which tier util_pct is: BUSY_GPM | BUSY_UTILIZATION
    gpu_util_pct: float | None = None     # utilization.gpu over the interval, whatever the tier
    sm_active_pct: float | None = None    # GPM, over the interval (None: not given)
    sm_occupancy_pct: float | None = None
    tensor_active_pct: float | None = None
    dram_bw_pct: float | None = None
    busy_note: str | None = None          # why a GPU with GPM fell back to utilization
    pcie_age_s: float | None = None       # how old pcie_*_kb_s are
    # the share of the interval the clocks were held down for each reason
    # (THROTTLE_DURATIONS; None: n/a), in collect/gpu_fields.py's order
    throttle_sw_power_cap_pct: float | None = None
    throttle_hw_power_brake_pct: float | None = None
    throttle_sw_thermal_pct: float | None = None
    throttle_hw_thermal_pct: float | None = None
    throttle_sync_boost_pct: float | None = None
    throttle_source: str | None = None    # THROTTLE_DURATIONS | THROTTLE_MASK | None (neither read)
    throttle_note: str | None = None      # a share clipped to 100%, a counter that went back
    # a GPU in MIG mode: per GPU instance its id, SMs and GPM SM activity (of its own SMs;
    # None: not this interval); util_pct is then theirs weighted by SMs.  None: not MIG
    mig_instances: list[dict] | None = None

    @property
    def throttle_pct(self) -> dict[str, float | None]:
        """The share of the interval each reason held, by reason (DURATION_REASONS)."""
        return {reason: getattr(self, f"throttle_{reason}_pct") for reason in DURATION_REASONS}


def window_mean(samples: list[tuple[int, float]] | UtilWindow | None,
                window_us: tuple[int, int] | None) -> float | None:
    """The mean of the samples stamped in (start, end] µs; of all of them when none is
    (or when there is no window); None when there are no samples.  A UtilWindow (read
    from a recording) already holds the sum and number of the samples of its interval."""
    if not samples:
        return None
    if type(samples) is UtilWindow:
        return samples.sum_pct / samples.count
    values = window_values(samples, window_us)
    return sum(values) / len(values)


def throttle_names(mask: int | None) -> list[str]:
    if not mask:
        return []
    return [name for bit, name in THROTTLE_REASONS if mask & bit]


def _throttle(cur: GpuRaw, prev: GpuRaw | None, window_us: tuple[int, int] | None) -> dict:
    """GpuView's throttle_* fields: each reason's share of the interval from two reads'
    cumulative ns (over NVML's own stamps of them, else the sampling window), with the
    reasons that held in it as throttle_reasons; the bit mask's reasons where the GPU
    counts no duration.  A counter that went back (a driver reload) is n/a for the
    interval; a share above 100% (the counters and their stamp read a hair apart) is
    clipped and said in throttle_note."""
    counters = {r: _int(getattr(cur, f"throttle_{r}_ns")) for r in DURATION_REASONS}
    if all(ns is None for ns in counters.values()):
        return {"throttle_reasons": throttle_names(cur.throttle_reasons),
                "throttle_source": THROTTLE_MASK if cur.throttle_reasons is not None else None}
    out: dict = {"throttle_source": THROTTLE_DURATIONS}
    span_us = None
    if prev is not None:
        if _int(cur.throttle_at_us) and _int(prev.throttle_at_us):
            span_us = cur.throttle_at_us - prev.throttle_at_us
        elif window_us is not None:
            span_us = window_us[1] - window_us[0]
    notes, held = [], []
    for reason, ns in counters.items():
        before = _int(getattr(prev, f"throttle_{reason}_ns")) if prev is not None else None
        pct = None
        if ns is not None and before is not None and span_us is not None and span_us > 0:
            if ns < before:
                notes.append(f"{reason} counter went back: n/a this interval")
            else:
                pct = (ns - before) / (span_us * 1000) * 100
                if pct > 100.0 + 1e-9:
                    notes.append(f"{reason} {pct:.1f}% of the interval, clipped to 100%")
                    pct = 100.0
                if pct > 0:
                    held.append(reason)
        out[f"throttle_{reason}_pct"] = pct
    out["throttle_reasons"] = held
    out["throttle_note"] = "; ".join(notes) or None
    return out


def _int(value) -> int | None:
    """A recorded counter is untrusted too: an int, or None."""
    return value if type(value) is int else None


def _mig(value) -> list[dict] | None:
    """A recorded or collected MIG layout ([[id, SMs, SM activity], ...]) as GpuView keeps
    it; entries that are not one are left out (a recording is untrusted), 64 at most."""
    if not isinstance(value, list):
        return None
    out = []
    for entry in value[:64]:
        if isinstance(entry, (list, tuple)) and len(entry) == 3 and _int(entry[0]) is not None \
                and _int(entry[1]) is not None:
            out.append({"gpu_instance_id": entry[0], "sm_count": entry[1],
                        "sm_active_pct": _share(entry[2])})
    return out


def _age_s(at_us: int | None, window_us: tuple[int, int] | None) -> float | None:
    if _int(at_us) is None or window_us is None:
        return None
    return max(0.0, (window_us[1] - at_us) / 1e6)


def _mib(value: int | None) -> float | None:
    return None if value is None else value / MIB


def _watts(value_mw: int | None) -> float | None:
    return None if value_mw is None else value_mw / 1000.0


def _power_avg_w(cur: GpuRaw, prev: GpuRaw | None, window_us: tuple[int, int] | None) -> float | None:
    if prev is None or window_us is None or cur.energy_mj is None or prev.energy_mj is None:
        return None
    interval_us = window_us[1] - window_us[0]
    delta_mj = cur.energy_mj - prev.energy_mj
    if interval_us <= 0 or delta_mj < 0:  # a reset counter (driver reload) gives no average
        return None
    return delta_mj / (interval_us / 1e6) / 1000.0  # mJ/s = mW


def _busy(cur: GpuRaw, window_us: tuple[int, int] | None) -> tuple:
    """(the busy figure, its tier, utilization.gpu, where that came from, SM activity,
    the tier's note): the one choice of the figure every verdict reads."""
    util = window_mean(cur.util_samples, window_us)
    source = "samples" if util is not None else None
    if util is None and cur.util_now_pct is not None:
        util, source = cur.util_now_pct, "rates"
    # the tier: a recording is untrusted too, so its GPM figure is checked again here
    sm_active = share_pct(cur.gpm_sm_active_pct) if cur.gpm_sm_active_pct is not None else None
    # a recorded note is untrusted text: a string, bounded (printed escaped by the surfaces)
    note = cur.gpm_note[:200] if isinstance(cur.gpm_note, str) else None
    busy, busy_source = util, BUSY_UTILIZATION
    if sm_active is not None:
        busy, busy_source = sm_active, BUSY_GPM
    elif cur.gpm_sm_active_pct is not None:
        note = f"GPM SM activity {cur.gpm_sm_active_pct!r}: utilization.gpu this interval"
    return busy, busy_source, util, source, sm_active, note


def gpu_busy_pct(cur: GpuRaw, window_us: tuple[int, int] | None) -> float | None:
    """gpu_view(cur, ...).util_pct alone, for a caller that needs nothing else of the
    view (verdict/detail.py, before every sample's process reads)."""
    return _busy(cur, window_us)[0]


def gpu_view(cur: GpuRaw, prev: GpuRaw | None, window_us: tuple[int, int] | None) -> GpuView:
    busy, busy_source, util, source, sm_active, note = _busy(cur, window_us)
    mem_util = window_mean(cur.mem_util_samples, window_us)
    if mem_util is None:
        mem_util = cur.mem_util_now_pct
    processes = [
        GpuProcessView(pid=p.pid, local_pid=p.local_pid, ns_pid=p.ns_pid, name=p.name,
                       cmdline=p.cmdline, gpu_mem_mib=_mib(p.used_gpu_mem_bytes), mapped=p.mapped,
                       mapped_by=p.mapped_by, sm_util_pct=_share(p.sm_util_pct),
                       mem_util_pct=_share(p.mem_util_pct), util_age_s=_age_s(p.util_at_us, window_us))
        for p in cur.processes or ()
    ]
    return GpuView(
        index=cur.index, name=cur.name, uuid=cur.uuid, pci_bus_id=cur.pci_bus_id,
        lost=cur.lost, error=cur.error, util_pct=busy, mem_util_pct=mem_util,
        mem_used_mib=_mib(cur.mem_used_bytes), mem_total_mib=_mib(cur.mem_total_bytes),
        power_w=_watts(cur.power_mw), power_limit_w=_watts(cur.power_limit_mw),
        temp_c=cur.temp_c, sm_clock_mhz=cur.sm_clock_mhz,
        pcie_rx_kb_s=cur.pcie_rx_kb_s, pcie_tx_kb_s=cur.pcie_tx_kb_s,
        processes=processes,
        util_source=source, power_avg_w=_power_avg_w(cur, prev, window_us),
        busy_source=busy_source, gpu_util_pct=util, sm_active_pct=sm_active,
        sm_occupancy_pct=_share(cur.gpm_sm_occupancy_pct),
        tensor_active_pct=_share(cur.gpm_tensor_active_pct), dram_bw_pct=_share(cur.gpm_dram_bw_pct),
        busy_note=note, pcie_age_s=cur.pcie_age_s, **_throttle(cur, prev, window_us),
        mig_instances=_mig(cur.gpm_mig),
    )


def _share(value) -> float | None:
    return None if value is None else share_pct(value)


def gpu_views(cur: GpuSnapshot, prev: GpuSnapshot | None,
              window_us: tuple[int, int] | None) -> list[GpuView]:
    """One view per GPU of `cur`.  `window_us` is (previous, current) wall time in µs, the
    interval whose samples are averaged; None averages every sample returned."""
    # The same GPU in prev: by uuid when known (indices can shift after a GPU is lost).
    previous = {(g.uuid or g.index): g for g in prev.gpus} if prev is not None else {}
    return [gpu_view(g, previous.get(g.uuid or g.index), window_us) for g in cur.gpus]


def unreadable_reason(status: str, gpus: list[GpuView]) -> str | None:
    """Why no GPU can be read in this interval, or None when one can: NVML unavailable
    (no driver, an NVML error, a hung driver call: the status says which), NVML seeing
    no GPU, or every GPU lost."""
    if status != "ok":
        return status.removeprefix(UNAVAILABLE_PREFIX) or "NVML unavailable"
    if not gpus:
        return "NVML sees no GPU"
    if all(g.lost for g in gpus):
        error = next((g.error for g in gpus if g.error), None) or "GPU is lost"
        return (f"the GPU is lost: {error}" if len(gpus) == 1
                else f"all {len(gpus)} GPUs are lost: {error}")
    return None


def gpu_as_json(view: GpuView) -> dict:
    return {
        "index": view.index, "name": view.name, "uuid": view.uuid, "pci_bus_id": view.pci_bus_id,
        "lost": view.lost, "error": view.error,
        "util_pct": view.util_pct, "mem_util_pct": view.mem_util_pct, "util_source": view.util_source,
        "busy_source": view.busy_source, "busy_note": view.busy_note, "gpu_util_pct": view.gpu_util_pct,
        "sm_active_pct": view.sm_active_pct, "sm_occupancy_pct": view.sm_occupancy_pct,
        "tensor_active_pct": view.tensor_active_pct, "dram_bw_pct": view.dram_bw_pct,
        "mem_used_mib": view.mem_used_mib, "mem_total_mib": view.mem_total_mib,
        "power_w": view.power_w, "power_limit_w": view.power_limit_w, "power_avg_w": view.power_avg_w,
        "temp_c": view.temp_c, "sm_clock_mhz": view.sm_clock_mhz,
        "pcie_rx_kb_s": view.pcie_rx_kb_s, "pcie_tx_kb_s": view.pcie_tx_kb_s,
        "pcie_age_s": None if view.pcie_age_s is None else round(view.pcie_age_s, 1),
        "throttle_reasons": list(view.throttle_reasons), "throttle_source": view.throttle_source,
        "throttle_note": view.throttle_note,
        "mig_instances": None if view.mig_instances is None else [dict(m) for m in view.mig_instances],
        **{f"throttle_{r}_pct": v for r, v in view.throttle_pct.items()},
        "processes": [
            {"pid": p.pid, "local_pid": p.local_pid, "ns_pid": p.ns_pid, "name": p.name,
             "cmdline": p.cmdline, "gpu_mem_mib": p.gpu_mem_mib, "mapped": p.mapped,
             "mapped_by": p.mapped_by, "sm_util_pct": p.sm_util_pct, "mem_util_pct": p.mem_util_pct,
             "util_age_s": None if p.util_age_s is None else round(p.util_age_s, 1)}
            for p in view.processes
        ],
    }
