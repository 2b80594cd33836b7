"""Format version 2, blocks: SEGMENT_SAMPLES samples of a session in one B frame.

The values column by column, each coded against itself (as is, as differences, or as
differences of differences, whichever is smallest), packed at the narrowest byte width
that holds it, and the whole block compressed with LZMA; rarely changing values (names,
device identity, command lines) as JSON runs.  The wall times go apart, deflated, so that
opening a recording reads them without decompressing the columns."""

from __future__ import annotations

import dataclasses
import itertools
import json
import lzma
import operator
import struct
import zlib
from array import array

from gpudisk_top.record.v2 import predict
from gpudisk_top.record.v2.fields import (INTS, FormatError, bits_float, constant, expand,
                                          runs)
from gpudisk_top.record.v2.predict import spread
from gpudisk_top.record.v2.unflatten import Unflattener

ABSENT = object()            # no value: the column's entity is not in this row
_WIDTHS = ((0, None), (1, "B"), (2, "H"), (4, "I"), (8, "Q"))
# a B frame's payload: first sample number, samples, then the lengths of its three parts:
# wall times (deflated, exact), the columns (LZMA), the summaries (record/derived.py)
BLOCK_HEAD = struct.Struct("<IIIII")
_BODY_HEAD = struct.Struct("<II")       # inside the LZMA part: header length, data length
WALL_KEY = "t/wall"


def _width(span: int) -> tuple[int, str | None]:
    """The narrowest unsigned width that holds 0..span (-1: none does)."""
    for w, code in _WIDTHS:
        if span < 1 << (8 * w):
            return w, code
    return -1, None


def _shuffle(data: bytes, w: int) -> bytes:
    """Byte planes: all first bytes, then all second bytes...  The high bytes of a
    column are nearly constant, so a compressor finds them as long runs."""
    if w <= 1:
        return data
    return b"".join(data[k::w] for k in range(w))


def _unshuffle(data, w: int, count: int) -> bytes:
    if w <= 1:
        return bytes(data)
    out = bytearray(count * w)
    for k in range(w):
        out[k::w] = data[k * count:(k + 1) * count]
    return bytes(out)




def _code_ints(vals: list):
    """(mode, heads, seq) with the smallest spread (predict.spread: what the packed
    bytes cost after LZMA): 0 as is, 1 differences, 2 differences of differences.  A
    smaller sum of magnitudes chose differences of differences for every noisy counter,
    whose spread is larger (the noise of two intervals): 4 % of a busy node's block."""
    n = len(vals)
    best = (0, [], vals)
    step = 2 if n > 128 else 1             # every other value of a long column: half the CPU
    if n >= 2:
        d = list(map(operator.sub, vals[1:], vals[:-1]))
        cost = spread(d, step)
        # a column that never goes down (a counter) is not worth its spread as is
        best_cost = spread(vals, step) if min(d) < 0 else cost + 1
        if cost < best_cost:
            best, best_cost = (1, [vals[0]], d), cost
        if n >= 3 and cost:
            dd = list(map(operator.sub, d[1:], d[:-1]))
            if spread(dd, step) < best_cost:
                best = (2, [vals[0], d[0]], dd)
    return best


def _decode_ints(mode: int, heads: list, seq, n: int) -> list:
    if mode == 0:
        return list(seq)
    if mode == 1:
        return list(itertools.accumulate(seq, initial=heads[0]))
    d = list(itertools.accumulate(seq, initial=heads[1]))
    return list(itertools.accumulate(d, initial=heads[0]))[:n]


# a block of this many samples or fewer is also coded without predictions, and the
# smaller kept: a small block's predictions (their descriptions in its header) can cost
# more than they save (a 1 MB --max-size budget leaves parts of ~10-sample blocks)
PLAIN_TRY_ROWS = 64


def encode_block(first: int, rows: list[tuple[int, list]], layouts: list[tuple],
                 state: dict, level: int = 6, summaries: bytes = b"",
                 predict_cols: bool = False) -> bytes:
    """A B frame's payload: samples first..first+len(rows)-1 of a session.  rows are
    (layout index, values); state is the processes' rebuilt counters before the first
    row (Unflattener.counters after the sample before it); summaries, the derived part.
    predict_cols: code columns against others where that is smaller (format version 3,
    predict.py; a block of PLAIN_TRY_ROWS or fewer, where the whole block is smaller
    without); a version 2 file's blocks are written without."""
    out, predicted = _encode(first, rows, layouts, state, level, summaries, predict_cols)
    if predicted and len(rows) <= PLAIN_TRY_ROWS:
        plain, _ = _encode(first, rows, layouts, state, level, summaries, False)
        if len(plain) < len(out):
            return plain
    return out


