"""What the columns of format version 2 hold: the field tables, the schema a session
header carries, and the small codings every part shares (doubles as their bits, runs of
equal values, NVML utilization windows).  The rest of the codec: flatten.py (a Sample
into column values and back), rows.py (R frames), blocks.py (B frames), summary.py (the
summary blocks); record/index_v2.py finds which frames hold which samples."""

from __future__ import annotations

import dataclasses
import itertools
import math
import operator
import struct

from gpudisk_top.collect.diskstats import DiskCounters
from gpudisk_top.collect.gpu_fields import THROTTLE_AT_FIELD, THROTTLE_NS_FIELDS
from gpudisk_top.collect.sample import (CpuTimes, DeviceInfo, DiskHealth, GpuProcessRaw,
                                        UtilWindow, window_values)

VERSION = 2
IO_FIELDS = ("rchar", "wchar", "read_bytes", "write_bytes")
SHARE_SCALE = 255          # a process's share of its tree's increase, in 1/255ths
EXACT = -1                 # share column value: this one is in the row's "px" list

field_names = lambda cls: tuple(f.name for f in dataclasses.fields(cls))  # noqa: E731

DISK_FIELDS = DiskCounters._fields
DEVICE_FIELDS = field_names(DeviceInfo)
CPU_FIELDS = field_names(CpuTimes)
# gpm_* (GPM's figures, the busy figure's tier: model/gpu.py) and pcie_age_s came with issue 40: earlier
# recordings lack them, read back None, and their GPUs' busy figure is utilization.gpu;
# gpm_mig (a MIG GPU's instances, a list) too: earlier recordings read back not MIG
GPU_STATIC = ("index", "name", "uuid", "pci_bus_id", "lost", "error", "mem_total_bytes",
              "power_limit_mw", "minor_number", "gpm_note", "gpm_mig")
GPU_INTS = ("mem_used_bytes", "power_mw", "energy_mj", "temp_c", "sm_clock_mhz",
            "pcie_rx_kb_s", "pcie_tx_kb_s", "throttle_reasons")
# the clock-event durations (collect/gpu_fields.py) and their stamp came with issue 40
# too: earlier recordings read back None, and their GPUs' throttling is the bit mask.
# Integers, with the floats: a row writes those only when they changed (a GPU that is
# not throttled costs nothing) and lets them be None (a reason the GPU does not count)
# without the row's integers losing their differences
GPU_FLOATS = ("util_now_pct", "mem_util_now_pct", "gpm_sm_active_pct", "gpm_sm_occupancy_pct",
              "gpm_tensor_active_pct", "gpm_dram_bw_pct", "pcie_age_s", *THROTTLE_NS_FIELDS,
              THROTTLE_AT_FIELD)
# a GPU process's NVML sample (sm_util_pct, mem_util_pct, util_at_us: issue 40) is at the
# end of its record: earlier recordings' records lack them, and read back None
GPU_PROCESS_FIELDS = field_names(GpuProcessRaw)
# direct_reads and data_kb (its data files: O_DIRECT, the size read through the page cache)
# came later: recordings made before them lack them in their schema, and read back None
# job (a GPU process's, collect/jobid.py) came with issue 37: earlier recordings read back
# None, and their GPU processes make one job (model/jobs.py)
PROC_STATIC = ("ppid", "root_pid", "name", "cmdline", "devices", "cgroup", "mounts",
               "direct_reads", "data_kb", "job")
# where a process's time went (ProcIoRaw): columns "p/PID/<key>", integers with -1 for
# None so that rows stay integer (coded as differences) and blocks pack them narrow;
# the state letter is kept as its code point, blocked_on as its place in the process's
# mounts plus one (0: none).  Recordings made before them lack the columns, and read back
# None.
PROC_ACCT = (("rd", "run_delay_ns"), ("bio", "blkio_ticks"), ("sr", "syscr"), ("s", "state"),
             ("bo", "blocked_on"), ("sy", "sys_ticks"))
