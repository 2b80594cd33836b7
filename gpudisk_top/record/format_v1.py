"""Format version 1: how a raw Sample becomes the payload of a K or D frame, and back.

A segment is one raw-deflate stream (zlib, wbits -15).  Each sample is one JSON object,
compressed with Z_SYNC_FLUSH so that the frame holding it can be decompressed as soon as
it is written; the sync marker every such flush ends with (00 00 ff ff) is left out of
the file and put back by the reader.  The first sample of a segment (K frame) is coded
on its own; the others (D frames) against the sample before them:

  - integer counters are stored as the difference from the previous sample's value;
    a value that is not an integer on both sides (None, a float, a string) is stored as
    it is.  Decoding applies the mirror rule, so every value comes back exactly, floats
    included (JSON keeps repr(), which round-trips).
  - what rarely changes (device identity, GPU names and processes, process names and
    command lines) is stored only when it changed;
  - NVML's utilization samples keep their values, with their timestamps as differences.

Field names of every positional record are in the session header ("schema"), so a
reader maps them by name: a field that a later Sample gains is recorded and named there,
and one this reader does not know is ignored.  This module stays as it is once version 2
exists: a reader for every version is kept forever (reader.py picks one by version).
"""

from __future__ import annotations

import dataclasses
import json
import operator
import zlib

from gpudisk_top.collect.diskstats import DiskCounters
from gpudisk_top.collect.sample import (CgroupIo, CpuTimes, DeviceInfo, GpuProcessRaw, GpuRaw,
                                        GpuSnapshot, HostRaw, ProcIoRaw, PsiTotals, Sample)

VERSION = 1
FLUSH_TAIL = b"\x00\x00\xff\xff"

_names = lambda cls: tuple(f.name for f in dataclasses.fields(cls))  # noqa: E731

GPU_STATIC = ("index", "name", "uuid", "pci_bus_id", "mem_total_bytes", "power_limit_mw")
GPU_SAMPLES = ("util_samples", "mem_util_samples")
GPU_DYNAMIC = tuple(n for n in _names(GpuRaw)
                    if n not in GPU_STATIC and n not in GPU_SAMPLES and n != "processes")
PROC_STATIC = ("ppid", "root_pid", "name", "cmdline", "devices")
PROC_COUNTERS = tuple(n for n in _names(ProcIoRaw) if n not in PROC_STATIC and n != "pid")


def schema() -> dict[str, list[str]]:
    """The field names of every positional record, as this version of the code writes them."""
    return {
        "disk": list(DiskCounters._fields),
        "device": list(_names(DeviceInfo)),
        "gpu_static": list(GPU_STATIC),
        "gpu_dynamic": list(GPU_DYNAMIC),
        "gpu_process": list(_names(GpuProcessRaw)),
        "proc_static": list(PROC_STATIC),
        "proc_counters": list(PROC_COUNTERS),
    }


class FormatError(ValueError):
    """A payload that passed its CRC but cannot be decoded (a bug, or a foreign writer)."""


# ---------------------------------------------------------------------------- delta rules
def _is_int(x) -> bool:
    return type(x) is int


_INT = {int}


def _all_ints(values: list) -> bool:
    return set(map(type, values)) <= _INT


def _delta(cur: list, prev: list | None) -> list:
    """Element-wise: cur - prev where both are integers, else cur as it is."""
    if prev is None or len(prev) != len(cur):
        return list(cur)
    return [c - p if type(c) is int and type(p) is int else c for c, p in zip(cur, prev)]


def _undelta(enc: list, prev: list | None) -> list:
    if prev is None or len(prev) != len(enc):
        return list(enc)
    return [p + e if type(e) is int and type(p) is int else e for e, p in zip(enc, prev)]


def _tree_delta(cur, prev):
    """The same rule on a JSON tree: dicts by key, lists by position (same length only)."""
    if type(cur) is int:
        return cur - prev if type(prev) is int else cur
    if isinstance(cur, dict):
        p = prev if isinstance(prev, dict) else {}
        return {k: _tree_delta(v, p.get(k)) for k, v in cur.items()}
    if isinstance(cur, list):
        if isinstance(prev, list) and len(prev) == len(cur):
            return [_tree_delta(c, p) for c, p in zip(cur, prev)]
        return [_tree_delta(c, None) for c in cur]
    return cur


