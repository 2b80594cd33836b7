"""Reading a recording: open it, index it in one pass, seek by time, decode samples.

    with Recording.open("node17.gdtrec") as rec:
        print(len(rec), rec.start_s, rec.end_s, rec.header["host_name"])
        i = rec.seek(rec.start_s + 3600)          # first sample at or after that time
        for i, sample in rec.samples(i, i + 60):  # raw Samples, as a recording keeps them
            ...
        rec.summaries()                           # what the recorder's detector made of them

Opening reads the preamble, then walks every frame and checks every CRC (about 0.1 s for
a day at 1 Hz); the index holds each sample's time and where it is, so seek() is a
bisection and sample(i) decodes at most one block (SEGMENT_SAMPLES samples).  Files are
read into memory, since their recorder cuts their end as it turns rows into blocks
(index_v2.py reads them).  A torn tail or a
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
import operator
import os
import stat
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field

from gpudisk_top.collect import utilpct
from gpudisk_top.collect.sample import Sample
from gpudisk_top.errors import RuntimeFailure, UsageError
from gpudisk_top.record import frames, sources, v2
from gpudisk_top.record.header import FORMAT_VERSION, iso

# Version 1 was replaced by version 2 before any release: only this repository's tests
# ever held one.  From 0.1.0 on, every version is read forever.
RETIRED_VERSIONS = {1: "recorded by a development build before 0.1.0"}


class CorruptRecording(RuntimeFailure):
    """A frame that passed its CRC could not be decoded."""


@dataclass
class Session:
    """One run of a recorder: its header, where its samples are, and how it ended."""

    header: dict
    first: int                   # index of its first sample
    end: dict | None = None      # the E frame: {"reason", "samples", "ended"}; None if it never ended cleanly
    number: int = 0              # its place among the file's sessions, from 0
    source: sources.Source | None = None
    samples: int = 0             # readable samples


@dataclass
class _Cursor:
    index: int = -1              # the last sample decoded
    sample: Sample | None = None


@dataclass
class _Index:
    walls: array = field(default_factory=lambda: array("d"))
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
    if version in RETIRED_VERSIONS:
        raise UsageError(f"{path}: recording format version {version} "
                         f"({RETIRED_VERSIONS[version]}) is no longer read")
    if version < 2:
        raise UsageError(f"{path}: unknown recording format version {version}")
    return version


class Recording:
    """A recording opened for reading.  Use Recording.open(path)."""

    def __init__(self, path: str, buf, version: int, keep: set[int] | None = None) -> None:
        self.path = path
        self.version = version
        self.warnings: list[str] = []
        self.sessions: list[Session] = []
        self.left_out: str | None = None       # choose_source(): what was left out, and how to choose
        self._keep = keep                      # numbers of the sessions indexed (None: all)
        self.size = len(buf)
        self._buf = buf
        self._idx = _Index()
        self._cursor = _Cursor()
        self._order: list[int] | None = None   # samples by time, when the clock went backwards
        self._v2 = None
        self._util_said = False                # a utilization was dropped (sample())
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
            # a recorder rewrites and cuts the end of the file as it goes (rows become a
            # block): a mapping would fault on bytes cut off, a copy of what is there now
            # does not
            buf = frames.read_all(fd, size)
        except IsADirectoryError:
            raise UsageError(f"{path}: is a directory, not a recording") from None
        except OSError as err:
            raise UsageError(f"{path}: {err.strerror or err}") from None
        finally:
            os.close(fd)
        return cls(path, buf, version)

    def _build_index_v2(self) -> None:
        from gpudisk_top.record.index_v2 import V2Index

        index = self._v2 = V2Index(self.path, self._buf, self.warnings, Session, self._keep)
        idx = self._idx
        idx.walls.extend(index.walls)
        idx.session_firsts.extend(index.session_firsts)
        self.sessions.extend(index.sessions)

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
        self.close()
        return view

    def global_index(self, session: int, number: int) -> int | None:
        """The index of sample `number` (counted from 0 in its session) of a session, or
        None when it is not readable."""
        return self._v2.sample_index(session, number)

    def summaries(self) -> list:
        """(index of its first sample, v2.summary.SummaryBlock, session number) for every
        summary block the recording holds whose samples are all readable."""
        return self._v2.summaries()

    # ------------------------------------------------------------------ facts
    def __len__(self) -> int:
        return len(self._idx.walls)

    def __enter__(self) -> "Recording":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._cursor = _Cursor()

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
    def sample(self, i: int) -> Sample:
        """Sample i, decoded (index_v2.py: sequential calls cost one row; a jump decodes its
        block).  Raises IndexError out of range and CorruptRecording when a frame that
        passed its CRC cannot be decoded."""
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"sample {i} of {n}")
        c = self._cursor
        if c.index == i and c.sample is not None:
            return c.sample
        try:
            sample = self._v2.sample(i)
        except v2.FormatError as err:
            self._cursor = _Cursor()
            raise CorruptRecording(f"{self.path}: sample {i} cannot be decoded: {err}") from None
        # the one edge a recording's samples come in by: a utilization that is not a
        # percentage goes no further (collect/utilpct.py); said once a recording
        dropped = utilpct.check_snapshot(sample.gpu)
        if dropped is not None and not self._util_said:
            self._util_said = True
            self.warnings.append(f"{self.path}: sample {i}: {dropped}; so is any later "
                                 "sample's")
        c.index, c.sample = i, sample
        return sample

    def interval_at(self, i: int) -> float | None:
        """The interval sample i's session was recorded at (its header's interval_s),
        None when the header does not say one that is a positive number of seconds: the
        cadence of the gap rule (verdict/gaps.py)."""
        from gpudisk_top.verdict.gaps import cadence_of   # the model only when replaying

        if not 0 <= i < len(self):
            return None
        header = self.sessions[self.session_index(i)].header
        return cadence_of(header.get("interval_s") if isinstance(header, dict) else None)

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
                self.warnings.append(f"{err}; skipped to the next block")
                i = min(stop, self._v2.unit_end(i))
                continue
            yield i, s
            i += 1

    def between(self, start_s: float | None = None, end_s: float | None = None
                ) -> Iterator[tuple[int, Sample]]:
        """(index, Sample) for the samples with start_s <= wall_s <= end_s, in recorded
        order (ranges())."""
        for lo, hi in self.ranges(start_s, end_s):
            yield from self.samples(lo, hi + 1)
