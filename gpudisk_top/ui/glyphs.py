"""The glyphs gpudisk-top draws, in UTF-8 and in ASCII, and which of the two this run
uses (chosen once at start: `--ascii`, or a locale or terminal that cannot draw UTF-8).

One owner: the widgets draw the named glyphs below (never a literal), and ASCII_FORM
gives each its ASCII form, taking as many cells as the UTF-8 one, so that a layout made
for one fits the other.  Under ASCII every glyph is written in its ASCII form at the two
edges where text leaves the program: the screen (ui/asciiscreen.py's line filter, every
panel and border of every app) and the text commands' standard output and error
(cli.py).  So the words other layers own (a state's "▲ DISK-STARVED", a fix's "×2.2",
the report's chart) follow without each of them knowing about ASCII; EXTRA_FORM holds
their glyphs, and tests/test_ascii.py holds every non-ASCII character of the package's
strings to a form here.

Textual is not imported here: `--once` and the report use this module too.
"""

from __future__ import annotations

import codecs
import locale
import os
import re
import sys
import unicodedata

from rich.cells import cell_len

# ---------------------------------------------------------------------------- the glyphs
BARS = " ▁▂▃▄▅▆▇█"      # a cell filled 0-8 eighths from the bottom (theme.bar)
SPARK = BARS[1:]         # a sparkline's bars: 0 % is the lowest bar, not a blank
HBAR_PARTS = " ▏▎▍▌▋▊▉"  # a cell filled 0-7 eighths from the left (theme.hbar)
FULL = "█"               # a full cell: a horizontal bar's body, replay's position
ELLIPSIS = "…"           # text cut to fit
DOT = "·"                # a separator between clauses; a sparkline's minute with no sample
UP, DOWN, LEFT, RIGHT = "↑", "↓", "←", "→"
SORTED = "▼"             # the column rows are sorted by
BLAMED = "▲"             # the device or process the verdict names; a starved node
ON_BLAMED = "△"          # a device in the blamed one's stack: its partition, dm, disk
WAIT = "◇"               # a node whose GPUs wait on peers
STALE = "×"              # a node that stopped reporting; a GPU that cannot be read
NO_GPU = "⊘"             # no GPU can be read there
ERROR = "✕"              # a query that failed
POINTER = "▶"            # the row followed or selected; replay playing
POINT_LEFT = "◀"         # after the name of the node a view calls out
PAUSED = "❚❚"            # replay paused
RAIL = "─"               # replay's time line
DASH = "–"               # a row of no job (the job rows' number column)
DEGREE = "°"

# Each named glyph's ASCII form, of the same length (one cell a character).  The bars are
# a density ramp; '-' stays out of it, as DOT's form, so a sparkline's missing minute
# never reads as a level.
ASCII_FORM = {
    BARS: " .:=+*%@#", HBAR_PARTS: " |||||||", FULL: "#", ELLIPSIS: "~", DOT: "-",
    UP: "^", DOWN: "v", LEFT: "<", RIGHT: ">", SORTED: "v", BLAMED: "^", WAIT: "?",
    STALE: "x", NO_GPU: "/", ERROR: "X", POINTER: ">", POINT_LEFT: "<", PAUSED: "||",
    RAIL: "-", DASH: "-", DEGREE: " ", ON_BLAMED: "+",
}
# The glyphs of words other layers own (states' banners, the health marks, a fix's
# speed-up, units) and of the report's chart, by character.
EXTRA_FORM = {
    "○": "o", "●": "*", "✓": "+", "✗": "X", "—": "-", "µ": "u", "±": "~", "²": "2",
    "▀": '"', "▐": "|", "▕": "|", "▔": "-", "▖": ".", "▗": ".", "▘": "'", "▝": "'",
    "⏎": "<", "⌫": "<",
}


def _table() -> dict[int, str]:
    table: dict[int, str] = {}

    def put(char: str, form: str) -> None:
        if cell_len(char) != cell_len(form) or not form.isascii():
            raise ValueError(f"ASCII form {form!r} of {char!r} is not as wide, or not ASCII")
        if table.setdefault(ord(char), form) != form:
            raise ValueError(f"{char!r} has two ASCII forms: {table[ord(char)]!r}, {form!r}")

    for glyph, form in ASCII_FORM.items():
        if len(glyph) != len(form):
            raise ValueError(f"ASCII form {form!r} of {glyph!r} is not as long")
        for char, one in zip(glyph, form):
            if not char.isascii():
                put(char, one)
    for char, form in EXTRA_FORM.items():
        put(char, form)
    # box drawing (Textual's borders, the report's axes): lines and their joins
    for code in range(0x2500, 0x2580):
        name = unicodedata.name(chr(code), "")
        if code in table or not name:
            continue
        words = set(name.split())
        across = bool(words & {"LEFT", "RIGHT", "HORIZONTAL"})
        down = bool(words & {"UP", "DOWN", "VERTICAL"})
        if "DIAGONAL" in words:
            form = "X" if "CROSS" in words else ("/" if "UPPER RIGHT" in name else "\\")
        else:
            form = "+" if across and down else ("-" if across else "|")
        table[code] = form
    return table


