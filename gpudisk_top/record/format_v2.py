"""Format version 2: how raw Samples become rows and blocks, and back.

A Sample is first *flattened*: a layout (a tuple of column keys such as "d/sda/rd_ios",
"g/0/power_mw", "p/4242/cpu") and one value per key.  The layout changes only when the
set of disks, GPUs, processes or host fields changes, so a reader builds a plan for it
once.  The flat values are written twice over a sample's life:

  - as a *row* (an R frame, one per sample, as soon as it is taken): the values as JSON
    (differences from the row before, records only when they changed).  Rows are the
    crash-safe tail of a recording;
  - as part of a *block* (a B frame, SEGMENT_SAMPLES samples, written when they are
    complete, which replaces their rows): the values column by column, each column
    coded against itself (as is, as differences, or as differences of differences,
    whichever is smallest), packed at the narrowest byte width that holds it, and the
    whole block compressed with LZMA.  Rarely changing values (names, device identity,
    command lines) are JSON runs.

What is kept exactly: every field of a Sample, with two exceptions, both chosen so that
the model and the detector compute the same numbers from a recording as they did live
(docs/recording-format.md, "What version 2 keeps"):

  - NVML utilization samples: per interval the sum and number of the samples that
    model.gpu.window_mean() averages for that interval (a UtilWindow), not each sample;
  - per-process I/O counters (rchar, wchar, read_bytes, write_bytes): per process tree
    (the processes with one root_pid; a process without one is a tree of its own) the
    exact sum of its members' increases, and each member's share of it in 1/255ths.  A
    reader gets counters whose increases add up exactly to each tree's, are zero exactly
    when the real one was, and go down (or start) exactly when the real ones did; the
    split between the members of one tree is within 1/255 of the tree's increase.

This module stays as it is once a version 3 exists: a reader for every version is kept.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import lzma
import operator
import struct
import zlib
from array import array

from gpudisk_top.collect.diskstats import DiskCounters
from gpudisk_top.collect.sample import (CgroupIo, CpuTimes, DeviceInfo, GpuProcessRaw, GpuRaw,
                                        GpuSnapshot, HostRaw, ProcIoRaw, PsiTotals, Sample,
                                        UtilWindow, window_values)

VERSION = 2
IO_FIELDS = ("rchar", "wchar", "read_bytes", "write_bytes")
SHARE_SCALE = 255          # a process's share of its tree's increase, in 1/255ths
EXACT = -1                 # share column value: this one is in the row's "px" list

_names = lambda cls: tuple(f.name for f in dataclasses.fields(cls))  # noqa: E731

DISK_FIELDS = DiskCounters._fields
DEVICE_FIELDS = _names(DeviceInfo)
CPU_FIELDS = _names(CpuTimes)
GPU_STATIC = ("index", "name", "uuid", "pci_bus_id", "lost", "error", "mem_total_bytes",
              "power_limit_mw")
GPU_INTS = ("mem_used_bytes", "power_mw", "energy_mj", "temp_c", "sm_clock_mhz",
            "pcie_rx_kb_s", "pcie_tx_kb_s", "throttle_reasons")
GPU_FLOATS = ("util_now_pct", "mem_util_now_pct")
GPU_PROCESS_FIELDS = _names(GpuProcessRaw)
PROC_STATIC = ("ppid", "root_pid", "name", "cmdline", "devices")
# where a process's time went (ProcIoRaw): columns "p/PID/<key>", integers with -1 for
# None so that rows stay integer (coded as differences) and blocks pack them narrow;
# the state letter is kept as its code point.  Recordings made before them lack the
# columns, and read back None.
PROC_ACCT = (("rd", "run_delay_ns"), ("bio", "blkio_ticks"), ("sr", "syscr"), ("s", "state"))


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
    }


class FormatError(ValueError):
    """A payload that passed its CRC but cannot be decoded (a bug, or a foreign writer)."""


_INT = {int}
_D = struct.Struct("<d")
_Q = struct.Struct("<q")


def _float_bits(x: float) -> int:
    return _Q.unpack(_D.pack(x))[0]


def _bits_float(b: int) -> float:
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


def _window_parts(w) -> tuple:
    """(sum, count) columns: None -> (None, None), [] -> (0, 0)."""
    if w is None:
        return None, None
    if not w:
        return 0, 0
    s = w.sum_pct
    if type(s) is float and s.is_integer() and abs(s) < 2**53:
        s = int(s)  # an integer column; read back as the same float
    return s, w.count


def _window_of(s, n):
    if n is None:
        return None
    if n == 0:
        return []
    return UtilWindow(float(s), n)


# ---------------------------------------------------------------------------- processes
def _allocate(total: int, shares: list[int]) -> list[int]:
    """Split `total` over members by their shares: each gets total * share // sum of
    shares, the member with the largest share (the first of them) also what rounding
    left; then a member with a share but nothing gets 1 from the largest part, so that
    exactly the members with a share get something.  The parts add up to `total`."""
    if total <= 0:
        return [0] * len(shares)
    q_sum = sum(shares)
    if q_sum <= 0:
        raise FormatError("a tree's increase without a member to take it")
    parts = [total * q // q_sum for q in shares]
    big = list(shares).index(max(shares))
    parts[big] += total - sum(parts)
    if total < q_sum:
        for i, q in enumerate(shares):
            if q and not parts[i]:
                j = parts.index(max(parts))
                if parts[j] < 2:
                    raise FormatError("a tree's increase smaller than its members that increased")
                parts[j] -= 1
                parts[i] = 1
    return parts


_device_rec = operator.attrgetter(*DEVICE_FIELDS)
_gpu_static = operator.attrgetter(*GPU_STATIC)
_gpu_ints = operator.attrgetter(*GPU_INTS)
_gpu_proc = operator.attrgetter(*GPU_PROCESS_FIELDS)
_cpu = operator.attrgetter(*CPU_FIELDS)
_proc_static = operator.attrgetter(*PROC_STATIC)
_io = operator.attrgetter(*IO_FIELDS)
_NO_CPU = (None,) * len(CPU_FIELDS)


def _int_or_none(value: int | None) -> int:
    return -1 if value is None else value

_NO_IO = (None,) * 4
_ZERO4 = (0, 0, 0, 0)
_EMPTY: dict = {}


# ---------------------------------------------------------------------------- flattening
class Flattener:
    """Sample -> (layout, values).  One per recorder session: it keeps the previous sample,
    which the utilization windows and the processes' increases are taken against.
    flatten() changes nothing; accept() makes its result the previous sample, once the
    row is safely written."""

    def __init__(self) -> None:
        self.prev: Sample | None = None
        self._sig = None
        self._layout: tuple[str, ...] | None = None
        self._dev_src = None
        self._dev_vals: list = []

    def reset(self) -> None:
        """A new session: the next sample has no previous one."""
        self.prev = None

    def _make_layout(self, s: Sample, tree_keys) -> tuple[str, ...]:
        keys = ["t/mono", "t/wall", "gs/status", "gs/driver", "w"]
        for n in s.disks:
            keys += [f"d/{n}/{f}" for f in DISK_FIELDS]
        keys += [f"v/{n}" for n in s.devices]
        for i in range(len(s.gpu.gpus)):
            keys.append(f"g/{i}/static")
            keys += [f"g/{i}/{f}" for f in GPU_INTS]
            keys += [f"g/{i}/{f}" for f in GPU_FLOATS]
            keys += [f"g/{i}/u/s", f"g/{i}/u/n", f"g/{i}/m/s", f"g/{i}/m/n", f"g/{i}/procs"]
        h = s.host
        keys += [f"h/cpu/{f}" for f in CPU_FIELDS]
        keys.append("h/ncpu")
        for k in h.psi:
            keys += [f"h/psi/{k}/some", f"h/psi/{k}/full"]
        keys += [f"h/mem/{k}" for k in h.meminfo_kb]
        keys.append("h/cg")
        if h.cgroup is not None:
            for dev, stat in h.cgroup.io_stat.items():
                keys += [f"h/cgio/{dev}/{k}" for k in stat]
            keys += ["h/cgp/some", "h/cgp/full"]
        for pid in s.procs:
            keys += ([f"p/{pid}/st", f"p/{pid}/cpu"] + [f"p/{pid}/{k}" for k, _ in PROC_ACCT]
                     + [f"p/{pid}/{f}" for f in IO_FIELDS])
        for t in tree_keys:
            keys += [f"T/{t}/{f}" for f in IO_FIELDS]
        keys.append("px")
        return tuple(keys)

    def flatten(self, s: Sample) -> tuple[tuple[str, ...], list]:
        """(layout, values) of s against the previous accepted sample.  Records (device
        identity, GPU identity, process identity) are tuples, written as JSON lists."""
        prev = self.prev
        vals: list = [_float_bits(s.mono_s), _float_bits(s.wall_s), s.gpu.status,
                      s.gpu.driver_version, s.warnings]
        for c in s.disks.values():
            vals += c
        devices = s.devices
        if devices is not self._dev_src and devices != self._dev_src:
            self._dev_vals = list(map(_device_rec, devices.values()))
        self._dev_src = devices
        vals += self._dev_vals
        window = (int(prev.wall_s * 1e6), int(s.wall_s * 1e6)) if prev is not None else None
        for g in s.gpu.gpus:
            vals.append(_gpu_static(g))
            vals += _gpu_ints(g)
            vals += (g.util_now_pct, g.mem_util_now_pct)
            vals += _window_parts(util_window(g.util_samples, window))
            vals += _window_parts(util_window(g.mem_util_samples, window))
            procs = g.processes
            vals.append(None if procs is None else list(map(_gpu_proc, procs)))
        h = s.host
        cpu = h.cpu
        vals += _NO_CPU if cpu is None else _cpu(cpu)
        vals.append(h.ncpu)
        for v in h.psi.values():
            vals += (v.some_us, v.full_us)
        vals += h.meminfo_kb.values()
        cg = h.cgroup
        vals.append(None if cg is None else cg.path)
        if cg is not None:
            for stat in cg.io_stat.values():
                vals += stat.values()
            press = cg.io_pressure
            vals += (None, None) if press is None else (press.some_us, press.full_us)
        # processes: identity and CPU ticks exactly; I/O as shares of their tree's increase
        prev_procs = prev.procs if prev is not None else _EMPTY
        exact: list = []
        trees: dict = {}
        members: list = []   # (position of the 4 share columns in vals, tree, increases)
        roots = []
        for pid, p in s.procs.items():
            root = p.root_pid
            roots.append(root)
            state = p.state
            vals += (_proc_static(p), p.cpu_ticks, _int_or_none(p.run_delay_ns),
                     _int_or_none(p.blkio_ticks), _int_or_none(p.syscr),
                     ord(state[0]) if state else -1)
            key = root if root is not None else -1 - pid
            tree = trees.get(key)
            if tree is None:
                tree = trees[key] = [0, 0, 0, 0]
            cur = _io(p)
            q = prev_procs.get(pid)
            incs = None
            if q is not None and q.root_pid == root:
                old = _io(q)
                if None not in cur and None not in old:
                    incs = tuple(map(operator.sub, cur, old))
                    if min(incs) < 0:
                        incs = None
            else:
                old = _NO_IO
            if incs is None:
                incs = []
                for k in range(4):
                    c, o = cur[k], old[k]
                    if c is None:
                        exact.append((pid, k, "n", None))
                    elif o is None:
                        exact.append((pid, k, "a", c))
                    elif c < o:
                        exact.append((pid, k, "d", c - o))
                    else:
                        incs.append(c - o)
                        tree[k] += c - o
                        continue
                    incs.append(None)
            else:
                tree[0] += incs[0]
                tree[1] += incs[1]
                tree[2] += incs[2]
                tree[3] += incs[3]
            members.append((len(vals), tree, incs))
            vals += _ZERO4
        scale = float(SHARE_SCALE)
        scales = {id(t): [scale / x if x else 0.0 for x in t] for t in trees.values()}
        for pos, tree, incs in members:
            sc = scales[id(tree)]
            if type(incs) is tuple:          # the usual case: four increases
                vals[pos:pos + 4] = [(int(d * f + 0.5) or 1) if d else 0 for d, f in zip(incs, sc)]
                continue
            for k in range(4):
                d = incs[k]
                if d is None:
                    vals[pos + k] = EXACT
                elif d:
                    vals[pos + k] = int(d * sc[k] + 0.5) or 1
        for tree in trees.values():
            vals += tree
        vals.append(exact)
        sig = (tuple(s.disks), tuple(devices), len(s.gpu.gpus), tuple(s.procs), tuple(roots),
               tuple(h.psi), tuple(h.meminfo_kb),
               None if cg is None else tuple((d, tuple(v)) for d, v in cg.io_stat.items()))
        if sig != self._sig:
            self._layout = self._make_layout(s, [str(k) if k >= 0 else f"s{-1 - k}" for k in trees])
            self._sig = sig
        return self._layout, vals

    def accept(self, s: Sample) -> None:
        self.prev = s


# ---------------------------------------------------------------------------- plans
@dataclasses.dataclass
class _Plan:
    """Where each part of a Sample is in one layout's values."""

    disks: list            # (name, [index per DiskCounters field or None])
    devices: list          # (name, index)
    gpus: list             # per GPU: dict of key -> index
    cpu: list              # index per CpuTimes field or None
    ncpu: int | None
    psi: list              # (resource, some index, full index)
    mem: list              # (key, index)
    cg: int | None
    cgio: list             # (dev, [(key, index)])
    cgp: tuple | None
    procs: list            # (pid, st index, cpu index, first io index, tree key)
    acct: dict             # pid -> index per PROC_ACCT column (None: not recorded)
    trees: dict            # tree key -> first index of its 4 totals
    tree_index: dict       # root PID (or ~pid of a process without one) -> its 4 totals
    px: int | None
    mono: int
    wall: int
    status: int | None
    driver: int | None
    warnings: int | None
    st_getter: object = None   # getters built by the Unflattener on first use
    _compiled: object = None


