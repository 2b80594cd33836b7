"""Format version 2, unflattening: a layout and its values back into a Sample.

A reader builds a plan per layout (where each part of a Sample is in its values) once,
then makes Samples from rows in order: the processes' I/O counters are rebuilt from each
tree's increase and its members' shares (flatten.py's docstring says what is kept)."""

from __future__ import annotations

import dataclasses
import json
import operator
from collections.abc import Callable

from gpudisk_top.collect.diskstats import DiskCounters
from gpudisk_top.collect.jobid import tag_from_record
from gpudisk_top.collect.sample import (CgroupIo, CpuTimes, DeviceInfo, DiskHealth,
                                        GpuProcessRaw, GpuRaw, GpuSnapshot, HealthSnapshot,
                                        HostRaw, MountRaw, ProcIoRaw, PsiTotals, Sample)
from gpudisk_top.record.v2.fields import (CPU_FIELDS, DEVICE_FIELDS, DISK_FIELDS, GPU_FLOATS,
                                          GPU_INTS, HEALTH_FIELDS, INTERVAL_KEY, IO_FIELDS,
                                          PROCS_AGE_KEY,
                                          PROC_ACCT, PROC_STATIC, EXACT,
                                          FormatError, bits_float, field_names, getter,
                                          health_reading, schema, window_of)
from gpudisk_top.record.v2.flatten import Flattener


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
    cgx: dict              # the job's cgroup: "pid", "max", "cp/some", "cp/full" -> index
    cgcpu: list            # (cpu.stat key, index)
    cgmem: list            # (memory.stat key, index)
    procs: list            # (pid, st index, cpu index, first io index, tree key)
    acct: dict             # pid -> index per PROC_ACCT column (None: not recorded)
    trees: dict            # tree key -> first index of its 4 totals
    tree_index: dict       # root PID (or ~pid of a process without one) -> its 4 totals
    px: int | None
    mounts: list           # (identity index, [(counter key, index)]), in the sample's order
    health: tuple | None   # ("Hp" index, [(device, "H/DEV" index)], [(device, "Hf/DEV" index)])
    interval: int | None   # INTERVAL_KEY's index
    procs_age: int | None  # PROCS_AGE_KEY's index
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
    cgcpu, cgmem = [], []
    trees: dict[str, list] = {}
    mounts: dict[int, list] = {}
    devices, mem = [], []
    readings, first = [], []
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
            elif parts[1] == "cgcpu" and len(parts) == 3:
                cgcpu.append((parts[2], i))
            elif parts[1] == "cgmem" and len(parts) == 3:
                cgmem.append((parts[2], i))
        elif head == "p" and len(parts) == 3:
            procs.setdefault(int(parts[1]), {})[parts[2]] = i
        elif head == "m" and len(parts) >= 2:
            m = mounts.setdefault(int(parts[1]), [None, []])
            if len(parts) == 2:
                m[0] = i
            else:
                m[1].append(("/".join(parts[2:]), i))
        elif head == "H" and len(parts) == 2:
            readings.append((parts[1], i))
        elif head == "Hf" and len(parts) == 2:
            first.append((parts[1], i))
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
        cgx={k: pos.get(f"h/cg{k}") for k in ("pid", "max", "cp/some", "cp/full")},
        cgcpu=cgcpu, cgmem=cgmem,
        procs=proc_list,
        acct=acct,
        trees={k: v for k, v in trees.items()},
        tree_index={(~int(k[1:]) if k.startswith("s") else int(k)): v for k, v in trees.items()},
        px=pos.get("px"),
        mounts=[tuple(mounts[i]) for i in sorted(mounts) if mounts[i][0] is not None],
        health=(pos["Hp"], readings, first) if "Hp" in pos else None,
        interval=pos.get(INTERVAL_KEY), procs_age=pos.get(PROCS_AGE_KEY),
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
_GPU_SET = frozenset(field_names(GpuRaw))


