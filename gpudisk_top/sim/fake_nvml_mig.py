"""The stand-in NVML's MIG layout (a part of FakeNvml, sim/fake_nvml.py, kept apart so
that file stays small), as nvidia-ml-py names it: nvmlDeviceGetMigMode,
nvmlDeviceGetMaxMigDeviceCount, nvmlDeviceGetMigDeviceHandleByIndex,
nvmlDeviceGetGpuInstanceId and nvmlDeviceGetAttributes of a MIG device; and each GPU
instance's own GPM counters, which nvmlGpmMigSampleGet samples.

Driving it (FakeGpu fields, through set_state):
    mig_gpu_instances={1, 2}          # MIG mode, with these GPU instances (empty: MIG off)
    mig_sm_count={1: 16, 2: 48}       # each instance's SMs (default 16, a 1g slice of an H100)
    mig_sm_active_pct={1: 80.0}       # each instance's SM activity, of its own SMs (default 0)
Taking an instance out of mig_gpu_instances destroys it: its MIG device handle is gone
and nvmlGpmMigSampleGet on it raises NVMLError_InvalidArgument, as after a real
`nvidia-smi mig -dgi`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pynvml

MAX_MIG_DEVICES = 7      # an H100's, a 1g slice each
DEFAULT_SMS = 16


@dataclass(frozen=True)
class FakeMigHandle:
    """A MIG device's handle: its GPU and its GPU instance."""

    index: int
    gpu_instance: int


class MigApi:
    """FakeNvml's MIG calls (uses its _device check and keeps, per GPU instance, its SM
    activity integrated over fake time)."""

    def _mig_sums(self) -> dict:
        return self.__dict__.setdefault("_mig_gpm_sums", {})

    def _integrate_mig(self, index: int, gpu, dt_s: float) -> None:
        sums = self._mig_sums()
        for gi in gpu.mig_gpu_instances:
            key = (index, gi)
            sums[key] = sums.get(key, 0.0) + gpu.mig_sm_active_pct.get(gi, 0.0) * dt_s

    def mig_sample(self, index: int, gi: int) -> dict[int, float]:
        """A GPU instance's GPM integrals now: what nvmlGpmMigSampleGet stores."""
        return {pynvml.NVML_GPM_METRIC_SM_UTIL: self._mig_sums().get((index, gi), 0.0)}

    def nvmlDeviceGetMigMode(self, device) -> list[int]:
        """[current, pending]: NVML_DEVICE_MIG_ENABLE while the GPU has GPU instances."""
        gpu = self._device("nvmlDeviceGetMigMode", device)
        mode = pynvml.NVML_DEVICE_MIG_ENABLE if gpu.mig_gpu_instances else pynvml.NVML_DEVICE_MIG_DISABLE
        return [mode, mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, device) -> int:
        self._device("nvmlDeviceGetMaxMigDeviceCount", device)
        return MAX_MIG_DEVICES

    def nvmlDeviceGetMigDeviceHandleByIndex(self, device, index: int) -> FakeMigHandle:
        """The index-th MIG device (one compute instance a GPU instance here);
        NVMLError_NotFound for an empty slot."""
        gpu = self._device("nvmlDeviceGetMigDeviceHandleByIndex", device)
        if not 0 <= index < MAX_MIG_DEVICES:
            raise pynvml.NVMLError_InvalidArgument()
        instances = sorted(gpu.mig_gpu_instances)
        if index >= len(instances):
            raise pynvml.NVMLError_NotFound()
        return FakeMigHandle(device.index, instances[index])

    def _mig(self, function: str, device: FakeMigHandle):
        gpu = self._device(function, device)
        if device.gpu_instance not in gpu.mig_gpu_instances:
            raise pynvml.NVMLError_NotFound()   # destroyed since the handle was had
        return gpu

    def nvmlDeviceGetGpuInstanceId(self, device: FakeMigHandle) -> int:
        self._mig("nvmlDeviceGetGpuInstanceId", device)
        return device.gpu_instance

    def nvmlDeviceGetAttributes(self, device: FakeMigHandle) -> pynvml.c_nvmlDeviceAttributes:
        gpu = self._mig("nvmlDeviceGetAttributes", device)
        attrs = pynvml.c_nvmlDeviceAttributes()
        sms = gpu.mig_sm_count.get(device.gpu_instance, DEFAULT_SMS)
        attrs.multiprocessorCount = sms
        attrs.gpuInstanceSliceCount = attrs.computeInstanceSliceCount = max(1, sms // DEFAULT_SMS)
        return attrs
