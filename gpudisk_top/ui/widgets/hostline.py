"""Host: CPU user/system/iowait, pressure (PSI) for io, cpu and memory, page cache, Dirty;
and the job in view's own cgroup over the interval (issue 41: its CPUs, throttling, PSI
and reads, in --once's words, model/cgjob_words.py cgroup_line), where it has one."""

from __future__ import annotations

from gpudisk_top.model.cgjob_words import cgroup_line
from gpudisk_top.model.metric import GIB, KIB
from gpudisk_top.model.present import pct, size
from gpudisk_top.ui import theme
from gpudisk_top.ui.widgets.base import LinesPanel, cut


def _psi(some, full) -> str:
    if some is None:
        return "n/a"
    return f"{some:.0f}/{pct(full)}" if full is not None else pct(some)


def _size_kb(kb) -> str:
    """'1.2G' from a GiB, whole MiB below ('512M'): a narrow line's sizes."""
    whole_mib = kb is not None and kb < GIB // KIB
    return size(kb, ("GiB", "MiB"), 0 if whole_mib else 1, short=True)


class HostLine(LinesPanel):
    DEFAULT_CSS = "HostLine { height: auto; }"

    def show(self, update, job=None) -> None:
        """job: (number, JobInfo) of the job in view (the one followed, or the node's one
        named job), or None; its cgroup's line is drawn where it has a cgroup interval."""
        if self.unchanged(update, job):
            return
        h = update.model.host
        cg = _job_line(job, self.size.width or 80)
        if h is None:
            self.set_lines([[(" host: n/a", theme.DIM)]] + cg)
            return
        psi_io = h.psi_io_some_pct
        io_style = theme.BAD if psi_io is not None and psi_io >= 20 else theme.PLAIN
        line = [(" CPU ", theme.LABEL),
                (f"usr {pct(h.cpu_user_pct)} sys {pct(h.cpu_system_pct)} "
                 f"iow {pct(h.cpu_iowait_pct)} idle {pct(h.cpu_idle_pct)}", theme.PLAIN),
                ("  PSI ", theme.LABEL), ("io ", theme.PLAIN),
                (_psi(h.psi_io_some_pct, h.psi_io_full_pct), io_style),
                (f" cpu {_psi(h.psi_cpu_some_pct, h.psi_cpu_full_pct)}"
                 f" mem {_psi(h.psi_memory_some_pct, h.psi_memory_full_pct)}", theme.PLAIN),
                ("  MEM ", theme.LABEL),
                (f"cache {_size_kb(h.cached_kb)} dirty {_size_kb(h.dirty_kb)} "
                 f"wb {_size_kb(h.writeback_kb)}", theme.PLAIN)]
        if h.cgroup_path:
            line.append((f"  cgroup io {_psi(h.cgroup_io_some_pct, h.cgroup_io_full_pct)}", theme.DIM))
        if sum(len(t) for t, _ in line) <= (self.size.width or 80):
            lines = [line]
        else:  # narrow: memory on a line of its own, its label kept
            lines = [line[:6], [(" MEM ", theme.LABEL)] + line[7:]]
        if update.free_space:  # the config file's watched paths ([watch], free_space rules)
            from gpudisk_top.watch.freespace import format_free_space
            lines.append([(" FREE ", theme.LABEL),
                          ("   ".join(format_free_space(fs) for fs in update.free_space), theme.PLAIN)])
        self.set_lines(lines + cg)


def _job_line(job, width: int) -> list:
    """The job's cgroup line ([] without a job or its cgroup interval), cut to width: a
    job's reads name its devices last, so a cut drops the least read first."""
    if job is None or job[1].cgroup_totals is None:
        return []
    number, info = job
    label = f" JOB {number} "
    return [[(label, theme.LABEL),
             (cut(cgroup_line(info.cgroup_totals), max(1, width - len(label))), theme.PLAIN)]]
