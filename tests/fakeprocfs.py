"""A procfs tree of a test's own, for `--procfs ROOT` and `Roots(procfs=ROOT)`: this
machine's own files copied where the test wants the real thing, and files written from
the lines the test gives where it wants a case (a diskstats of its devices, a mountinfo
with a hostile mountpoint, an impossible meminfo).  In the manner of below's TestProcfs
(facebookincubator/below, procfs/src/test.rs): a small object that writes the tree into a
temporary directory; one owner for what the tests built by hand four ways."""

from __future__ import annotations

import os
from pathlib import Path

# what the host line and the disk table read (the collectors' files, no process's)
HOST_FILES = ("stat", "meminfo", "pressure/io", "pressure/cpu", "pressure/memory",
              "self/cgroup", "self/mountinfo", "1/mountinfo", "diskstats", "cmdline")


class FakeProcfs:
    """The tree under `root` (made if missing).  Path-like: `str(procfs)` is the root to
    give the command, `procfs / "meminfo"` a file's Path."""

    def __init__(self, root) -> None:
        self.root = os.fspath(root)
        os.makedirs(self.root, exist_ok=True)

    def __fspath__(self) -> str:
        return self.root

    def __str__(self) -> str:
        return self.root

    def __truediv__(self, rel: str) -> Path:
        return Path(self.root, rel)

    def copy(self, *rels: str, mode: int | None = None) -> FakeProcfs:
        """This machine's /proc/REL for each rel, read whole as Python reads a file
        (until read() returns nothing); a file that cannot be read is left out, as a
        kernel without it would.  `mode`: each copy's permission bits."""
        for rel in rels:
            try:
                with open(f"/proc/{rel}", "rb") as f:
                    data = f.read()
            except OSError:
                continue
            path = self._write(rel, data)
            if mode is not None:
                os.chmod(path, mode)
        return self

    def write(self, rel: str, lines: str | list[str]) -> FakeProcfs:
        """REL holding `lines` (a text as it is, or lines each ended by a newline)."""
        text = lines if isinstance(lines, str) else "".join(f"{ln}\n" for ln in lines)
        self._write(rel, text.encode())
        return self

    def _write(self, rel: str, data: bytes) -> Path:
        path = self / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path