# a network or FUSE mount (MountRaw): "m/I" its identity record, "m/I/KEY" its counters
# (I: its place in the sample; a mountpoint holds slashes, a layout key cannot)
MOUNT_STATIC = ("mountpoint", "fstype", "source", "kind", "daemon_pid")
# the disks' health (Sample.health, a HealthSnapshot), slow data: "H/DEV" the poller's
# latest reading of DEV, "Hf/DEV" this run's first readable one (what the trend since
# start is taken from), "Hp" [polls, polled_wall_s].  Readings are records by the
# header's schema "health" (DiskHealth's fields), made again only when the poller has a
# new reading (polls changed): a row carries a record only when it changed, a block
# keeps it as a run, so a reading costs its bytes once, not once a sample.  Recordings
# made before them lack the keys, and read back health None.
HEALTH_FIELDS = field_names(DiskHealth)
# the interval the sampler was set to (Sample.interval_s), in integer milliseconds, in a
# sample that says it: a dynamic column (a row codes it as a difference, a block as a run),
# so it costs nearly nothing while it stands.  Recordings made before it lack the key and
# read back None (a replay then takes the session header's interval_s); readers that do not
# know it ignore it, as every unknown key.
INTERVAL_KEY = "t/interval_ms"
# how old the sample's processes are (Sample.procs_age_s, issue 41: the slow cadence of
# per-process reads), in integer milliseconds, in a sample taken while that cadence was in
# force: a dynamic column like INTERVAL_KEY.  A sample that did not read its processes
# carries the last read's counters unchanged (zero differences); model/detail.py takes
# the same rates from them in a replay as it did live.  Recordings made before it lack
# the key and read back None (every sample read its processes).
PROCS_AGE_KEY = "t/procs_age_ms"
HEALTH_HEADS = ("H", "Hf", "Hp")
_health_values = operator.attrgetter(*HEALTH_FIELDS)


def schema() -> dict[str, list[str]]:
    """The field names behind the column keys, as this version of the code writes them."""
    return {
        "disk": list(DISK_FIELDS),
        "device": list(DEVICE_FIELDS),
        "cpu": list(CPU_FIELDS),
        "gpu_static": list(GPU_STATIC),
        "gpu_ints": list(GPU_INTS),
        "gpu_floats": list(GPU_FLOATS),
        "gpu_util": ["u/s", "u/n", "m/s", "m/n"],
        "gpu_process": list(GPU_PROCESS_FIELDS),
        "proc_static": list(PROC_STATIC),
        "proc_io": list(IO_FIELDS),
        "proc_acct": [field for _, field in PROC_ACCT],
        "mount_static": list(MOUNT_STATIC),
        "health": list(HEALTH_FIELDS),
    }


class FormatError(ValueError):
    """A payload that passed its CRC but cannot be decoded (a bug, or a foreign writer)."""


# ---------------------------------------------------------------------------- health readings
def health_record(h: DiskHealth) -> list:
    """A DiskHealth as recordings keep it: its fields in HEALTH_FIELDS order, tuples as
    lists (what JSON gives back, so a row and a block compare equal).  The one
    serialisation: an "H/DEV" record is this list, a summary block's reading the
    fields of it that are set (health_named)."""
    return [list(v) if isinstance(v, tuple) else v for v in _health_values(h)]


def health_named(h: DiskHealth) -> dict:
    """health_record's fields by name, the unset ones (None, empty) left out: a summary
    block's reading (most drives give half of them)."""
    return {n: v for n, v in zip(HEALTH_FIELDS, health_record(h)) if v is not None and v != []}


def _health_kinds() -> dict[str, tuple]:
    """Per DiskHealth field, what a recorded value may be: its annotation's types (a
    float field takes an int: JSON writes 78.0 as 78 nowhere, but other writers may)."""
    import types
    import typing

    out = {}
    for name, hint in typing.get_type_hints(DiskHealth).items():
        args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        kinds = []
        for a in args:
            if a is float:
                kinds += [float, int]
            elif typing.get_origin(a) is tuple:
                kinds.append(tuple)
            else:
                kinds.append(a)
        out[name] = tuple(kinds)
    return out