def make_plan(layout: tuple[str, ...]) -> _Plan:
    """Read a layout by its keys: fields this code does not know are ignored, fields the
    recording lacks take their defaults."""
    pos = {k: i for i, k in enumerate(layout)}
    disks: dict[str, list] = {}
    gpus: dict[int, dict] = {}
    procs: dict[int, dict] = {}
    psi: dict[str, list] = {}
    cgio: dict[str, list] = {}
    trees: dict[str, list] = {}
    devices, mem = [], []
    for i, k in enumerate(layout):
        parts = k.split("/")
        head = parts[0]
        if head == "d" and len(parts) == 3:
            disks.setdefault(parts[1], {})[parts[2]] = i
        elif head == "v" and len(parts) == 2:
            devices.append((parts[1], i))
        elif head == "g" and len(parts) >= 3:
            gpus.setdefault(int(parts[1]), {})["/".join(parts[2:])] = i
        elif head == "h" and len(parts) >= 2:
            if parts[1] == "psi" and len(parts) == 4:
                psi.setdefault(parts[2], [None, None])[0 if parts[3] == "some" else 1] = i
            elif parts[1] == "mem" and len(parts) == 3:
                mem.append((parts[2], i))
            elif parts[1] == "cgio" and len(parts) == 4:
                cgio.setdefault(parts[2], []).append((parts[3], i))
        elif head == "p" and len(parts) == 3:
            procs.setdefault(int(parts[1]), {})[parts[2]] = i
        elif head == "T" and len(parts) == 3:
            trees.setdefault(parts[1], [None] * 4)
            if parts[2] in IO_FIELDS:
                trees[parts[1]][IO_FIELDS.index(parts[2])] = i
    proc_list = []
    acct = {}
    for pid, f in procs.items():
        if "st" not in f:
            raise FormatError(f"process {pid} without its identity")
        io = [f.get(x) for x in IO_FIELDS]
        proc_list.append((pid, f["st"], f.get("cpu"), io))
        acct[pid] = [f.get(k) for k, _ in PROC_ACCT]
    return _Plan(
        disks=[(n, [f.get(x) for x in DISK_FIELDS]) for n, f in disks.items()],
        devices=devices,
        gpus=[gpus[i] for i in sorted(gpus)],
        cpu=[pos.get(f"h/cpu/{x}") for x in CPU_FIELDS],
        ncpu=pos.get("h/ncpu"),
        psi=[(r, a, b) for r, (a, b) in psi.items()],
        mem=mem,
        cg=pos.get("h/cg"),
        cgio=list(cgio.items()),
        cgp=(pos.get("h/cgp/some"), pos.get("h/cgp/full")),
        procs=proc_list,
        acct=acct,
        trees={k: v for k, v in trees.items()},
        tree_index={(~int(k[1:]) if k.startswith("s") else int(k)): v for k, v in trees.items()},
        px=pos.get("px"),
        mono=pos["t/mono"], wall=pos["t/wall"],
        status=pos.get("gs/status"), driver=pos.get("gs/driver"), warnings=pos.get("w"),
    )