def _tree_undelta(enc, prev):
    if type(enc) is int:
        return prev + enc if type(prev) is int else enc
    if isinstance(enc, dict):
        p = prev if isinstance(prev, dict) else {}
        return {k: _tree_undelta(v, p.get(k)) for k, v in enc.items()}
    if isinstance(enc, list):
        if isinstance(prev, list) and len(prev) == len(enc):
            return [_tree_undelta(e, p) for e, p in zip(enc, prev)]
        return [_tree_undelta(e, None) for e in enc]
    return enc


def _samples_enc(samples, base: int) -> list | None:
    """NVML (timestamp_us, value) samples -> [timestamp differences, values]."""
    if samples is None:
        return None
    dts, last = [], base
    for ts, _ in samples:
        dts.append(ts - last)
        last = ts
    return [dts, [v for _, v in samples]]


def _samples_dec(enc, base: int):
    if enc is None:
        return None
    out, ts = [], base
    for dt, v in zip(enc[0], enc[1]):
        ts += dt
        out.append((ts, v))
    return out


def _last_ts(samples) -> int:
    return samples[-1][0] if samples else 0


# ---------------------------------------------------------------------------- host
_CPU_FIELDS = _names(CpuTimes)
_DEVICE_FIELDS = _names(DeviceInfo)
_GPU_PROCESS_FIELDS = _names(GpuProcessRaw)


def _host_tree(h: HostRaw) -> dict:
    return {
        "cpu": [getattr(h.cpu, n) for n in _CPU_FIELDS] if h.cpu is not None else None,
        "ncpu": h.ncpu,
        "psi": {k: [v.some_us, v.full_us] for k, v in h.psi.items()},
        "mem": dict(h.meminfo_kb),
        "cg": None if h.cgroup is None else [
            h.cgroup.path, h.cgroup.io_stat,
            None if h.cgroup.io_pressure is None
            else [h.cgroup.io_pressure.some_us, h.cgroup.io_pressure.full_us]],
    }


def _host_from_tree(t: dict) -> HostRaw:
    cpu = t.get("cpu")
    cg = t.get("cg")
    cgroup = None
    if cg is not None:
        press = cg[2]
        cgroup = CgroupIo(path=cg[0], io_stat=cg[1],
                          io_pressure=None if press is None else PsiTotals(press[0], press[1]))
    return HostRaw(
        cpu=None if cpu is None else CpuTimes(**dict(zip(_CPU_FIELDS, cpu))),
        ncpu=t.get("ncpu", 1),
        psi={k: PsiTotals(v[0], v[1]) for k, v in (t.get("psi") or {}).items()},
        meminfo_kb=dict(t.get("mem") or {}),
        cgroup=cgroup,
    )


# ---------------------------------------------------------------------------- records
def _device_list(d: DeviceInfo) -> list:
    return [list(v) if isinstance(v, tuple) else v for v in (getattr(d, n) for n in _DEVICE_FIELDS)]


def _maker(cls, recorded: list[str], tuple_fields=(), required_default=None):
    """A function that builds cls from a positional record written with field names
    `recorded`: positional when they are this code's own fields, else by name (fields
    this code does not know are dropped; fields the recording lacks take their default,
    or `required_default` when they have none)."""
    own = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else list(cls._fields)
    tuples = [i for i, n in enumerate(recorded) if n in tuple_fields]

    def fix(vals):
        for i in tuples:
            if i < len(vals) and isinstance(vals[i], list):
                vals[i] = tuple(vals[i])
        return vals

    if list(recorded) == own:
        return lambda vals: cls(*fix(list(vals)))
    if dataclasses.is_dataclass(cls):
        missing = [f.name for f in dataclasses.fields(cls)
                   if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                   and f.name not in recorded]
    else:
        missing = [n for n in own if n not in cls._field_defaults and n not in recorded]
    known = [(i, n) for i, n in enumerate(recorded) if n in own]

    def build(vals):
        vals = fix(list(vals))
        kwargs = {n: vals[i] for i, n in known if i < len(vals)}
        for n in missing:
            kwargs.setdefault(n, required_default)
        return cls(**kwargs)
    return build


