"""Reading format version 2: which frames hold which samples, and decoding them.

A session's samples are numbered from 0.  Each is in a block (B frame) or, when its block
was never written (the recorder was stopped within SEGMENT_SAMPLES samples of its end),
in a row (R frame).  A crash while a block was being copied over its rows can leave the
rows and the block, or the block twice: the first block wins, and rows a block covers are
ignored.  Rows after a gap (damage) cannot be decoded until the next block: they carry
their processes' counters as shares of what came before.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from gpudisk_top.record import format_v2, frames

_B, _R = 0, 1


@dataclass
class _Session:
    header: dict
    end: dict | None = None
    blocks: dict = field(default_factory=dict)      # first number -> (frame, n, walls)
    rows: dict = field(default_factory=dict)        # number -> frame
    tail_summaries: list = field(default_factory=list)   # s frames
    duplicates: set = field(default_factory=set)    # offsets of blocks written twice


@dataclass
class _Unit:
    """A block, or a run of rows: samples decoded in order from a known state."""

    kind: int
    session: int
    frames: list                 # the B frame, or the R frames of the run
    numbers: list[int]           # session numbers of its samples
    prev_block: "_Unit | None" = None   # a run of rows: the block before it


class V2Index:
    """The index of a v2 recording and its decoder.  Fills `walls`, `session_firsts`
    (global indexes), `sessions` (header, end), and reports damage in `warnings`."""

    def __init__(self, path: str, buf, warnings: list[str], session_cls) -> None:
        self.path = path
        self.buf = buf
        self.warnings = warnings
        self.walls: list[float] = []
        self.session_firsts: list[int] = []
        self.sessions = []
        self.refs: list[tuple] = []          # per sample: (unit, position in unit)
        self.units: list[_Unit] = []
        self._numbers: list[dict] = []      # per session: number -> global index
        self._raw_sessions: list[_Session] = []
        self._cursor = None                 # (unit, next position, Unflattener, RowDecoder)
        self._end_states: dict[int, dict] = {}   # id(block unit) -> processes' counters after it
        self._block_cache: tuple | None = None
        self._summaries: list | None = None
        self._build(session_cls)

    # ------------------------------------------------------------------ indexing
    def _build(self, session_cls) -> None:
        found, damage = frames.scan(self.buf, frames.PREAMBLE.size)
        sessions: list[_Session] = []
        cur: _Session | None = None
        unknown: set[int] = set()
        bad = 0
        self._frame_session: dict[int, int] = {}    # frame offset -> session number
        for fr in found:
            kind = fr.kind
            if kind != frames.SESSION:
                self._frame_session[fr.offset] = len(sessions) - 1 if cur is not None else len(sessions)
            if kind == frames.SESSION:
                cur = _Session(frames.frame_json(self.buf, fr, self.path, self.warnings))
                sessions.append(cur)
                continue
            if kind == frames.END:
                if cur is not None:
                    cur.end = frames.frame_json(self.buf, fr, self.path, self.warnings)
                continue
            if kind in (frames.BLOCK, frames.ROW, frames.SUMMARY) and cur is None:
                cur = _Session({})          # its header was lost: this version's schema
                sessions.append(cur)
            if kind == frames.BLOCK:
                try:
                    first, n, walls = format_v2.block_info(self.buf[fr.start:fr.end])
                except format_v2.FormatError:
                    bad += 1
                    continue
                if first in cur.blocks:
                    cur.duplicates.add(fr.offset)
                    continue
                cur.blocks[first] = (fr, n, walls)
            elif kind == frames.ROW:
                if fr.end - fr.start < format_v2.ROW.size:
                    bad += 1
                    continue
                (number,) = format_v2.ROW.unpack_from(self.buf, fr.start)
                cur.rows.setdefault(number, fr)
            elif kind == frames.SUMMARY:
                cur.tail_summaries.append(fr)
            elif chr(kind).isupper() or kind not in range(32, 127):
                unknown.add(kind)
        skipped = 0
        self._raw_sessions = sessions
        for s in sessions:
            skipped += self._index_session(s, session_cls)
        self._report(damage, found, sessions, skipped, unknown, bad)

    def _index_session(self, s: _Session, session_cls) -> int:
        """Add a session's samples in number order; returns rows that cannot be read."""
        first_global = len(self.walls)
        session_no = len(self.sessions)
        self.sessions.append(session_cls(s.header, first_global, end=s.end))
        self.session_firsts.append(first_global)
        numbers: dict[int, int] = {}
        self._numbers.append(numbers)
        covered = set()
        for first, (fr, n, walls) in s.blocks.items():
            covered.update(range(first, first + n))
        events = [(first, _B, item) for first, item in s.blocks.items()]
        events += [(num, _R, fr) for num, fr in s.rows.items() if num not in covered]
        events.sort(key=lambda e: (e[0], e[1]))
        expected = 0               # the next number a row run may continue from
        last_block: _Unit | None = None
        run: _Unit | None = None
        skipped = 0
        for num, kind, item in events:
            if kind == _B:
                fr, n, walls = item
                unit = _Unit(_B, session_no, [fr], list(range(num, num + n)))
                self.units.append(unit)
                for j, w in enumerate(walls):
                    numbers[num + j] = len(self.walls)
                    self.walls.append(w)
                    self.refs.append((unit, j))
                last_block, run = unit, None
                expected = num + n
                continue
            fr = item
            if num != expected:
                skipped += 1       # a gap before it: its chain is broken
                continue
            if run is None:
                prev = last_block if last_block is not None and last_block.numbers[-1] == num - 1 else None
                if num != 0 and prev is None:
                    skipped += 1
                    continue
                run = _Unit(_R, session_no, [], [], prev_block=prev)
                self.units.append(run)
            numbers[num] = len(self.walls)
            self.walls.append(fr.wall_s)
            self.refs.append((run, len(run.frames)))
            run.frames.append(fr)
            run.numbers.append(num)
            expected = num + 1
        return skipped

    def _report(self, damage, found, sessions, skipped: int, unknown: set, bad: int) -> None:
        starts = [f.offset for f in found]
        for d in damage:
            # a block copy that power loss cut short (see writer.py): what is damaged is
            # rows the block holds, and the session misses no sample
            if not d.torn_tail:
                k = bisect.bisect_left(starts, d.end)
                sno = self._frame_session.get(starts[k]) if k < len(starts) else None
                if sno is not None and sno < len(self._numbers) and self._complete(sno):
                    continue
            if d.torn_tail:
                self.warnings.append(
                    f"{self.path}: the last {d.end - d.start} bytes (from byte {d.start}) are a torn "
                    "or damaged frame, skipped (the recorder was stopped while writing: kill -9, "
                    f"power loss or a full disk); the {len(self.walls)} samples before it are read")
            else:
                self.warnings.append(f"{self.path}: bytes {d.start}-{d.end} are damaged and were skipped")
        if skipped:
            self.warnings.append(f"{self.path}: {skipped} samples after damage, up to the next "
                                 "block, could not be decoded and were skipped")
        if bad:
            self.warnings.append(f"{self.path}: {bad} frames could not be read and were skipped")
        for kind in sorted(unknown):
            self.warnings.append(f"{self.path}: frames of unknown type {kind:#04x} were skipped "
                                 "(written by a newer gpudisk-top?)")

    def _complete(self, sno: int) -> bool:
        """Does session sno hold every sample from its first to its last (and as many
        as its end frame says)?"""
        numbers = self._numbers[sno]
        if not numbers or max(numbers) != len(numbers) - 1:
            return False
        end = self._raw_sessions[sno].end if sno < len(self._raw_sessions) else None
        return end is None or end.get("samples") in (None, len(numbers))

    # ------------------------------------------------------------------ decoding
    def _schema(self, unit: _Unit):
        return self._raw_sessions[unit.session].header.get("schema")

    def _block(self, unit: _Unit) -> format_v2.Block:
        c = self._block_cache
        if c is not None and c[0] is unit:
            return c[1]
        fr = unit.frames[0]
        blk = format_v2.decode_block(self.buf[fr.start:fr.end])
        if len(blk.rows) != len(unit.numbers):
            raise format_v2.FormatError("a block whose samples do not match its index")
        self._block_cache = (unit, blk)
        return blk

    def _end_state(self, unit: _Unit) -> dict:
        """The processes' counters after a block's last sample."""
        key = id(unit)
        state = self._end_states.get(key)
        if state is None:
            blk = self._block(unit)
            un = format_v2.Unflattener(blk.state, self._schema(unit))
            for j in range(len(blk.rows)):
                un.advance(*blk.values(j))
            state = self._end_states[key] = un.counters
        return state

    def sample(self, i: int):
        """Sample i (global index); raises format_v2.FormatError."""
        unit, pos = self.refs[i]
        c = self._cursor
        if c is None or c[0] is not unit or c[1] > pos:
            if unit.kind == _B:
                blk = self._block(unit)
                c = [unit, 0, format_v2.Unflattener(blk.state, self._schema(unit)), None]
            else:
                base = self._end_state(unit.prev_block) if unit.prev_block is not None else {}
                c = [unit, 0, format_v2.Unflattener(base, self._schema(unit)),
                     format_v2.RowDecoder()]
            self._cursor = c
        un = c[2]
        try:
            if unit.kind == _B:
                blk = self._block(unit)
                while c[1] < pos:
                    un.advance(*blk.values(c[1]))
                    c[1] += 1
                out = un.sample(*blk.values(pos))
            else:
                rd = c[3]
                while c[1] <= pos:
                    fr = unit.frames[c[1]]
                    number, layout, vals = rd.decode(self.buf[fr.start:fr.end])
                    if c[1] < pos:
                        un.advance(layout, vals)
                    else:
                        out = un.sample(layout, vals)
                    c[1] += 1
                c[1] = pos + 1
                return out
        except format_v2.FormatError:
            self._cursor = None
            raise
        c[1] = pos + 1
        return out

    def unit_end(self, i: int) -> int:
        """The global index after the last sample of sample i's unit (to skip damage)."""
        unit, pos = self.refs[i]
        return i + len(unit.numbers) - pos

    # ------------------------------------------------------------------ summaries
    def summaries(self):
        """(global index of the first sample, SummaryBlock, session number) of every
        summary block whose samples are all in the index, in index order (decoded once)."""
        if self._summaries is None:
            self._summaries = self._read_summaries()
        return list(self._summaries)

    def _read_summaries(self):
        from gpudisk_top.record import derived

        out = []
        for sno, s in enumerate(self._raw_sessions):
            numbers = self._numbers[sno]
            have: dict[int, object] = {}
            for first, (fr, n, walls) in s.blocks.items():
                data = format_v2.block_summaries(self.buf[fr.start:fr.end])
                if not data:
                    continue
                try:
                    blocks = derived.decode_blocks(data)
                except ValueError:
                    self.warnings.append(f"{self.path}: the summaries of a block at byte "
                                         f"{fr.offset} could not be read; report replays it")
                    continue
                for b in blocks:
                    have[b.first] = b
            for fr in s.tail_summaries:
                try:
                    blocks = derived.decode_blocks(self.buf[fr.start:fr.end])
                except ValueError:
                    continue
                for b in blocks:
                    have.setdefault(b.first, b)
            for first in sorted(have):
                b = have[first]
                g = numbers.get(first)
                if g is None or any(numbers.get(first + k) != g + k for k in range(b.n)):
                    continue
                out.append((g, b, sno))
        out.sort(key=lambda x: x[0])
        # overlapping blocks (a tail summary and a block's): keep the first of each range
        kept, end = [], -1
        for g, b, sno in out:
            if g >= end:
                kept.append((g, b, sno))
                end = g + b.n
        return kept
