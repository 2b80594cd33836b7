"""Reading a recording: open it, index it in one pass, seek by time, decode samples.

    with Recording.open("node17.gdtrec") as rec:
        print(len(rec), rec.start_s, rec.end_s, rec.header["host_name"])
        i = rec.seek(rec.start_s + 3600)          # first sample at or after that time
        for i, sample in rec.samples(i, i + 60):  # raw Samples, as a recording keeps them
            ...
        rec.summaries()                           # format v2: what the recorder's detector made of them

Opening reads the preamble, then walks every frame and checks every CRC (about 0.1 s for
a day at 1 Hz); the index holds each sample's time and where it is, so seek() is a
bisection and sample(i) decodes at most one segment or block (SEGMENT_SAMPLES samples).
Version 1 files are mapped; version 2 files are read into memory, since their recorder
cuts their end as it turns rows into blocks (index_v2.py reads them).  A torn tail or a
damaged stretch becomes a warning in `warnings`, and every good frame around it is
still read.

Wall clocks step (NTP after boot, a VM resumed after weeks, two files concatenated), so
sample indexes, not wall times, are the order of a recording: `runs` are the stretches in
which the wall clock never went back, and ranges(t0, t1) the samples of a time window as
index ranges in recorded order, one at most per run.  Each session has a Source
(record/sources.py: live, simulated, or unknown when its header is damaged);
choose_source() gives a Recording of one source's sessions.
"""

from __future__ import annotations

import bisect
import mmap
import operator
import os
import stat
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field

from gpudisk_top.collect.sample import Sample
from gpudisk_top.errors import RuntimeFailure, UsageError
from gpudisk_top.record import format_v1, format_v2, frames, sources
from gpudisk_top.record.header import FORMAT_VERSION, iso

# A reader for every format version, forever: version -> the module that codes its samples.
DECODERS = {1: format_v1, 2: format_v2}


class CorruptRecording(RuntimeFailure):
    """A frame that passed its CRC could not be decoded."""


@dataclass
class Session:
    """One run of a recorder: its header, where its samples are, and how it ended."""

    header: dict
    first: int                   # index of its first sample
    end: dict | None = None      # the E frame: {"reason", "samples", "ended"}; None if it never ended cleanly
    decoder_module: object = None
    number: int = 0              # its place among the file's sessions, from 0
    source: sources.Source | None = None
    samples: int = 0             # readable samples


@dataclass
class _Cursor:
    index: int = -1              # the last sample decoded
    keyframe: int = -1           # its segment's keyframe
    decoder: object = None
    sample: Sample | None = None


@dataclass
class _Index:
    walls: array = field(default_factory=lambda: array("d"))
    starts: array = field(default_factory=lambda: array("q"))   # payload start
    ends: array = field(default_factory=lambda: array("q"))
    keyframes: list[int] = field(default_factory=list)          # sample indexes of K frames
    session_firsts: list[int] = field(default_factory=list)


def check_preamble(path: str, head: bytes, size: int) -> int:
    """The format version of a file that starts with `head`; raises UsageError with one
    line when it is not a recording this code can read."""
    if size == 0:
        raise UsageError(f"{path}: empty file, not a gpudisk-top recording")
    if not head.startswith(frames.MAGIC[:min(len(head), len(frames.MAGIC))]):
        raise UsageError(f"{path}: not a gpudisk-top recording")
    if size < frames.PREAMBLE.size:
        raise UsageError(f"{path}: truncated gpudisk-top recording ({size} bytes, no header)")
    _, version, _ = frames.PREAMBLE.unpack_from(head)
    if version > FORMAT_VERSION:
        raise UsageError(f"{path}: recording format version {version} is newer than this "
                         f"gpudisk-top reads (up to {FORMAT_VERSION}); upgrade gpudisk-top to read it")
    if version not in DECODERS:
        raise UsageError(f"{path}: unknown recording format version {version}")
    return version


