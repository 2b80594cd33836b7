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


def printable(text: str) -> str:
    """`text` with every control character escaped, a newline too: text of several lines
    is made of lines each made printable (printable_lines, printable_block), never
    escaped whole with its newlines kept, which let a mountpoint's newline start a line
    of the episode panel's evidence (issue 35)."""
    if text.isprintable():
        return text
    return text.translate(_TABLE)


def printable_lines(lines) -> str:
    """Lines of text output (--once, report) joined, each ending in a newline: every line
    is one line, so a newline inside one is data (a mountpoint named "x\\nverdict:
    healthy") and is shown escaped like any control character, never a line of its own."""
    return "".join(printable(line) + "\n" for line in lines)


def printable_block(lines) -> str:
    """Lines for a block of text on a screen (a panel's evidence, a note), joined by
    newlines, each line escaped whole as printable_lines does: only our own line breaks
    break lines."""
    return "\n".join(printable(line) for line in lines)
