"""Format version 3's one addition to a block: columns coded against other columns.

Some counters follow others closely, so a block may keep a column as its difference from
a prediction made of other columns of the same rows (integers only, exact both ways):

  - "sum": a disk's time in queue (rq_ticks, /proc/diskstats field 11) less the sum of
    its read, write, discard and flush ticks: since Linux 5.0 the kernel prints field 11
    as the sum of the same four nanosecond counters the others are printed from, so the
    rest is their rounding (a few ms a second);
  - "lin": a disk's sectors less K times its requests (rd_sectors against rd_ios, and
    so for writes and discards), K the block's sectors per request: a steady request
    size leaves a small rest; a process tree's storage reads less K times its reads
    (read_bytes against rchar, write_bytes against wchar), K the block's share of them
    that missed the page cache;
  - "cum": a GPU's energy counter less K times the running sum of its power (energy_mj
    against power_mw; K the block's seconds per sample): NVML's energy is the power's
    integral, so the rest is how far the interval's mean power was from the sampled one.

K is in 256ths (a prediction is K * value // 256, exact in integers both ways).  A
prediction is used only where it makes the column's differences smaller (the block
header's "pred" list says which, with their K); the column then holds the rest, coded as
any other (blocks.py).  Decoding adds the prediction back, after every column is read.
Version 2 blocks have no "pred": nothing changes for them.
"""

from __future__ import annotations

import itertools
import operator

from gpudisk_top.record.v2.fields import INTS

# (kind, target field, reference fields), of one disk ("d/DEV/") or GPU ("g/I/")
_DISK = (("sum", "rq_ticks", ("rd_ticks", "wr_ticks", "dc_ticks", "fl_ticks")),
         ("lin", "rd_sectors", ("rd_ios",)), ("lin", "wr_sectors", ("wr_ios",)),
         ("lin", "dc_sectors", ("dc_ios",)))
_GPU = (("cum", "energy_mj", ("power_mw",)),)
# a process tree's increases ("T/TREE/"): the bytes it read from storage against those it
# read at all (read_bytes is rchar less what the page cache served)
_TREE = (("lin", "read_bytes", ("rchar",)), ("lin", "write_bytes", ("wchar",)))
_TABLES = {"d": _DISK, "g": _GPU, "T": _TREE}
_MAX_K = 1 << 30
_K_ONE = 256           # "lin" and "cum" multiply by K / 256: fractions of a sector, a byte


def spread(seq) -> float:
    """The mean absolute deviation of seq from its mean: what a column's packed bytes
    cost after LZMA grows with (its entropy), where the sum of magnitudes does not (a
    counter's steady increase is large and costs nothing)."""
    n = len(seq)
    if not n:
        return 0.0
    mean = sum(seq) / n
    return sum(map(abs, map(operator.sub, seq, itertools.repeat(mean, n)))) / n


def _diffs(vals) -> list:
    return list(map(operator.sub, vals[1:], vals[:-1]))


def _prediction(kind: str, k: int, refs: list[list]) -> list:
    if kind == "sum":
        return [sum(t) for t in zip(*refs)]
    if kind == "lin":
        return [k * v // _K_ONE for v in refs[0]]
    return [k * v // _K_ONE for v in itertools.accumulate(refs[0])]           # "cum"


def candidates(keys) -> list[tuple[str, str, tuple[str, ...]]]:
    """(kind, target key, reference keys) for the disks and GPUs among a block's keys."""
    have = set(keys)
    out = []
    for key in keys:
        head, _, field = key.rpartition("/")
        table = _TABLES.get(key[:key.find("/")], ())
        for kind, target, refs in table:
            if field == target:
                ref_keys = tuple(f"{head}/{r}" for r in refs)
                if all(r in have for r in ref_keys):
                    out.append((kind, key, ref_keys))
    return out


def field_is_increase(key: str) -> bool:
    """A tree's columns hold each interval's increase, not a counter."""
    return key.startswith("T/")


def _ints(vals) -> bool:
    return vals is not None and set(map(type, vals)) <= INTS


def apply(keys: list[str], cols: list[list], presence: list) -> list[list]:
    """Replace predicted columns by their rests, in cols (each column's values in the
    rows that have it; presence: which rows those are, equal for columns present in the
    same rows) and return the block header's "pred" list: [target column, kind, K,
    [reference columns]] per column replaced.  A column is predicted only from columns
    present in the same rows."""
    index = {k: i for i, k in enumerate(keys)}
    out = []
    for kind, target, ref_keys in candidates(keys):
        t = index[target]
        ref_cols = [index[r] for r in ref_keys]
        if any(presence[r] != presence[t] for r in ref_cols):
            continue
        refs = [cols[r] for r in ref_cols]
        vals = cols[t]
        if len(vals) < 2 or not _ints(vals) or not all(map(_ints, refs)):
            continue
        k = 1
        if kind != "sum":
            if kind == "cum":
                base, span = sum(refs[0][1:]), vals[-1] - vals[0]
            elif field_is_increase(target):
                base, span = sum(refs[0]), sum(vals)
            else:
                base, span = refs[0][-1] - refs[0][0], vals[-1] - vals[0]
            if not base:
                continue
            k = round(span * _K_ONE / base)
            if not 0 < k < _MAX_K:
                continue
        rest = list(map(operator.sub, vals, _prediction(kind, k, refs)))
        if spread(_diffs(rest)) < spread(_diffs(vals)):
            cols[t] = rest
            out.append([t, kind, k, ref_cols])
    return out


def undo(pred: list, cols: list[list], absent) -> None:
    """Add the predictions of a block header's "pred" list back to cols (decoded columns,
    `absent` in the rows without the column; in place).  Raises ValueError or TypeError
    for a list that does not fit the columns."""
    for t, kind, k, refs in pred:
        if kind not in ("sum", "lin", "cum") or not isinstance(k, int):
            raise ValueError(f"a prediction of kind {kind!r}")
        if t in refs:
            raise ValueError("a column predicted from itself")
        col = cols[t]
        rows = [i for i, v in enumerate(col) if v is not absent]
        ref_vals = [[cols[r][i] for i in rows] for r in refs]
        pred_vals = _prediction(kind, k, ref_vals)
        for i, p in zip(rows, pred_vals, strict=True):
            col[i] += p