def _record(cls, recorded: list[str]):
    """A function building cls from a positional record written with field names
    `recorded` (by position when they are this code's, else by name)."""
    own = list(field_names(cls))
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

    def __init__(self, counters: dict | None = None, recorded: dict | None = None,
                 warn: Callable[[str], None] | None = None) -> None:
        """warn: told once, in a line, of what was left out (health records that cannot
        be read); by default the lines are kept in `warnings`."""
        self.warnings: list[str] = []
        self._warn = warn or self.warnings.append
        self._health_warned = False
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
        self._mount_static = list(sch.get("mount_static", ()))
        self._health_names = list(sch.get("health", HEALTH_FIELDS))
        self._health_last: tuple = ((), None)   # (the records it came from, HealthSnapshot)
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
            st_get = plan.st_getter = getter([st_i for _, st_i, _, _ in plan.procs])
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
                per_k.append((tree[k], None if None in idx else getter(idx)))
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
                disks.append((name, getter(idx), None, None))
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
        ppid, root, name, cmd, dev, cgroup, mounts, direct, data_kb, job = [
            st[i] if i is not None and i < len(st) else None for i in idx]
        tag = tag_from_record(job) if job is not None else None
        return (ppid, root, name, cmd, tuple(dev) if isinstance(dev, list) else dev, cgroup,
                tuple(mounts or ()), direct, data_kb, tag.as_record() if tag else None)

    def _health_reading(self, rec) -> DiskHealth:
        if not isinstance(rec, list):
            raise FormatError(f"a health record that is a {type(rec).__name__}")
        return health_reading(zip(self._health_names, rec))

    def _health(self, plan: _Plan, vals) -> HealthSnapshot | None:
        """The sample's HealthSnapshot: the same object while its records are (they repeat,
        as one object, until the poller's next reading), so that model.health.health_views
        keeps its views by identity as it does live."""
        if plan.health is None:
            return None
        hp, readings, first = plan.health
        recs = (vals[hp],) + tuple(vals[i] for _, i in readings) + tuple(vals[i] for _, i in first)
        last, snap = self._health_last
        if len(last) == len(recs) and all(map(operator.is_, last, recs)):
            return snap
        cached = self._cached
        try:
            polls, polled = (list(vals[hp]) + [0, None])[:2]
            if not isinstance(polls, int) or not (polled is None or isinstance(polled, (int, float))):
                raise FormatError(f"a health poll record {vals[hp]!r:.40}")
            now = {d: (vals[i], cached(vals[i], self._health_reading)) for d, i in readings}
            firsts = {}
            for d, i in first:
                rec = vals[i]
                got = now.get(d)
                # live, the first reading is the latest one (one object) until the next
                # poll; equal records are that one reading (its read time tells polls
                # apart), so model.health sees no trend from a reading to itself, as live
                firsts[d] = (got[1] if got is not None and got[0] == rec
                             else cached(rec, self._health_reading))
        except (TypeError, ValueError) as err:
            # health is slow, optional data: the sample keeps everything else it holds
            self._health_last = (recs, None)
            if not self._health_warned:
                self._health_warned = True
                self._warn(f"health records that cannot be read ({err}): those samples "
                           "are read without device health")
            return None
        snap = HealthSnapshot(readings={d: h for d, (_, h) in now.items()}, first=firsts,
                              polled_wall_s=polled, polls=polls)
        self._health_last = (recs, snap)
        return snap

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
            kw["util_samples"] = window_of(_get(vals, u_s), _get(vals, u_n))
            kw["mem_util_samples"] = window_of(_get(vals, m_s), _get(vals, m_n))
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
            x = {k: _get(vals, i) for k, i in plan.cgx.items()}
            pid, cp_some, cp_full = (None if v is None or v < 0 else v
                                     for v in (x["pid"], x["cp/some"], x["cp/full"]))
            cgroup = CgroupIo(path=cg_path,
                              io_stat={dev: {k: vals[i] for k, i in items} for dev, items in plan.cgio},
                              io_pressure=None if some is None else PsiTotals(some, _get(vals, full_i)),
                              pid=pid, cpu_max=x["max"],
                              cpu_pressure=None if cp_some is None else PsiTotals(cp_some, cp_full),
                              cpu_stat={k: vals[i] for k, i in plan.cgcpu},
                              memory_stat={k: vals[i] for k, i in plan.cgmem})
        host = HostRaw(cpu=cpu, ncpu=_get(vals, plan.ncpu, 1),
                       psi={r: PsiTotals(vals[a], _get(vals, b)) for r, a, b in plan.psi},
                       meminfo_kb={k: vals[i] for k, i in plan.mem}, cgroup=cgroup)
        procs = {}
        identity = self._proc_identity
        for pid, st_i, cpu_i, _io in plan.procs:
            ppid, root, name, cmd, dev, cgroup, mounts, direct, data_kb, job = cached(
                vals[st_i], identity)
            c = counters[pid]
            rd, bio, sr, st, bo, sy = [None if i is None or vals[i] is None or vals[i] < 0 else vals[i]
                                   for i in plan.acct[pid]]
            procs[pid] = ProcIoRaw(pid, ppid, root, name, cmd, c[0], c[1], c[2], c[3],
                                   vals[cpu_i] if cpu_i is not None else None, dev,
                                   state=chr(st) if st else None, run_delay_ns=rd,
                                   blkio_ticks=bio, syscr=sr, cgroup=cgroup, mounts=mounts,
                                   blocked_on=mounts[bo - 1] if bo and bo <= len(mounts) else None,
                                   direct_reads=direct, data_kb=data_kb, sys_ticks=sy,
                                   job=job)
        return Sample(mono_s=bits_float(vals[plan.mono]), wall_s=bits_float(vals[plan.wall]),
                      disks=disks, devices=devices,
                      gpu=GpuSnapshot(status=_get(vals, plan.status, "unavailable: not sampled"),
                                      driver_version=_get(vals, plan.driver), gpus=gpus),
                      host=host, procs=procs, mounts=self._mounts(plan, vals),
                      warnings=list(_get(vals, plan.warnings) or ()),
                      health=self._health(plan, vals),
                      interval_s=None if plan.interval is None else vals[plan.interval] / 1000,
                      procs_age_s=_age_s(vals, plan.procs_age))

    def _mounts(self, plan: _Plan, vals) -> dict[str, MountRaw]:
        out = {}
        for ident, counters in plan.mounts:
            rec = dict(zip(self._mount_static, vals[ident]))
            mp = rec.get("mountpoint")
            if mp is None:
                continue
            out[mp] = MountRaw(mp, rec.get("fstype", "?"), rec.get("source", "?"),
                               rec.get("kind", "other"), rec.get("daemon_pid"),
                               {k: vals[i] for k, i in counters if vals[i] is not None})
        return out


def _age_s(vals, i: int | None) -> float | None:
    """PROCS_AGE_KEY's value in seconds; a value that is not a count of ms is not an age
    (a damaged file): None, the processes taken as read in that sample."""
    if i is None:
        return None
    ms = vals[i]
    return ms / 1000 if type(ms) is int and ms >= 0 else None


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


