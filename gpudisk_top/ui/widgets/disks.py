"""Disks: per device r/s, w/s, rMB/s, wMB/s, r_await, w_await, aqu-sz, %util, class and
mountpoint, as iostat -x computes them, and the disk's health where the health poller
runs (model/health.py: OK, warn, FAIL, n/a, with a glyph; a partition or a dm/md device
shows its disks' worst).  Saturated devices are marked (glyph and colour);
`s` cycles the sort (busiest first by default, the sort column marked ▼), `a` all or
active devices, `/` filters by name.  Focused, ↑/↓ move a row cursor and Enter opens the
device's detail; the column header stays while the rows scroll.  The table owns the
disks' order (order()): the timeline draws its disk rows in it.

Marks: ▲ a device the verdict names, △ one in its stack (a partition of it, the dm device
on it, the disk under it: the same cause, not another), ! another device saturated.

The columns fit the width, cut in base.CUT_FIRST["disks"]'s order: full device names and
iostat's core columns always; the wide columns (rareq-sz, %rrqm, f/s), the class, the
first health reason and the health word (its glyph stays wherever health is read) go
before the mountpoint is cut (with …, never dropped)."""

from __future__ import annotations

from gpudisk_top.collect.blockdev import device_stack
from gpudisk_top.model.health import health_of
from gpudisk_top.model.mounts import like_disk
from gpudisk_top.model.select import DeviceFilter
from gpudisk_top.model.present import class_tag, natural_key
from gpudisk_top.model.vocab import DISK, DISK_MB, TIMELINE, mb_s
from gpudisk_top.ui import glyphs, theme
from gpudisk_top.ui.widgets import health
from gpudisk_top.ui.widgets.base import CursorPanel, cut, fit

SORTS = ("util", "r_await", "iops", "throughput", "name")
# each sort in the words of the column it marks (the toast, the table's note)
SORT_LABEL = {"util": TIMELINE["util_pct"].label, "r_await": DISK["r_await_ms"].label,
              "iops": TIMELINE["iops"].label, "throughput": TIMELINE["mb_s"].label,
              "name": "name"}
NAME_MAX = 24      # a device's name is cut only beyond this
BLAMED, ON_BLAMED, SATURATED = glyphs.BLAMED, glyphs.ON_BLAMED, "!"  # the marks (module docstring)
MOUNT_MIN = 10     # the mountpoint column is never narrower

# (the metric, the sorts it marks), its header the metric's label and its text the
# metric's (vocab.Metric.text: the same figure as --once, report, the verdict, the
# fleet); the first 8 are iostat -x's core columns and always shown, the rest where the
# width allows
COLUMNS = tuple((m, sorts) for m, sorts in (
    (DISK["r_s"], ("iops",)), (DISK["w_s"], ("iops",)),
    (DISK_MB["rmb_s"], ("throughput",)), (DISK_MB["wmb_s"], ("throughput",)),
    (DISK["r_await_ms"], ("r_await",)), (DISK["w_await_ms"], ()), (DISK["aqu_sz"], ()),
    (DISK["util_pct"], ("util",)), (DISK["rareq_kb"], ()), (DISK["wareq_kb"], ()),
    (DISK["rrqm_pct"], ()), (DISK["wrqm_pct"], ()), (DISK["d_s"], ()), (DISK["f_s"], ()),
    (DISK["f_await_ms"], ()),
))
CORE = 8
# a network or FUSE mount's row: its numbers (model/mounts.py like_disk) under the columns
# that mean the same (title -> field, its unit from the model's); the rest "-"
MOUNT_CELLS = {"r_s": ("r_s", float), "rmb_s": ("rkb_s", mb_s),
               "r_await_ms": ("r_await_ms", float), "aqu_sz": ("aqu_sz", float)}
