"""MIG: one GPU's SM activity per GPU instance, where the GPU is in MIG mode and has GPM.

A GPU split into MIG instances answers no utilization.gpu, and its whole-GPU GPM sample
mixes jobs that share nothing.  GPM samples each GPU instance apart
(nvmlGpmMigSampleGet): this module owns finding the layout and sampling it.  The mode is
asked once per GPU (nvmlDeviceGetMigMode: it changes only with a GPU reset, after which
the collector starts the GPU afresh); the layout (the MIG devices, by
nvmlDeviceGetMigDeviceHandleByIndex, their GPU instance ids and SMs) every
LAYOUT_REFRESH_S and at once after an instance stops answering.  Each instance has its
own pair of GPM samples (collect/gpu_gpm.py GpmState).  The GPU's SM activity is its
instances' weighted by their SMs.  A layout that changed (an instance created or
destroyed, one that stops answering) gives no figure for that interval: the GPU falls
back to the next tier and the reading says why; no other GPU is affected.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudisk_top.collect.gpu_gpm import GpmReading, GpmState

LAYOUT_REFRESH_S = 5.0
MAX_MIG_DEVICES = 64      # more MIG devices than any GPU has is a broken answer
_ENABLED = 1              # NVML_DEVICE_MIG_ENABLE
_FIRST = "GPM: first sample"


@dataclass
class MigReading:
    """One interval of a MIG GPU: per GPU instance [id, SMs, SM activity % or None], and
    the GPU's (SM-weighted) in `gpm`, whose note says why it is None."""

    instances: list[list] = field(default_factory=list)
    gpm: GpmReading = field(default_factory=GpmReading)


class MigState:
    """One GPU's MIG mode, layout and per-instance GPM between intervals."""

    def __init__(self) -> None:
        self.enabled: bool | None = None          # None until asked
        self.layout: dict[int, int] | None = None  # GPU instance id -> its SMs
        self._layout_at_s: float | None = None
        self._states: dict[int, GpmState] = {}

    def read(self, nvml, handle, now_s: float, gpm: GpmState, lost: tuple[type, ...],
             unsupported: tuple[type, ...]) -> MigReading | None:
        """This interval's reading, or None when the GPU is not in MIG mode or has no GPM
        (then the whole-GPU tiers apply).  Raises the `lost` classes, nothing else."""
        if self.enabled is None:
            self.enabled = self._mode(nvml, handle, lost, unsupported)
        if not self.enabled or not gpm.known(nvml, handle, lost, unsupported):
            return None
        if self._layout_at_s is None or now_s - self._layout_at_s >= LAYOUT_REFRESH_S:
            before = self.layout
            self.layout = self._read_layout(nvml, handle, lost)
            self._layout_at_s = now_s
            if self.layout is None:
                return MigReading(gpm=GpmReading(note="MIG layout unreadable: utilization.gpu this interval"))
            if before is not None and before != self.layout:
                self._relayout(nvml)
                return MigReading(
                    [[gi, sms, None] for gi, sms in sorted(self.layout.items())],
                    GpmReading(note=f"MIG layout changed (GPU instances {_ids(before)} -> "
                                    f"{_ids(self.layout)}): utilization.gpu this interval"))
        instances, failed = [], []
        for gi, sms in sorted(self.layout.items()):
            state = self._states.get(gi)
            if state is None:
                state = self._states[gi] = GpmState(gpu_instance=gi)
                state.supported = True
            reading = state.read(nvml, handle, now_s, lost, unsupported)
            pct = None if reading is None else reading.sm_active_pct
            instances.append([gi, sms, pct])
            if pct is None and reading is not None and reading.note and not reading.note.startswith(_FIRST) \
                    and " apart " not in reading.note:
                failed.append(gi)
        if failed:
            self._layout_at_s = None   # read the layout again next interval
            return MigReading(instances, GpmReading(
                note=f"MIG layout changed (GPU instance {_ids(failed)} not answering): "
                     "utilization.gpu this interval"))
        total = sum(sms for _, sms, _ in instances)
        if not instances or total <= 0:
            return MigReading(instances, GpmReading(note="MIG mode, no GPU instance: utilization.gpu"))
        if any(pct is None for _, _, pct in instances):
            return MigReading(instances, GpmReading(note=f"{_FIRST} of a GPU instance: utilization.gpu this interval"))
        return MigReading(instances, GpmReading(
            sm_active_pct=sum(sms * pct for _, sms, pct in instances) / total))

    def free(self, nvml) -> None:
        """Give every instance's sample buffers back.  Raises nothing."""
        for state in self._states.values():
            state.free(nvml)
        self._states = {}

    def _relayout(self, nvml) -> None:
        """Instances gone or new: their pairs start again."""
        self.free(nvml)

    def _mode(self, nvml, handle, lost, unsupported) -> bool | None:
        get = getattr(nvml, "nvmlDeviceGetMigMode", None)
        if get is None:
            return False
        try:
            return int(get(handle)[0]) == _ENABLED
        except lost:
            raise
        except unsupported:
            return False          # not a MIG-capable GPU
        except Exception:  # noqa: BLE001 - transient: asked again next interval
            return None

    def _read_layout(self, nvml, handle, lost) -> dict[int, int] | None:
        """GPU instance id -> its SMs (the MIG devices', summed per instance), or None
        when the driver could not say."""
        try:
            count = min(int(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)), MAX_MIG_DEVICES)
            layout: dict[int, int] = {}
            for i in range(count):
                try:
                    device = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, i)
                except nvml.NVMLError_NotFound:
                    continue      # an empty slot
                gi = int(nvml.nvmlDeviceGetGpuInstanceId(device))
                sms = int(nvml.nvmlDeviceGetAttributes(device).multiprocessorCount)
                layout[gi] = layout.get(gi, 0) + max(0, sms)
            return layout
        except lost:
            raise
        except Exception:  # noqa: BLE001 - mid-change, or unsupported: no layout this time
            return None


def _ids(ids) -> str:
    return ",".join(str(i) for i in sorted(ids)) or "none"