def _hashable(x) -> bool:
    try:
        hash(x)
        return True
    except TypeError:
        return False


def _get(vals, i, default=None):
    return default if i is None else vals[i]


_DISK_ZERO = DiskCounters.zero()
_DEVICE_SET = frozenset(DEVICE_FIELDS)
_GPU_SET = frozenset(_names(GpuRaw))


def _record(cls, recorded: list[str]):
    """A function building cls from a positional record written with field names
    `recorded` (by position when they are this code's, else by name)."""
    own = list(_names(cls))
    if list(recorded) == own:
        return lambda vals: cls(*vals)
    known = [(i, n) for i, n in enumerate(recorded) if n in own]
    return lambda vals: cls(**{n: vals[i] for i, n in known if i < len(vals)})


class Unflattener:
    """(layout, values) -> Sample.  Keeps the processes' rebuilt I/O counters of the
    previous sample (`counters`: pid -> [rchar, wchar, read_bytes, write_bytes]), which
    the next sample's shares are added to; a block starts from the state the writer saved
    with it.  `recorded` is the session header's schema: positional records (device
    identity, GPU identity and processes, process identity) are read by those names."""

    def __init__(self, counters: dict | None = None, recorded: dict | None = None) -> None:
        self.counters: dict[int, list] = dict(counters or {})
        self._plans: dict[tuple, _Plan] = {}
        self._devices: dict = {}     # DeviceInfo -> the one equal object handed out
        self._records: dict = {}     # id(record) -> (record, what it was made into)
        self._group_cache: dict = {}
        sch = schema()
        sch.update(recorded or {})
        self._device_names = list(sch["device"])
        self._gpu_static = list(sch["gpu_static"])
        self._gpu_proc = _record(GpuProcessRaw, sch["gpu_process"])
        st = list(sch["proc_static"])
        self._st = [st.index(f) if f in st else None for f in PROC_STATIC]

    def plan(self, layout) -> _Plan:
        p = self._plans.get(layout)
        if p is None:
            p = self._plans[layout] = make_plan(layout)
        return p

    def _device(self, rec) -> DeviceInfo:
        kw = {}
        for name, v in zip(self._device_names, rec):
            if name in _DEVICE_SET:
                kw[name] = tuple(v) if isinstance(v, list) else v
        kw.setdefault("name", "")
        kw.setdefault("display_name", kw["name"])
        info = DeviceInfo(**kw)
        # one object for equal identities, so that a reader's caches by identity hit
        return self._devices.setdefault(info, info) if _hashable(info) else info

    def _groups(self, plan: _Plan, vals):
        """The process trees of a row: per tree, its totals' columns, its members and
        their share columns per counter (built once per layout and set of roots)."""
        st_get = plan.st_getter
        if st_get is None:
            st_get = plan.st_getter = _getter([st_i for _, st_i, _, _ in plan.procs])
        ri = self._st[1]
        sts = st_get(vals)
        roots = tuple([st[ri] if ri is not None and ri < len(st) else None for st in sts])
        key = (id(plan), roots)
        got = self._group_cache.get(key)
        if got is not None and got[0] is plan:
            return got[1]
        members: dict = {}
        for (pid, _st_i, _cpu_i, io), root in zip(plan.procs, roots):
            members.setdefault(root if root is not None else ~pid, []).append((pid, io))
        groups = []
        for tkey, mem in members.items():
            tree = plan.tree_index.get(tkey) or [None] * 4
            pids = [pid for pid, _ in mem]
            per_k = []
            for k in range(4):
                idx = [io[k] for _, io in mem]
                per_k.append((tree[k], None if None in idx else _getter(idx)))
            groups.append((pids, per_k))
        if len(self._group_cache) > 64:
            self._group_cache.clear()
        self._group_cache[key] = (plan, groups)
        return groups

    def advance(self, layout, vals) -> dict[int, list]:
        """The processes' rebuilt I/O counters after this row (and keep them)."""
        plan = self.plan(layout)
        prev = self.counters
        out: dict[int, list] = {}
        for pid, _st_i, _cpu_i, io in plan.procs:
            old = prev.get(pid)
            c = out[pid] = old[:] if old is not None else [None, None, None, None]
            if None in io:                       # a layout without these columns
                for k in range(4):
                    if io[k] is None:
                        c[k] = None
        for pids, per_k in self._groups(plan, vals):
            for k in range(4):
                t_i, get = per_k[k]
                total = vals[t_i] if t_i is not None else 0
                if get is None:
                    continue
                qs = get(vals)
                if len(pids) == 1:
                    if total and qs[0] != EXACT:
                        c = out[pids[0]]
                        if c[k] is None:
                            raise FormatError(f"process {pids[0]}: a share without a previous counter")
                        c[k] += total
                    continue
                if not total:
                    continue
                if EXACT in qs:
                    share = [(pid, q) for pid, q in zip(pids, qs) if q != EXACT]
                    who, qs = [p for p, _ in share], [q for _, q in share]
                else:
                    who = pids
                for pid, d in zip(who, _allocate(total, qs)):
                    if d:
                        c = out[pid]
                        if c[k] is None:
                            raise FormatError(f"process {pid}: a share without a previous counter")
                        c[k] += d
        if plan.px is not None:
            for pid, k, kind, v in vals[plan.px]:
                c = out.get(pid)
                if c is None:
                    continue
                if kind == "a":
                    c[k] = v
                elif kind == "d":
                    old = prev.get(pid)
                    base = old[k] if old is not None else None
                    c[k] = None if base is None else base + v
                else:
                    c[k] = None
        self.counters = out
        return out

    def _compiled(self, plan: _Plan):
        """Per layout: getters for the parts of a Sample (built once)."""
        c = plan._compiled
        if c is not None:
            return c
        disks = []
        for name, idx in plan.disks:
            if None in idx:
                defaults = list(_DISK_ZERO)
                disks.append((name, None, idx, defaults))
            else:
                disks.append((name, _getter(idx), None, None))
        gpus = []
        for g in plan.gpus:
            dyn = [(f, g[f]) for f in GPU_INTS + GPU_FLOATS if f in g]
            gpus.append((g["static"], dyn, g.get("u/s"), g.get("u/n"), g.get("m/s"),
                         g.get("m/n"), g.get("procs")))
        c = plan._compiled = (disks, gpus)
        return c

    def _cached(self, obj, make):
        """make(obj), computed once per record object (records repeat, as one object, in
        the rows of a block and from row to row)."""
        cache = self._records
        hit = cache.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        if len(cache) > 20000:
            cache.clear()
        value = make(obj)
        cache[id(obj)] = (obj, value)
        return value

    def _proc_identity(self, st):
        idx = self._st
        ppid, root, name, cmd, dev = [st[i] if i is not None and i < len(st) else None for i in idx]
        return ppid, root, name, cmd, tuple(dev) if isinstance(dev, list) else dev

    def _gpu_identity(self, st):
        return {n: v for n, v in zip(self._gpu_static, st) if n in _GPU_SET}

    def sample(self, layout, vals) -> Sample:
        """The Sample of one row; rows must come in order (the processes' counters)."""
        plan = self.plan(layout)
        counters = self.advance(layout, vals)
        cdisks, cgpus = self._compiled(plan)
        make_disk = DiskCounters._make
        disks = {}
        for name, get, idx, defaults in cdisks:
            if get is not None:
                disks[name] = make_disk(get(vals))
            else:
                disks[name] = make_disk([vals[i] if i is not None else z for i, z in zip(idx, defaults)])
        cached = self._cached
        devices = {name: cached(vals[i], self._device) for name, i in plan.devices}
        gpus = []
        for st_i, dyn, u_s, u_n, m_s, m_n, procs_i in cgpus:
            kw = dict(cached(vals[st_i], self._gpu_identity))
            for f, i in dyn:
                kw[f] = vals[i]
            kw["util_samples"] = _window_of(_get(vals, u_s), _get(vals, u_n))
            kw["mem_util_samples"] = _window_of(_get(vals, m_s), _get(vals, m_n))
            procs = _get(vals, procs_i)
            kw["processes"] = None if procs is None else [self._gpu_proc(x) for x in procs]
            gpus.append(GpuRaw(**kw))
        cpu = None if plan.cpu and plan.cpu[0] is not None and vals[plan.cpu[0]] is None \
            else CpuTimes(*[_get(vals, i, 0) for i in plan.cpu])
        cgroup = None
        cg_path = _get(vals, plan.cg)
        if cg_path is not None:
            some_i, full_i = plan.cgp
            some = _get(vals, some_i)
            cgroup = CgroupIo(path=cg_path,
                              io_stat={dev: {k: vals[i] for k, i in items} for dev, items in plan.cgio},
                              io_pressure=None if some is None else PsiTotals(some, _get(vals, full_i)))
        host = HostRaw(cpu=cpu, ncpu=_get(vals, plan.ncpu, 1),
                       psi={r: PsiTotals(vals[a], _get(vals, b)) for r, a, b in plan.psi},
                       meminfo_kb={k: vals[i] for k, i in plan.mem}, cgroup=cgroup)
        procs = {}
        identity = self._proc_identity
        for pid, st_i, cpu_i, _io in plan.procs:
            ppid, root, name, cmd, dev = cached(vals[st_i], identity)
            c = counters[pid]
            rd, bio, sr, st = [None if i is None or vals[i] is None or vals[i] < 0 else vals[i]
                               for i in plan.acct[pid]]
            procs[pid] = ProcIoRaw(pid, ppid, root, name, cmd, c[0], c[1], c[2], c[3],
                                   vals[cpu_i] if cpu_i is not None else None, dev,
                                   state=chr(st) if st else None, run_delay_ns=rd,
                                   blkio_ticks=bio, syscr=sr)
        return Sample(mono_s=_bits_float(vals[plan.mono]), wall_s=_bits_float(vals[plan.wall]),
                      disks=disks, devices=devices,
                      gpu=GpuSnapshot(status=_get(vals, plan.status, "unavailable: not sampled"),
                                      driver_version=_get(vals, plan.driver), gpus=gpus),
                      host=host, procs=procs, warnings=list(_get(vals, plan.warnings) or ()))