# ---------------------------------------------------------------------------- encoder
class Encoder:
    """Turns Samples into frame payloads; one instance per writer.  start_segment()
    begins a new deflate stream (the next payload is a keyframe)."""

    def __init__(self, level: int = 6) -> None:
        # level 6: 4 % larger than 9 at half its CPU (bench: 0.48 vs 0.97 ms a sample)
        self.level = level
        self.start_segment()

    def start_segment(self) -> None:
        self._z = zlib.compressobj(self.level, zlib.DEFLATED, -15, 9)
        self._disk_names: list[str] | None = None
        self._disk_flat: list | None = None
        self._disk_ints = False
        self._devices: dict | None = None
        self._gpu_status = None
        self._gpus: list[tuple] | None = None   # per GPU: (dyn, static, procs, last util ts, last mem ts)
        self._pids: list[int] | None = None
        self._proc_flat: list | None = None
        self._proc_ints = False
        self._proc_static: dict[int, list] = {}
        self._host = None

    def encode(self, s: Sample) -> bytes:
        """The compressed payload of s; the first after start_segment() is a keyframe."""
        out: dict = {"t": [s.mono_s, s.wall_s]}
        # disks: names when they change, counters as one flat list
        names = list(s.disks)
        flat = [v for c in s.disks.values() for v in c]
        ints = _all_ints(flat)
        if names != self._disk_names:
            out["dn"] = names
            out["da"] = flat
        elif ints and self._disk_ints:
            out["dv"] = list(map(operator.sub, flat, self._disk_flat))
        else:
            out["da"] = _delta(flat, self._disk_flat)
        self._disk_names, self._disk_flat, self._disk_ints = names, flat, ints
        # devices: only when they changed
        if self._devices is None or s.devices != self._devices:
            out["v"] = [_device_list(d) for d in s.devices.values()]
            self._devices = dict(s.devices)
        # GPUs
        status = [s.gpu.status, s.gpu.driver_version]
        if status != self._gpu_status:
            out["gs"] = status
            self._gpu_status = status
        prev_gpus = self._gpus if self._gpus is not None and len(self._gpus) == len(s.gpu.gpus) else None
        recs, state = [], []
        for i, g in enumerate(s.gpu.gpus):
            dyn = [getattr(g, n) for n in GPU_DYNAMIC]
            static = [getattr(g, n) for n in GPU_STATIC]
            procs = None if g.processes is None else [[getattr(p, n) for n in _GPU_PROCESS_FIELDS]
                                                      for p in g.processes]
            p = prev_gpus[i] if prev_gpus is not None else None
            rec = [_delta(dyn, p[0] if p else None),
                   _samples_enc(g.util_samples, p[3] if p else 0),
                   _samples_enc(g.mem_util_samples, p[4] if p else 0)]
            if p is None or static != p[1] or procs != p[2]:
                rec.append(static if p is None or static != p[1] else 0)
                rec.append([procs] if p is None or procs != p[2] else 0)
            recs.append(rec)
            state.append((dyn, static, procs, _last_ts(g.util_samples) if g.util_samples else (p[3] if p else 0),
                          _last_ts(g.mem_util_samples) if g.mem_util_samples else (p[4] if p else 0)))
        out["g"] = recs
        self._gpus = state
        # host
        tree = _host_tree(s.host)
        out["h"] = _tree_delta(tree, self._host)
        self._host = tree
        # processes: pids when they change, counters flat, statics when they change
        pids = list(s.procs)
        flat = [getattr(p, n) for p in s.procs.values() for n in PROC_COUNTERS]
        ints = _all_ints(flat)
        if pids != self._pids:
            out["pk"] = pids
            out["pa"] = flat
        elif ints and self._proc_ints:
            out["pv"] = list(map(operator.sub, flat, self._proc_flat))
        else:
            out["pa"] = _delta(flat, self._proc_flat)
        changed = []
        statics = {}
        for i, (pid, p) in enumerate(s.procs.items()):
            st = [getattr(p, n) for n in PROC_STATIC]
            if isinstance(st[4], tuple):
                st[4] = list(st[4])
            statics[pid] = st
            if self._proc_static.get(pid) != st:
                changed.append([i, st])
        if changed:
            out["ps"] = changed
        self._pids, self._proc_flat, self._proc_ints, self._proc_static = pids, flat, ints, statics
        if s.warnings:
            out["w"] = list(s.warnings)
        raw = json.dumps(out, separators=(",", ":"), ensure_ascii=False).encode()
        data = self._z.compress(raw) + self._z.flush(zlib.Z_SYNC_FLUSH)
        if data.endswith(FLUSH_TAIL):
            data = data[:-4]
        return data