MOUNT_TAG = {"nfs": "NFS", "fuse": "FUSE", "lustre": "Lstr", "network": "net"}
HEALTH_SHORT = 1 + health.SHORT_W   # the health column with the status alone
HEALTH_GLYPH = 2                    # ... with its glyph alone (✓ ! ✗ ?), where narrow
REASON_MIN = 16    # a reason cut narrower says too little: the status alone then
REASON_MAX = 40


def column_widths(num_w: int, ncols: int) -> list[int]:
    """The first ncols columns' widths: num_w, or the title and a space where longer."""
    return [max(num_w, len(m.label) + 1) for m, _ in COLUMNS[:ncols]]


# what _layout fits from, the same at every width: the core columns' widths with the
# numbers' padding (8 cells) and without (7), and the cells the wide columns take as they
# go from all of them to none
CORE_WIDTHS = tuple(column_widths(num_w, CORE) for num_w in (8, 7))
WIDE_CELLS = tuple(sum(column_widths(8, n)) - sum(column_widths(8, CORE))
                   for n in range(len(COLUMNS), CORE - 1, -1))


def value_cells(rates, widths: list[int]) -> str:
    """A device's iostat -x values in the first len(widths) columns."""
    return "".join(m.text(getattr(rates, m.field), width=w - 1).rjust(w)
                   for (m, _), w in zip(COLUMNS, widths))