def canonical(samples, flattener: Flattener | None = None) -> list[Sample]:
    """The samples as a version 2 recording gives them back (one session)."""
    fl = flattener or Flattener()
    un = Unflattener()
    out = []
    for s in samples:
        layout, vals = fl.flatten(s)
        fl.accept(s)
        out.append(un.sample(layout, json.loads(json.dumps(vals))))
    return out


# ---------------------------------------------------------------------------- rows
ROW = struct.Struct("<I")    # session-relative sample number
_STATIC_TAILS = frozenset(("st", "static", "procs") + GPU_FLOATS)
_STATIC_HEADS = frozenset(("v", "gs", "w", "px"))


def _positions(layout) -> tuple:
    """(static positions, other positions) of a layout: records that rarely change are
    written in a row only when they changed since the previous row."""
    st, dyn = [], []
    for i, k in enumerate(layout):
        parts = k.split("/")
        (st if parts[0] in _STATIC_HEADS or parts[-1] in _STATIC_TAILS or k == "h/cg"
         else dyn).append(i)
    return st, dyn


def _getter(idx: list):
    if not idx:
        return lambda vals: ()
    if len(idx) == 1:
        i = idx[0]
        return lambda vals: (vals[i],)
    return operator.itemgetter(*idx)


class RowCoder:
    """Rows of one run of R frames (after a session start or a block): the first row of
    a run and any row whose layout changed carry the layout and every record; the others
    carry only the records that changed since the row before."""

    def __init__(self) -> None:
        self._plans: dict = {}
        self.reset()

    def reset(self) -> None:
        self._layout = None
        self._statics = None
        self._dyn = None

    def _plan(self, layout):
        p = self._plans.get(layout)
        if p is None:
            st, dyn = _positions(layout)
            p = self._plans[layout] = (st, dyn, _getter(st), _getter(dyn))
        return p

    def encode(self, number: int, layout: tuple, vals: list) -> tuple[bytes, tuple]:
        """(payload, token): pass the token to accepted() once the row is written."""
        st_idx, _, get_st, get_dyn = self._plan(layout)
        statics = get_st(vals)
        dyn = get_dyn(vals)
        ints = set(map(type, dyn)) <= _INT
        if layout is self._layout or layout == self._layout:
            prev = self._statics
            changes = [[k, v] for k, (v, p) in enumerate(zip(statics, prev)) if v != p]
            if ints and self._dyn is not None:
                # differences from the row before: short numbers, less to write and deflate
                body = [None, changes, None, list(map(operator.sub, dyn, self._dyn))]
            else:
                body = [None, changes, dyn, None]
        else:
            body = [layout, statics, dyn, None]
        data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
        # not deflated: rows live only until their block replaces them, and deflating
        # each one cost more CPU than the 2 kB it saved
        return ROW.pack(number) + data, (layout, statics, dyn if ints else None)

    def accepted(self, token: tuple) -> None:
        self._layout, self._statics, self._dyn = token


