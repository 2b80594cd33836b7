"""Numbers as a terminal dashboard shows them: short, with units, n/a for unknown."""

from __future__ import annotations

from gpudisk_top.model import present, timefmt
from gpudisk_top.model.metric import KIB
from gpudisk_top.model.vocab import TIMELINE, mb_s


def na(value, fmt: str = "{:.0f}") -> str:
    return "n/a" if value is None else fmt.format(value)


def si(value: float | None, unit: str = "") -> str:
    """1234567 -> '1.2M'."""
    if value is None:
        return "n/a"
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= div:
            v = value / div
            return f"{v:.1f}{suffix}{unit}" if v < 100 else f"{v:.0f}{suffix}{unit}"
    return f"{value:.0f}{unit}" if value >= 10 or value == 0 else f"{value:.1f}{unit}"


def rate(kb_s: float | None, unit: str = "B") -> str:
    """A rate in kB/s, short, in iostat's units (kB = 1024 bytes, MB = 1024 kB: vocab.mb_s),
    so that a process's figure reads against its disk's rMB/s: 76184 -> '74.4MB' beside
    the disk's 74.4, never the '78.0MB' of 10^6 bytes."""
    if kb_s is None:
        return "n/a"
    mb = mb_s(kb_s)
    for value, suffix in ((mb / KIB, "G"), (mb, "M"), (kb_s, "k")):
        if abs(value) >= 1:
            return f"{value:.1f}{suffix}{unit}" if abs(value) < 100 else f"{value:.0f}{suffix}{unit}"
    return f"{kb_s * KIB:.0f}{unit}"


LEGEND_W = 5      # the cells a timeline row's latest value has beside its name


def legend(field: str, value: float | None) -> str:
    """A timeline metric's latest value beside a row's name (the dashboard's timeline, a
    device's detail): its Metric's text (vocab.TIMELINE) in LEGEND_W cells, %util with
    its sign."""
    metric = TIMELINE[field]
    if metric.unit == "%":
        return metric.text(value, width=LEGEND_W - 1) + ("%" if value is not None else "")
    return metric.text(value, width=LEGEND_W)


def mib(value_mib: float | None) -> str:
    """A size in MiB (a GPU's memory) in GiB, short: '30.1G', whole from 10 GiB ('80G')."""
    if value_mib is None:
        return "n/a"
    return present.size(value_mib * KIB, ("GiB",), 0 if value_mib >= 10240 else 1, short=True)


# times: one owner (model/timefmt.py) for the dashboard, the fleet screens and --once
clock = timefmt.clock
duration = timefmt.duration_compact
