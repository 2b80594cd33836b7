"""The I/O process view (`i`, like iotop's and atop's disk view): who is loading the disks.

Every followed process (the GPU job's, and the busiest others a scan of the node finds:
collect/ioscan.py) with its block read and write rate (/proc/PID/io read_bytes and
write_bytes, what pidstat -d and iotop show), the device its files live on and its share
of that device's reads and writes (model/ioprocs.py), its CPU, its cgroup, and J where it
belongs to the GPU job.  Busiest first, those loading the device the verdict
names before the rest."""

from __future__ import annotations

from gpudisk_top.model.ioprocs import container_of, io_rows
from gpudisk_top.ui import glyphs, theme
from gpudisk_top.ui.format import rate
from gpudisk_top.ui.widgets.base import LinesPanel, cut, fit

HEAD = "     PID  read/s write/s  device       %rd  %wr  cpu% J  cgroup            command"
LEFT = HEAD.index("cgroup")   # the columns before the cgroup, never cut
CGROUP_W = 23     # 'containerd 3f2a1b9c0d4e' whole
COMMAND_MIN = 30   # a command keeps this much before the cgroup id is cut
LEGEND = ("   %rd %wr: its share of that device's reads and writes (iostat rkB/s, wkB/s) "
          f"{glyphs.DOT} J: the GPU job's")


def _pct(value: float | None) -> str:
    return "   -" if value is None else f"{value:4.0f}"


def command_of(view) -> str:
    return view.cmdline or view.name or "?"


def cgroup_and_command(views, room: int) -> tuple[int, int]:
    """(cgroup cells with their space, command cells) of the process rows' last two
    columns in `room` cells: the cgroup as wide as its longest name (up to CGROUP_W); a
    long command's tail, then the cgroup, are cut before the command itself
    (base.CUT_FIRST["ioprocs"])."""
    want = max([len("command")] + [len(command_of(v)) for v in views])
    longest = min(CGROUP_W, max([len("cgroup")] + [len(container_of(v.cgroup)) for v in views]))
    cgroup_ws = [longest + 1] + list(range(longest, 6, -1)) + [0]
    pick = fit("ioprocs", {"cgroup": cgroup_ws,
                           "command-tail": list(range(max(0, want - COMMAND_MIN), -1, -1)),
                           "command": list(range(min(want, COMMAND_MIN), 7, -1))}, room)
    cgroup_w = cgroup_ws[pick["cgroup"]]
    return cgroup_w, max(1, room - cgroup_w)


def cgroup_cell(cgroup: str | None, cgroup_w: int) -> str:
    """A process's container or cgroup in cgroup_w cells (its space included)."""
    return (cut(container_of(cgroup), cgroup_w - 1) + " ").ljust(cgroup_w) if cgroup_w else ""


class IoProcPanel(LinesPanel):
    DEFAULT_CSS = "IoProcPanel { height: 1fr; min-height: 4; }"
    can_focus = True

    def show(self, update, note: str = "") -> None:
        """note: how the processes were found (the scan's rate, what cannot be read)."""
        self._input = (update, note)
        io_view = self.screen.has_class("io-view")
        if self.unchanged(update, note, io_view):
            return
        model = update.model
        width = max(40, self.size.width or 80)
        mark = (">", theme.FOCUS_MARK) if self.has_focus else (" ", theme.PLAIN)
        blamed = list(update.verdict.devices) if update.verdict is not None else []
        rows = io_rows(model, blamed)
        back = "i: back to the timeline" if io_view else "i: full height"
        cgroup_w, command_w = cgroup_and_command([r.view for r in rows], width - 1 - LEFT)
        # the title's words: how rows are ordered, how they are found, then how to go back
        parts = {"name": [" I/O by process"],
                 "order": ["  busiest first (the blamed device's first)", "  busiest first"],
                 "back": [f" {glyphs.DOT} {back}"], "note": [note, ""]}
        pick = fit("ioprocs", {k: [len(f) for f in v] for k, v in parts.items()}, width)
        title = "".join(v[pick[k]] for k, v in parts.items() if k != "name")
        lines = [[mark, ("I/O by process", theme.LABEL), (title, theme.DIM)],
                 [((" " + HEAD[:LEFT] + ("cgroup".ljust(cgroup_w) if cgroup_w else "") + "command")[:width], theme.HEAD)]]
        if not rows:
            lines.append([("   no process did block I/O in this interval (a new one shows "
                           "from its second interval)"[:width], theme.DIM)])
        for r in rows:
            v = r.view
            device = model.devices[r.device].display_name if r.device in model.devices else "-"
            culprit = r.device in blamed and not r.job and (r.read_share_pct or 0) >= 10
            cpu = "   -" if v.cpu_pct is None else f"{v.cpu_pct:4.0f}"
            text = (f"{v.pid:>8} {rate(v.read_kb_s):>7} {rate(v.write_kb_s):>7}  "
                    f"{device[:12]:<12} {_pct(r.read_share_pct)} {_pct(r.write_share_pct)} "
                    f"{cpu} {'J' if r.job else ' '}  "
                    f"{cgroup_cell(v.cgroup, cgroup_w)}{cut(command_of(v), command_w)}")
            # the process loading the device the verdict names: a glyph and bold reverse,
            # which NO_COLOR keeps
            glyph = (glyphs.BLAMED, theme.CULPRIT) if culprit else (" ", theme.PLAIN)
            lines.append([glyph, (text[:width - 1], theme.CULPRIT if culprit else theme.PLAIN)])
        legend = [LEGEND, f"   %rd %wr: its share of the device's reads, writes {glyphs.DOT} J: the job's"]
        lines.append([(legend[fit("ioprocs", {"legend": [len(t) for t in legend]}, width)["legend"]]
                       [:width], theme.DIM)])
        self.set_lines(lines)