class RowDecoder:
    """The mirror of RowCoder for one run of rows; raises FormatError."""

    def __init__(self) -> None:
        self._layout = None
        self._statics = None
        self._dyn = None
        self._plans: dict = {}

    def decode(self, payload) -> tuple[int, tuple, list]:
        """(number, layout, values) of one R frame's payload."""
        try:
            (number,) = ROW.unpack_from(payload)
            layout, statics, dyn, delta = json.loads(bytes(payload[ROW.size:]))
            if delta is not None:
                if self._dyn is None:
                    raise FormatError("a row of differences without the row before it")
                dyn = list(map(operator.add, self._dyn, delta))
            if layout is not None:
                layout = tuple(layout)
                statics = list(statics)
            else:
                if self._layout is None:
                    raise FormatError("a row whose layout was lost (damage before it)")
                layout = self._layout
                changed = statics
                statics = list(self._statics)
                for k, v in changed:
                    statics[k] = v
            p = self._plans.get(layout)
            if p is None:
                p = self._plans[layout] = _positions(layout)
            st_idx, dyn_idx = p
            if len(st_idx) != len(statics) or len(dyn_idx) != len(dyn):
                raise FormatError("a row that does not match its layout")
            vals = [None] * len(layout)
            for i, v in zip(st_idx, statics):
                vals[i] = v
            for i, v in zip(dyn_idx, dyn):
                vals[i] = v
        except FormatError:
            raise
        except (zlib.error, ValueError, TypeError, struct.error, IndexError) as err:
            raise FormatError(f"{type(err).__name__}: {err}") from None
        self._layout, self._statics = layout, statics
        self._dyn = dyn if set(map(type, dyn)) <= _INT else None
        return number, layout, vals


