"""`--once`: one interval as an iostat-like text report or one JSON object.

The JSON layout is an API (README, "JSON output"): add keys, never rename or remove them.
"""

from __future__ import annotations

import json
import os

from gpudisk_top import __version__
from gpudisk_top.collect.blockdev import device_stack
from gpudisk_top.collect.host import PSI_RESOURCES
from gpudisk_top.collect.sample import MAPPED_BY_DEVICE_FILE
from gpudisk_top.collect.source import LIVE, Source, live_source
from gpudisk_top.verdict.detect import UNAVAILABLE
from gpudisk_top.verdict.detect.states import gpu_ranges
from gpudisk_top.verdict.ledger import NO_PRICE, Ledger, Price, ledger_of
from gpudisk_top.model.loaders import IO_MEASURED
from gpudisk_top.model.present import size
from gpudisk_top.verdict.whatif import text_lines as whatif_lines
from gpudisk_top.textsafe import printable_lines
from gpudisk_top.model.cgjob_words import cgroup_line
from gpudisk_top.model.gpu import gpu_as_json
from gpudisk_top.model.gpu_words import sampled as with_age, throttle_line
from gpudisk_top.model.health import health_of
from gpudisk_top.model.host import host_as_json
from gpudisk_top.model.select import DeviceFilter
from gpudisk_top.model.snapshot import Model
from gpudisk_top.model.present import Col, class_tag, metric_col, natural_key, table
from gpudisk_top.model.vocab import (AVG_CPU, DISK, GPU, GPU_PROCESS, GPU_PROCESS_IO, HEALTH,
                                     HOST, MOUNT, iso_time, job_json, verdict_json)


def selected_disks(model: Model, dev_filter: DeviceFilter) -> list[str]:
    names = [n for n in model.disks
             if n in model.devices and dev_filter.selected(model.devices[n], model.sample.disks.get(n))]
    return sorted(names, key=natural_key)


def shown_disks(model: Model, dev_filter: DeviceFilter) -> list[str]:
    """selected_disks() and the selected devices whose rates the model dropped this
    interval (model.disk_dropped): those are shown too, as n/a with the reason."""
    dropped = [n for n in model.disk_dropped if n in model.devices
               and dev_filter.selected(model.devices[n], model.sample.disks.get(n))]
    return sorted(selected_disks(model, dev_filter) + dropped, key=natural_key)


def disk_json(model: Model, name: str) -> dict:
    info = model.devices[name]
    out = {"name": name, "display_name": info.display_name, "kind": info.kind}
    rates = model.disks.get(name)
    # a device whose interval was impossible: every rate null, and why (never 0)
    out.update({m.json_key: None if rates is None else getattr(rates, m.field) for m in DISK})
    out["dropped"] = model.disk_dropped.get(name)
    out.update({
        "mountpoints": list(info.mountpoints),
        "rotational": info.rotational,
        "class": info.dev_class,
        "parent": info.parent,
        "slaves": list(info.slaves),
    })
    # the health of the disk it lives on (a partition's disk, a dm device's worst member)
    view = health_of(model.health, model.devices, name)
    out["health"] = None if view is None else {"device": view.device, "status": view.status,
                                               "reasons": list(view.reasons)}
    return out


def health_disks(model: Model, dev_filter: DeviceFilter) -> list[str]:
    """The physical disks whose health reading is shown, by name: every one read, or with
    -d (patterns) those under the devices it names (a partition's disk, a dm device's
    members), as the disk table shows only those."""
    names = set(model.health)
    if dev_filter.patterns:
        named = [n for n, info in model.devices.items() if dev_filter.matches_name(info)]
        names &= {d for n in named for d in device_stack(model.devices, n)}
    return sorted(names, key=natural_key)


def health_json(model: Model, dev_filter: DeviceFilter) -> list[dict]:
    """Each shown physical disk's latest health reading (model/health.py
    HealthView.as_json), by name; [] when health was not read."""
    return [model.health[d].as_json() for d in health_disks(model, dev_filter)]


def mount_json(view) -> dict:
    """A network or FUSE mount the job reads (model/mounts.py MountView)."""
    out = {"mountpoint": view.mountpoint, "fstype": view.fstype, "source": view.source,
           "kind": view.kind, "daemon_pid": view.daemon_pid}
    out.update({m.json_key: getattr(view, m.field) for m in MOUNT})
    return out