class DiskPanel(CursorPanel):
    DEFAULT_CSS = "DiskPanel { height: auto; max-height: 40%; }"
    can_focus = True

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.sort = SORTS[0]
        self.filter = DeviceFilter()
        self._selected: tuple | None = None    # selected()'s last (model, filter, sort, names)

    def selected(self, model) -> list[str]:
        """The devices the filter selects, in the sort's order (the table's rows and the
        timeline's disk rows: worked out once a sample)."""
        last = self._selected
        if last is None or last[0] is not model or last[1:3] != (self.filter, self.sort):
            last = self._selected = (model, self.filter, self.sort, self._select(model))
        return list(last[3])

    def order(self, update) -> list[str]:
        """The table's disk rows, top to bottom: the devices the verdict names first,
        whatever the sort (in plain sight), then the sort's order.  The one order of the
        disks on the dashboard: the timeline's disk rows follow it."""
        blamed = set(update.verdict.devices) if update.verdict is not None else set()
        return sorted(self.selected(update.model), key=lambda n: n not in blamed)

    @staticmethod
    def mark(name: str, devices, blamed: set, sat) -> str:
        """The row's mark (BLAMED, ON_BLAMED, SATURATED or a blank); devices: the model's,
        for the stack; sat: the device's Saturation or None.  A device in a blamed
        device's stack (device_stack: a partition of it, a dm device on it, the disk under
        it) is its cause, not another one: its `!` ("saturated, not the job's cause") was
        wrong there (issue 38)."""
        if name in blamed:
            return BLAMED
        if any(d in blamed for d in device_stack(devices, name)) or any(
                name in device_stack(devices, b) for b in blamed):
            return ON_BLAMED
        return SATURATED if sat is not None and sat.saturated else " "

    def _select(self, model) -> list[str]:
        names = [n for n in model.disks if n in model.devices
                 and self.filter.selected(model.devices[n], model.sample.disks.get(n))]
        key = {
            "name": lambda n: (0, natural_key(n)),
            "util": lambda n: (-model.disks[n].util_pct, natural_key(n)),
            "r_await": lambda n: (-model.disks[n].r_await_ms, natural_key(n)),
            "iops": lambda n: (-(model.disks[n].r_s + model.disks[n].w_s), natural_key(n)),
            "throughput": lambda n: (-(model.disks[n].rkb_s + model.disks[n].wkb_s), natural_key(n)),
        }[self.sort]
        return sorted(names, key=key)

    def _layout(self, width: int, dev_w: int, health_w: int = 0, mount_need: int = MOUNT_MIN
                ) -> tuple[list[int], bool, int, int]:
        """(the shown columns' widths, class shown, mount width, health width) for `width`,
        cut in base.CUT_FIRST["disks"]'s order: the wide columns, a reason's tail, the
        numbers' padding (8 cells to 7), the class, the health reason, the health word (its
        glyph stays), and the mountpoint last.  health_w (0: no health column) is the
        health cell wanted with its reason; mount_need the longest mountpoint."""
        core = CORE_WIDTHS
        parts = {"fixed": [1 + dev_w + sum(core[1]) + 2], "pad": [sum(core[0]) - sum(core[1]), 0],
                 "wide": WIDE_CELLS, "class": [6, 0],
                 "mount": list(range(max(mount_need, MOUNT_MIN), 0, -1))}
        if health_w:
            reason_w = health_w - HEALTH_SHORT      # its space and the longest reason
            parts["reason-tail"] = list(range(reason_w - 1 - REASON_MIN, -1, -1)) or [0]
            parts["health-reason"] = [min(reason_w, 1 + REASON_MIN), 0]
            parts["health-word"] = [HEALTH_SHORT, HEALTH_GLYPH]
        pick = fit("disks", parts, width)
        got = {k: v[pick[k]] for k, v in parts.items()}
        ncols = len(COLUMNS) - pick["wide"]
        widths = list(core[0] if got["pad"] else core[1]) + column_widths(8, ncols)[CORE:]
        health_w = sum(got.get(k, 0) for k in ("health-word", "health-reason", "reason-tail"))
        if not got.get("health-reason"):
            health_w = got.get("health-word", 0)
        rest = width - (parts["fixed"][0] + got["pad"] + got["wide"] + got["class"] + health_w)
        return widths, bool(got["class"]), max(1, rest), health_w

    def show(self, update) -> None:
        self._input = (update,)
        if self.unchanged(update, self.sort, self.filter, self.cursor):
            return
        model = update.model
        width = max(40, self.size.width or 80)
        mark = (">", theme.FOCUS_MARK) if self.has_focus else (" ", theme.PLAIN)
        blamed = set(update.verdict.devices) if update.verdict is not None else set()
        names = self.order(update)
        sats = update.verdict.saturation if update.verdict is not None else {}
        # a device whose interval was impossible (model.disk_dropped) is n/a, never 0
        dropped = sorted((n for n in model.disk_dropped if n in model.devices
                          and self.filter.selected(model.devices[n], model.sample.disks.get(n))),
                         key=natural_key)
        least = len("▼Device") if self.sort == "name" else 6
        dev_w = min(NAME_MAX, max([least] + [len(model.devices[n].display_name) for n in names + dropped]
                                  + [len(mp) for mp in model.mounts]))
        # health: a column wherever the poller runs (None: it does not, or an old recording)
        views = None
        health_w = 0
        if model.sample.health is not None:
            views = {n: health_of(model.health, model.devices, n) for n in names + dropped}
            reasons = [len(v.reasons[0]) for v in views.values()
                       if v is not None and v.reasons and v.status != "ok"]
            longest = min(REASON_MAX, max(reasons, default=0))
            health_w = HEALTH_SHORT + (1 + longest if longest else 0)
        need = max([MOUNT_MIN] + [len(",".join(model.devices[n].mountpoints)) for n in names + dropped]
                   + [len(v.source) for v in model.mounts.values()])
        widths, with_class, mount_w, health_w = self._layout(width, dev_w, health_w, need)
        cols = list(zip(COLUMNS, widths))
        what = "all devices" if self.filter.all_devices else (
            f"filter {','.join(self.filter.patterns)}" if self.filter.patterns else "active devices")
        title = ("▼" if self.sort == "name" else "") + "Device"
        head = [mark, (f"{title:<{dev_w}}" + (" class" if with_class else ""), theme.HEAD)]
        for (m, sorts), w in cols:
            marked = self.sort in sorts
            head.append(((("▼" if marked else "") + m.label).rjust(w),
                         theme.HEAD_SORTED if marked else theme.HEAD))
        if views is not None:
            # the glyph alone has no room for its title (help: ? h F1)
            head.append(((" health" if health_w > HEALTH_GLYPH else "").ljust(health_w), theme.HEAD))
        head.append(("  mount".ljust(min(mount_w, 10) + 2), theme.HEAD))
        used = sum(len(t) for t, _ in head)
        for note in (f"  sort: {SORT_LABEL[self.sort]} · {what}" + ("  ↑↓ Enter: detail" if self.has_focus else ""),
                     f"  {what}"):
            if used + len(note) <= width:
                head.append((note, theme.DIM))
                break
        if self.sort == "name":
            head[1] = (head[1][0], theme.HEAD_SORTED)
        lines = [head]
        self._set_order(names + dropped)
        if not model.disks and not dropped:
            lines.append([(" collecting: rates need two samples", theme.DIM)])
        elif not names and not dropped:
            lines.append([(" no device selected (a: all devices, /: filter)", theme.DIM)])
        for n in names:
            info, r = model.devices[n], model.disks[n]
            glyph = self.mark(n, model.devices, blamed, sats.get(n))
            style = {BLAMED: theme.CULPRIT, ON_BLAMED: theme.CULPRIT,
                     SATURATED: theme.WARN}.get(glyph, theme.PLAIN)
            text = self._name_cells(info, dev_w, with_class)
            text += value_cells(r, widths)
            lines.append(self._row(n, glyph, text, style, info, mount_w, views, health_w))
        for v in model.mounts.values():
            row = self._mount_row(v, v.mountpoint in blamed, dev_w, with_class, cols, mount_w)
            if views is not None:
                row.insert(2, (" " * health_w, theme.PLAIN))
            lines.append(row)
        for n in dropped:
            info = model.devices[n]
            text = self._name_cells(info, dev_w, with_class) + "".join("n/a".rjust(w) for _, w in cols)
            row = self._row(n, "?", text, theme.DIM, info, mount_w, views, health_w)
            row[-1] = (f"  no rates: {model.disk_dropped[n]}", theme.WARN)
            lines.append(row)
        self.fixed = 1
        self.set_lines(lines)
        self._show_cursor()

    @staticmethod
    def _mount_row(v, blamed: bool, dev_w: int, with_class: bool, cols, mount_w: int) -> list:
        """A network or FUSE mount under the disks: its mountpoint as the name, its type
        as the class, its source where a disk shows its mountpoints."""
        style = theme.CULPRIT if blamed else theme.PLAIN
        text = f"{cut(v.mountpoint, dev_w):<{dev_w}}"
        text += f" {MOUNT_TAG.get(v.kind, v.kind)[:5]:<5}" if with_class else ""
        numbers = like_disk(v)
        for (m, _), w in cols:
            field, unit = MOUNT_CELLS.get(m.field, (None, float))
            value = numbers.get(field)
            text += m.text(None if value is None else unit(value), "-", w - 1).rjust(w)
        return [("▲" if blamed else " ", style), (text, style),
                ("  " + cut(v.source, mount_w), theme.DIM)]

    @staticmethod
    def _name_cells(info, dev_w: int, with_class: bool) -> str:
        text = f"{cut(info.display_name, dev_w):<{dev_w}}"
        return text + (f" {class_tag(info.dev_class):<5}" if with_class else "")

    def _row(self, name: str, glyph: str, text: str, style, info, mount_w: int,
             views: dict | None = None, health_w: int = 0) -> list:
        mounts = cut(",".join(info.mountpoints) or "-", mount_w)
        selected = self.has_focus and name == self.cursor
        if selected:
            style = theme.SELECTED + style
        row = [(glyph, style), (text, style)]
        if views is not None:
            view = views.get(name)
            cell = (" " + health.cell(view, health_w - HEALTH_SHORT - 1))[:health_w].ljust(health_w)
            hstyle = health.style(view.status if view is not None else None)
            row.append((cell, theme.SELECTED + hstyle if selected else hstyle))
        row.append(("  " + mounts, theme.DIM))
        return row