TABLE = _table()


def _other(char: str) -> str:
    """A character with no form here (a process's name in another script, Textual's own
    icons): as many '?' as it takes cells, so the columns still line up."""
    if 0x2800 <= ord(char) <= 0x28FF:          # braille dots of a chart
        return " " if char == "\u2800" else "."
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return ""
    # a letter with its accents (é: e), where that is one ASCII letter as wide
    base = "".join(c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c))
    if len(base) == 1 and base.isascii() and base.isprintable() and cell_len(char) == 1:
        return base
    return "?" * cell_len(char)


def to_ascii(text: str) -> str:
    """`text` with every glyph in its ASCII form, cell for cell (what has no form becomes
    '?' a cell).  Never raises."""
    if text.isascii():
        return text
    text = text.translate(TABLE)
    if text.isascii():
        return text
    return "".join(c if c.isascii() else _other(c) for c in text)


# ---------------------------------------------------------------------------- the choice
_ascii = False


def use_ascii(on: bool = True) -> None:
    """Draw this run in ASCII (or back in UTF-8): chosen once at start, before anything is
    drawn (cli.py; a test sets it around its app)."""
    global _ascii
    _ascii = bool(on)


def ascii_on() -> bool:
    """Whether this run draws in ASCII."""
    return _ascii


# TERMs that draw no full set of block and box glyphs: the Linux console (its font holds
# 256 or 512 glyphs), DEC VTs and their emulations, BSD consoles, ANSI.SYS
_TERM_NO_GLYPHS = re.compile(r"(linux|vt\d+|cons\d+|ansi|pcansi)([-+.].*)?")
def ascii_reason(environ=None, streams=None) -> str | None:
    """Why this run cannot draw UTF-8 (a line's clause), or None when it can: a TERM with
    no block and box glyphs, a locale named C or POSIX (or of another encoding), or a
    standard stream that encodes another.  No locale named at all (a container's default)
    is taken as UTF-8, as Python itself takes it (PEP 538).  Never raises."""
    environ = os.environ if environ is None else environ
    term = environ.get("TERM", "")
    if _TERM_NO_GLYPHS.fullmatch(term):
        return f"TERM={term} has no full set of block and box glyphs"
    # Python turns a C locale (or one not installed) into C.UTF-8 as it starts, putting
    # LC_CTYPE=C.UTF-8 in the environment (PEP 538), and sets its UTF-8 mode (PEP 540):
    # the mode unasked says so, and then the locale the user named is LC_ALL's or LANG's
    asked_utf8 = environ.get("PYTHONUTF8") or "utf8" in getattr(sys, "_xoptions", {})
    if sys.flags.utf8_mode and not asked_utf8:
        var = next((v for v in ("LC_ALL", "LANG") if environ.get(v)), None)
        if var is not None and not _utf8(_codeset(environ[var])):
            return f"the locale ({var}={environ[var]}) is not UTF-8"
    else:
        var = next((v for v in ("LC_ALL", "LC_CTYPE", "LANG") if environ.get(v)), None)
        if var is not None and environ[var] in ("C", "POSIX"):
            return f"the locale ({var}={environ[var]}) is not UTF-8"
        if not sys.flags.utf8_mode and not _utf8(locale.getpreferredencoding(False)):
            return (f"the locale ({var}={environ[var] if var else ''}) encodes "
                    f"{locale.getpreferredencoding(False)}")
    for name, stream in (streams or {"standard output": sys.stdout,
                                     "standard error": sys.stderr}).items():
        encoding = getattr(stream, "encoding", None)
        if encoding and not _utf8(encoding):
            return f"{name} encodes {encoding}"
    return None


def _codeset(name: str) -> str:
    """The encoding a locale's name says (en_US.UTF-8@euro: UTF-8); '' for none."""
    return name.partition(".")[2].partition("@")[0]


def _utf8(encoding: str) -> bool:
    if not encoding:
        return False
    try:
        return codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        return False


def dumb_terminal(environ=None) -> bool:
    """TERM=dumb: a terminal that cannot move its cursor (Emacs's shell, some CI logs)."""
    environ = os.environ if environ is None else environ
    return environ.get("TERM") == "dumb"