def gpus_json(model: Model) -> list[dict]:
    gpus = []
    for view in model.gpus:
        g = gpu_as_json(view)
        for proc in g.get("processes", []):
            io = model.gpu_proc_io.get(proc["pid"]) or {}
            proc.update({m.json_key: io.get(m.field) for m in GPU_PROCESS_IO})
            proc["devices"] = sorted(io.get("devices") or ())
            loaders = io.get("loaders")
            proc["loaders"] = loaders.as_json() if loaders is not None else None
        gpus.append(g)
    return gpus


def job_ledgers(model: Model, verdict, ledgers: dict | None = None) -> list[tuple]:
    """(job verdict, its Ledger) for every job of the node's verdict: the ledgers given
    by job id (a history's), else each job's interval against 100%."""
    if verdict is None:
        return []
    ledgers = ledgers or {}
    return [(jv, ledgers.get(jv.job.id) or ledger_of(model, jv)) for jv in verdict.jobs]


def to_json(model: Model, dev_filter: DeviceFilter, origin: Source | None = None,
            verdict=None, ledger: Ledger | None = None, price: Price = NO_PRICE,
            ledgers: dict | None = None) -> dict:
    """origin: where the numbers come from (default: this machine).  ledger: the GPU time
    lost (verdict/ledger.py; default: this interval's, against 100%); ledgers: each job's,
    by job id (default: this interval's)."""
    origin = origin or live_source()
    if ledger is None and verdict is not None:
        ledger = ledger_of(model, verdict)
    disks = shown_disks(model, dev_filter)
    return {
        "version": __version__,
        "source": origin.label,
        "time": iso_time(model.wall_s),
        "interval_s": model.interval_s,
        # the processes' cadence while it is slower than the interval (issue 41), else null
        "detail_s": model.detail_s,
        "host_name": origin.host_name,
        "kernel": origin.kernel,
        "gpu_status": model.gpu_status,
        "gpus": gpus_json(model),
        "disks": [disk_json(model, n) for n in disks],
        "mounts": [mount_json(v) for v in model.mounts.values()],
        "health": health_json(model, dev_filter),
        "host": host_as_json(model.host) if model.host is not None else {},
        "verdict": verdict_json(verdict),
        "ledger": ledger.as_json(price) if ledger is not None else None,
        "jobs": [job_json(jv, jl.as_json(price)) for jv, jl in job_ledgers(model, verdict, ledgers)],
        "warnings": [*model.all_warnings, *_unavailable_warning(verdict),
                     *filter(None, [selection_note(model, dev_filter, disks)])],
    }


def _unavailable_warning(verdict) -> list[str]:
    """No readable GPU is a problem a script must see in `warnings` too."""
    if verdict is None or verdict.state != UNAVAILABLE:
        return []
    return [f"GPUs unavailable: {verdict.reason}"]


def render_json(model: Model, dev_filter: DeviceFilter, origin: Source | None = None,
                verdict=None, ledger: Ledger | None = None, price: Price = NO_PRICE,
                ledgers: dict | None = None) -> str:
    return json.dumps(to_json(model, dev_filter, origin, verdict, ledger, price, ledgers), indent=2,
                      allow_nan=False, default=str)


