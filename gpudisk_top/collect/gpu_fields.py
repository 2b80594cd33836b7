"""NVML field values (nvmlDeviceGetFieldValues): one GPU's cumulative clock-event
durations, the raw counters throttling is measured by, and its energy counter.

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
reads the bit mask as before.  The energy counter (NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION,
the mJ nvmlDeviceGetTotalEnergyConsumption gives) comes in the same call: one driver
round trip a GPU a sample fewer; where the field is not supported, the function is asked.

The field ids are taken from the nvml module by name, never written here: nvidia-ml-py
releases gave the thermal and power-brake ones different numbers (251-253, then 269-271).
"""

from __future__ import annotations

import ctypes
import operator
import struct

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
# each reason's nvmlClocksEventReason* bit (nvml.h), in THROTTLE_REASONS' order
_BITS = {"sw_power_cap": 0x4, "sync_boost": 0x10, "sw_thermal": 0x20, "hw_thermal": 0x40,
         "hw_power_brake": 0x80}
# the GpuRaw attributes holding them (GpuFields.fill sets them by name, in this order),
# and the one holding NVML's timestamp of the read
THROTTLE_NS_FIELDS = tuple(f"throttle_{reason}_ns" for reason in THROTTLE_REASONS)
THROTTLE_AT_FIELD = "throttle_at_us"
_MASK_BITS = tuple(_BITS[reason] for reason in THROTTLE_REASONS)
# every field asked, in one call: the reasons, then the energy counter (its place _ENERGY)
_ASKED = THROTTLE_FIELDS + (("energy", "NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION"),)
_ENERGY = len(THROTTLE_FIELDS)

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


_GETTERS: dict = {}


def struct_field(cls, name: str):
    """A function reading field `name` of a `cls` instance.  pynvml's structures override
    __getattribute__ to decode bytes, which makes every read of a number 4x slower (8x
    for a nested one: 1.9 µs a sample value); the field's own ctypes descriptor reads the
    same number.  For a class without one, plain attribute access.  Raises nothing."""
    getter = _GETTERS.get((cls, name))
    if getter is None:
        descriptor = cls.__dict__.get(name) if isinstance(cls, type) else None
        getter = operator.attrgetter(name)
        if type(descriptor).__name__.startswith("CField"):
            getter = descriptor.__get__
        _GETTERS[(cls, name)] = getter
    return getter


# c_nvmlFieldValue_t as nvidia-ml-py lays it out (fieldId, scopeId, timestamp,
# latencyUsec, valueType, nvmlReturn, the value's 8 bytes): an array of them is read in
# one struct.iter_unpack, a tenth of reading each member through ctypes
FIELD_VALUE = struct.Struct("=IIqqII8s")
_FIELD_OFFSETS = (("fieldId", 0), ("scopeId", 4), ("timestamp", 8), ("latencyUsec", 16),
                  ("valueType", 24), ("nvmlReturn", 28), ("value", 32))
# c_nvmlValue_t member -> its struct code (native sizes, as ctypes has them)
_CODES = {"dVal": "d", "uiVal": "I", "ulVal": "L", "ullVal": "Q", "sllVal": "q", "siVal": "i",
          "usVal": "H"}
_PACKED: dict = {}


def packed_layout(cls) -> bool:
    """Whether `cls` (a field value structure) is laid out as FIELD_VALUE.  Raises nothing."""
    known = _PACKED.get(cls)
    if known is None:
        try:
            known = ctypes.sizeof(cls) == FIELD_VALUE.size and all(
                getattr(cls, name).offset == offset for name, offset in _FIELD_OFFSETS)
        except (TypeError, AttributeError):
            known = False
        _PACKED[cls] = known
    return known


