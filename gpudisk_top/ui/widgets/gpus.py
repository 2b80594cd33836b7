"""GPUs: per GPU a utilization bar, its busy figure tagged with its tier ("SM" GPM SM
activity, "util" utilization.gpu; widgets/gpu_busy.py, with a notes line for the marked
ones), memory, power, temperature, PCIe and process count; cells flow into as many
columns as the width allows.  `p` expands the process list, with
each GPU process's read rate (summed over its DataLoader workers); on a short screen the
GPUs then take one line (their cells where one line holds them, else their mean and
lowest), so that the process rows have the room (at 80x24 none showed, issue 38).

On a shared node (several jobs, or one the node can name) the GPUs are grouped by job:
each job's row (widgets/jobrows.py: its number, state, name, GPUs) with its GPUs' cells
under it where the rows fit, else the jobs' rows alone, each with a glyph per GPU."""

from __future__ import annotations

from gpudisk_top.collect.sample import MAPPED_BY_DEVICE_FILE
from gpudisk_top.verdict.detect import UNAVAILABLE
from gpudisk_top.verdict.detect.states import gpu_ranges, mean
from gpudisk_top.model.loaders import IO_MEASURED
from gpudisk_top.ui import theme
from gpudisk_top.ui.format import mib, rate
from gpudisk_top.ui.follow import job_verdicts, shows_jobs
from gpudisk_top.ui.widgets.base import LinesPanel
from gpudisk_top.model.busy_tier import tag
from gpudisk_top.model.gpu_words import sampled as with_age
from gpudisk_top.model.vocab import GPU_PROCESS
from gpudisk_top.ui.widgets.gpu_busy import BUSY_W, busy_cell, notes_line
from gpudisk_top.ui.widgets.gpu_notes import throttle_notes
from gpudisk_top.ui.widgets.jobrows import job_lines, job_rows

# each cell's busy figure carries its tier's tag and a mark (widgets/gpu_busy.py): BUSY_W
CELL_W = 46 + BUSY_W     # full cell: bar, busy, memory, power, temperature, PCIe, processes
COMPACT_W = 26 + BUSY_W  # small terminals: bar, busy, memory used, power, temperature
TINY_W = 22              # smallest: bar, busy, power
BAR_W = 10
JOB_INDENT = 4       # a job's GPU cells, under its row
SHORT_JOB_ROWS = 4   # the rows of jobs where GPU cells get 2 (Screen.short: 5 with the title)
PROC_WIDE_W = 100    # the process rows' width from which rchar/s and procs show
SHORT_PROC_ROWS = 1  # the GPUs' lines on a short screen while the processes show ...
SHORT_PROC_JOBS = 2  # ... and the jobs' lines on a shared node
# what a node without a readable GPU says under it: how to see the tool at work
SM = GPU_PROCESS["sm_util_pct"]   # a process's NVML sample, worded as --once words it
DEMO_HINT = "  no GPU to watch here: gpudisk-top --demo shows a simulated GPU node at work"