# ------------------------------------------------------------------------------ text
def _gpu_lines(model: Model, verdict=None) -> list[str]:
    if not model.gpus:
        # the verdict line above already says why (once is enough)
        shown = verdict is not None and verdict.state == UNAVAILABLE
        return ["GPUs: none readable" if shown else f"GPUs: {model.gpu_status}"]
    util, mem, used, total, power, limit, temp, rx, tx = (GPU[f] for f in (
        "util_pct", "mem_util_pct", "mem_used_mib", "mem_total_mib", "power_w",
        "power_limit_w", "temp_c", "pcie_rx_kb_s", "pcie_tx_kb_s"))
    rows: list = []
    for g in model.gpus:
        name = (g.name or "?")[:22]
        if g.lost:
            rows.append(f"{g.index:>3} {name:<22} LOST: {g.error or 'GPU is lost'}")
            continue
        rows.append((str(g.index), name, util.text(g.util_pct), mem.text(g.mem_util_pct),
                     f"{used.text(g.mem_used_mib)}/{total.text(g.mem_total_mib)}",
                     f"{power.text(g.power_w)}/{limit.text(g.power_limit_w)}",
                     temp.text(g.temp_c), f"{rx.text(g.pcie_rx_kb_s)}/{tx.text(g.pcie_tx_kb_s)}",
                     str(len(g.processes)), g.busy_source))
    lines = [f"GPUs: {model.gpu_status}", *table(rows, (
        Col("GPU", 3), Col("name", 22, "<"), Col("util%", 6), Col("mem%", 5),
        Col("mem used/total MiB", 19), Col("power W", 12), Col("temp C", 6),
        Col("PCIe rx/tx KB/s", 17), Col("procs", 5, "<"), Col("busy", 0, "<")))]
    # a GPU whose busy figure fell back, or reads GPM: what utilization.gpu said beside it
    for g in model.gpus:
        if g.lost:
            continue
        if g.busy_note:
            lines.append(f"  GPU {g.index}: {g.busy_note}")
        elif g.sm_active_pct is not None and g.gpu_util_pct is not None:
            lines.append(f"  GPU {g.index}: SM activity {util.text(g.sm_active_pct)}%, "
                         f"utilization.gpu {util.text(g.gpu_util_pct)}%")
        if g.mig_instances:
            lines.append(f"  GPU {g.index}: MIG, SM activity per GPU instance: " + ", ".join(
                f"{m['gpu_instance_id']} ({m['sm_count']} SMs) {util.text(m['sm_active_pct'])}%"
                for m in g.mig_instances))
        throttle = throttle_line(g)
        if throttle:
            lines.append(f"  GPU {g.index}: {throttle}")
    procs = [(g.index, p) for g in model.gpus for p in g.processes]
    if procs:
        lines.append("")
        mib, read, rchar, tree = (GPU_PROCESS["gpu_mem_mib"], GPU_PROCESS_IO["read_kb_s"],
                                  GPU_PROCESS_IO["rchar_kb_s"], GPU_PROCESS_IO["nprocs"])
        sm = GPU_PROCESS["sm_util_pct"]
        # NVML's per-process samples: a column only where one came (a GPU that gives none,
        # a MIG or vGPU one, would fill it with n/a)
        sampled = any(p.sm_util_pct is not None for _, p in procs)
        estimated = False
        rows = []
        for idx, p in procs:
            io = model.gpu_proc_io.get(p.pid) or {}
            lt = io.get("loaders")
            if lt is not None and lt.io_wait_pct is not None:
                mark = "~" if lt.io_source != IO_MEASURED else ""
                estimated |= bool(mark)
                io_pct = f"{mark}{lt.io_wait_pct:.0f}"
            else:
                io_pct = "n/a"
            rows.append((str(idx), p.pid_label(), (p.name or "?")[:16],
                         mib.text(getattr(p, mib.field)),
                         *((with_age(sm.text(p.sm_util_pct), p.util_age_s),) if sampled else ()),
                         read.text(io.get(read.field)),
                         rchar.text(io.get(rchar.field)), str(io.get(tree.field) or 0),
                         _whole(lt and lt.on_cpu_pct), _whole(lt and lt.cpu_wait_pct), io_pct,
                         ",".join(sorted(io.get("devices") or ())) or "-"))
        # %cpu, %wait, %io: the loaders' shares (LoaderTime), explained under the table
        lines += table(rows, (
            Col("GPU", 3), Col("pid", 8), Col("name", 16, "<"), Col(mib.label, 8),
            *((Col(sm.label, 8),) if sampled else ()), Col(read.label, 10), Col(rchar.label, 11),
            Col(tree.label, 5), Col("%cpu", 5), Col("%wait", 5), Col("%io", 6), Col("devices", 0, "<", "  ")))
        if sampled:
            lines.append("  sm%: NVML's last sample of the process (its own sample period, not the "
                         "interval), @ how many seconds old")
        lines.append("  %cpu, %wait, %io: where the time of its loaders (DataLoader workers, else "
                     "itself) went: on a CPU, waiting for one, blocked on reads; mean per loader")
        if estimated:
            lines.append("  ~ estimated from reads x r_await (no delay accounting for these processes, "
                         "or for some of their loaders)")
        if any(not p.mapped for _, p in procs):
            lines.append("  * not visible from this PID namespace: its I/O cannot be read")
        if any(p.mapped_by == MAPPED_BY_DEVICE_FILE for _, p in procs):
            lines.append("  host=local: NVML's host PID = its PID here, found by the GPU device "
                         "file it holds open")
    return lines


def _whole(pct: float | None) -> str:
    return "n/a" if pct is None else f"{pct:.0f}"


