"""Reading format version 2: which frames hold which samples, and decoding them.

A session's samples are numbered from 0.  Each is in a block (B frame) or, when its block
was never written (the recorder was stopped within SEGMENT_SAMPLES samples of its end),
in a row (R frame).  A crash while a block was being copied over its rows can leave the
rows and the block, or the block twice: the first block wins, and rows a block covers are
ignored.  Rows after a gap (damage) cannot be decoded until the next block: they carry
their processes' counters as shares of what came before.

A session header that fails its CRC still starts a session (record/sources.py salvages
what it can of it): without that, the samples after it would be taken for the session
before's, and those whose numbers it already holds would be dropped as copies.  Damage
followed by samples numbered from 0 again, when the session being read already holds a
sample 0, is a session whose header was lost with the damage.
"""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass, field

from gpudisk_top.record import frames, sources, v2
from gpudisk_top.record.v2.summary import decode_blocks

_B, _R = 0, 1


@dataclass
class _Session:
    header: dict
    damaged: bool = False                           # its header failed its CRC or was lost
    offset: int | None = None                       # where its header is (or was)
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
    schema: object = None        # its session header's record schema (None: this version's)
    prev_block: "_Unit | None" = None   # a run of rows: the block before it


class V2Index:
    """The index of a v2 recording and its decoder.  Fills `walls`, `session_firsts`
    (global indexes), `sessions` (header, end, source), and reports damage in `warnings`.
    `keep`: the numbers (in the file, from 0) of the sessions to index; None: all.  The
    others are still walked, so damage is reported the same either way."""

    def __init__(self, path: str, buf, warnings: list[str], session_cls,
                 keep: set[int] | None = None) -> None:
        self.path = path
        self.buf = buf
        self.warnings = warnings
        self.walls: list[float] = []
        self.session_firsts: list[int] = []
        self.sessions = []
        self.refs: list[tuple] = []          # per sample: (unit, position in unit)
        self.units: list[_Unit] = []
        self._keep = keep
        self._numbers: list[dict] = []      # per indexed session: number -> global index
        self._raw_numbers: list[dict] = []  # per session in the file (-1: not indexed)
        self._raw_sessions: list[_Session] = []
        self._kept: list[int] = []          # file numbers of the indexed sessions
        self._cursor = None                 # (unit, next position, Unflattener, RowDecoder)
        self._end_states: dict[int, dict] = {}   # id(block unit) -> processes' counters after it
        self._block_cache: tuple | None = None
        self._summaries: list | None = None
        self._left_out_said = False
        self._build(session_cls)

    # ------------------------------------------------------------------ indexing
    def _build(self, session_cls) -> None:
        found, damage = frames.scan(self.buf, frames.PREAMBLE.size)
        # damage that ends where a good frame starts: a session header in it starts a session
        after_damage: dict[int, tuple] = {}
        for d in damage:
            if not d.torn_tail:
                after_damage[d.end] = (d, sources.damaged_header(self.buf, d))
        sessions: list[_Session] = []
        cur: _Session | None = None
        unknown: set[int] = set()
        bad = 0
        lost_headers: list[_Session] = []
        watch_restart = False               # damage before: does a sample number 0 follow?
        self._frame_session: dict[int, int] = {}    # frame offset -> session number
        for fr in found:
            kind = fr.kind
            hit = after_damage.get(fr.offset)
            if hit is not None:
                d, raw = hit
                if raw is not None and kind != frames.SESSION:
                    cur = _Session(sources.salvage(raw), damaged=True, offset=d.start)
                    sessions.append(cur)
                    lost_headers.append(cur)
                else:
                    watch_restart = True
            if kind in (frames.BLOCK, frames.ROW) and watch_restart:
                watch_restart = False
                number = _number(self.buf, fr)
                if number == 0 and cur is not None and _holds_first(cur):
                    # a session began inside the damage, its header lost with it
                    cur = _Session(sources.salvage(b""), damaged=True, offset=fr.offset)
                    sessions.append(cur)
                    lost_headers.append(cur)
            if kind != frames.SESSION:
                self._frame_session[fr.offset] = len(sessions) - 1 if cur is not None else len(sessions)
            if kind == frames.SESSION:
                header = frames.frame_json(self.buf, fr, self.path, self.warnings)
                cur = _Session(header, damaged=not header, offset=fr.offset)
                sessions.append(cur)
                watch_restart = False
                continue
            if kind == frames.END:
                if cur is not None:
                    cur.end = frames.frame_json(self.buf, fr, self.path, self.warnings)
                continue
            if kind in (frames.BLOCK, frames.ROW, frames.SUMMARY) and cur is None:
                cur = _Session({}, damaged=True, offset=frames.PREAMBLE.size)  # header lost
                sessions.append(cur)
                lost_headers.append(cur)
            if kind == frames.BLOCK:
                try:
                    first, n, walls = v2.block_info(self.buf[fr.start:fr.end])
                except v2.FormatError:
                    bad += 1
                    continue
                if first in cur.blocks:
                    cur.duplicates.add(fr.offset)
                    continue
                cur.blocks[first] = (fr, n, walls)
            elif kind == frames.ROW:
                if fr.end - fr.start < v2.ROW.size:
                    bad += 1
                    continue
                (number,) = v2.ROW.unpack_from(self.buf, fr.start)
                cur.rows.setdefault(number, fr)
            elif kind == frames.SUMMARY:
                cur.tail_summaries.append(fr)
            elif chr(kind).isupper() or kind not in range(32, 127):
                unknown.add(kind)
        skipped = 0
        self._raw_sessions = sessions
        for sno, s in enumerate(sessions):
            skipped += self._index_session(sno, s, session_cls,
                                           self._keep is None or sno in self._keep)
        self._report(damage, found, sessions, skipped, unknown, bad)
        for s in lost_headers:
            sno = sessions.index(s)
            n = len(self._raw_numbers[sno])
            if not n:
                continue
            src = sources.source_of(s.header, damaged=True)
            what = ("what remains of it says simulated" if src.kind == sources.SIMULATED else
                    "what remains of it says live" if src.kind == sources.LIVE else
                    "whether it is live or simulated cannot be told: labelled 'unknown source'")
            self.warnings.append(
                f"{self.path}: the header of session {sno + 1} (byte {s.offset}) is damaged or "
                f"lost; its {n} samples are read with this version's schema, and {what}")

    def _index_session(self, sno: int, s: _Session, session_cls, keep: bool) -> int:
        """Add a session's samples in number order (only their numbers when not `keep`);
        returns rows that cannot be read."""
        numbers: dict[int, int] = {}
        self._raw_numbers.append(numbers)
        if keep:
            first_global = len(self.walls)
            session_no = len(self.sessions)
            sess = session_cls(s.header, first_global, end=s.end)
            sess.number = sno
            sess.source = sources.source_of(s.header, s.damaged)
            self.sessions.append(sess)
            self.session_firsts.append(first_global)
            self._numbers.append(numbers)
            self._kept.append(sno)
            schema = s.header.get("schema") if not s.damaged else None
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
                if not keep:
                    numbers.update(dict.fromkeys(range(num, num + n), -1))
                    last_block, run, expected = None, None, num + n
                    continue
                unit = _Unit(_B, session_no, [fr], list(range(num, num + n)), schema)
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
            if not keep:
                if num == 0 or num - 1 in numbers:
                    numbers[num] = -1
                    expected = num + 1
                else:
                    skipped += 1
                continue
            if run is None:
                prev = last_block if last_block is not None and last_block.numbers[-1] == num - 1 else None
                if num != 0 and prev is None:
                    skipped += 1
                    continue
                run = _Unit(_R, session_no, [], [], schema, prev_block=prev)
                self.units.append(run)
            numbers[num] = len(self.walls)
            self.walls.append(fr.wall_s)
            self.refs.append((run, len(run.frames)))
            run.frames.append(fr)
            run.numbers.append(num)
            expected = num + 1
        if keep:
            sess.samples = len(numbers)
        return skipped

    def _report(self, damage, found, sessions, skipped: int, unknown: set, bad: int) -> None:
        starts = [f.offset for f in found]
        for d in damage:
            # a block copy that power loss cut short (see writer.py): what is damaged is
            # rows the block holds, and the session misses no sample
            if not d.torn_tail:
                k = bisect.bisect_left(starts, d.end)
                sno = self._frame_session.get(starts[k]) if k < len(starts) else None
                if sno is not None and sno < len(self._raw_numbers) and self._complete(sno) \
                        and not self._raw_sessions[sno].damaged:
                    continue
            if d.torn_tail:
                self.warnings.append(
                    f"{self.path}: the last {d.end - d.start} bytes (from byte {d.start}) are a torn "
                    "or damaged frame, skipped (the recorder was stopped while writing: kill -9, "
                    f"power loss or a full disk); the {len(self.walls)} samples before it are read")
            elif d.end - d.start == frames.PREAMBLE.size and \
                    bytes(self.buf[d.start:d.start + len(frames.MAGIC)]) == frames.MAGIC:
                self.warnings.append(f"{self.path}: bytes {d.start}-{d.end} are another recording's "
                                     "preamble (files concatenated?); what follows is read")
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
        """Does session sno (in the file) hold every sample from its first to its last
        (and as many as its end frame says)?"""
        numbers = self._raw_numbers[sno]
        if not numbers or max(numbers) != len(numbers) - 1:
            return False
        end = self._raw_sessions[sno].end if sno < len(self._raw_sessions) else None
        return end is None or end.get("samples") in (None, len(numbers))

    # ------------------------------------------------------------------ decoding
    def _block(self, unit: _Unit) -> v2.Block:
        c = self._block_cache
        if c is not None and c[0] is unit:
            return c[1]
        fr = unit.frames[0]
        blk = v2.decode_block(self.buf[fr.start:fr.end])
        if len(blk.rows) != len(unit.numbers):
            raise v2.FormatError("a block whose samples do not match its index")
        self._block_cache = (unit, blk)
        return blk

    def _end_state(self, unit: _Unit) -> dict:
        """The processes' counters after a block's last sample."""
        key = id(unit)
        state = self._end_states.get(key)
        if state is None:
            blk = self._block(unit)
            un = v2.Unflattener(blk.state, unit.schema)
            for j in range(len(blk.rows)):
                un.advance(*blk.values(j))
            state = self._end_states[key] = un.counters
        return state

    def sample(self, i: int):
        """Sample i (global index); raises v2.FormatError."""
        unit, pos = self.refs[i]
        c = self._cursor
        if c is None or c[0] is not unit or c[1] > pos:
            if unit.kind == _B:
                blk = self._block(unit)
                c = [unit, 0, v2.Unflattener(blk.state, unit.schema, self._left_out), None]
            else:
                base = self._end_state(unit.prev_block) if unit.prev_block is not None else {}
                c = [unit, 0, v2.Unflattener(base, unit.schema, self._left_out),
                     v2.RowDecoder()]
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
        except v2.FormatError:
            self._cursor = None
            raise
        c[1] = pos + 1
        return out

    def _left_out(self, line: str) -> None:
        """What a decoder read without (health records that cannot be read): said once
        per recording, in `warnings`, whichever block it is in (the first one's words)."""
        if not self._left_out_said:
            self._left_out_said = True
            self.warnings.append(f"{self.path}: {line}")

    def sample_index(self, session: int, number: int) -> int | None:
        """The index of sample `number` (from 0 in its session) of indexed session
        `session`, or None when it is not readable."""
        return self._numbers[session].get(number)

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
        out = []
        for sno, raw in enumerate(self._kept):
            s = self._raw_sessions[raw]
            numbers = self._numbers[sno]
            have: dict[int, object] = {}
            for first, (fr, n, walls) in s.blocks.items():
                data = v2.block_summaries(self.buf[fr.start:fr.end])
                if not data:
                    continue
                try:
                    blocks = decode_blocks(data)
                except ValueError:
                    self.warnings.append(f"{self.path}: the summaries of a block at byte "
                                         f"{fr.offset} could not be read; report replays it")
                    continue
                for b in blocks:
                    have[b.first] = b
            for fr in s.tail_summaries:
                try:
                    blocks = decode_blocks(self.buf[fr.start:fr.end])
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


def _number(buf, fr) -> int | None:
    """The session number of a row's sample or of a block's first one."""
    try:
        if fr.kind == frames.ROW:
            return v2.ROW.unpack_from(buf, fr.start)[0]
        return v2.BLOCK_HEAD.unpack_from(buf, fr.start)[0]
    except struct.error:       # a frame too short to say: not a restart
        return None


def _holds_first(s: _Session) -> bool:
    return 0 in s.blocks or 0 in s.rows
