"""Read /proc/diskstats into raw cumulative counters, one object per device line.

Field layout (Documentation/admin-guide/iostats.rst), counting as sysstat does, with
major, minor and name as the first three fields:
  14 fields: reads, writes, in-flight, io_ticks, time_in_queue (every 2.6+ kernel)
  18 fields: + discards (Linux 4.18)
  20 fields: + flushes (Linux 5.5)
The *_ticks fields are milliseconds printed as a 32-bit `unsigned int` on every kernel, so
they wrap at 2**32; every other counter is an `unsigned long` (64 bits on 64-bit kernels).
"""

from __future__ import annotations

import errno
from itertools import chain, repeat
from typing import NamedTuple

from gpudisk_top.collect.roots import Roots, read_bytes

MASK32 = 0xFFFFFFFF
MASK64 = 0xFFFFFFFFFFFFFFFF

# The counter names in /proc/diskstats order, after major, minor and name.
COUNTER_FIELDS = (
    "rd_ios", "rd_merges", "rd_sectors", "rd_ticks",
    "wr_ios", "wr_merges", "wr_sectors", "wr_ticks",
    "ios_pgr", "tot_ticks", "rq_ticks",
    "dc_ios", "dc_merges", "dc_sectors", "dc_ticks",
    "fl_ios", "fl_ticks",
)
# Fields that sysstat reads as 32-bit `unsigned int` (rd_stats.h `struct io_stats`); the
# kernel prints the tick counters as `unsigned int` too, so they wrap at 2**32.
_U32_FIELDS = frozenset(
    ("rd_ticks", "wr_ticks", "ios_pgr", "tot_ticks", "rq_ticks", "dc_ticks", "fl_ticks")
)
_WIDTH_MASKS = tuple(MASK32 if f in _U32_FIELDS else MASK64 for f in COUNTER_FIELDS)


class DiskCounters(NamedTuple):
    """The raw counters of one /proc/diskstats line.

    `nfields` is how many fields the line had (14, 18 or 20, or more on a future kernel);
    discard and flush counters read as 0 where the line had none, as sysstat does.
    A tuple, because a sample holds one per device and is built every second.
    """

    major: int
    minor: int
    nfields: int
    rd_ios: int
    rd_merges: int
    rd_sectors: int
    rd_ticks: int
    wr_ios: int
    wr_merges: int
    wr_sectors: int
    wr_ticks: int
    ios_pgr: int
    tot_ticks: int
    rq_ticks: int
    dc_ios: int = 0
    dc_merges: int = 0
    dc_sectors: int = 0
    dc_ticks: int = 0
    fl_ios: int = 0
    fl_ticks: int = 0

    @classmethod
    def zero(cls, major: int = 0, minor: int = 0) -> "DiskCounters":
        return cls(major, minor, 20, *([0] * len(COUNTER_FIELDS)))

    def values(self) -> tuple[int, ...]:
        return self[3:]

    def total_ios(self) -> int:
        return self.rd_ios + self.wr_ios + self.dc_ios + self.fl_ios


def _leading_uint(token: str) -> int | None:
    """The unsigned number at the start of token, as sscanf's %lu would take it, else None."""
    end = 0
    while end < len(token) and "0" <= token[end] <= "9":
        end += 1
    return int(token[:end]) if end else None


_U32_INDEXES = tuple(i for i, f in enumerate(COUNTER_FIELDS) if f in _U32_FIELDS)
_PADDING = {14: (0,) * 6, 18: (0,) * 2, 20: ()}