# ---------------------------------------------------------------------------- decoder
class Decoder:
    """Turns frame payloads back into Samples, one segment at a time.  A decoder is
    built for one session's schema; start_segment() at every keyframe."""

    def __init__(self, recorded_schema: dict | None = None) -> None:
        sch = schema()
        sch.update(recorded_schema or {})
        self.schema = sch
        self._disk = _maker(DiskCounters, sch["disk"], required_default=0)
        self._disk_n = len(sch["disk"])
        self._device = _maker(DeviceInfo, sch["device"], tuple_fields=("slaves", "mountpoints"),
                              required_default="")
        self._gpu_proc = _maker(GpuProcessRaw, sch["gpu_process"])
        self._gpu_static = [n for n in sch["gpu_static"]]
        self._gpu_dynamic = [n for n in sch["gpu_dynamic"]]
        gpu_fields = set(_names(GpuRaw))
        self._gpu_known_static = [(i, n) for i, n in enumerate(self._gpu_static) if n in gpu_fields]
        self._gpu_known_dynamic = [(i, n) for i, n in enumerate(self._gpu_dynamic) if n in gpu_fields]
        self._proc_static_names = sch["proc_static"]
        self._proc_counters = sch["proc_counters"]
        self._proc_n = len(self._proc_counters)
        proc_fields = set(_names(ProcIoRaw))
        self._proc_known = [(i, n) for i, n in enumerate(self._proc_counters) if n in proc_fields]
        self._proc_known_static = [(i, n) for i, n in enumerate(self._proc_static_names) if n in proc_fields]
        self._proc_positional = (
            list(self._proc_static_names) == list(PROC_STATIC) and list(self._proc_counters) == list(PROC_COUNTERS)
            and list(_names(ProcIoRaw)) == ["pid", *PROC_STATIC[:4], *PROC_COUNTERS, PROC_STATIC[4]])
        self.start_segment()

    def _proc_identity(self, st: list):
        """A process's identity as decode() uses it: a tuple in PROC_STATIC order when
        positional, else a dict of the fields this code knows."""
        names = self._proc_static_names
        dev_i = names.index("devices") if "devices" in names else None
        if dev_i is not None and isinstance(st[dev_i], list):
            st = list(st)
            st[dev_i] = tuple(st[dev_i])
        if self._proc_positional:
            return tuple(st)
        return {name: st[j] for j, name in self._proc_known_static}

    def start_segment(self) -> None:
        self._z = zlib.decompressobj(-15)
        self._disk_names: list[str] | None = None
        self._disk_flat: list | None = None
        self._devices: dict[str, DeviceInfo] = {}
        self._gpu_status = ["unavailable: not sampled", None]
        self._gpus: list[list] | None = None  # per GPU: [dyn, static, procs, last util ts, last mem ts]
        self._pids: list[int] | None = None
        self._proc_flat: list | None = None
        self._proc_static: dict[int, tuple | dict] = {}
        self._host = None

    def decode(self, payload: bytes) -> Sample:
        """The Sample in one frame's payload.  Raises FormatError when it cannot be read
        (then the rest of the segment cannot be read either)."""
        try:
            raw = self._z.decompress(payload + FLUSH_TAIL)
            return self._decode(json.loads(raw))
        except FormatError:
            raise
        except (zlib.error, ValueError, TypeError, KeyError, IndexError, AttributeError) as err:
            raise FormatError(f"{type(err).__name__}: {err}") from None

    def _decode(self, d: dict) -> Sample:
        mono_s, wall_s = d["t"]
        # disks
        if "dn" in d:
            self._disk_names = d["dn"]
            flat = d["da"]
        elif "dv" in d:
            flat = list(map(operator.add, self._disk_flat, d["dv"]))
        else:
            flat = _undelta(d["da"], self._disk_flat)
        self._disk_flat = flat
        n = self._disk_n
        make = self._disk
        names = self._disk_names
        if len(flat) != n * len(names):
            raise FormatError("disk counters do not match the disk names")
        disks = {name: make(flat[i * n:(i + 1) * n]) for i, name in enumerate(names)}
        # devices
        if "v" in d:
            self._devices = {}
            for rec in d["v"]:
                info = self._device(rec)
                self._devices[info.name] = info
        # GPUs
        if "gs" in d:
            self._gpu_status = d["gs"]
        prev = self._gpus if self._gpus is not None and len(self._gpus) == len(d["g"]) else None
        gpus, state = [], []
        for i, rec in enumerate(d["g"]):
            p = prev[i] if prev is not None else None
            dyn = _undelta(rec[0], p[0] if p else None)
            static = p[1] if p else None
            procs = p[2] if p else None
            if len(rec) > 3:
                if rec[3] != 0:
                    static = rec[3]
                if rec[4] != 0:
                    procs = rec[4][0]
            if static is None:
                raise FormatError("a GPU record without its identity")
            util = _samples_dec(rec[1], p[3] if p else 0)
            mem = _samples_dec(rec[2], p[4] if p else 0)
            kwargs = {n: static[j] for j, n in self._gpu_known_static}
            kwargs.update({n: dyn[j] for j, n in self._gpu_known_dynamic})
            gpus.append(GpuRaw(
                **kwargs, util_samples=util, mem_util_samples=mem,
                processes=None if procs is None else [self._gpu_proc(x) for x in procs]))
            state.append([dyn, static, procs,
                          _last_ts(util) if util else (p[3] if p else 0),
                          _last_ts(mem) if mem else (p[4] if p else 0)])
        self._gpus = state
        # host
        tree = _tree_undelta(d["h"], self._host)
        self._host = tree
        host = _host_from_tree(tree)
        # processes
        if "pk" in d:
            self._pids = d["pk"]
            flat = d["pa"]
        elif "pv" in d:
            flat = list(map(operator.add, self._proc_flat, d["pv"]))
        else:
            flat = _undelta(d["pa"], self._proc_flat)
        self._proc_flat = flat
        statics = self._proc_static
        pids = self._pids
        for i, st in d.get("ps", ()):
            statics[pids[i]] = self._proc_identity(st)
        n = self._proc_n
        if len(flat) != n * len(pids):
            raise FormatError("process counters do not match the process list")
        procs = {}
        if self._proc_positional:
            # this code's own field order: ProcIoRaw(pid, ppid, root_pid, name, cmdline,
            # rchar, wchar, read_bytes, write_bytes, cpu_ticks, devices)
            for i, pid in enumerate(pids):
                st = statics.get(pid)
                if st is None:
                    raise FormatError(f"process {pid} without its identity")
                base = i * n
                procs[pid] = ProcIoRaw(pid, st[0], st[1], st[2], st[3], *flat[base:base + n], st[4])
        else:
            known = self._proc_known
            for i, pid in enumerate(pids):
                st = statics.get(pid)
                if st is None:
                    raise FormatError(f"process {pid} without its identity")
                kwargs = dict(st)
                base = i * n
                for j, name in known:
                    kwargs[name] = flat[base + j]
                procs[pid] = ProcIoRaw(pid=pid, **kwargs)
        return Sample(mono_s=mono_s, wall_s=wall_s, disks=disks, devices=dict(self._devices),
                      gpu=GpuSnapshot(status=self._gpu_status[0], driver_version=self._gpu_status[1],
                                      gpus=gpus),
                      host=host, procs=procs, warnings=list(d.get("w", ())))
