"""Where a session's samples come from, and which sessions a report, an export or a replay reads.

A recording can hold sessions of more than one source: a `record --demo` appended to a live
recording (older recorders allowed it), two nodes' files concatenated.  Their numbers must
never be added up together, and a simulated one must never read as live.  Every session
has a Source: its kind ("live", "simulated", or "unknown" when its header is lost or
damaged and what remains of it cannot tell), its host and a label.  Sessions of one kind
and host are one group; readers use one group (choose()) and say what they left out.

A session header that fails its CRC is not trusted (one flipped bit can rename
"simulated" and make a simulated session read as live), but what remains of it is
evidence: a header says it is simulated in three places (`"simulated": true`, a source
"simulated, scenario ...", the kernel "simulated"), and one flipped bit can spoil at most
one of them, nor can it turn `true` into `false` or "simulated, ..." into "live".  So a
damaged header is taken as simulated when any of those is left, as live only when both
`"simulated": false` and `"source": "live"` are, and as unknown otherwise (salvage()).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# the one Source type, kept below record/ (collect/source.py): re-exported for readers
from gpudisk_top.collect.source import LIVE, SIMULATED, UNKNOWN, Source
from gpudisk_top.errors import UsageError
from gpudisk_top.record import frames

# the order in which readers prefer a group when a recording mixes them: real numbers
# first, then the simulator's, then those whose source cannot be told
PREFERENCE = (LIVE, SIMULATED, UNKNOWN)

_SIM_HINTS = (re.compile(rb'"simulated"\s*:\s*true'), re.compile(rb'"source"\s*:\s*"simulated'),
              re.compile(rb'"kernel"\s*:\s*"simulated"'))
_LIVE_HINTS = (re.compile(rb'"simulated"\s*:\s*false'), re.compile(rb'"source"\s*:\s*"live"'))
_FIELD = {k: re.compile(rb'"' + k.encode() + rb'"\s*:\s*"([^"\\]{0,200})"')
          for k in ("host_name", "kernel", "source", "tool_version")}
_INTERVAL = re.compile(rb'"interval_s"\s*:\s*([0-9.eE+-]{1,32})')
# text only a session header holds (rows, blocks and end frames never do): enough of it
# in a damaged stretch, or a damaged frame typed H, means a session began there
_HEADER_MARKS = (b"gpudisk-top recording", b'"segment_samples"', b'"tool_version"',
                 b'"format_version"', b'"recorder_pid"')


def source_of(header: dict, damaged: bool = False) -> Source:
    """The Source a session header describes.  An intact header without "source" is live,
    as it always read; a damaged one says what salvage() made of it."""
    if damaged:
        kind = header.get("source_kind", UNKNOWN)
        return Source(kind, header.get("host_name"), header.get("source") or kind, True)
    if not header:
        return Source(UNKNOWN, None, UNKNOWN, True)
    label = header.get("source", LIVE)
    simulated = bool(header.get("simulated", False)) or label != LIVE
    return Source(SIMULATED if simulated else LIVE, header.get("host_name"), label)


def salvage(raw: bytes) -> dict:
    """A session header made of what remains of a damaged one (see the module's doc):
    "source_kind", "source" and "simulated" from the evidence, and the host, kernel and
    interval when they can still be read.  Never raises."""
    sim = any(p.search(raw) for p in _SIM_HINTS)
    live = all(p.search(raw) for p in _LIVE_HINTS)
    kind = SIMULATED if sim else LIVE if live else UNKNOWN
    out: dict = {"source_kind": kind, "header_damaged": True}
    for key, pattern in _FIELD.items():
        m = pattern.search(raw)
        if m:
            text = m.group(1).decode("utf-8", "replace")
            out[key] = "".join(c if c.isprintable() else "?" for c in text)
    if kind == SIMULATED and not str(out.get("source", "")).startswith("simulated"):
        out["source"] = "simulated"
    elif kind != SIMULATED:
        out["source"] = kind            # "live" or "unknown": never a simulated label dropped
    out["source"] = f"{out['source']} (session header damaged)"
    # "simulated" as the report JSON means it: not known to be live
    out["simulated"] = kind != LIVE
    m = _INTERVAL.search(raw)
    if m:
        try:
            value = float(m.group(1))
            if 0 < value <= 3600:
                out["interval_s"] = value
        except ValueError:
            pass
    return out


def damaged_header(buf, damage: frames.Damage) -> bytes | None:
    """The bytes of a session header that `damage` (a stretch that failed its CRC) holds,
    or None when it does not look like one: a frame typed H at its start, or at least two
    texts only a header holds."""
    start, end = damage.start, damage.end
    head = bytes(buf[start:start + frames.HEADER_SIZE])
    typed = len(head) == frames.HEADER_SIZE and head[:2] == frames.SYNC and head[2] == frames.SESSION
    stretch = bytes(buf[start:end])
    if not typed and sum(m in stretch for m in _HEADER_MARKS) < 2:
        return None
    if typed:
        (length,) = frames.HEADER.unpack_from(head)[3:4]
        return stretch[frames.HEADER_SIZE:frames.HEADER_SIZE + length]
    return stretch


# ---------------------------------------------------------------------------- choosing
@dataclass
class Group:
    """Sessions of one source (kind and host), numbered as in the file."""

    source: Source
    sessions: list[int] = field(default_factory=list)
    samples: int = 0

    def describe(self) -> str:
        n = len(self.sessions)
        return (f"{n} session{'s' * (n != 1)} of {self.source.describe()} "
                f"({self.samples} sample{'s' * (self.samples != 1)})")


def _near(a: str | None, b: str | None) -> bool:
    """A damaged header's host name read with at most one byte changed."""
    if a is None or b is None:
        return True
    return len(a) == len(b) and sum(x != y for x, y in zip(a, b)) <= 1


def groups(sessions, counts: list[int]) -> list[Group]:
    """Sessions that hold samples grouped by source, in the order each source first
    appears (one without samples mixes nothing in).  A session whose header is damaged
    joins a group of the kind it was salvaged as, when its host name (as far as it could
    be read) is that group's."""
    out: list[Group] = []
    pending = []
    for k, s in enumerate(sessions):
        src = s.source
        if not counts[k]:
            continue
        if src.damaged:
            pending.append(k)
            continue
        g = next((g for g in out if g.source.kind == src.kind and g.source.host_name == src.host_name), None)
        if g is None:
            g = Group(src)
            out.append(g)
        g.sessions.append(k)
        g.samples += counts[k]
    for k in pending:
        src = sessions[k].source
        g = None
        if src.kind != UNKNOWN:
            g = next((g for g in out if g.source.kind == src.kind and not g.source.damaged
                      and _near(src.host_name, g.source.host_name)), None)
        if g is None:
            g = next((g for g in out if g.source == src), None)
        if g is None:
            g = Group(src)
            out.append(g)
        g.sessions.append(k)
        g.sessions.sort()
        g.samples += counts[k]
    return out


def _matches(g: Group, wanted: str) -> bool:
    w = wanted.strip().lower()
    if w in PREFERENCE:
        return g.source.kind == w
    return (g.source.host_name or "").lower() == w


def choose(sessions, counts: list[int], wanted: str | None, path: str) -> tuple[list[int], str | None]:
    """(the session numbers to read, a one-line warning or None).  With several sources
    and no `wanted`, the first group in PREFERENCE order is read (the first recorded among
    equals) and the warning says what was left out and how to choose.  `wanted` is a
    kind (live, simulated, unknown) or a host name.  Raises UsageError when it matches
    nothing."""
    gs = groups(sessions, counts)
    if wanted is not None:
        pick = [g for g in gs if _matches(g, wanted)]
        if not pick:
            held = "; ".join(f"{g.describe()}" for g in gs) or "no sessions"
            raise UsageError(f"--source {wanted}: {path} holds no such sessions; it holds {held}")
    else:
        pick = gs
    pick = sorted(pick, key=lambda g: PREFERENCE.index(g.source.kind))
    if len(gs) <= 1:
        return list(range(len(sessions))), None      # one source: every session
    chosen = pick[0]
    left = [g for g in gs if g is not chosen]
    choices = sorted({g.source.kind if sum(h.source.kind == g.source.kind for h in gs) == 1
                      else (g.source.host_name or g.source.kind) for g in left})
    warning = (f"{path} mixes sources: read {chosen.describe()}, left out "
               + ", ".join(g.describe() for g in left)
               + f"; choose with --source {' or --source '.join(choices)}")
    return chosen.sessions, warning
