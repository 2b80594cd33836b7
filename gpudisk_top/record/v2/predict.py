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

from gpudisk_top.record.v2.fields import INTS, constant

# (kind, target field, reference fields), of one disk ("d/DEV/") or GPU ("g/I/"), in the
# order decoding undoes them: a target that is another's reference comes first
_DISK = (("lin", "rd_ticks", ("rd_ios",)), ("lin", "wr_ticks", ("wr_ios",)),
         ("lin", "fl_ticks", ("fl_ios",)), ("lin", "dc_ticks", ("dc_ios",)),
         ("lin", "rd_merges", ("rd_ios",)), ("lin", "wr_merges", ("wr_ios",)),
         ("sum", "rq_ticks", ("rd_ticks", "wr_ticks", "dc_ticks", "fl_ticks")),
         ("lin", "tot_ticks", ("rq_ticks",)),
         ("lin", "rd_sectors", ("rd_ios",)), ("lin", "wr_sectors", ("wr_ios",)),
         ("lin", "dc_sectors", ("dc_ios",)))
_GPU = (("cum", "energy_mj", ("power_mw",)),)
# a process tree's increases ("T/TREE/"): the bytes it read from storage against those it
# read at all (read_bytes is rchar less what the page cache served)
_TREE = (("lin", "read_bytes", ("rchar",)), ("lin", "write_bytes", ("wchar",)))
_TABLES = {"d": _DISK, "g": _GPU, "T": _TREE}
_MAX_K = 1 << 30
_K_ONE = 256           # "lin" and "cum" multiply by K / 256: fractions of a sector, a byte


def spread(seq, step: int = 1) -> float:
    """The mean absolute deviation of seq from its mean (of every step-th value): what a
    column's packed bytes cost after LZMA grows with (its entropy), where the sum of
    magnitudes does not (a counter's steady increase is large and costs nothing)."""
    if step > 1:
        seq = seq[::step]
    n = len(seq)
    if not n:
        return 0.0
    mean = sum(seq) / n
    return sum(map(abs, map(operator.sub, seq, itertools.repeat(mean, n)))) / n


def _diffs(vals) -> list:
    return list(map(operator.sub, vals[1:], vals[:-1]))


def _ratio(ref: list, target: list) -> list:
    """Each value's prediction: its reference's value times the target's ratio to the
    reference in the row before (that row's reference taken as 1 where it is 0), 0 for
    the first.  Encoding only (maps run in C); decoding rebuilds the same in order."""
    if len(ref) < 2:
        return [0] * len(ref)
    div = [r or 1 for r in ref[:-1]]
    return [0] + list(map(operator.floordiv, map(operator.mul, ref[1:], target[:-1]), div))


def _scaled(k: int, seq):
    """K/256 of each value of seq, exact in integers: k * v // 256 (an iterator; maps
    run in C, where a generator's frame resumes once a value)."""
    return map(operator.floordiv, map(operator.mul, itertools.repeat(k), seq),
               itertools.repeat(_K_ONE))


def _prediction(kind: str, k: int, refs: list[list]) -> list:
    if kind == "sum":
        return [sum(t) for t in zip(*refs)]
    if kind == "lin":
        return list(_scaled(k, refs[0]))
    return list(_scaled(k, itertools.accumulate(refs[0])))           # "cum"


