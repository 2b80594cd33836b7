"""How things read on every text surface: one owner for the layout of a table, the order
of names, a device's class tag, and the spelling of a size, a percentage and a process
("pid 912 (rsync)").  A metric's own rule (its decimals) is its Metric's
(metric.Metric.text); this module lays the texts out.

`--once` (output/once.py), `report` (report/text.py), `fleet --once` (fleet/text.py) and
the dashboard's panels all import it: it lives under model/ so that every layer may, and
imports nothing but the vocabulary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from gpudisk_top.model.metric import GIB, KIB, MIB, TIB, Metric
from gpudisk_top.model.vocab import CLASS_TAG

_DIGITS = re.compile(r"([0-9]+)")


def natural_key(text: str) -> tuple:
    """The one natural order of names: 'sdb2' before 'sdb10', 'node-2' before 'node-10',
    '10.0.0.9:9425' before '10.0.0.10:9425'.  Only ASCII digits count as a number ('²'
    stays text), and the key alternates text and number, so any two names compare."""
    parts = _DIGITS.split(text)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts))


def class_tag(dev_class: str) -> str:
    """A device's class (collect/blockdev.py dev_class) in at most 5 cells: '?' for one
    this version does not know."""
    return CLASS_TAG.get(dev_class, "?")


# The binary units a size reads in (docs/json-output.md#units), largest first: what one
# is in KiB, the model's kB
SIZE_UNITS = {"TiB": TIB // KIB, "GiB": GIB // KIB, "MiB": MIB // KIB, "KiB": 1}
ALL_SIZE_UNITS = tuple(SIZE_UNITS)


def size(kb: float | None, units: Sequence[str] = ALL_SIZE_UNITS, places: int = 1,
         short: bool = False, na: str = "n/a") -> str:
    """A size in KiB (the model's kB) as every surface prints it, in binary units: in the
    largest of `units` (largest first) it reaches, else the last, to `places` decimals:
    '12.34 GiB'; short, for a narrow cell, the unit's letter and no space: '12.3G'.
    `na` for None.  Raises KeyError for a unit not in SIZE_UNITS."""
    if kb is None:
        return na
    unit = next((u for u in units if abs(kb) >= SIZE_UNITS[u]), units[-1])
    value = f"{kb / SIZE_UNITS[unit]:.{places}f}"
    return value + unit[0] if short else f"{value} {unit}"


def pct(value: float | None, places: int = 0, na: str = "n/a") -> str:
    """A percentage as every surface prints it: '43%', to `places` decimals; `na` for
    None.  Raises nothing."""
    return na if value is None else f"{value:.{places}f}%"


def pid_name(pid: int, name: str | None) -> str:
    """A process as every sentence names it: 'pid 912 (rsync)', '?' for a name not
    known.  The name is the caller's to escape where it came from outside (comm is
    anyone's to choose).  Raises nothing."""
    return f"pid {pid} ({name or '?'})"


def pids_name(pids: Sequence[int], name: str | None) -> str:
    """Processes of one name: 'pids 912, 913 (fio)'; one of them reads as pid_name's.
    Raises nothing."""
    if len(pids) == 1:
        return pid_name(pids[0], name)
    return f"pids {', '.join(map(str, pids))} ({name or '?'})"


@dataclass(frozen=True)
class Col:
    """A column of a text table: its title, its width (None: the widest of the title and
    its cells; 0 for a last column of free text), "<" left (names, words) or ">" right
    (numbers), and what stands before it (not before the first)."""

    title: str
    width: int | None = None
    align: str = ">"
    sep: str = " "


def metric_col(metric: Metric, sep: str = " ") -> Col:
    """A Metric's column: its label over its column_width, right-aligned."""
    return Col(metric.label, metric.column_width, ">", sep)


def table(rows: Sequence[Sequence[str] | str], columns: Sequence[Col],
          head: bool = True) -> list[str]:
    """Lines of a text table: the titles (head), then a line a row of cells (one text per
    column, already formatted); a row that is a str is a line of its own (a note under a
    row, a row that fits no column).  A cell wider than its column is never cut: the line
    grows, as an f-string's would.  Trailing spaces are dropped."""
    cells = [r for r in rows if not isinstance(r, str)]
    widths = [c.width if c.width is not None
              else max([len(c.title)] + [len(r[i]) for r in cells])
              for i, c in enumerate(columns)]

    def line(texts: Sequence[str]) -> str:
        out = []
        for i, (c, w, t) in enumerate(zip(columns, widths, texts)):
            out.append(("" if i == 0 else c.sep) + (t.rjust(w) if c.align == ">" else t.ljust(w)))
        return "".join(out).rstrip()

    lines = [line([c.title for c in columns])] if head else []
    lines += [r if isinstance(r, str) else line(r) for r in rows]
    return lines