_HEALTH_KINDS = _health_kinds()


def health_value(name: str, value):
    """A recorded value of DiskHealth field `name`, as the field holds it (a list of
    strings as a tuple).  Raises FormatError for one of another type, a number that is
    not finite or a bool where a number belongs."""
    kinds = _HEALTH_KINDS[name]
    if isinstance(value, list) and tuple in kinds:
        if all(isinstance(x, str) for x in value):
            return tuple(value)
    elif value is None and type(None) in kinds:
        return None
    elif isinstance(value, bool):
        if bool in kinds:
            return value
    elif isinstance(value, int):
        if int in kinds:
            return value
    elif isinstance(value, float):
        if float in kinds and math.isfinite(value):
            return value
    elif isinstance(value, str) and str in kinds:
        return value
    raise FormatError(f"health field {name}: {type(value).__name__} {str(value)[:40]!r}")


def health_reading(pairs) -> DiskHealth:
    """The DiskHealth of recorded (field name, value) pairs: an "H/DEV" record zipped
    with the header's schema names, or a summary's reading's items.  Fields this code
    does not know are left out, those it lacks take their defaults.  Raises FormatError
    for a value of the wrong type, or no device name."""
    kw = {n: health_value(n, v) for n, v in pairs if n in _HEALTH_KINDS}
    if not isinstance(kw.get("device"), str):
        raise FormatError("a health reading without its device")
    return DiskHealth(**kw)


INTS = {int}
_D = struct.Struct("<d")
_Q = struct.Struct("<q")


def float_bits(x: float) -> int:
    return _Q.unpack(_D.pack(x))[0]


def bits_float(b: int) -> float:
    return _D.unpack(_Q.pack(b))[0]


# ---------------------------------------------------------------------------- util windows
def util_window(samples, window_us) -> UtilWindow | list | None:
    """What a recording keeps of one interval's NVML samples: None and [] as they are,
    else the sum and number of exactly the samples model.gpu.window_mean() averages over
    window_us, so that a reader's window_mean() returns the same float."""
    if not samples:
        return samples
    if isinstance(samples, UtilWindow):
        return samples
    values = window_values(samples, window_us)
    return UtilWindow(sum(values), len(values))


def window_parts(w) -> tuple:
    """(sum, count) columns: None -> (None, None), [] -> (0, 0)."""
    if w is None:
        return None, None
    if not w:
        return 0, 0
    s = w.sum_pct
    if type(s) is float and s.is_integer() and abs(s) < 2**53:
        s = int(s)  # an integer column; read back as the same float
    return s, w.count


def window_of(s, n):
    if n is None:
        return None
    if n == 0:
        return []
    return UtilWindow(float(s), n)


def constant(values: list) -> bool:
    """Whether every value of a non-empty list is its first, as list.count() judges (the
    same object, or equal).  The last is looked at first: it settles a counter at once,
    where counting walks all of a block's 600 values (3,800 columns a block at scale)."""
    v0, last = values[0], values[-1]
    return (last is v0 or last == v0) and values.count(v0) == len(values)


def runs(values) -> list:
    """[[value, count], ...] of consecutive equal values."""
    n = len(values)
    if n and constant(values):
        return [[values[0], n]]
    return [[v, len(list(grp))] for v, grp in itertools.groupby(values)]


def expand(runs) -> list:
    """The values of [[value, count], ...]."""
    out = []
    for v, n in runs:
        out += [v] * n
    return out


def getter(idx: list):
    """A function of a row's values giving the values at positions idx, as a tuple."""
    if not idx:
        return lambda vals: ()
    if len(idx) == 1:
        i = idx[0]
        return lambda vals: (vals[i],)
    return operator.itemgetter(*idx)
