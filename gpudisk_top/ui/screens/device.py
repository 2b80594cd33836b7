"""Enter on a disk: the device's detail, kept live as samples arrive.

What it is (class, model, mountpoints, the probe's ceiling), its stack (the disk under a
partition, the members under a dm/md device, the partitions and devices over it), every
iostat -x column for it and the devices in its stack, its own timeline (%util, r_await,
IOPS, MB/s, aqu-sz on the dashboard's x-axis, starved columns shaded), where the health
poller runs its disk's health (a line at the top, every field of the reading below the
timeline: ui/widgets/health.py) and the processes reading and writing it
(model/ioprocs.py)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Footer

from gpudisk_top.collect.blockdev import device_stack
from gpudisk_top.model.health import health_of
from gpudisk_top.model.ioprocs import io_rows
from gpudisk_top.model.present import class_tag
from gpudisk_top.model.vocab import TIMELINE
from gpudisk_top.ui import glyphs, theme
from gpudisk_top.ui.format import legend, rate
from gpudisk_top.ui.widgets import health
from gpudisk_top.ui.widgets.base import LinesPanel, cut
from gpudisk_top.ui.widgets.ioprocs import cgroup_and_command, cgroup_cell, command_of
from gpudisk_top.ui.widgets.header import HeaderBar
from gpudisk_top.ui.widgets.disks import COLUMNS, column_widths, value_cells
from gpudisk_top.ui.widgets.timeline import Timeline, glyph

LABEL_W = 16


class DeviceDetail(LinesPanel):
    DEFAULT_CSS = "DeviceDetail { height: 1fr; }"
    can_focus = True

    def show(self, update, history, name: str) -> None:
        self._input = (update, history, name)
        model = update.model
        width = max(40, self.size.width or 80)
        info = model.devices.get(name)
        if info is None:
            self.set_lines([[(f" {name}: no longer a block device here", theme.WARN)]])
            return
        lines = [[(f" {info.display_name} ", theme.HEAD),
                  (f" {class_tag(info.dev_class)} {info.kind}"
                   f"{'  ' + info.model if info.model else ''}"
                   f"  {info.major}:{info.minor}  mounted at "
                   f"{', '.join(info.mountpoints) or '-'}", theme.PLAIN)]]
        below = device_stack(model.devices, name)[1:]
        above = sorted(n for n, d in model.devices.items()
                       if d.parent == name or name in d.slaves)
        stack = []
        if below:
            stack.append(f"on {', '.join(below)}")
        if above:
            stack.append(f"under it: {', '.join(above)}")
        if info.ceiling_iops:
            stack.append(f"probe: {info.ceiling_iops:.0f} IOPS at QD32, "
                         f"{info.ceiling_mib_s or 0:.0f} MiB/s sequential")
        lines.append([(" " + (f" {glyphs.DOT} ".join(stack) or "a device on its own"), theme.DIM)])
        read = model.sample.health is not None
        if read:
            # the verdict on its disk in plain sight; every field below the timeline
            view = health_of(model.health, model.devices, name)
            status = view.status if view is not None else None
            lines.append([(" health ", theme.DIM),
                          (health.cell(view), health.style(status)),
                          ((": " + "; ".join(view.reasons) if view is not None and view.reasons
                            else "")[:max(0, width - 16)], health.style(status))])
        lines.append([])
        # every iostat -x column, for it and its stack
        ncols = len(COLUMNS)       # as many of iostat's columns as fit
        while ncols > 1 and LABEL_W + sum(column_widths(8, ncols)) > width:
            ncols -= 1
        widths = column_widths(8, ncols)
        head = f" {'Device':<{LABEL_W - 1}}" + "".join(
            m.label.rjust(w) for (m, _), w in zip(COLUMNS, widths))
        lines.append([(head[:width], theme.HEAD)])
        for n in [name] + below + above:
            r = model.disks.get(n)
            if r is None:
                continue
            text = (f" {model.devices[n].display_name[:LABEL_W - 2]:<{LABEL_W - 1}}"
                    + value_cells(r, widths))
            lines.append([(text[:width], theme.BOLD if n == name else theme.PLAIN)])
        lines.append([])
        # its own timeline: every metric, on the dashboard's columns
        ncols = width - LABEL_W
        cols = history.last(ncols)
        lines.append([(" Timeline", theme.LABEL), ("  one column per interval", theme.DIM)])
        if cols:
            spans = Timeline.shade_spans(cols)
            lines.append(Timeline.state_line(cols, spans, LABEL_W))
            for m in TIMELINE:
                text = "".join(glyph(c.metric(name, m.field), m.field) for c in cols)
                now = cols[-1].metric(name, m.field)
                label = f"{m.label} {legend(m.field, now)}"
                lines.append(Timeline.row_line(label, text, spans, LABEL_W))
            lines.append(Timeline.axis(cols, LABEL_W))
        lines.append([])
        if read:
            lines += health.detail_lines(model, name, width)
            lines.append([])
        # who reads and writes it
        rows = [r for r in io_rows(model)
                if any(name in device_stack(model.devices, d) for d in r.view.devices or ())]
        lines.append([(" Processes with files on it", theme.LABEL),
                      ("  read/s write/s of each (not split by device)", theme.DIM)])
        if not rows:
            lines.append([("   none followed (i: I/O by process)", theme.DIM)])
        cgroup_w, command_w = cgroup_and_command([r.view for r in rows], width - 31)
        for r in rows:
            v = r.view
            text = (f"   {v.pid:>8} {rate(v.read_kb_s or 0):>7} "
                    f"{rate(v.write_kb_s or 0):>7} {'J' if r.job else ' '} "
                    f"{cgroup_cell(v.cgroup, cgroup_w)}{cut(command_of(v), command_w)}")
            lines.append([(text[:width], theme.PLAIN)])
        self.set_lines(lines)




class DeviceScreen(ModalScreen):
    """The detail of one device; the app calls show() with every update."""

    DEFAULT_CSS = """
    DeviceScreen { layout: vertical; background: $surface; }
    DeviceScreen > DeviceDetail { width: 100%; height: 1fr; background: $surface; }
    """
    # its header is the dashboard's (DEMO, REPLAY, PAUSED...: the app draws it); its
    # footer says how to go back
    BINDINGS = [Binding("escape,q,enter", "dismiss", "Back", key_display="esc"),
                Binding("up", "scroll(-1)", "Scroll", key_display=glyphs.UP + glyphs.DOWN),
                Binding("down", "scroll(1)", show=False)]

    def __init__(self, name: str) -> None:
        super().__init__()
        self.device = name

    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header")
        yield DeviceDetail()
        yield Footer(compact=True)

    def show(self, update, history) -> None:
        self.query_one(DeviceDetail).show(update, history, self.device)

    def action_scroll(self, delta: int) -> None:
        self.query_one(DeviceDetail).scroll_lines(delta)
