"""A procfs or sysfs tree of a test's own, for `--procfs ROOT` / `--sysfs ROOT` and
`Roots(procfs=..., sysfs=...)`: this machine's own /proc files copied where the test wants
the real thing, files written from the lines the test gives where it wants a case (a
diskstats of its devices, a mountinfo with a hostile mountpoint, an impossible meminfo),
and block devices laid out in sysfs as the kernel lays them out.  In the manner of
below's TestProcfs (facebookincubator/below, procfs/src/test.rs): a small object that
writes the tree into a temporary directory; one owner for what the tests built by hand."""

from __future__ import annotations

import os
from pathlib import Path

# what the host line and the disk table read (the collectors' files, no process's)
HOST_FILES = ("stat", "meminfo", "pressure/io", "pressure/cpu", "pressure/memory",
              "self/cgroup", "self/mountinfo", "1/mountinfo", "diskstats", "cmdline")


class _Tree:
    """A directory tree under `root` (made if missing).  Path-like: `str(tree)` is the
    root to give the command, `tree / "meminfo"` a file's Path."""

    def __init__(self, root) -> None:
        self.root = os.fspath(root)
        os.makedirs(self.root, exist_ok=True)

    def __fspath__(self) -> str:
        return self.root

    def __str__(self) -> str:
        return self.root

    def __truediv__(self, rel) -> Path:
        return Path(self.root, rel)

    def write(self, rel, lines: str | list[str]):
        """REL holding `lines` (a text as it is, or lines each ended by a newline)."""
        text = lines if isinstance(lines, str) else "".join(f"{ln}\n" for ln in lines)
        self._write(rel, text.encode())
        return self

    def _write(self, rel, data: bytes) -> Path:
        path = self / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path


class FakeProcfs(_Tree):
    """A procfs: copies of this machine's files and files of the test's lines."""

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


class FakeSysfs(_Tree):
    """A sysfs of block devices: each under devices/ (`under`), linked from block/ and
    class/block/ as the kernel links them, its partitions below it."""

    def block_device(self, name: str, major: int, minor: int, files: dict[str, str], *,
                     under: str = "devices/virtual", slaves: tuple[str, ...] = ()) -> Path:
        """The device's directory: its dev, each of `files` (rel -> text, a newline
        added), slaves/ linking each of `slaves` beside it; returns the directory."""
        d = self / under / name
        self.write(d / "dev", f"{major}:{minor}\n")
        for rel, text in files.items():
            self.write(d / rel, text + "\n")
        os.makedirs(d / "slaves", exist_ok=True)
        for s in slaves:
            os.symlink(f"../../{s}", d / "slaves" / s)
        for link_dir in ("block", "class/block"):
            os.makedirs(self / link_dir, exist_ok=True)
            os.symlink(d, self / link_dir / name)
        return d

    def partition(self, name: str, parent: str, major: int, minor: int, *,
                  under: str = "devices/virtual") -> Path:
        """A partition of `parent` (made by block_device with the same `under`), linked
        from class/block/ only, as the kernel does."""
        d = self / under / parent / name
        self.write(d / "partition", "1\n")
        self.write(d / "dev", f"{major}:{minor}\n")
        os.symlink(d, self / "class/block" / name)
        return d
