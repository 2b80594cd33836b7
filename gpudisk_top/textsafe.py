"""Text from the machine made safe for a terminal.

Device names, process names and command lines, mountpoints and file paths come from
/proc, /sys, NVML and recordings, and any of them can hold control characters: a process
can name itself "\\x1b]2;...\\x07" (prctl PR_SET_NAME), a crafted diskstats or recording can
hold anything.  Printed raw, an escape sequence would move the cursor, retitle the
terminal or hide text.  Everything we print to a terminal (the dashboard's lines, --once
text, report text, warnings) goes through printable(), which shows such characters as
\\xNN escapes, as `ls -b` does; JSON escapes them itself.
"""

from __future__ import annotations

# C0 controls, DEL, C1 controls, and the bidirectional overrides and isolates that make
# text display in another order than it reads ("trojan source")
_UNSAFE = ([*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]
           + [*range(0x202A, 0x202F), *range(0x2066, 0x206A)])
_TABLE = {c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _UNSAFE}
_TABLE_KEEP_NL = {c: v for c, v in _TABLE.items() if c != 0x0A}


def printable(text: str, *, newlines: bool = False) -> str:
    """`text` with every control character escaped; newlines kept when `newlines`."""
    if text.isprintable():
        return text
    return text.translate(_TABLE_KEEP_NL if newlines else _TABLE)


def printable_lines(lines) -> str:
    """Lines of text output (--once, report) joined, each ending in a newline: every line
    is one line, so a newline inside one is data (a mountpoint named "x\\nverdict:
    healthy") and is shown escaped like any control character, never a line of its own."""
    return "".join(printable(line) + "\n" for line in lines)
