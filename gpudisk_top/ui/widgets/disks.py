"""Disks: per device r/s, w/s, rMB/s, wMB/s, r_await, w_await, aqu-sz, %util, class and
mountpoint, as iostat -x computes them.  Saturated devices are marked (glyph and colour);
`s` cycles the sort, `a` all or active devices, `/` filters by name."""

from __future__ import annotations

from gpudisk_top.model.select import DeviceFilter
from gpudisk_top.ui import theme
from gpudisk_top.ui.format import ms
from gpudisk_top.ui.widgets.base import LinesPanel

SORTS = ("name", "util", "r_await", "iops", "throughput")
CLASS_TAG = {"NVMe": "NVMe", "SSD": "SSD", "HDD": "HDD", "virtual": "virt", "unknown": "?"}


def natural(name: str):
    import re
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


class DiskPanel(LinesPanel):
    DEFAULT_CSS = "DiskPanel { height: auto; max-height: 40%; }"
    can_focus = True

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.sort = "name"
        self.filter = DeviceFilter()

    def selected(self, model) -> list[str]:
        names = [n for n in model.disks if n in model.devices
                 and self.filter.selected(model.devices[n], model.sample.disks.get(n))]
        key = {
            "name": lambda n: (0, natural(n)),
            "util": lambda n: (-model.disks[n].util_pct, natural(n)),
            "r_await": lambda n: (-model.disks[n].r_await_ms, natural(n)),
            "iops": lambda n: (-(model.disks[n].r_s + model.disks[n].w_s), natural(n)),
            "throughput": lambda n: (-(model.disks[n].rkb_s + model.disks[n].wkb_s), natural(n)),
        }[self.sort]
        return sorted(names, key=key)

    def show(self, update) -> None:
        self._input = (update,)
        model = update.model
        width = max(40, self.size.width or 80)
        wide = width >= 110
        mark = (">", theme.FOCUS_MARK) if self.has_focus else (" ", theme.PLAIN)
        blamed = set(update.verdict.devices) if update.verdict is not None else set()
        # the devices the verdict names come first, whatever the sort: in plain sight
        names = sorted(self.selected(model), key=lambda n: n not in blamed)
        sats = update.verdict.saturation if update.verdict is not None else {}
        # a device whose interval was impossible (model.disk_dropped) is n/a, never 0
        dropped = sorted((n for n in model.disk_dropped if n in model.devices
                          and self.filter.selected(model.devices[n], model.sample.disks.get(n))),
                         key=natural)
        dev_w = max([6] + [len(model.devices[n].display_name) for n in names + dropped])
        dev_w = min(dev_w, 16)
        cols = "     r/s     w/s   rMB/s   wMB/s r_await w_await  aqu-sz  %util"
        if wide:
            cols += " rareq-sz %rrqm  f/s"
        what = "all devices" if self.filter.all_devices else (
            f"filter {','.join(self.filter.patterns)}" if self.filter.patterns else "active devices")
        head = [mark, (f"{'Device':<{dev_w}} class{cols}  mount", theme.HEAD),
                (f"  sort: {self.sort} · {what}", theme.DIM)]
        lines = [head]
        if not model.disks and not dropped:
            lines.append([(" collecting: rates need two samples", theme.DIM)])
        elif not names and not dropped:
            lines.append([(" no device selected (a: all devices, /: filter)", theme.DIM)])
        for n in names:
            info, r = model.devices[n], model.disks[n]
            sat = sats.get(n)
            glyph = "▲" if n in blamed else ("!" if sat is not None and sat.saturated else " ")
            style = theme.CULPRIT if n in blamed else (theme.WARN if glyph == "!" else theme.PLAIN)
            text = (f"{info.display_name[:dev_w]:<{dev_w}} {CLASS_TAG.get(info.dev_class, '?'):<5}"
                    f"{r.r_s:8.1f}{r.w_s:8.1f}{r.rkb_s / 1024:8.1f}{r.wkb_s / 1024:8.1f}"
                    f"{ms(r.r_await_ms):>8}{ms(r.w_await_ms):>8}{r.aqu_sz:8.2f}{r.util_pct:7.1f}")
            if wide:
                text += f"{r.rareq_kb:9.1f}{r.rrqm_pct:6.1f}{r.f_s:5.0f}"
            mounts = ",".join(info.mountpoints) or "-"
            lines.append([(glyph, style), (text, style), ("  " + mounts, theme.DIM)])
        for n in dropped:
            info = model.devices[n]
            text = (f"{info.display_name[:dev_w]:<{dev_w}} {CLASS_TAG.get(info.dev_class, '?'):<5}"
                    + "     n/a" * 7 + "    n/a" + ("      n/a   n/a  n/a" if wide else ""))
            lines.append([("?", theme.WARN), (text, theme.DIM),
                          (f"  no rates: {model.disk_dropped[n]}", theme.WARN)])
        self.set_lines(lines)