# ---------------------------------------------------------------------------- blocks
ABSENT = object()            # no value: the column's entity is not in this row
_WIDTHS = ((0, None), (1, "B"), (2, "H"), (4, "I"), (8, "Q"))
# a B frame's payload: first sample number, samples, then the lengths of its three parts:
# wall times (deflated, exact), the columns (LZMA), the summaries (record/derived.py)
BLOCK_HEAD = struct.Struct("<IIIII")
_BODY_HEAD = struct.Struct("<II")       # inside the LZMA part: header length, data length
WALL_KEY = "t/wall"


def _width(span: int) -> tuple[int, str | None]:
    """The narrowest unsigned width that holds 0..span (-1: none does)."""
    for w, code in _WIDTHS:
        if span < 1 << (8 * w):
            return w, code
    return -1, None


def _shuffle(data: bytes, w: int) -> bytes:
    """Byte planes: all first bytes, then all second bytes...  The high bytes of a
    column are nearly constant, so a compressor finds them as long runs."""
    if w <= 1:
        return data
    return b"".join(data[k::w] for k in range(w))


def _unshuffle(data, w: int, count: int) -> bytes:
    if w <= 1:
        return bytes(data)
    out = bytearray(count * w)
    for k in range(w):
        out[k::w] = data[k * count:(k + 1) * count]
    return bytes(out)


def _runs(values) -> list:
    """[[value, count], ...] of consecutive equal values."""
    n = len(values)
    if n and values.count(values[0]) == n:
        return [[values[0], n]]
    return [[v, len(list(grp))] for v, grp in itertools.groupby(values)]