class GpuFields:
    """One GPU's field values between samples.  `usable`: any field is still asked;
    `durations`: any clock-event duration is (else the bit mask is read); `energy`:
    the energy counter is (else nvmlDeviceGetTotalEnergyConsumption is asked)."""

    def __init__(self, nvml) -> None:
        # field id -> its place in _ASKED, for those still asked (the ones this nvml
        # module names and the GPU has not said NotSupported to)
        self._place = {getattr(nvml, const): i for i, (_, const) in enumerate(_ASKED)
                       if isinstance(getattr(nvml, const, None), int)}
        self._asked()
        self._before: list = [None] * len(THROTTLE_REASONS)
        self._unpack: dict = {}     # NVML value type -> its unpack_from (None: unknown type)

    def _asked(self) -> None:
        self.ids = list(self._place)
        self.usable = bool(self.ids)
        self.durations = any(i < _ENERGY for i in self._place.values())
        self.energy = _ENERGY in self._place.values()

    def off(self) -> None:
        """nvmlDeviceGetFieldValues itself is not supported: never ask again."""
        self._place = {}
        self._asked()

    def fill(self, raw, nvml, values) -> None:
        """From nvmlDeviceGetFieldValues' answer to `ids`, set raw's energy_mj (where the
        field is asked) and, where durations are, throttle_<reason>_ns (None for a
        reason not given this time), throttle_at_us (NVML's stamp of the read) and
        throttle_reasons (the nvmlClocksEventReason* bits of the reasons whose count
        advanced since the read before: the bit mask is not asked where durations are,
        and a recording keeps an integer there, as ever; 0 on the first read).  A field
        NotSupported is dropped from later requests; any other error, an unknown value
        type or a value out of range is None this interval.  Raises nothing."""
        got: list = [None] * len(_ASKED)
        at_us = None
        dropped = []
        place = self._place
        for field_id, ret, stamp, value in self._rows(nvml, values):
            i = place.get(field_id)
            if i is None:
                continue  # not asked: a driver's answer is matched by id, not by place
            if ret:
                if ret == _NOT_SUPPORTED:
                    dropped.append(field_id)
            elif type(value) is int and 0 <= value < _MAX_NS:
                got[i] = value
                if at_us is None and stamp > 0 and i < _ENERGY:
                    at_us = stamp
        durations, energy = self.durations, self.energy
        if dropped:
            self._place = {f: i for f, i in place.items() if f not in dropped}
            self._asked()
        if energy:
            raw.energy_mj = got[_ENERGY]
        if not durations:
            return
        (raw.throttle_sw_power_cap_ns, raw.throttle_hw_power_brake_ns, raw.throttle_sw_thermal_ns,
         raw.throttle_hw_thermal_ns, raw.throttle_sync_boost_ns) = counters = got[:_ENERGY]
        mask = 0
        for bit, ns, before in zip(_MASK_BITS, counters, self._before):
            if ns is not None and before is not None and ns > before:
                mask |= bit
        self._before = counters
        raw.throttle_at_us, raw.throttle_reasons = at_us, mask

    def _rows(self, nvml, values) -> list[tuple]:
        """(fieldId, nvmlReturn, timestamp, value) of each field value: pynvml's ctypes
        array in one unpack, anything else member by member; value None where its type
        is unknown, a row of Nones where it cannot be read at all."""
        try:
            if isinstance(values, ctypes.Array) and packed_layout(values._type_):
                rows = []
                unpacks = self._unpack
                for field_id, _, stamp, _, value_type, ret, raw in FIELD_VALUE.iter_unpack(bytes(values)):
                    if ret:     # an error: its value is not read
                        rows.append((field_id, ret, stamp, None))
                        continue
                    unpack = unpacks.get(value_type, False)
                    if unpack is False:
                        unpack = self._unpacker(nvml, value_type)
                    rows.append((field_id, ret, stamp, None if unpack is None else unpack(raw)[0]))
                return rows
            rows = []
            for value in values:
                get = [struct_field(type(value), n) for n in ("fieldId", "nvmlReturn", "timestamp",
                                                                "valueType", "value")]
                member = value_member(nvml, int(get[3](value)))
                rows.append((int(get[0](value)), int(get[1](value)), int(get[2](value)),
                             None if member is None else getattr(get[4](value), member)))
            return rows
        except (TypeError, ValueError, AttributeError, struct.error):
            return []

    def _unpacker(self, nvml, value_type: int):
        """The unpack_from of a value of NVML_VALUE_TYPE `value_type`'s 8 bytes (None for a
        type NVML does not have), kept per type."""
        member = value_member(nvml, value_type)
        code = _CODES.get(member) if member else None
        unpack = self._unpack[value_type] = None if code is None else struct.Struct("@" + code).unpack_from
        return unpack
