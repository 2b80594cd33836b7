"""Format version 2, rows: one R frame per sample, written as soon as it is taken.

A run of rows (after a session start or a block) starts with a row that carries its
layout and every value; the next rows carry the differences of the integer values from
the row before and only the records that changed.  Rows are the crash-safe tail of a
recording until a block replaces them (blocks.py)."""

from __future__ import annotations

import json
import operator
import struct
import zlib

from gpudisk_top.record.v2.fields import GPU_FLOATS, HEALTH_HEADS, INTS, FormatError, getter

ROW = struct.Struct("<I")    # session-relative sample number
_STATIC_TAILS = frozenset(("st", "static", "procs") + GPU_FLOATS)
_STATIC_HEADS = frozenset(("v", "gs", "w", "px") + HEALTH_HEADS)


def _positions(layout) -> tuple:
    """(static positions, other positions) of a layout: records that rarely change are
    written in a row only when they changed since the previous row."""
    st, dyn = [], []
    for i, k in enumerate(layout):
        parts = k.split("/")
        (st if parts[0] in _STATIC_HEADS or parts[-1] in _STATIC_TAILS or k in ("h/cg", "h/cgmax")
         else dyn).append(i)
    return st, dyn




class RowCoder:
    """Rows of one run of R frames (after a session start or a block): the first row of
    a run and any row whose layout changed carry the layout and every record; the others
    carry only the records that changed since the row before."""

    def __init__(self) -> None:
        self._plans: dict = {}
        self.reset()

    def reset(self) -> None:
        self._layout = None
        self._statics = None
        self._dyn = None

    def _plan(self, layout):
        p = self._plans.get(layout)
        if p is None:
            st, dyn = _positions(layout)
            p = self._plans[layout] = (st, dyn, getter(st), getter(dyn))
        return p

    def encode(self, number: int, layout: tuple, vals: list) -> tuple[bytes, tuple]:
        """(payload, token): pass the token to accepted() once the row is written."""
        st_idx, _, get_st, get_dyn = self._plan(layout)
        statics = get_st(vals)
        dyn = get_dyn(vals)
        ints = set(map(type, dyn)) <= INTS
        if layout is self._layout or layout == self._layout:
            prev = self._statics
            changes = [[k, v] for k, (v, p) in enumerate(zip(statics, prev)) if v != p]
            if ints and self._dyn is not None:
                # differences from the row before: short numbers, less to write and deflate
                body = [None, changes, None, list(map(operator.sub, dyn, self._dyn))]
            else:
                body = [None, changes, dyn, None]
        else:
            body = [layout, statics, dyn, None]
        data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
        # not deflated: rows live only until their block replaces them, and deflating
        # each one cost more CPU than the 2 kB it saved
        return ROW.pack(number) + data, (layout, statics, dyn if ints else None)

    def accepted(self, token: tuple) -> None:
        self._layout, self._statics, self._dyn = token


class RowDecoder:
    """The mirror of RowCoder for one run of rows; raises FormatError."""

    def __init__(self) -> None:
        self._layout = None
        self._statics = None
        self._dyn = None
        self._plans: dict = {}

    def decode(self, payload) -> tuple[int, tuple, list]:
        """(number, layout, values) of one R frame's payload."""
        try:
            (number,) = ROW.unpack_from(payload)
            layout, statics, dyn, delta = json.loads(bytes(payload[ROW.size:]))
            if delta is not None:
                if self._dyn is None:
                    raise FormatError("a row of differences without the row before it")
                dyn = list(map(operator.add, self._dyn, delta))
            if layout is not None:
                layout = tuple(layout)
                statics = list(statics)
            else:
                if self._layout is None:
                    raise FormatError("a row whose layout was lost (damage before it)")
                layout = self._layout
                changed = statics
                statics = list(self._statics)
                for k, v in changed:
                    statics[k] = v
            p = self._plans.get(layout)
            if p is None:
                p = self._plans[layout] = _positions(layout)
            st_idx, dyn_idx = p
            if len(st_idx) != len(statics) or len(dyn_idx) != len(dyn):
                raise FormatError("a row that does not match its layout")
            vals = [None] * len(layout)
            for i, v in zip(st_idx, statics):
                vals[i] = v
            for i, v in zip(dyn_idx, dyn):
                vals[i] = v
        except FormatError:
            raise
        except (zlib.error, ValueError, TypeError, struct.error, IndexError) as err:
            raise FormatError(f"{type(err).__name__}: {err}") from None
        self._layout, self._statics = layout, statics
        self._dyn = dyn if set(map(type, dyn)) <= INTS else None
        return number, layout, vals