def _expand(runs) -> list:
    out = []
    for v, n in runs:
        out += [v] * n
    return out


def _code_ints(vals: list):
    """(mode, heads, seq) with a small sum of magnitudes: 0 as is, 1 differences,
    2 differences of differences (tried only when differences are not already small)."""
    n = len(vals)
    best, best_cost = (0, [], vals), None
    if abs(vals[0]) < 1 << 24:            # a counter is never worth storing as is
        best_cost = sum(map(abs, vals))
    if n >= 2:
        d = list(map(operator.sub, vals[1:], vals[:-1]))
        cost = sum(map(abs, d))
        if best_cost is None or cost < best_cost:
            best, best_cost = (1, [vals[0]], d), cost
        if n >= 3 and cost > 4 * n:
            dd = list(map(operator.sub, d[1:], d[:-1]))
            cost = sum(map(abs, dd))
            if cost < best_cost:
                best = (2, [vals[0], d[0]], dd)
    return best


def _decode_ints(mode: int, heads: list, seq, n: int) -> list:
    if mode == 0:
        return list(seq)
    if mode == 1:
        return list(itertools.accumulate(seq, initial=heads[0]))
    d = list(itertools.accumulate(seq, initial=heads[1]))
    return list(itertools.accumulate(d, initial=heads[0]))[:n]


def encode_block(first: int, rows: list[tuple[int, list]], layouts: list[tuple],
                 state: dict, level: int = 6, summaries: bytes = b"") -> bytes:
    """A B frame's payload: samples first..first+len(rows)-1 of a session.  rows are
    (layout index, values); state is the processes' rebuilt counters before the first
    row (Unflattener.counters after the sample before it); summaries, the derived part."""
    n = len(rows)
    union: dict[str, int] = {}
    maps = []
    for layout in layouts:
        maps.append([union.setdefault(k, len(union)) for k in layout])
    ncols = len(union)
    # transpose runs of rows that share a layout (zip runs in C); a column is the values
    # of the runs whose layout has its key
    runs = [(lid, [v for _, v in grp]) for lid, grp in itertools.groupby(rows, key=operator.itemgetter(0))]
    pieces: list[list] = [[] for _ in range(ncols)]
    for r, (lid, grp) in enumerate(runs):
        for c, values in zip(maps[lid], zip(*grp)):
            pieces[c].append((r, values))
    descs = []
    chunks: dict[int, list] = {}
    sub = operator.sub
    wall_col = union.get(WALL_KEY)
    walls = b""
    for c in range(ncols):
        got = pieces[c]
        present = None
        if len(got) == 1:
            vals = list(got[0][1])
        else:
            vals = list(itertools.chain.from_iterable(v for _, v in got))
        if len(got) < len(runs):
            have = {r for r, _ in got}
            present = []
            for r, (_, grp) in enumerate(runs):
                flag = r in have
                if present and present[-1][0] == flag:
                    present[-1][1] += len(grp)
                else:
                    present.append([flag, len(grp)])
        if c == wall_col and present is None:
            # the wall times go in their own part, which opening a recording reads
            descs.append([None, "w"])
            walls = _pack_walls(vals)
            continue
        v0 = vals[0]
        m = len(vals)
        if vals.count(v0) == m:                  # constant: its value is enough
            if type(v0) is int:
                descs.append([present, "i", 1, 0, [v0], 0])
            else:
                descs.append([present, "j", [[v0, m]]])
            continue
        if set(map(type, vals)) <= _INT:
            mode, heads, seq = _code_ints(vals)
            lo = min(seq) if seq else 0
            w, code = _width((max(seq) - lo) if seq else 0)
            if w >= 0:
                if w:
                    if lo:
                        seq = list(map(sub, seq, itertools.repeat(lo, len(seq))))
                    chunks.setdefault(w, []).append(_shuffle(array(code, seq).tobytes(), w))
                descs.append([present, "i", mode, w, heads, lo])
                continue
        descs.append([present, "j", _runs(vals)])
    data = b"".join(b for w in sorted(chunks) for b in chunks[w])
    header = json.dumps({"keys": list(union), "layouts": maps,
                         "rows": _runs([lid for lid, _ in rows]), "cols": descs,
                         "state": [[pid, c] for pid, c in state.items()]},
                        separators=(",", ":"), ensure_ascii=False, allow_nan=True).encode()
    body = _BODY_HEAD.pack(len(header), len(data)) + header + data
    packed = lzma.compress(body, format=lzma.FORMAT_RAW, filters=[dict(_LZMA_ENCODE, preset=level)])
    return BLOCK_HEAD.pack(first, n, len(walls), len(packed), len(summaries)) + walls + packed + summaries


def _pack_walls(bits: list) -> bytes:
    """Wall times (their float bits) as differences of differences, deflated."""
    if len(bits) < 2:
        heads, seq = list(bits), []
    else:
        d = list(map(operator.sub, bits[1:], bits[:-1]))
        heads, seq = [bits[0], d[0]], list(map(operator.sub, d[1:], d[:-1]))
    return zlib.compress(json.dumps(heads).encode() + b"\n" + array("q", seq).tobytes(), 9)


def _unpack_walls(data, n: int) -> list[int]:
    raw = zlib.decompress(bytes(data))
    nl = raw.index(b"\n")
    heads = json.loads(raw[:nl])
    seq = array("q")
    seq.frombytes(raw[nl + 1:])
    if n < 2:
        return heads[:n]
    return _decode_ints(2, heads, seq, n)


