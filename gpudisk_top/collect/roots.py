"""Where /proc and /sys live (`--procfs`, `--sysfs`), like node_exporter's `--path.procfs`."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Roots:
    """The procfs and sysfs trees every collector reads from."""

    procfs: str = "/proc"
    sysfs: str = "/sys"

    def proc(self, *parts: str) -> str:
        return os.path.join(self.procfs, *parts)

    def sys(self, *parts: str) -> str:
        return os.path.join(self.sysfs, *parts)


def read_text(path: str) -> str | None:
    """The file's text, or None when it is missing or unreadable (a value, not an error)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def read_first_line(path: str) -> str | None:
    text = read_text(path)
    if text is None:
        return None
    return text.split("\n", 1)[0].strip()


class FileCache:
    """Keeps the files read every sample open and re-reads them with pread(fd, n, 0).

    /proc and /sys files can be read again from offset 0 (seq_file), which saves the
    path walk and the open and close of every read: on a virtual machine those syscalls
    cost most of a cold sample.  A file that stops reading (a process exited, a device
    went away) is closed and opened afresh next time.  Thread-compatible, not shared
    between threads.
    """

    CHUNK = 65536

    def __init__(self, max_files: int = 512) -> None:
        self.max_files = max_files
        self._fds: dict[str, int] = {}

    def read(self, path: str) -> str | None:
        """The file's text, or None when it cannot be read (a value, not an error)."""
        fd = self._fds.get(path)
        if fd is not None:
            text = self._pread(fd)
            if text is not None:
                return text
            self._drop(path)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        text = self._pread(fd)
        if text is None:
            os.close(fd)
            return None
        if len(self._fds) >= self.max_files:
            self._drop(next(iter(self._fds)))  # the oldest: a process long gone
        self._fds[path] = fd
        return text

    def _pread(self, fd: int) -> str | None:
        try:
            data = os.pread(fd, self.CHUNK, 0)
            if len(data) == self.CHUNK:  # a large file (a busy node's diskstats): the rest
                parts = [data]
                while len(data) == self.CHUNK:
                    data = os.pread(fd, self.CHUNK, sum(len(p) for p in parts))
                    parts.append(data)
                data = b"".join(parts)
        except OSError:
            return None
        return data.decode("utf-8", errors="replace")

    def _drop(self, path: str) -> None:
        fd = self._fds.pop(path, None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def forget(self, prefix: str) -> None:
        """Close every file under prefix (a process that exited)."""
        for path in [p for p in self._fds if p.startswith(prefix)]:
            self._drop(path)

    def close(self) -> None:
        for path in list(self._fds):
            self._drop(path)
