"""The stand-in NVML's field values and per-process utilization (a part of FakeNvml,
sim/fake_nvml.py, kept apart so that file stays small): nvmlDeviceGetFieldValues with
pynvml's c_nvmlFieldValue_t, answering the clock-event durations
(NVML_FI_DEV_CLOCKS_EVENT_REASON_*, cumulative ns) of a GPU's throttle schedule and its
energy counter (NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, mJ), and
nvmlDeviceGetProcessesUtilizationInfo / nvmlDeviceGetProcessUtilization with pynvml's
sample structures, as a driver answers them.

Driving it (FakeGpu fields, through set_state):
    throttle_pct={NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP: 30.0}  # held 30% of the time
    clocks_event_reasons=nvmlClocksEventReasonSwPowerCap    # the bit: held all the time
    throttle_schedule=[(2.0, 2.5, field id), ...]   # held from 2 s to 2.5 s after the fake's start
    clock_event_ns={field id: ns}    # the counters themselves (set one lower: it goes back)
    unsupported_fields={field id}    # that field's nvmlReturn is NVML_ERROR_NOT_SUPPORTED
    process_util={pid: (sm %, memory %)}   # a running process's use: a sample of it
        every utilization sample period (1/6 s) while it is non-zero, as NVML keeps them
"""

from __future__ import annotations

import struct

import pynvml

from gpudisk_top.collect.gpu_fields import FIELD_VALUE, packed_layout

# the clock-event duration fields the stand-in counts (pynvml's ids, whatever they are)
THROTTLE_FIELD_IDS = frozenset(getattr(pynvml, name) for name in dir(pynvml)
                               if name.startswith("NVML_FI_DEV_CLOCKS_EVENT_REASON_"))
# a clocks_event_reasons bit set holds its reason's counter too, so the bit mask and the
# durations of a GPU tell one story (HwSlowdown, GpuIdle, ... have no duration field)
_BIT_FIELDS = tuple((getattr(pynvml, bit), getattr(pynvml, f"NVML_FI_DEV_CLOCKS_EVENT_REASON_{name}"))
                    for bit, name in (("nvmlClocksEventReasonSwPowerCap", "SW_POWER_CAP"),
                                      ("nvmlClocksEventReasonSyncBoost", "SYNC_BOOST"),
                                      ("nvmlClocksEventReasonSwThermalSlowdown", "SW_THERM_SLOWDOWN"),
                                      ("nvmlClocksEventReasonHwThermalSlowdown", "HW_THERM_SLOWDOWN"),
                                      ("nvmlClocksEventReasonHwPowerBrakeSlowdown",
                                       "HW_POWER_BRAKE_SLOWDOWN")))


def integrate_clock_events(gpu, start_us: int, end_us: int, origin_us: int) -> None:
    """Add to gpu.clock_event_ns the time each reason held in (start_us, end_us]:
    its throttle_pct share, its throttle_schedule windows (seconds from origin_us), and
    the whole of it for a clocks_event_reasons bit set."""
    held: dict[int, float] = {}
    for field_id, pct in gpu.throttle_pct.items():
        held[field_id] = held.get(field_id, 0.0) + (end_us - start_us) * 1000 * pct / 100
    if gpu.clocks_event_reasons:
        for bit, field_id in _BIT_FIELDS:
            if gpu.clocks_event_reasons & bit:
                held[field_id] = held.get(field_id, 0.0) + (end_us - start_us) * 1000
    for begin_s, end_s, field_id in gpu.throttle_schedule:
        lo = max(start_us, origin_us + begin_s * 1e6)
        hi = min(end_us, origin_us + end_s * 1e6)
        if hi > lo:
            held[field_id] = held.get(field_id, 0.0) + (hi - lo) * 1000
    for field_id, ns in held.items():
        gpu.clock_event_ns[field_id] = gpu.clock_event_ns.get(field_id, 0) + round(ns)


_FV = pynvml.c_nvmlFieldValue_t
assert packed_layout(_FV), "nvidia-ml-py's c_nvmlFieldValue_t is not laid out as FIELD_VALUE"
_ULL = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
_Q = struct.Struct("@Q")


class FieldsApi:
    """FakeNvml's field values and per-process utilization (uses its _device check and
    clock; keeps, per GPU, each running process's newest sample)."""

    def _process_samples(self, index: int) -> dict[int, tuple[int, float, float]]:
        samples = self.__dict__.setdefault("_proc_util_samples", {})
        return samples.setdefault(index, {})

    def _tick_processes(self, index: int, gpu, ts_us: int) -> None:
        """A utilization sample period ends at ts_us: each process with some use gets a
        sample (NVML keeps only those)."""
        samples = self._process_samples(index)
        for pid, (sm, mem) in gpu.process_util.items():
            if sm or mem:
                samples[pid] = (ts_us, sm, mem)

    def nvmlDeviceGetFieldValues(self, handle, fieldIds):
        """pynvml's: a c_nvmlFieldValue_t array, one per id (an id, or (id, scopeId)),
        each with its own nvmlReturn."""
        gpu = self._device("nvmlDeviceGetFieldValues", handle)
        # packed straight into the array (pynvml's structures' __setattr__ made the
        # stand-in's call cost several times the collector's reading of it)
        values = (_FV * len(fieldIds))()
        for offset, field_id in zip(range(0, FIELD_VALUE.size * len(fieldIds), FIELD_VALUE.size), fieldIds):
            field_id, scope = field_id if isinstance(field_id, tuple) else (field_id, 0)
            if field_id in gpu.unsupported_fields:
                value = None
            elif field_id in THROTTLE_FIELD_IDS:
                value = gpu.clock_event_ns.get(field_id, 0)
            elif field_id == pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION:
                value = int(gpu.energy_mj)
            else:
                value = None
            if value is None:
                FIELD_VALUE.pack_into(values, offset, field_id, scope, self.now_us, 0, 0,
                                      pynvml.NVML_ERROR_NOT_SUPPORTED, bytes(8))
            else:
                FIELD_VALUE.pack_into(values, offset, field_id, scope, self.now_us, 0, _ULL,
                                      pynvml.NVML_SUCCESS, _Q.pack(value))
        return values

    def nvmlDeviceGetProcessesUtilizationInfo(self, handle, timeStamp: int):
        """pynvml's: [c_nvmlProcessUtilizationInfo_v1_t] of the samples newer than
        timeStamp; NVMLError_NotFound when there is none."""
        self._device("nvmlDeviceGetProcessesUtilizationInfo", handle)
        out = []
        for pid, (ts, sm, mem) in self._newer(handle.index, timeStamp):
            s = pynvml.c_nvmlProcessUtilizationInfo_v1_t()
            s.timeStamp, s.pid, s.smUtil, s.memUtil = ts, pid, round(sm), round(mem)
            out.append(s)
        return out

    def nvmlDeviceGetProcessUtilization(self, handle, timeStamp: int):
        """pynvml's older call: [c_nvmlProcessUtilizationSample_t], as above."""
        self._device("nvmlDeviceGetProcessUtilization", handle)
        out = []
        for pid, (ts, sm, mem) in self._newer(handle.index, timeStamp):
            s = pynvml.c_nvmlProcessUtilizationSample_t()
            s.pid, s.timeStamp, s.smUtil, s.memUtil = pid, ts, round(sm), round(mem)
            out.append(s)
        return out

    def _newer(self, index: int, since_us: int) -> list:
        newer = [(pid, v) for pid, v in self._process_samples(index).items() if v[0] > since_us]
        if not newer:
            raise pynvml.NVMLError_NotFound()
        return newer