class Recording:
    """A recording opened for reading.  Use Recording.open(path)."""

    def __init__(self, path: str, buf, version: int, mm: mmap.mmap | None = None,
                 keep: set[int] | None = None) -> None:
        self.path = path
        self.version = version
        self.warnings: list[str] = []
        self.sessions: list[Session] = []
        self.left_out: str | None = None       # choose_source(): what was left out, and how to choose
        self._keep = keep                      # numbers of the sessions indexed (None: all)
        self.size = len(buf)
        self._buf = buf
        self._mm = mm
        self._idx = _Index()
        self._cursor = _Cursor()
        self._order: list[int] | None = None   # samples by time, when the clock went backwards
        self._v2 = None
        if version == 1:
            self._build_index()
        else:
            self._build_index_v2()
        self._find_runs()

    # ------------------------------------------------------------------ opening
    @classmethod
    def open(cls, path) -> "Recording":
        """Open and index a recording.  Raises UsageError (one line) when the file cannot
        be opened or is not a recording this code can read; damage inside the file is a
        warning in `warnings`, never an exception."""
        path = os.fspath(path)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise UsageError(f"{path}: no such file") from None
        except IsADirectoryError:
            raise UsageError(f"{path}: is a directory, not a recording") from None
        except OSError as err:
            raise UsageError(f"{path}: {err.strerror or err}") from None
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise UsageError(f"{path}: is a directory, not a recording")
            if not stat.S_ISREG(st.st_mode):
                raise UsageError(f"{path}: not a regular file")
            size = st.st_size
            head = os.pread(fd, frames.PREAMBLE.size, 0)
            version = check_preamble(path, head, size)
            mm = None
            if version == 1:
                try:
                    mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
                    buf = mm
                except (OSError, ValueError):
                    buf = frames.read_all(fd, size)
            else:
                # a version 2 recorder rewrites and cuts the end of the file as it goes
                # (rows become a block): a mapping would fault on bytes cut off, a copy
                # of what is there now does not
                buf = frames.read_all(fd, size)
        except IsADirectoryError:
            raise UsageError(f"{path}: is a directory, not a recording") from None
        except OSError as err:
            raise UsageError(f"{path}: {err.strerror or err}") from None
        finally:
            os.close(fd)
        return cls(path, buf, version, mm)

    def _build_index(self) -> None:
        found, damage = frames.scan(self._buf, frames.PREAMBLE.size)
        lost_header = {}       # offset after damage that held a session header -> its bytes
        for d in damage:
            raw = None if d.torn_tail else sources.damaged_header(self._buf, d)
            if raw is not None:
                lost_header[d.end] = raw
        idx = self._idx
        walls, starts, ends = idx.walls, idx.starts, idx.ends
        keyframes = idx.keyframes
        module = DECODERS[self.version]
        session: Session | None = None
        number = -1            # the file's session being read
        keep = True            # is it indexed?
        chain = False          # can the next D frame be decoded (its segment is intact)?
        prev_end = frames.PREAMBLE.size
        skipped = 0            # D frames that follow damage, up to the next keyframe
        unknown: set[int] = set()
        damaged: list[Session] = []
        seen: dict[int, int] = {}   # sample frames of each session, indexed or not

        def start(header: dict, damaged_header: bool) -> None:
            nonlocal session, number, keep
            number += 1
            keep = self._keep is None or number in self._keep
            session = Session(header, len(walls), decoder_module=module, number=number,
                              source=sources.source_of(header, damaged_header))
            if keep:
                self.sessions.append(session)
                idx.session_firsts.append(len(walls))

        for fr in found:
            if fr.offset != prev_end:
                chain = False  # damage in between: scan() reported it
                raw = lost_header.get(fr.offset)
                if raw is not None and fr.kind != frames.SESSION:
                    start(sources.salvage(raw), True)
                    damaged.append(session)
            prev_end = fr.end
            kind = fr.kind
            if kind in (frames.DELTA, frames.KEYFRAME) and session is not None:
                seen[number] = seen.get(number, 0) + 1
            if kind == frames.DELTA:
                if not keep:
                    continue
                if chain:
                    walls.append(fr.wall_s)
                    starts.append(fr.start)
                    ends.append(fr.end)
                else:
                    skipped += 1
            elif kind == frames.KEYFRAME:
                if session is None:
                    # its session header was lost: read it with this version's schema
                    start({}, True)
                    damaged.append(session)
                    seen[number] = 1
                if not keep:
                    continue
                chain = True
                keyframes.append(len(walls))
                walls.append(fr.wall_s)
                starts.append(fr.start)
                ends.append(fr.end)
            elif kind == frames.SESSION:
                header = frames.frame_json(self._buf, fr, self.path, self.warnings)
                start(header, not header)
                chain = False
            elif kind == frames.END:
                if session is not None:
                    session.end = frames.frame_json(self._buf, fr, self.path, self.warnings)
                chain = False
            elif chr(kind).isupper() or kind not in range(32, 127):
                unknown.add(kind)
                chain = False
            # an unknown lower-case type is an addition this reader may ignore
        firsts = idx.session_firsts + [len(walls)]
        for k, sess in enumerate(self.sessions):
            sess.samples = firsts[k + 1] - firsts[k]
        self._report_damage(damage, skipped, unknown)
        for sess in damaged:
            if seen.get(sess.number):
                self.warnings.append(
                    f"{self.path}: the header of session {sess.number + 1} is damaged or lost; "
                    f"its samples are read with this version's schema, and "
                    + ("what remains of it says simulated" if sess.source.kind == sources.SIMULATED else
                       "what remains of it says live" if sess.source.kind == sources.LIVE else
                       "whether it is live or simulated cannot be told: labelled 'unknown source'"))
        # sessions that hold no sample (a recorder stopped before its first) are kept for
        # their headers, but samples map to the last session that starts at their index

    def _build_index_v2(self) -> None:
        from gpudisk_top.record.index_v2 import V2Index

        v2 = self._v2 = V2Index(self.path, self._buf, self.warnings, Session, self._keep)
        idx = self._idx
        idx.walls.extend(v2.walls)
        idx.session_firsts.extend(v2.session_firsts)
        self.sessions.extend(v2.sessions)
        for sess in self.sessions:
            sess.decoder_module = format_v2

    def _find_runs(self) -> None:
        """The stretches of samples, in recorded order, over which the wall clock never
        went back; a warning names the steps back."""
        walls = self._idx.walls
        n = len(walls)
        self._run_starts: list[int] = [0] if n else []
        if n and not all(map(operator.le, walls[:-1], walls[1:])):
            self._run_starts = [0] + [i for i in range(1, n) if walls[i] < walls[i - 1]]
            self._order = sorted(range(n), key=walls.__getitem__)
            steps = len(self._run_starts) - 1
            first = self._run_starts[1]
            self.warnings.append(
                f"{self.path}: the wall clock went back {steps} time{'s' * (steps != 1)} during the "
                f"recording (first at sample {first}, by {walls[first - 1] - walls[first]:.0f} s); "
                "each stretch is read in recorded order, and a time window takes its "
                "samples from every stretch")

    @property
    def runs(self) -> list[tuple[int, int]]:
        """(first, last) sample index of each stretch in which the wall clock never went
        back, in recorded order."""
        ends = self._run_starts[1:] + [len(self)]
        return [(a, b - 1) for a, b in zip(self._run_starts, ends)]

    def run_of(self, i: int) -> tuple[int, int]:
        """The (first, last) of the stretch that holds sample i."""
        k = bisect.bisect_right(self._run_starts, i) - 1
        starts = self._run_starts
        return starts[k], (starts[k + 1] - 1 if k + 1 < len(starts) else len(self) - 1)

    def ranges(self, start_s: float | None = None, end_s: float | None = None) -> list[tuple[int, int]]:
        """The samples with start_s <= wall_s <= end_s (None: no bound), as (first, last)
        index ranges in recorded order, at most one per stretch of a clock that never went
        back (runs), so each range's wall times are sorted.  Costs a bisection per
        stretch, whatever the span."""
        walls = self._idx.walls
        out: list[tuple[int, int]] = []
        for a, b in self.runs:
            lo = a if start_s is None else bisect.bisect_left(walls, start_s, a, b + 1)
            hi = b if end_s is None else bisect.bisect_right(walls, end_s, a, b + 1) - 1
            if lo <= hi:
                out.append((lo, hi))
        return out

    # ------------------------------------------------------------------ sources
    @property
    def source(self) -> sources.Source:
        """Where the samples come from: simulated if any session with samples is, else
        unknown if any one's header is damaged beyond telling, else live; the label of the
        first intact header of that kind."""
        with_samples = [s.source for s in self.sessions if s.samples and s.source is not None]
        srcs = with_samples or [s.source for s in self.sessions if s.source is not None]
        if not srcs:
            return sources.Source(sources.UNKNOWN, None, sources.UNKNOWN, True)
        kinds = {x.kind for x in srcs}
        kind = next(k for k in (sources.SIMULATED, sources.UNKNOWN, sources.LIVE) if k in kinds)
        of_kind = [x for x in srcs if x.kind == kind]
        best = next((x for x in of_kind if not x.damaged), of_kind[0])
        return sources.Source(kind, best.host_name, best.label, any(x.damaged for x in of_kind))

    def choose_source(self, wanted: str | None = None) -> "Recording":
        """This recording, or when it mixes sources (or `wanted`, a kind or a host, says
        so) a Recording of one source's sessions that takes this one's place (this one is
        closed); `left_out` (also a warning) says what was left out and how to choose.
        Raises UsageError when `wanted` matches no session."""
        counts = [s.samples for s in self.sessions]
        keep, warning = sources.choose(self.sessions, counts, wanted, self.path)
        numbers = {self.sessions[k].number for k in keep}
        if warning is None and len(numbers) == len(self.sessions):
            return self
        view = self.only(numbers)
        if warning is not None:
            view.left_out = warning
            view.warnings.append(warning)
        return view

    def only(self, numbers) -> "Recording":
        """A Recording of the sessions numbered `numbers` (in the file, from 0), read from
        this one's bytes; it takes this one's place (this one is closed)."""
        view = Recording(self.path, self._buf, self.version, keep=set(numbers))
        view._mm, self._mm = self._mm, None
        self.close()
        return view

    def global_index(self, session: int, number: int) -> int | None:
        """The index of sample `number` (counted from 0 in its session) of a session, or
        None when it is not readable (format v2)."""
        if self._v2 is None:
            return None
        return self._v2._numbers[session].get(number)

    def summaries(self) -> list:
        """(index of its first sample, derived.SummaryBlock, session number) for every
        summary block the recording holds whose samples are all readable (format v2;
        none for version 1)."""
        if self._v2 is None:
            return []
        return self._v2.summaries()

    def _report_damage(self, damage: list[frames.Damage], skipped: int, unknown: set[int]) -> None:
        for d in damage:
            if d.torn_tail:
                self.warnings.append(
                    f"{self.path}: the last {d.end - d.start} bytes (from byte {d.start}) are a torn "
                    "or damaged frame, skipped (the recorder was stopped while writing: kill -9, "
                    f"power loss or a full disk); the {len(self)} samples before it are read")
            else:
                self.warnings.append(f"{self.path}: bytes {d.start}-{d.end} are damaged and were skipped")
        if skipped:
            self.warnings.append(f"{self.path}: {skipped} samples after damage, up to the next "
                                 "keyframe, could not be decoded and were skipped")
        for kind in sorted(unknown):
            self.warnings.append(f"{self.path}: frames of unknown type {kind:#04x} were skipped "
                                 "(written by a newer gpudisk-top?)")

    # ------------------------------------------------------------------ facts
    def __len__(self) -> int:
        return len(self._idx.walls)

    def __enter__(self) -> "Recording":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._cursor = _Cursor()
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:
                pass  # a payload view is still alive somewhere; the GC closes it
            self._mm = None

    @property
    def header(self) -> dict:
        """The first session's header (host, kernel, tool version, GPUs, devices, schema);
        the first intact one's when that one is damaged."""
        for s in self.sessions:
            if s.source is None or not s.source.damaged:
                return s.header
        return self.sessions[0].header if self.sessions else {}

    @property
    def start_s(self) -> float | None:
        """Wall time of the earliest sample, or None for a recording without samples."""
        if not len(self):
            return None
        return self._idx.walls[self._order[0]] if self._order else self._idx.walls[0]

    @property
    def end_s(self) -> float | None:
        if not len(self):
            return None
        return self._idx.walls[self._order[-1]] if self._order else self._idx.walls[-1]

    @property
    def duration_s(self) -> float:
        return (self.end_s - self.start_s) if len(self) else 0.0

    def wall_s(self, i: int) -> float:
        """Wall time of sample i, from the index (nothing is decoded)."""
        return self._idx.walls[i]

    @property
    def walls(self):
        """Every sample's wall time, in recorded order (the index's; do not modify)."""
        return self._idx.walls

    @property
    def session_firsts(self):
        """The index of each session's first sample, ascending (do not modify)."""
        return self._idx.session_firsts

    def describe(self) -> str:
        """'1234 samples, 2026-01-01T00:00:01+00:00 to ...' for messages."""
        if not len(self):
            return "no samples"
        return f"{len(self)} samples, {iso(self.start_s)} to {iso(self.end_s)}"

    def session_index(self, i: int) -> int:
        """Which session sample i belongs to."""
        return max(0, bisect.bisect_right(self._idx.session_firsts, i) - 1)

    def starts_session(self, i: int) -> bool:
        """True for the first sample of a recorder run: no interval ends there."""
        firsts = self._idx.session_firsts
        j = bisect.bisect_left(firsts, i)
        return j < len(firsts) and firsts[j] == i

    # ------------------------------------------------------------------ seeking
    def seek(self, wall_s: float) -> int:
        """The index of the first sample at or after wall_s (len(self) when none is)."""
        walls = self._idx.walls
        if self._order is None:
            return bisect.bisect_left(walls, wall_s)
        order = self._order
        j = bisect.bisect_left(order, wall_s, key=walls.__getitem__)
        return order[j] if j < len(order) else len(walls)

    def index_at(self, wall_s: float) -> int:
        """The index of the last sample at or before wall_s (0 when none is): the one a
        screen shows at that moment."""
        walls = self._idx.walls
        if self._order is None:
            return max(0, bisect.bisect_right(walls, wall_s) - 1)
        order = self._order
        j = bisect.bisect_right(order, wall_s, key=walls.__getitem__) - 1
        return order[max(0, j)] if order else 0

    # ------------------------------------------------------------------ decoding
    def _decoder(self, i: int):
        s = self.sessions[self.session_index(i)] if self.sessions else None
        module = s.decoder_module if s is not None else DECODERS[self.version]
        return module.Decoder(s.header.get("schema") if s is not None else None)

    def _keyframe_of(self, i: int) -> int:
        kf = self._idx.keyframes
        return kf[bisect.bisect_right(kf, i) - 1]

    def sample(self, i: int) -> Sample:
        """Sample i, decoded.  Sequential calls cost one frame each; a jump decodes from
        the segment's keyframe.  Raises IndexError out of range and CorruptRecording when
        a frame that passed its CRC cannot be decoded."""
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"sample {i} of {n}")
        c = self._cursor
        if c.index == i and c.sample is not None:
            return c.sample
        if self._v2 is not None:
            try:
                sample = self._v2.sample(i)
            except format_v2.FormatError as err:
                self._cursor = _Cursor()
                raise CorruptRecording(f"{self.path}: sample {i} cannot be decoded: {err}") from None
            c.index, c.sample = i, sample
            return sample
        k = self._keyframe_of(i)
        if not (c.keyframe == k and c.index < i and c.decoder is not None):
            c.decoder = self._decoder(k)
            c.keyframe, c.index = k, k - 1
        idx = self._idx
        buf = self._buf
        while c.index < i:
            j = c.index + 1
            try:
                c.sample = c.decoder.decode(bytes(buf[idx.starts[j]:idx.ends[j]]))
            except format_v1.FormatError as err:
                self._cursor = _Cursor()
                raise CorruptRecording(f"{self.path}: sample {j} (byte {idx.starts[j]}) "
                                       f"cannot be decoded: {err}") from None
            c.index = j
        return c.sample

    def samples(self, start: int = 0, stop: int | None = None) -> Iterator[tuple[int, Sample]]:
        """(index, Sample) for samples start..stop-1 in file order.  A segment that cannot
        be decoded is skipped with a warning in `warnings`."""
        n = len(self)
        stop = n if stop is None else min(stop, n)
        i = max(0, start)
        while i < stop:
            try:
                s = self.sample(i)
            except CorruptRecording as err:
                if self._v2 is not None:
                    self.warnings.append(f"{err}; skipped to the next block")
                    i = min(stop, self._v2.unit_end(i))
                    continue
                self.warnings.append(f"{err}; skipped to the next keyframe")
                kf = self._idx.keyframes
                j = bisect.bisect_right(kf, i)
                i = kf[j] if j < len(kf) else stop
                continue
            yield i, s
            i += 1

    def between(self, start_s: float | None = None, end_s: float | None = None
                ) -> Iterator[tuple[int, Sample]]:
        """(index, Sample) for the samples with start_s <= wall_s <= end_s, in recorded
        order (ranges())."""
        for lo, hi in self.ranges(start_s, end_s):
            yield from self.samples(lo, hi + 1)