def candidates(keys) -> list[tuple[str, str, tuple[str, ...]]]:
    """(kind, target key, reference keys) for the disks and GPUs among a block's keys."""
    have = set(keys)
    out = []
    for key in keys:
        head, _, field = key.rpartition("/")
        table = _TABLES.get(key[:key.find("/")], ())
        for rank, (kind, target, refs) in enumerate(table):
            if field == target:
                ref_keys = tuple(f"{head}/{r}" for r in refs)
                if all(r in have for r in ref_keys):
                    out.append((rank, kind, key, ref_keys))
    out.sort(key=lambda c: c[0])            # stable: the keys' order within a rank
    return [c[1:] for c in out]


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
    before: dict[int, list] = {}      # replaced columns as they were: predictions use them
    diffs: dict[int, list] = {}       # their differences, each made once
    ints: dict[int, bool] = {}

    def diff(c: int) -> list:
        d = diffs.get(c)
        if d is None:
            d = diffs[c] = _diffs(before.get(c, cols[c]))
        return d

    def is_int(c: int) -> bool:
        b = ints.get(c)
        if b is None:
            b = ints[c] = _ints(before.get(c, cols[c]))
        return b

    for kind, target, ref_keys in candidates(keys):
        t = index[target]
        ref_cols = [index[r] for r in ref_keys]
        vals = cols[t]
        # a constant column costs nothing already (a disk's discards, most often)
        if (len(vals) < 2 or constant(vals)
                or any(presence[r] != presence[t] for r in ref_cols)
                or not is_int(t) or not all(map(is_int, ref_cols))):
            continue
        refs = [before.get(r, cols[r]) for r in ref_cols]
        increase = field_is_increase(target)
        k = 1
        if kind != "sum":
            if kind == "cum":
                base, span = sum(refs[0][1:]), vals[-1] - vals[0]
            elif increase:
                base, span = sum(refs[0]), sum(vals)
            else:
                base, span = refs[0][-1] - refs[0][0], vals[-1] - vals[0]
            k = round(span * _K_ONE / base) if base else 0
        # the costs are judged on differences (a counter is coded as its differences),
        # near enough: the rest is made exactly only for the prediction chosen
        dv = diff(t)
        if increase:
            best, best_cost = None, min(spread(vals), spread(dv))
        else:
            best, best_cost = None, spread(dv)
        if 0 < k < _MAX_K:
            if kind == "sum":
                guess = list(map(operator.sub, dv, map(sum, zip(*map(diff, ref_cols)))))
            elif kind == "cum":
                guess = list(map(operator.sub, dv, _scaled(k, refs[0][1:])))
            elif increase:
                guess = list(map(operator.sub, vals, _scaled(k, refs[0])))
            else:
                guess = list(map(operator.sub, dv, _scaled(k, diff(ref_cols[0]))))
            cost = spread(guess)
            if cost < best_cost:
                best, best_cost = [t, kind, k, ref_cols], cost
        if kind == "lin":
            # the ratio of the row before: a request size or a cache hit rate that
            # changes from phase to phase within a block
            if increase:
                guess = list(map(operator.sub, vals, _ratio(refs[0], vals)))
            else:
                guess = list(map(operator.sub, dv, _ratio(diff(ref_cols[0]), dv)))
            if spread(guess) < best_cost:
                best = [t, "ratio" if increase else "dratio", 0, ref_cols]
        if best is not None:
            before[t] = vals
            cols[t] = _rest(best[1], best[2], refs, vals)
            out.append(best)
    return out


def _rest(kind: str, k: int, refs: list[list], vals: list) -> list:
    """The column a prediction leaves: what undo() adds the prediction back to."""
    if kind == "ratio":
        return list(map(operator.sub, vals, _ratio(refs[0], vals)))
    if kind == "dratio":
        steps = _ratio(_diffs(refs[0]), _diffs(vals))
        return list(map(operator.sub, vals, itertools.accumulate([0] + steps)))
    return list(map(operator.sub, vals, _prediction(kind, k, refs)))


def undo(pred: list, cols: list[list], absent) -> None:
    """Add the predictions of a block header's "pred" list back to cols (decoded columns,
    `absent` in the rows without the column; in place).  Raises ValueError or TypeError
    for a list that does not fit the columns."""
    for t, kind, k, refs in pred:
        if kind not in ("sum", "lin", "cum", "ratio", "dratio") or not isinstance(k, int):
            raise ValueError(f"a prediction of kind {kind!r}")
        if t in refs:
            raise ValueError("a column predicted from itself")
        col = cols[t]
        rows = [i for i, v in enumerate(col) if v is not absent]
        ref_vals = [[cols[r][i] for i in rows] for r in refs]
        vals = [col[i] for i in rows]
        if kind == "ratio":
            _unratio(ref_vals[0], vals)
        elif kind == "dratio":
            _undratio(ref_vals[0], vals)
        else:
            vals = list(map(operator.add, vals, _prediction(kind, k, ref_vals)))
        for i, v in zip(rows, vals, strict=True):
            col[i] = v


def _unratio(ref: list, vals: list) -> None:
    """vals (the rests of a "ratio" prediction) back to the values, in place."""
    for i in range(1, len(vals)):
        vals[i] += ref[i] * vals[i - 1] // (ref[i - 1] or 1)


def _undratio(ref: list, vals: list) -> None:
    """vals (the rests of a "dratio" prediction: the counter less the running sum of its
    predicted increases) back to the counter, in place."""
    total = 0
    for i in range(2, len(vals)):
        total += ((ref[i] - ref[i - 1]) * (vals[i - 1] - vals[i - 2])
                  // (ref[i - 1] - ref[i - 2] or 1))
        vals[i] += total