def _host_lines(model: Model) -> list[str]:
    h = host_as_json(model.host) if model.host is not None else {}
    # iostat's avg-cpu block: each value right under its header
    lines = table([["", *(m.text(h.get(m.json_key)) for m in AVG_CPU)]],
                  [Col("avg-cpu:", 8, "<"),
                   *(Col(m.label, 7, ">", " " if i else "") for i, m in enumerate(AVG_CPU))])

    def f(key: str) -> str:
        return HOST[key].text(h.get(key))

    psi = [f"{res} some {f(f'psi_{res}_some_pct')}% full {f(f'psi_{res}_full_pct')}%"
           for res in PSI_RESOURCES]
    lines.append("pressure: " + "   ".join(psi))

    def gib(key):
        return size(h.get(key), ("GiB",), 2)

    def mib(key):
        return size(h.get(key), ("MiB",), 1)

    lines.append(f"memory: total {gib('mem_total_kb')}  available {gib('mem_available_kb')}  "
                 f"page cache {gib('cached_kb')}  dirty {mib('dirty_kb')}  writeback {mib('writeback_kb')}")
    if h.get("cgroup_path"):
        whose = f"the job's (pid {h['cgroup_pid']})" if h.get("cgroup_pid") is not None else "ours"
        lines.append(f"cgroup {h['cgroup_path']}, {whose}: io pressure some "
                     f"{f('cgroup_io_some_pct')}% full {f('cgroup_io_full_pct')}%")
        if h.get("cgroup_throttled_pct") is not None or h.get("cgroup_cpu_some_pct") is not None:
            limit = h.get("cgroup_cpu_limit_cpus")
            lines.append(f"  cpu: throttled {f('cgroup_throttled_pct')}% of periods, "
                         f"limit {'none' if limit is None else f'{limit:.1f}'} CPUs, used "
                         f"{f('cgroup_cpu_used_cpus')}, pressure some "
                         f"{f('cgroup_cpu_some_pct')}%")
    return lines


def _disk_lines(model: Model, dev_filter: DeviceFilter) -> list[str]:
    names = shown_disks(model, dev_filter)
    rows = []
    for n in names:
        info, r = model.devices[n], model.disks.get(n)
        where = ",".join(info.mountpoints) or "-"
        if r is None:
            where += f"  (dropped: {model.disk_dropped.get(n, '?')})"
        rows.append((info.display_name, class_tag(info.dev_class),
                     *(m.text(None if r is None else getattr(r, m.field)) for m in DISK), where))
    lines = table(rows, (Col("Device", align="<"), Col("class", 5, "<"),
                         *(metric_col(m) for m in DISK), Col("mountpoints", 0, "<", "  ")))
    note = selection_note(model, dev_filter, names)
    if note is not None:
        lines.append(f"({note})")
    return lines


def selection_note(model: Model, dev_filter: DeviceFilter, names: list[str]) -> str | None:
    """Why no disk is shown (names: those shown), the same in the text and the JSON's
    warnings; None where some are."""
    if names:
        return None
    if dev_filter.patterns and not any(dev_filter.matches_name(i) for i in model.devices.values()):
        return (f"-d {','.join(dev_filter.patterns)} matches no device "
                f"(of {len(model.devices)} here)")
    return "no device selected: none has done I/O, or the filter matched none"


# the health columns --once prints (all of them are in the JSON)
_HEALTH_COLUMNS = tuple(HEALTH[f] for f in (
    "temperature_c", "warning_temp_c", "critical_temp_c", "percentage_used_pct",
    "available_spare_pct", "media_errors", "error_log_entries", "reallocated_sectors",
    "pending_sectors", "power_on_hours"))


def _health_lines(model: Model, dev_filter: DeviceFilter) -> list[str]:
    """Each shown physical disk's health (health_disks): status, the numbers, why; an
    unreadable one says why in one line."""
    names = health_disks(model, dev_filter)
    if not names:
        return []
    width = max(len("Device"), *(len(n) for n in names))
    readable = any(model.health[n].reading.readable for n in names)
    rows: list = []
    for n in names:
        v = model.health[n]
        h = v.reading
        if not h.readable:
            rows.append(f"{n:<{width}} {'n/a':<8} {h.unreadable_reason or 'not readable'}")
            continue
        why = f"{h.source}" + (f": {'; '.join(v.reasons)}" if v.reasons else "")
        if h.unreadable_reason:     # the kernel's view only: why smartctl's is missing
            why += f" (smartctl: {h.unreadable_reason})"
        rows.append((n, v.status, *(m.text(getattr(h, m.field), "-") for m in _HEALTH_COLUMNS),
                     why))
    if not readable:
        return [f"{'Device':<{width}} health", *rows]
    return table(rows, (Col("Device", width, "<"), Col("health", 8, "<"),
                        *(Col(m.label, max(6, len(m.label))) for m in _HEALTH_COLUMNS),
                        Col("source: reasons", 0, "<", "  ")))


