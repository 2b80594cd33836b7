"""NVML field values (nvmlDeviceGetFieldValues): one GPU's cumulative clock-event
durations, the raw counters throttling is measured by.

nvmlDeviceGetCurrentClocksEventReasons says which reasons hold at the instant it is
asked: a bit mask sampled once a second tells little of a GPU that hits its power cap
for 300 ms in every second.  NVML also keeps, per reason, the nanoseconds the clocks were
held down for it since the driver loaded (NVML_FI_DEV_CLOCKS_EVENT_REASON_*: the power
cap's and sync boost's ids are the older NVML_FI_DEV_PERF_POLICY_POWER and _SYNC_BOOST).
This module owns asking for them: one nvmlDeviceGetFieldValues a GPU a sample for every
reason at once, each field's own nvmlReturn checked (a field NotSupported on that GPU is
never asked again: that reason is n/a there, the others still come), and which reasons
there are (THROTTLE_FIELDS).  The share of the interval each one held is the model's
(model/gpu.py), from two samples' counters; where no field is supported the collector
reads the bit mask as before.

The field ids are taken from the nvml module by name, never written here: nvidia-ml-py
releases gave the thermal and power-brake ones different numbers (251-253, then 269-271).
"""

from __future__ import annotations

# reason (GpuRaw throttle_<reason>_ns, GpuView throttle_<reason>_pct) -> its field's
# constant in pynvml, in the order surfaces list them
THROTTLE_FIELDS = (
    ("sw_power_cap", "NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP"),
    ("hw_power_brake", "NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN"),
    ("sw_thermal", "NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN"),
    ("hw_thermal", "NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN"),
    ("sync_boost", "NVML_FI_DEV_CLOCKS_EVENT_REASON_SYNC_BOOST"),
)
THROTTLE_REASONS = tuple(reason for reason, _ in THROTTLE_FIELDS)
# each reason's nvmlClocksEventReason* bit (nvml.h)
_BITS = {"sw_power_cap": 0x4, "sync_boost": 0x10, "sw_thermal": 0x20, "hw_thermal": 0x40,
         "hw_power_brake": 0x80}
# the GpuRaw attributes holding them, and the one holding NVML's timestamp of the read
THROTTLE_NS_FIELDS = tuple(f"throttle_{reason}_ns" for reason in THROTTLE_REASONS)
THROTTLE_AT_FIELD = "throttle_at_us"

_SUCCESS = 0            # NVML_SUCCESS
_NOT_SUPPORTED = 3      # NVML_ERROR_NOT_SUPPORTED
_MAX_NS = 1 << 63       # a counter beyond a signed 64-bit is a broken answer

# pynvml's NVML_VALUE_TYPE_* numbers -> the c_nvmlValue_t member holding that type.
_VALUE_MEMBERS = {
    "NVML_VALUE_TYPE_DOUBLE": (0, "dVal"),
    "NVML_VALUE_TYPE_UNSIGNED_INT": (1, "uiVal"),
    "NVML_VALUE_TYPE_UNSIGNED_LONG": (2, "ulVal"),
    "NVML_VALUE_TYPE_UNSIGNED_LONG_LONG": (3, "ullVal"),
    "NVML_VALUE_TYPE_SIGNED_LONG_LONG": (4, "sllVal"),
    "NVML_VALUE_TYPE_SIGNED_INT": (5, "siVal"),
    "NVML_VALUE_TYPE_UNSIGNED_SHORT": (6, "usVal"),
}


def value_member(nvml, value_type: int) -> str | None:
    """The c_nvmlValue_t member that holds a value of NVML_VALUE_TYPE `value_type`, or
    None for a type NVML does not have.  The one table: the utilization samples' and
    the field values' alike.  Raises nothing."""
    for const, (default, member) in _VALUE_MEMBERS.items():
        if getattr(nvml, const, default) == value_type:
            return member
    return None


class ClockEventFields:
    """One GPU's clock-event duration fields between samples.  `usable` is False once
    the GPU gave none of them (then the bit mask is read instead)."""

    def __init__(self, nvml) -> None:
        # (reason, field id) still asked: those this nvml module names
        self._asked = [(reason, getattr(nvml, const)) for reason, const in THROTTLE_FIELDS
                       if isinstance(getattr(nvml, const, None), int)]
        self.ids = [field_id for _, field_id in self._asked]
        self.usable = bool(self._asked)
        self._before: dict[str, int | None] = {}

    def held_mask(self, counters: dict[str, int | None]) -> int:
        """The nvmlClocksEventReason* bits of the reasons whose counter advanced since the
        read before: GpuRaw.throttle_reasons of a GPU that counts durations (the bit
        mask is not asked there; a recording keeps an integer, as ever).  0 on the first."""
        mask = 0
        for reason, ns in counters.items():
            before = self._before.get(reason)
            if ns is not None and before is not None and ns > before:
                mask |= _BITS[reason]
        self._before = counters
        return mask

    def off(self) -> None:
        """nvmlDeviceGetFieldValues itself is not supported: never ask again."""
        self._asked, self.ids, self.usable = [], [], False

    def parse(self, nvml, values) -> tuple[dict[str, int | None], int | None]:
        """({reason: cumulative ns or None}, NVML's timestamp of the read in µs or None)
        from nvmlDeviceGetFieldValues' array for `ids`.  A field NotSupported is dropped
        from later requests (usable turns False when none is left); any other error, an
        unknown value type or a value out of range is None this interval.  Raises nothing."""
        out: dict[str, int | None] = dict.fromkeys(THROTTLE_REASONS)
        at_us = None
        dropped = []
        for i, (reason, field_id) in enumerate(self._asked):
            try:
                value = values[i]
                ret = int(value.nvmlReturn)
            except (IndexError, TypeError, ValueError, AttributeError):
                continue
            if ret == _NOT_SUPPORTED:
                dropped.append(field_id)
                continue
            if ret != _SUCCESS or int(value.fieldId) != field_id:
                continue
            member = value_member(nvml, int(value.valueType))
            if member is None or member == "dVal":
                continue
            ns = int(getattr(value.value, member))
            if 0 <= ns < _MAX_NS:
                out[reason] = ns
                stamp = int(value.timestamp)
                if at_us is None and stamp > 0:
                    at_us = stamp
        if dropped:
            self._asked = [(r, f) for r, f in self._asked if f not in dropped]
            self.ids = [f for _, f in self._asked]
            self.usable = bool(self._asked)
        return out, at_us