def _parse_line(line: str) -> tuple[str, DiskCounters, int] | None:
    """(name, counters, number of whitespace-separated fields), or None if unusable."""
    parts = line.split()
    n = len(parts)
    if n < 14:
        return None
    if n in _PADDING:
        # Fast path: every field a plain number, as every kernel prints them
        digits = "".join(parts[3:])
        if digits.isdigit() and digits.isascii() and parts[0].isdigit() and parts[1].isdigit():
            values = list(map(int, parts[3:]))
            if max(values) > MASK32:  # rare: only then can a field need its C width
                for i in _U32_INDEXES:
                    if i < n - 3:
                        values[i] &= MASK32
                values = [v & MASK64 for v in values]
            return parts[2], DiskCounters(int(parts[0]), int(parts[1]), n, *values, *_PADDING[n]), n
    # Like sysstat's sscanf(): read numbers until the first field that is not one, then
    # accept the line when at least 14 fields were read (iostat.c read_diskstats_stat_work).
    numbers: list[int] = []
    count = 0
    for i, token in enumerate(parts[:20]):
        if i == 2:
            count += 1
            continue
        if token.isascii() and token.isdigit():
            numbers.append(int(token))
            count += 1
            continue
        value = _leading_uint(token)
        if value is not None:  # "123abc": sscanf takes 123, then stops at "abc"
            numbers.append(value)
            count += 1
        break
    if count < 14:
        return None
    counters = numbers[2:]
    # sysstat reads discard fields only from 18-field lines and flush fields from 20-field ones
    usable = 11 if count < 18 else (15 if count < 20 else 17)
    values = [v & m for v, m in zip(counters[:usable], _WIDTH_MASKS)]
    values.extend([0] * (len(COUNTER_FIELDS) - usable))
    return parts[2], DiskCounters(numbers[0], numbers[1], count, *values), n


def _parse_lines(lines: list[str]) -> dict[str, tuple[str, DiskCounters, int]]:
    """_parse_line() of each line, taken together where every one of them is what a kernel
    prints (the same 14, 18 or 20 fields, each a plain number but the name): one split
    and one int() pass over all of them, not a call a line (a large node's 128 devices
    all move every second).  {} where one of them is not: each then goes through
    _parse_line() on its own, which says why.  The same tuples _parse_line() gives."""
    if len(lines) < 2:
        return {}
    rows = [line.split() for line in lines]
    n = len(rows[0])
    pad = _PADDING.get(n)
    if pad is None or any(len(r) != n for r in rows):
        return {}
    tokens = list(chain.from_iterable(rows))
    names = tokens[2::n]
    tokens[2::n] = repeat(str(n), len(names))   # the name's place holds nfields
    digits = "".join(tokens)
    if not (digits.isdigit() and digits.isascii()):
        return {}
    values = list(map(int, tokens))
    if max(values) > MASK32:
        # rare, as in _parse_line(): the fields C reads as 32 bits wrap there
        for i in _U32_INDEXES:
            if i < n - 3 and max(values[3 + i::n]) > MASK32:
                values[3 + i::n] = [v & MASK32 for v in values[3 + i::n]]
        if max(values) > MASK64:
            return {}
    rows_of = zip(*[iter(values)] * n)
    counters = [_make((*t, *pad)) for t in rows_of] if pad else list(map(_make, rows_of))
    return {line: (name, c, n) for line, name, c in zip(lines, names, counters)}


_make = DiskCounters._make


def parse(text: str) -> dict[str, DiskCounters]:
    """Parse /proc/diskstats text into {device name: DiskCounters}, reading it as iostat
    does (sysstat 12.6.1 iostat.c read_diskstats_stat_work).

    A malformed line (too few fields, a garbled number before the 14th field) is skipped
    and parsing goes on; a name on two lines keeps the last one, as iostat does.  This
    function never raises on bad text.
    """
    return parse_checked(text)[0]


