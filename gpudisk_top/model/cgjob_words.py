"""How a job's cgroup totals over an interval (model/cgjob.py CgJobInterval, on its
model/jobs.py JobInfo.cgroup_totals) are written: the JSON object every JSON surface puts
under a job's "cgroup_totals" (model/vocab.py job_json), `--once`'s one line a job, and
the vocabulary of each job's Prometheus series of them (JOB_CGROUP, by cgroup_figures:
exporter/jobseries.py), whose figures are the JSON's.

A figure the interval cannot give is null in JSON and "n/a" in text, never 0: the whole
object where the job has no cgroup interval (cgroup v1, no cgroup of its own, the first
interval, a replay); a device's rates where the cgroup has no io.stat (the io controller
off in the v2 tree, or v1's as on a hybrid host); a PSI resource the kernel does not
count; the page cache without memory.stat.  Names are the machine's text: the caller
escapes them (output/once.py printable_lines).
"""

from __future__ import annotations

from gpudisk_top.model.cgjob import CgJobInterval
from gpudisk_top.model.metric import Family, Metric
from gpudisk_top.model.present import pct
from gpudisk_top.model.vocab import mb_s, psi_metric

PSI_NAMES = (("cpu", "cpu"), ("io", "io"), ("memory", "mem"))
READ_DEVICES_SAID = 3       # the line names the devices it reads most, this many


# A job's cgroup interval as Prometheus series (exporter/jobseries.py, labelled as the
# job's other series), the figures cgroup_figures() takes from it: a shared node's jobs
# apart, where the host's cgroup_* figures are the first job's alone
JOB_CGROUP = Family("job_cgroup", (
    Metric("cpu_used_cpus", "CPUs", "CPUs used",
           "CPUs the job's cgroup used over the interval (cpu.stat usage_usec).",
           prom="job_cgroup_cpu_used_cpus", csv=False, alert=False),
    Metric("throttled_pct", "%", "throttled%",
           "Share of the CFS periods in which the job's cgroup ran out of its CPU quota and "
           "was held off the CPUs (cpu.stat nr_throttled / nr_periods); none without a "
           "limit.", prom="job_cgroup_throttled_ratio", csv=False, alert=False),
    *(psi_metric(resource, kind, "job_cgroup", of=" of the job's cgroup",
                 source=f"{resource}.pressure", csv=False, alert=False)
      for resource, _ in PSI_NAMES for kind in ("some", "full")),
    Metric("read_kb_s", "kB/s", "read",
           "The job's cgroup's reads from block devices, every device (io.stat rbytes); "
           "none without io.stat.", prom="job_cgroup_read_bytes_per_second", csv=False,
           alert=False),
    Metric("write_kb_s", "kB/s", "written",
           "The job's cgroup's writes to block devices, every device (io.stat wbytes); "
           "none without io.stat.", prom="job_cgroup_write_bytes_per_second", csv=False,
           alert=False),
))


def cgroup_figures(iv: CgJobInterval | None) -> dict[str, float | None] | None:
    """JOB_CGROUP's figures of a job's cgroup interval, by field (None: no interval; a
    figure None: n/a, as in its JSON).  Raises nothing."""
    if iv is None:
        return None
    out: dict[str, float | None] = {"cpu_used_cpus": iv.cpu_pct / 100.0,
                                    "throttled_pct": iv.throttled_periods_pct}
    for resource, _ in PSI_NAMES:
        out[f"psi_{resource}_some_pct"], out[f"psi_{resource}_full_pct"] = _psi(iv, resource)
    out["read_kb_s"] = iv.read_kb_s if iv.io_read else None
    out["write_kb_s"] = iv.write_kb_s if iv.io_read else None
    return out


def _psi(iv: CgJobInterval, resource: str) -> tuple[float | None, float | None]:
    """(some, full) % of the resource's pressure over the interval; (None, None) where the
    kernel does not count it for the cgroup."""
    return iv.psi_pct.get(resource, (None, None))


def _r(value: float | None, places: int = 2) -> float | None:
    return None if value is None else round(value, places)


def cgroup_totals_json(iv: CgJobInterval | None) -> dict | None:
    """A job's cgroup interval as JSON (None: n/a): path, interval_s, cpu_pct (of one
    CPU), user_pct, system_pct, throttled_pct (the share of its cpu.max periods it was
    throttled in), throttled_ms_s, psi_some_pct and psi_full_pct ({cpu, io, memory}),
    io ({device: {r_kb_s, w_kb_s, r_s, w_s}}; null without io.stat), file_dirty_kb,
    file_writeback_kb.  Raises nothing."""
    if iv is None:
        return None
    some = {r: _r(_psi(iv, r)[0]) for r, _ in PSI_NAMES}
    full = {r: _r(_psi(iv, r)[1]) for r, _ in PSI_NAMES}
    io = ({name: {"r_kb_s": _r(d.read_kb_s, 1), "w_kb_s": _r(d.write_kb_s, 1),
                  "r_s": _r(d.r_s), "w_s": _r(d.w_s)} for name, d in sorted(iv.io.items())}
          if iv.io_read else None)
    return {"path": iv.path, "interval_s": _r(iv.elapsed_s, 3),
            "cpu_pct": _r(iv.cpu_pct), "user_pct": _r(iv.user_pct),
            "system_pct": _r(iv.system_pct), "throttled_pct": _r(iv.throttled_periods_pct),
            "throttled_ms_s": _r(iv.throttled_ms_s),
            "psi_some_pct": some, "psi_full_pct": full, "io": io,
            "file_dirty_kb": iv.memory_kb.get("file_dirty"),
            "file_writeback_kb": iv.memory_kb.get("file_writeback")}


def cgroup_line(iv: CgJobInterval | None) -> str:
    """'cgroup: cpu 212%, throttled 0%, PSI cpu 3% io 0% mem 0%, read sdb 120.0 MB/s':
    a job's cgroup interval in one line ('cgroup: n/a' without one).  Raises nothing."""
    if iv is None:
        return "cgroup: n/a"
    psi = " ".join(f"{word} {pct(_psi(iv, r)[0])}" for r, word in PSI_NAMES)
    if not iv.io_read:
        read = "read n/a"
    else:
        reading = sorted(((d.read_kb_s, name) for name, d in iv.io.items() if d.read_kb_s > 0),
                         reverse=True)
        read = "read " + (", ".join(f"{name} {mb_s(kb_s):.1f} MB/s"
                                    for kb_s, name in reading[:READ_DEVICES_SAID])
                          or "0.0 MB/s")
    return (f"cgroup: cpu {pct(iv.cpu_pct)}, throttled {pct(iv.throttled_periods_pct)}, "
            f"PSI {psi}, {read}")
