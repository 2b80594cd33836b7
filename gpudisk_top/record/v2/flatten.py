"""Format version 2, flattening: a Sample into a layout and values, and back.

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

This package stays as it is once a version 3 exists: a reader for every version is kept.
"""

from __future__ import annotations

import operator

from gpudisk_top.collect.sample import HealthSnapshot, Sample, is_new
from gpudisk_top.record.v2.fields import (CPU_FIELDS, DEVICE_FIELDS, DISK_FIELDS, GPU_FLOATS,
                                          GPU_INTS, GPU_PROCESS_FIELDS, GPU_STATIC, IO_FIELDS,
                                          PROC_ACCT, SHARE_SCALE, EXACT, PROC_STATIC,
                                          MOUNT_STATIC, INTERVAL_KEY, PROCS_AGE_KEY, float_bits,
                                          health_record,
                                          util_window, window_parts)


_device_rec = operator.attrgetter(*DEVICE_FIELDS)
_gpu_static = operator.attrgetter(*GPU_STATIC)
_gpu_ints = operator.attrgetter(*GPU_INTS)
_gpu_floats = operator.attrgetter(*GPU_FLOATS)
_gpu_proc = operator.attrgetter(*GPU_PROCESS_FIELDS)
_cpu = operator.attrgetter(*CPU_FIELDS)
_proc_static = operator.attrgetter(*PROC_STATIC)
_mount_static = operator.attrgetter(*MOUNT_STATIC)
_io = operator.attrgetter(*IO_FIELDS)
_NO_CPU = (None,) * len(CPU_FIELDS)


def _int_or_none(value: int | None) -> int:
    return -1 if value is None else value


def _health_values(snap: HealthSnapshot) -> tuple[list, tuple]:
    """A health snapshot's values ("Hp", "H/DEV"..., "Hf/DEV"...) and its layout's part."""
    vals = [[snap.polls, snap.polled_wall_s]]
    vals += map(health_record, snap.readings.values())
    vals += map(health_record, snap.first.values())
    return vals, (tuple(snap.readings), tuple(snap.first))

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
        self._health_src: HealthSnapshot | None = None
        self._health_vals: list = []
        self._health_keys: tuple | None = None

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
        cg = h.cgroup
        if cg is not None:
            for dev, stat in cg.io_stat.items():
                keys += [f"h/cgio/{dev}/{k}" for k in stat]
            keys += ["h/cgp/some", "h/cgp/full"]
            keys += ["h/cgpid", "h/cgmax", "h/cgcp/some", "h/cgcp/full"]
            keys += [f"h/cgcpu/{k}" for k in cg.cpu_stat]
            keys += [f"h/cgmem/{k}" for k in cg.memory_stat]
        for pid in s.procs:
            keys += ([f"p/{pid}/st", f"p/{pid}/cpu"] + [f"p/{pid}/{k}" for k, _ in PROC_ACCT]
                     + [f"p/{pid}/{f}" for f in IO_FIELDS])
        for t in tree_keys:
            keys += [f"T/{t}/{f}" for f in IO_FIELDS]
        for i, m in enumerate(s.mounts.values()):
            keys += [f"m/{i}"] + [f"m/{i}/{k}" for k in m.counters]
        if s.health is not None:
            readings, first = self._health_keys
            keys += ["Hp"] + [f"H/{d}" for d in readings] + [f"Hf/{d}" for d in first]
        if s.interval_s is not None:
            keys.append(INTERVAL_KEY)
        if s.procs_age_s is not None:
            keys.append(PROCS_AGE_KEY)
        keys.append("px")
        return tuple(keys)

    def flatten(self, s: Sample) -> tuple[tuple[str, ...], list]:
        """(layout, values) of s against the previous accepted sample.  Records (device
        identity, GPU identity, process identity) are tuples, written as JSON lists."""
        prev = self.prev
        vals: list = [float_bits(s.mono_s), float_bits(s.wall_s), s.gpu.status,
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
            vals += _gpu_floats(g)
            vals += window_parts(util_window(g.util_samples, window))
            vals += window_parts(util_window(g.mem_util_samples, window))
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
            # integers, -1 for None, so that rows stay integer (coded as differences)
            press = cg.cpu_pressure
            vals += (_int_or_none(cg.pid), cg.cpu_max,
                     -1 if press is None else press.some_us,
                     -1 if press is None or press.full_us is None else press.full_us)
            vals += cg.cpu_stat.values()
            vals += cg.memory_stat.values()
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
                     ord(state[0]) if state else -1,
                     p.mounts.index(p.blocked_on) + 1 if p.blocked_on in p.mounts else 0,
                     _int_or_none(p.sys_ticks))
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
        for m in s.mounts.values():
            vals.append(_mount_static(m))
            vals += m.counters.values()
        health = s.health
        if health is not None:
            # records are made again only for a new snapshot (collect.sample.is_new: the
            # poller's next one, not a copy of this one), so rows and blocks see the same
            # objects until the next reading
            if is_new(health, self._health_src):
                self._health_vals, self._health_keys = _health_values(health)
            self._health_src = health
            vals += self._health_vals
        if s.interval_s is not None:
            vals.append(round(s.interval_s * 1000))
        if s.procs_age_s is not None:
            vals.append(round(s.procs_age_s * 1000))
        vals.append(exact)
        sig = (tuple(s.disks), tuple(devices), len(s.gpu.gpus), tuple(s.procs), tuple(roots),
               tuple(h.psi), tuple(h.meminfo_kb),
               tuple((mp, tuple(m.counters)) for mp, m in s.mounts.items()),
               None if health is None else self._health_keys, s.interval_s is None,
               s.procs_age_s is None,
               None if cg is None else (tuple((d, tuple(v)) for d, v in cg.io_stat.items()),
                                        tuple(cg.cpu_stat), tuple(cg.memory_stat)))
        if sig != self._sig:
            self._layout = self._make_layout(s, [str(k) if k >= 0 else f"s{-1 - k}" for k in trees])
            self._sig = sig
        return self._layout, vals

    def accept(self, s: Sample) -> None:
        self.prev = s