def block_info(payload) -> tuple[int, int, list[float]]:
    """(first sample number, samples, their wall times) of a B frame, without
    decompressing its columns.  Raises FormatError."""
    try:
        first, n, wl, rl, sl = BLOCK_HEAD.unpack_from(payload)
        if BLOCK_HEAD.size + wl + rl + sl != len(payload):
            raise FormatError("a block whose parts do not add up")
        off = BLOCK_HEAD.size
        bits = _unpack_walls(payload[off:off + wl], n) if wl else []
        if len(bits) != n:
            raise FormatError("a block without its wall times")
        return first, n, [_bits_float(b) for b in bits]
    except FormatError:
        raise
    except (zlib.error, ValueError, struct.error, IndexError) as err:
        raise FormatError(f"{type(err).__name__}: {err}") from None


def block_summaries(payload) -> bytes:
    """The derived part of a B frame (b"" when it has none)."""
    first, n, wl, rl, sl = BLOCK_HEAD.unpack_from(payload)
    off = BLOCK_HEAD.size + wl + rl
    return bytes(payload[off:off + sl])


# A block's columns are under a megabyte: a 1 MiB dictionary holds them, so a reader needs
# no more memory than that.  A hash-chain match finder that stops early costs a third of
# preset 6's default for 2 % more bytes (bench: 193 against 185 bytes a sample, 77 against
# 180 us of CPU; preset 1 is 203 bytes for 48 us).
_LZMA_ENCODE = {"id": lzma.FILTER_LZMA2, "dict_size": 1 << 20, "mf": lzma.MF_HC3,
                "nice_len": 8, "depth": 4}
_LZMA_FILTERS = [{"id": lzma.FILTER_LZMA2, "dict_size": 1 << 20}]


@dataclasses.dataclass
class Block:
    first: int
    layouts: list[tuple]           # the layouts of its rows (column keys)
    maps: list[list[int]]          # per layout: the block column of each of its keys
    row_layouts: list[int]
    rows: list[tuple]              # one tuple per sample over the block's columns
    state: dict[int, list]         # processes' counters before the first row

    def values(self, j: int) -> tuple[tuple, list]:
        """(layout, values) of the block's row j."""
        lid = self.row_layouts[j]
        row = self.rows[j]
        return self.layouts[lid], [row[c] for c in self.maps[lid]]


def decode_block(payload) -> Block:
    """The columns of a B frame, rows not yet made into Samples.  Raises FormatError."""
    try:
        first, n, wl, rl, sl = BLOCK_HEAD.unpack_from(payload)
        off = BLOCK_HEAD.size
        wall_bits = _unpack_walls(payload[off:off + wl], n) if wl else None
        body = lzma.decompress(bytes(payload[off + wl:off + wl + rl]), format=lzma.FORMAT_RAW,
                               filters=_LZMA_FILTERS)
        hlen, dlen = _BODY_HEAD.unpack_from(body)
        off = _BODY_HEAD.size
        h = json.loads(body[off:off + hlen])
        data = memoryview(body)[off + hlen:off + hlen + dlen]
        keys = h["keys"]
        descs = h["cols"]
        # the packed columns are stored by width, in column order within a width
        sizes = {}
        for d in descs:
            if d[1] == "i" and d[3]:
                sizes.setdefault(d[3], []).append(d)
        offsets = {}
        pos = 0
        for w in sorted(sizes):
            for d in sizes[w]:
                offsets[id(d)] = pos
                nvals = _present_count(d[0], n) - len(d[4])
                pos += nvals * w
        cols = []
        for d in descs:
            present, kind = d[0], d[1]
            if kind == "w":
                if wall_bits is None or len(wall_bits) != n:
                    raise FormatError("a block without its wall times")
                cols.append(wall_bits)
                continue
            m = _present_count(present, n)
            if kind == "i":
                _, _, mode, w, heads, lo = d
                cnt = m - len(heads)
                if w:
                    code = dict(_WIDTHS)[w]
                    start = offsets[id(d)]
                    seq = array(code)
                    seq.frombytes(_unshuffle(data[start:start + cnt * w], w, cnt))
                    if lo:
                        seq = map(operator.add, seq, itertools.repeat(lo, cnt))
                else:
                    seq = [lo] * cnt
                vals = _decode_ints(mode, heads, seq, m)
            else:
                vals = _expand(d[2])
            if present is not None:
                full = []
                it = iter(vals)
                for flag, count in present:
                    full += [next(it) for _ in range(count)] if flag else [ABSENT] * count
                vals = full
            if len(vals) != n:
                raise FormatError("a column of the wrong length")
            cols.append(vals)
        layouts = [tuple(keys[c] for c in m) for m in h["layouts"]]
        row_layouts = _expand(h["rows"])
        rows = list(zip(*cols)) if cols else [()] * n
        state = {pid: c for pid, c in h["state"]}
        if len(row_layouts) != n:
            raise FormatError("rows and layouts do not match")
        return Block(first, layouts, h["layouts"], row_layouts, rows, state)
    except FormatError:
        raise
    except (lzma.LZMAError, ValueError, TypeError, KeyError, IndexError, struct.error,
            StopIteration) as err:
        raise FormatError(f"{type(err).__name__}: {err}") from None


def _present_count(present, n: int) -> int:
    if present is None:
        return n
    return sum(count for flag, count in present if flag)


def block_samples(payload, recorded: dict | None = None):
    """(first, [Sample, ...], end state) of a B frame."""
    blk = decode_block(payload)
    un = Unflattener(blk.state, recorded)
    out = [un.sample(*blk.values(j)) for j in range(len(blk.rows))]
    return blk.first, out, un.counters