def _mount_lines(model: Model) -> list[str]:
    """The network and FUSE mounts the job reads, beside the block devices."""
    if not model.mounts:
        return []
    rows = [(v.mountpoint, v.fstype[:10], *(m.text(getattr(v, m.field)) for m in MOUNT),
             v.source + (f" (daemon pid {v.daemon_pid})" if v.daemon_pid else ""))
            for v in model.mounts.values()]
    return table(rows, (Col("Mount", align="<"), Col("type", 10, "<"),
                        *(Col(m.label, 9) for m in MOUNT), Col("source", 0, "<", "  ")))


def _verdict_lines(verdict) -> list[str]:
    if verdict is None:
        return []
    lines = [f"verdict: {verdict.state}" + (f": {verdict.reason}" if verdict.reason else "")]
    if verdict.advice:
        lines.append(f"advice: {verdict.advice}")
    lines += whatif_lines(verdict.whatif)
    if verdict.raw_state != verdict.state:
        # with a history (--demo-start) the state has hysteresis: an episode not open yet,
        # or not closed yet; say what this interval alone shows
        lines.append(f"this interval alone: {verdict.raw_state}"
                     + (f": {verdict.raw_reason}" if verdict.raw_reason else ""))
    return lines


def _job_lines(model: Model, verdict, price: Price, ledgers: dict | None) -> list[str]:
    """A block a job where the node holds several; a line naming the one job otherwise
    (none where it cannot be told: the node's verdict is the job's); each with its
    cgroup's totals over the interval (model/cgjob_words.py)."""
    pairs = job_ledgers(model, verdict, ledgers)
    if len(pairs) == 1:
        job = pairs[0][0].job
        return [] if job.source == "unknown" else [f"job: {job.name} [{job.id}]",
                                                   cgroup_line(job.cgroup_totals)]
    lines = [f"jobs: {len(pairs)} on this node, the worst above"]
    for jv, jl in pairs:
        job = jv.job
        lines += ["", f"job {job.name} [{job.id}], {gpu_ranges(list(job.gpus))}, "
                      f"pid {', '.join(map(str, job.pids[:4]))}{', ...' if len(job.pids) > 4 else ''}"]
        lines += ["  " + line for line in _verdict_lines(jv)]
        lines.append(f"  GPU time: {jl.line(price)}")
        if job.source != "unknown":
            lines.append("  " + cgroup_line(job.cgroup_totals))
    return lines


def render_text(model: Model, dev_filter: DeviceFilter, origin: Source | None = None,
                verdict=None, ledger: Ledger | None = None, price: Price = NO_PRICE,
                ledgers: dict | None = None) -> str:
    origin = origin or live_source()
    if ledger is None and verdict is not None:
        ledger = ledger_of(model, verdict)
    ncpu = model.host.ncpu if model.host is not None and model.host.ncpu else os.cpu_count()
    head = (f"gpudisk-top {__version__}  {origin.host_name}  Linux {origin.kernel}  "
            f"{iso_time(model.wall_s)}  interval {model.interval_s:.2f} s  ({ncpu} CPU)")
    if origin.kind != LIVE:
        head = f"DEMO ({origin.label}): " + head
    account = [f"GPU time: {ledger.line(price)}"] if ledger is not None else []
    parts = [head, *_verdict_lines(verdict), *account, *_job_lines(model, verdict, price, ledgers),
             "", *_gpu_lines(model, verdict), "",
             *_host_lines(model), "", *_disk_lines(model, dev_filter)]
    mounts = _mount_lines(model)
    if mounts:
        parts += ["", *mounts]
    health = _health_lines(model, dev_filter)
    if health:
        parts += ["", *health]
    warnings = model.all_warnings
    if warnings:
        parts += ["", *(f"warning: {w}" for w in warnings)]
    return printable_lines(parts)