def _encode(first: int, rows: list[tuple[int, list]], layouts: list[tuple], state: dict,
            level: int, summaries: bytes, predict_cols: bool) -> tuple[bytes, bool]:
    """(the B frame's payload, whether a column in it is predicted)."""
    n = len(rows)
    union: dict[str, int] = {}
    maps = []
    for layout in layouts:
        maps.append([union.setdefault(k, len(union)) for k in layout])
    ncols = len(union)
    # transpose runs of rows that share a layout (zip runs in C); a column is the values
    # of the runs whose layout has its key
    groups = [(lid, [v for _, v in grp]) for lid, grp in itertools.groupby(rows, key=operator.itemgetter(0))]
    pieces: list[list] = [[] for _ in range(ncols)]
    for r, (lid, grp) in enumerate(groups):
        for c, values in zip(maps[lid], zip(*grp)):
            pieces[c].append((r, values))
    columns: list = []
    presents: list = []
    for c in range(ncols):
        got = pieces[c]
        present = None
        if len(got) == 1:
            vals = list(got[0][1])
        else:
            vals = list(itertools.chain.from_iterable(v for _, v in got))
        if len(got) < len(groups):
            have = {r for r, _ in got}
            present = []
            for r, (_, grp) in enumerate(groups):
                flag = r in have
                if present and present[-1][0] == flag:
                    present[-1][1] += len(grp)
                else:
                    present.append([flag, len(grp)])
        columns.append(vals)
        presents.append(present)
    pred = []
    if predict_cols:
        pred = predict.apply(list(union), columns, presents)
    descs = []
    chunks: dict[int, list] = {}
    sub = operator.sub
    wall_col = union.get(WALL_KEY)
    walls = b""
    for c in range(ncols):
        vals, present = columns[c], presents[c]
        if c == wall_col and present is None:
            # the wall times go in their own part, which opening a recording reads
            descs.append([None, "w"])
            walls = _pack_walls(vals)
            continue
        v0 = vals[0]
        m = len(vals)
        if constant(vals):                       # its value is enough
            if type(v0) is int:
                descs.append([present, "i", 1, 0, [v0], 0])
            else:
                descs.append([present, "j", [[v0, m]]])
            continue
        if set(map(type, vals)) <= INTS:
            mode, heads, seq = _code_ints(vals)
            lo = min(seq) if seq else 0
            w, code = _width((max(seq) - lo) if seq else 0)
            if w >= 0:
                if w:
                    if lo:
                        seq = list(map(sub, seq, itertools.repeat(lo, len(seq))))
                    chunks.setdefault(w, []).append(_shuffle(array(code, seq).tobytes(), w))
                descs.append([present, "i", mode, w, heads, lo])
                continue
        descs.append([present, "j", runs(vals)])
    data = b"".join(b for w in sorted(chunks) for b in chunks[w])
    head = {"keys": list(union), "layouts": maps, "rows": runs([lid for lid, _ in rows]),
            "cols": descs, "state": [[pid, c] for pid, c in state.items()]}
    if pred:
        head["pred"] = pred
    header = json.dumps(head, separators=(",", ":"), ensure_ascii=False,
                        allow_nan=True).encode()
    body = _BODY_HEAD.pack(len(header), len(data)) + header + data
    packed = lzma.compress(body, format=lzma.FORMAT_RAW, filters=[dict(_LZMA_ENCODE, preset=level)])
    return (BLOCK_HEAD.pack(first, n, len(walls), len(packed), len(summaries)) + walls + packed
            + summaries, bool(pred))


def _pack_walls(bits: list) -> bytes:
    """Wall times (their float bits) as differences of differences, deflated."""
    if len(bits) < 2:
        heads, seq = list(bits), []
    else:
        d = list(map(operator.sub, bits[1:], bits[:-1]))
        heads, seq = [bits[0], d[0]], list(map(operator.sub, d[1:], d[:-1]))
    return zlib.compress(json.dumps(heads).encode() + b"\n" + array("q", seq).tobytes(), 9)


def _unpack_walls(data, n: int) -> list[int]:
    raw = zlib.decompress(bytes(data))
    nl = raw.index(b"\n")
    heads = json.loads(raw[:nl])
    seq = array("q")
    seq.frombytes(raw[nl + 1:])
    if n < 2:
        return heads[:n]
    return _decode_ints(2, heads, seq, n)


def block_info(payload) -> tuple[int, int, list[float]]:
    """(first sample number, samples, their wall times) of a B frame, without
    decompressing its columns.  Raises FormatError."""
    try:
        first, n, wl, rl, sl = BLOCK_HEAD.unpack_from(payload)
        if BLOCK_HEAD.size + wl + rl + sl != len(payload):
            raise FormatError("a block whose parts do not add up")
        off = BLOCK_HEAD.size
        bits = _unpack_walls(payload[off:off + wl], n) if wl else []
        if len(bits) != n:
            raise FormatError("a block without its wall times")
        return first, n, [bits_float(b) for b in bits]
    except FormatError:
        raise
    except (zlib.error, ValueError, struct.error, IndexError) as err:
        raise FormatError(f"{type(err).__name__}: {err}") from None