class GpuPanel(LinesPanel):
    DEFAULT_CSS = "GpuPanel { height: auto; max-height: 45%; }"
    can_focus = True

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.show_processes = False
        self.max_rows = 4      # GPU rows before cells switch to the compact form
        self.demo_hint = False  # a live node: with no GPU readable, point to --demo

    def show(self, update, followed: str | None = None) -> None:
        """followed: the id of the job `j` follows, whose row is marked."""
        self._input = (update, followed)
        if self.unchanged(update, self.show_processes, self.max_rows, followed, self.demo_hint):
            return
        model = update.model
        width = max(40, self.size.width or 80)
        mark = (">", theme.FOCUS_MARK) if self.has_focus else (" ", theme.PLAIN)
        if not model.gpus:
            # the verdict banner says why when the state is unavailable: once is enough
            v = update.verdict
            why = "none readable" if v is not None and v.state == UNAVAILABLE else model.gpu_status
            lines = [[mark, ("GPUs: ", theme.LABEL), (why, theme.WARN)]]
            if self.demo_hint:
                # the first screen of a node without GPUs: how to see what it would show
                lines.append([(DEMO_HINT, theme.BOLD)])
            self.set_lines(lines)
            return
        names = {g.name for g in model.gpus if g.name}
        jobs = shows_jobs(model.jobs)
        title = [mark, (f"GPUs ({len(model.gpus)})", theme.LABEL)]
        if jobs:
            n = len(model.jobs)
            title.append((f" · {n} job{'' if n == 1 else 's'}", theme.LABEL))
        title.append((f"  {', '.join(sorted(names))}", theme.DIM))
        if jobs:
            title.append(("   j: next, esc: node" if followed else "   j: follow a job",
                          theme.DIM))
        title.append(("   p: processes" if not self.show_processes else "   p: hide processes",
                      theme.DIM))
        lines = [title]
        # on a short screen the process list needs the panel's rows more than the cells
        procs_short = self.show_processes and self.max_rows <= 2
        if jobs:
            lines.extend(self._job_lines(update, followed, width,
                                         SHORT_PROC_JOBS if procs_short else None))
            if self.show_processes:
                lines.extend(self._process_lines(update, width))
            self.set_lines(lines)
            return
        rows = SHORT_PROC_ROWS if procs_short else self.max_rows
        # the widest cell whose rows fit in `rows`, else the narrowest (or, above the
        # processes, the GPUs' summary)
        for cell_w, form in ((CELL_W, self._cell), (COMPACT_W, self._compact), (TINY_W, self._tiny)):
            per_line = max(1, (width + 2) // (cell_w + 2))
            if -(-len(model.gpus) // per_line) <= rows:
                break
        else:
            if procs_short:
                lines.append(self._summary(model.gpus))
                lines.extend(self._process_lines(update, width))
                self.set_lines(lines)
                return
        cells = [form(g) for g in model.gpus]
        for i in range(0, len(cells), per_line):
            row = []
            for cell in cells[i:i + per_line]:
                row.extend(cell)
                row.append(("  ", theme.PLAIN))
            lines.append(row)
        lines.extend(notes_line(model.gpus, width))
        lines.extend(throttle_notes(model.gpus, width))
        if self.show_processes:
            lines.extend(self._process_lines(update, width))
        self.set_lines(lines)

    @staticmethod
    def _summary(gpus) -> list:
        """One line for every GPU: their mean use and the lowest (a straggler shows)."""
        utils = [(g.util_pct, g.index) for g in gpus if g.util_pct is not None]
        text = f"  {gpu_ranges([g.index for g in gpus])}: "
        if not utils:
            return [(text + "use n/a", theme.DIM)]
        low, index = min(utils)
        avg = mean([u for u, _ in utils])
        # the figures' tier, where the GPUs share one (else the cells' notes say it)
        tags = {tag(g.busy_source) for g in gpus if g.util_pct is not None}
        name = tags.pop() if len(tags) == 1 else "busy"
        return [(text, theme.BOLD), (f"mean {name} {avg:.0f}%", theme.level_style(avg)),
                (f", lowest {low:.0f}% (GPU {index})", theme.level_style(low))]

    def _job_lines(self, update, followed: str | None, width: int,
                   budget: int | None = None) -> list:
        """Each job's row with its GPUs' cells under it, in the widest cell that lets
        them fit the panel's rows (or `budget` lines); else the jobs' rows alone (a glyph
        per GPU)."""
        model = update.model
        rows = job_rows(model, job_verdicts(update))
        if budget is None:
            budget = SHORT_JOB_ROWS if self.max_rows <= 2 else self.max_rows
        gpus = {g.index: g for g in model.gpus}
        for cell_w, form in ((CELL_W, self._cell), (COMPACT_W, self._compact), (TINY_W, self._tiny)):
            per_line = max(1, (width - JOB_INDENT + 2) // (cell_w + 2))
            if sum(1 + -(-len(r.gpus) // per_line) for r in rows) > budget:
                continue
            lines = []
            for head, r in zip(job_lines(rows, width, len(rows), followed), rows):
                lines.append(head)
                cells = [form(gpus[i]) for i in r.gpus]
                for i in range(0, len(cells), per_line):
                    row = [(" " * JOB_INDENT, theme.PLAIN)]
                    for cell in cells[i:i + per_line]:
                        row.extend(cell)
                        row.append(("  ", theme.PLAIN))
                    lines.append(row)
            return lines + notes_line(model.gpus, width) + throttle_notes(model.gpus, width)
        return job_lines(rows, width, budget, followed)

    def _cell(self, g) -> list:
        if g.lost:
            return [(f"{g.index:>2} ", theme.BOLD), (f"LOST: {g.error or 'GPU is lost'}"[:CELL_W - 4].ljust(CELL_W - 3), theme.BAD)]
        util = g.util_pct
        style = theme.level_style(util) if g.processes else theme.DIM
        mem = f"{mib(g.mem_used_mib)}/{mib(g.mem_total_mib)}"
        power = "n/a" if g.power_w is None else f"{g.power_w:.0f}W"
        temp = "n/a" if g.temp_c is None else f"{g.temp_c}C"
        pcie = f"↓{rate(g.pcie_rx_kb_s, '')}"
        return [(f"{g.index:>2} ", theme.BOLD), (theme.hbar(util, BAR_W), style),
                (f" {busy_cell(g)} ", style), (f"{mem:>9} {power:>5} {temp:>4} {pcie:>6} ", theme.PLAIN),
                (f"{len(g.processes)}p", theme.DIM)]

    def _compact(self, g) -> list:
        if g.lost:
            return [(f"{g.index:>2} ", theme.BOLD), ("LOST".ljust(COMPACT_W - 5), theme.BAD)]
        util = g.util_pct
        style = theme.level_style(util) if g.processes else theme.DIM
        used = mib(g.mem_used_mib)
        power = "n/a" if g.power_w is None else f"{g.power_w:.0f}W"
        temp = "n/a" if g.temp_c is None else f"{g.temp_c}C"
        return [(f"{g.index:>2} ", theme.BOLD), (theme.hbar(util, 4), style),
                (f" {busy_cell(g)}", style), (f" {used:>4} {power:>4} {temp:>3}", theme.PLAIN)]

    def _tiny(self, g) -> list:
        if g.lost:
            return [(f"{g.index:>2} ", theme.BOLD), ("LOST".ljust(TINY_W - 3), theme.BAD)]
        util = g.util_pct
        style = theme.level_style(util) if g.processes else theme.DIM
        power = "n/a" if g.power_w is None else f"{g.power_w:.0f}W"
        # the memory goes where the tier's tag came (three cells a line at 80 columns)
        return [(f"{g.index:>2} ", theme.BOLD), (theme.hbar(util, 3), style),
                (f" {busy_cell(g)}", style), (f" {power:>4}", theme.PLAIN)]

    def _process_lines(self, update, width: int) -> list:
        model = update.model
        # where the whole row does not fit (80 columns), rchar/s and the process count go
        # and the name narrows, so that where the loaders' time goes and the devices stay
        wide = width >= PROC_WIDE_W
        # NVML's per-process samples: a column only where one came (a GPU that gives
        # none, MIG or vGPU, the simulator's, would fill it with n/a), as --once has it
        sampled = any(p.sm_util_pct is not None for g in model.gpus for p in g.processes)
        name_w = 20 if wide else (10 if sampled else 14)
        lines = [[(f"   GPU      pid {'name':<{name_w}} GPU mem "
                   + ("    sm% " if sampled else "") + " read/s "
                   + (" rchar/s procs " if wide else "")
                   + " cpu%  wait%   io%  devices", theme.DIM)]]
        estimated = False
        for g in model.gpus:
            for p in g.processes:
                io = model.gpu_proc_io.get(p.pid) or {}
                pid = p.pid_label()
                read = io.get("read_kb_s")
                rchar = io.get("rchar_kb_s")
                devs = ",".join(io.get("devices") or ()) or "-"
                cpu, wait, blocked = _loader_cells(io.get("loaders"))
                estimated |= blocked.startswith("~")
                text = (f"   {g.index:>3} {pid:>8} {(p.name or '?')[:name_w]:<{name_w}} "
                        f"{mib(p.gpu_mem_mib):>7} "
                        + (f"{with_age(SM.text(p.sm_util_pct), p.util_age_s):>7} " if sampled else "")
                        + f"{rate(read):>7} "
                        + (f"{rate(rchar):>8} {io.get('nprocs') or 0:>5} " if wide else "")
                        + f"{cpu:>5} {wait:>6} {blocked:>5}  {devs}")
                lines.append([(text[:width], theme.PLAIN)])
        if len(lines) > 1 and sampled:
            lines.append([("   sm%: NVML's last sample of the process (its own sample period, "
                           "not the interval) @ its age"[:width], theme.DIM)])
        if len(lines) > 1:
            legend = ("   cpu% wait% io%: where its loaders' time went (DataLoader workers, else "
                      "itself): on a CPU, waiting for one, blocked on reads"
                      + ("; ~ estimated (no delay accounting)" if estimated else ""))
            lines.append([(legend[:width], theme.DIM)])
        if any(not p.mapped for g in model.gpus for p in g.processes):
            lines.append([("   * not visible from this PID namespace: its I/O cannot be read", theme.DIM)])
        if any(p.mapped_by == MAPPED_BY_DEVICE_FILE for g in model.gpus for p in g.processes):
            lines.append([("   host=local: NVML's host PID = its PID here, found by the GPU device "
                           "file it holds open"[:width], theme.DIM)])
        if len(lines) == 1:
            lines.append([("   no compute processes", theme.DIM)])
        return lines


def _loader_cells(lt) -> tuple[str, str, str]:
    """(on CPU, waiting for a CPU, blocked on reads) in %, '~' before an estimate."""
    if lt is None:
        return "n/a", "n/a", "n/a"
    pct = lambda v: "n/a" if v is None else f"{v:.0f}"  # noqa: E731
    blocked = pct(lt.io_wait_pct)
    if lt.io_wait_pct is not None and lt.io_source != IO_MEASURED:
        blocked = "~" + blocked
    return pct(lt.on_cpu_pct), pct(lt.cpu_wait_pct), blocked
