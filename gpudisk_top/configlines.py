"""Where each table, [[array]] entry and key of a config file's text is, by line.

A config error names the line of the offending key, and every [[alerts]] rule records
the line of its own [[alerts]] header.  Found by scanning the file for each of them, 5,000
rules took 36 s to load (each rule's lookup read the whole file: quadratic); the text is
read once here, into maps and each entry's span, so a lookup costs a dict access (and,
for a key inside one [[array]] entry, a scan of that entry alone).  Only the line numbers
come from here: tomllib parses the values.
"""

from __future__ import annotations

import re

# "[[alerts]]" (an array entry's header); matched on the stripped line
_ENTRY_RE = re.compile(r"^\[\[\s*([^\]]+?)\s*\]\]")
# "[detector]", "[devices."nvme0n1"]"; on "[[alerts]]" it gives "[alerts", which no
# table is named, so entries never count as tables
_TABLE_RE = re.compile(r"^\[\s*([^\]]+?)\s*\]")
# a key's name before "=": bare, quoted or dotted
_KEY_RE = re.compile(r"^([A-Za-z0-9_\-\"'. ]+?)\s*=")


class LineIndex:
    """One pass over a config file's text.  line_of() and entry_line() are 1-based line
    numbers, or None where the text has no such table or entry.  Never raises."""

    def __init__(self, text: str) -> None:
        self._lines = text.splitlines()
        self._table_line: dict[str, int] = {}      # table -> its last header's line
        self._key_line: dict[str, int] = {}        # "table.key" -> its first line
        # array name -> [(header line, index of the entry's first body line, of its end)]
        self._entries: dict[str, list[tuple[int, int, int]]] = {}
        current = ""
        open_entry: tuple[str, int] | None = None   # (array name, its header line)

        def close(end: int) -> None:
            if open_entry is not None:
                name, header = open_entry
                self._entries.setdefault(name, []).append((header, header, end))

        for n, line in enumerate(self._lines, 1):
            stripped = line.strip()
            if stripped.startswith("["):
                # any header ends the entry before it (its body is the lines between)
                close(n - 1)
                m = _ENTRY_RE.match(stripped)
                open_entry = (m.group(1), n) if m else None
            m = _TABLE_RE.match(stripped)
            if m:
                current = m.group(1).replace(" ", "")
                self._table_line[current] = n
                continue
            m = _KEY_RE.match(stripped)
            if m:
                key = m.group(1).replace(" ", "").replace('"', "")
                self._key_line.setdefault(".".join(p for p in (current, key) if p), n)
        close(len(self._lines))

    def line_of(self, table: str, key: str | None) -> int | None:
        """Where `key` is first set inside [table] (dotted keys included), else where
        [table] starts (its last header, if it has several)."""
        header = self._table_line.get(table)
        if key is None:
            return header
        return self._key_line.get(f"{table}.{key}" if table else key, header)

    def entry_line(self, table: str, index: int, key: str | None) -> int | None:
        """Where `key` is set in the index-th (0-based) [[table]] entry, else that
        entry's [[table]] header line; None when there is no such entry."""
        entries = self._entries.get(table, [])
        if not 0 <= index < len(entries):
            return None
        header, first, end = entries[index]
        if key is not None:
            key_re = re.compile(r"""^\s*["']?""" + re.escape(key) + r"""["']?\s*=""")
            # body lines are header+1 .. end (1-based): list indexes header .. end-1
            for n in range(first, end):
                if key_re.match(self._lines[n]):
                    return n + 1
        return header