def block_summaries(payload) -> bytes:
    """The derived part of a B frame (b"" when it has none)."""
    first, n, wl, rl, sl = BLOCK_HEAD.unpack_from(payload)
    off = BLOCK_HEAD.size + wl + rl
    return bytes(payload[off:off + sl])


# A block's columns are under a megabyte: a 1 MiB dictionary holds them, so a reader needs
# no more memory than that.  Preset 6 as it is (a binary-tree match finder, nice_len 64):
# on the busy day's format 3 columns 226.5 bytes a sample against 234.7 for a four-byte
# hash chain stopped early (nice_len 8, depth 4, what was written until issue 41's third
# stop), at 88 against 39 ms of CPU a 600-sample block: 0.008 % of a core at 1 Hz for
# 0.7 MB a day (preset 9e: 224.9 bytes at 223 ms).  The recorder's own thread compresses
# a block; the reader's settings need no change.
_LZMA_ENCODE = {"id": lzma.FILTER_LZMA2, "dict_size": 1 << 20}
_LZMA_FILTERS = [_LZMA_ENCODE]     # the reader's: the same dictionary


@dataclasses.dataclass
class Block:
    first: int
    layouts: list[tuple]           # the layouts of its rows (column keys)
    maps: list[list[int]]          # per layout: the block column of each of its keys
    row_layouts: list[int]
    rows: list[tuple]              # one tuple per sample over the block's columns
    state: dict[int, list]         # processes' counters before the first row

    def values(self, j: int) -> tuple[tuple, list]:
        """(layout, values) of the block's row j."""
        lid = self.row_layouts[j]
        row = self.rows[j]
        return self.layouts[lid], [row[c] for c in self.maps[lid]]


def decode_block(payload) -> Block:
    """The columns of a B frame, rows not yet made into Samples.  Raises FormatError."""
    try:
        first, n, wl, rl, sl = BLOCK_HEAD.unpack_from(payload)
        off = BLOCK_HEAD.size
        wall_bits = _unpack_walls(payload[off:off + wl], n) if wl else None
        body = lzma.decompress(bytes(payload[off + wl:off + wl + rl]), format=lzma.FORMAT_RAW,
                               filters=_LZMA_FILTERS)
        hlen, dlen = _BODY_HEAD.unpack_from(body)
        off = _BODY_HEAD.size
        h = json.loads(body[off:off + hlen])
        data = memoryview(body)[off + hlen:off + hlen + dlen]
        keys = h["keys"]
        descs = h["cols"]
        # the packed columns are stored by width, in column order within a width
        sizes = {}
        for d in descs:
            if d[1] == "i" and d[3]:
                sizes.setdefault(d[3], []).append(d)
        offsets = {}
        pos = 0
        for w in sorted(sizes):
            for d in sizes[w]:
                offsets[id(d)] = pos
                nvals = _present_count(d[0], n) - len(d[4])
                pos += nvals * w
        cols = []
        for d in descs:
            present, kind = d[0], d[1]
            if kind == "w":
                if wall_bits is None or len(wall_bits) != n:
                    raise FormatError("a block without its wall times")
                cols.append(wall_bits)
                continue
            m = _present_count(present, n)
            if kind == "i":
                _, _, mode, w, heads, lo = d
                cnt = m - len(heads)
                if w:
                    code = dict(_WIDTHS)[w]
                    start = offsets[id(d)]
                    seq = array(code)
                    seq.frombytes(_unshuffle(data[start:start + cnt * w], w, cnt))
                    if lo:
                        seq = map(operator.add, seq, itertools.repeat(lo, cnt))
                else:
                    seq = [lo] * cnt
                vals = _decode_ints(mode, heads, seq, m)
            else:
                vals = expand(d[2])
            if present is not None:
                full = []
                it = iter(vals)
                for flag, count in present:
                    full += [next(it) for _ in range(count)] if flag else [ABSENT] * count
                vals = full
            if len(vals) != n:
                raise FormatError("a column of the wrong length")
            cols.append(vals)
        if "pred" in h:
            predict.undo(h["pred"], cols, ABSENT)
        layouts = [tuple(keys[c] for c in m) for m in h["layouts"]]
        row_layouts = expand(h["rows"])
        rows = list(zip(*cols)) if cols else [()] * n
        state = {pid: c for pid, c in h["state"]}
        if len(row_layouts) != n:
            raise FormatError("rows and layouts do not match")
        return Block(first, layouts, h["layouts"], row_layouts, rows, state)
    except FormatError:
        raise
    except (lzma.LZMAError, ValueError, TypeError, KeyError, IndexError, struct.error,
            StopIteration) as err:
        raise FormatError(f"{type(err).__name__}: {err}") from None


def _present_count(present, n: int) -> int:
    if present is None:
        return n
    return sum(count for flag, count in present if flag)


def block_samples(payload, recorded: dict | None = None):
    """(first, [Sample, ...], end state) of a B frame."""
    blk = decode_block(payload)
    un = Unflattener(blk.state, recorded)
    out = [un.sample(*blk.values(j)) for j in range(len(blk.rows))]
    return blk.first, out, un.counters