def parse_checked(text: str, whole_lines: bool = False,
                  memo: dict | None = None) -> tuple[dict[str, DiskCounters], list[str]]:
    """Like parse(), and also one warning per line that was skipped, read only in part,
    repeated, or cut off without its newline.

    whole_lines: also skip a last line that has no newline.  The kernel ends every line
    of /proc/diskstats with one, so such a line was cut mid-number (a partial read, or a
    file that someone rewrites in place while we read it) and its last counter may have
    lost digits.  iostat's fgets() reads it anyway, so parse() does too; the sampler
    (read()) does not, so a cut number never reaches the model.

    memo: a dict kept between calls (the sampler's): a line the same as in the previous
    call is not parsed again, and gives the same DiskCounters object (a device that did
    not move: model/disk.py carries it over without deriving it again).
    """
    seen = memo if memo is not None else {}
    fresh: dict[str, tuple | None] = {}
    out: dict[str, DiskCounters] = {}
    line_of: dict[str, int] = {}
    warnings: list[str] = []
    lines = text.splitlines()
    # splitlines() also splits at \r, \v and other separators the kernel never prints;
    # only "\n" counts as the end of the last line
    cut_last = bool(lines) and not text.endswith("\n") and bool(lines[-1].strip())
    bulk = _parse_lines([line for line in lines
                         if line not in seen and len(line) < _FGETS_CHARS])
    for lineno, full_line in enumerate(lines, 1):
        # iostat reads lines with fgets(line, 256, fp): a line of 255 characters or more
        # (only possible with counters near 2**64) is read as 255-character pieces, each
        # parsed on its own.  Do the same so both tools see the same devices.
        if len(full_line) < _FGETS_CHARS:
            pieces = (full_line,)
        else:
            pieces = [full_line[i:i + _FGETS_CHARS] for i in range(0, len(full_line), _FGETS_CHARS)]
            warnings.append(f"diskstats line {lineno} is longer than {_FGETS_CHARS} characters; "
                            "read in pieces, as iostat does")
        for line in pieces:
            parsed = seen.get(line, _UNSEEN)
            if parsed is _UNSEEN:
                parsed = bulk.get(line) or _parse_line(line)
            fresh[line] = parsed
            if parsed is None:
                if len(pieces) == 1 and line.strip():
                    warnings.append(f"diskstats line {lineno} is malformed and was skipped: "
                                    f"{line.strip()[:60]!r}")
                continue
            name, counters, ntokens = parsed
            if cut_last and lineno == len(lines):
                if whole_lines:
                    warnings.append(f"diskstats line {lineno} ({name}) has no newline: the file "
                                    "was cut mid-line (a partial read or a rewrite in place); "
                                    "the line was not used")
                    continue
                warnings.append(f"diskstats line {lineno} ({name}) has no newline: the file was "
                                "cut mid-line, so its last counter may have lost digits")
            if counters.nfields < min(ntokens, 20):
                warnings.append(
                    f"diskstats line {lineno} ({name}) is garbled after field {counters.nfields}; "
                    f"read the first {counters.nfields} fields, as iostat does")
            if name in out:
                # iostat's add_list_device() finds the name already in its list ("Device
                # found in list") and read_diskstats_stat_work() overwrites its stats with
                # this line's: the last line wins.  A kernel never prints a name twice, so
                # say so: the text is not one consistent read.
                warnings.append(f"diskstats lines {line_of[name]} and {lineno} both name {name}; "
                                "the last one is used, as iostat does")
            out[name] = counters
            line_of[name] = lineno
    if memo is not None:
        memo.clear()
        memo.update(fresh)     # only the last read's lines: a bounded memo
    return out, warnings


_UNSEEN = object()


# fgets(line, 256, fp) returns at most 255 characters, the newline counting as one
_FGETS_CHARS = 255


def read(roots: Roots, files=None, memo: dict | None = None
         ) -> tuple[dict[str, DiskCounters], list[str]]:
    """Read and parse <procfs>/diskstats; returns the counters and the parse warnings.
    files: a roots.FileCache that keeps the file open between samples; memo: the lines
    of the last read, as parse_checked() keeps them.

    Raises OSError when the file cannot be read; the sampler turns that into a status.
    """
    path = roots.proc("diskstats")
    if files is not None:
        text = files.read(path)
        if text is None:
            raise OSError(errno.EIO, files.errors.get(path) or "cannot be read", path)
        return parse_checked(text, whole_lines=True, memo=memo)
    return parse_checked(read_bytes(path).decode("ascii", errors="replace"), whole_lines=True,
                         memo=memo)
