"""Free space of configured paths (a checkpoint directory, a dataset cache), by statvfs.

    watch = FreeSpaceWatch(["/checkpoints"])
    for fs in watch.read():          # once per sample, from the sampler thread
        print(format_free_space(fs))

statvfs on a network mount whose server is gone blocks in the kernel, possibly for
minutes (NFS "hard" mounts retry forever).  A monitor must not freeze with it, so the
calls run in one worker thread and read() waits at most `timeout_s` for them: a path that
has not answered is reported with an error, and the next read does not queue another call
behind the stuck one.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

from gpudisk_top.deadline import DeadlineWorker
from gpudisk_top.model.present import pct

GB = 1000**3   # sizes in GB are decimal, as `df -H` prints them


@dataclass(frozen=True, slots=True)
class FreeSpace:
    """One watched path at one moment.  Byte fields are None when the path could not be
    read; `error` then says why, in a few words."""

    path: str
    size_bytes: int | None = None
    avail_bytes: int | None = None    # what an unprivileged writer can still use (df's Avail)
    free_bytes: int | None = None     # including the blocks reserved for root
    dev_major: int | None = None      # the block device the path lives on (st_dev)
    dev_minor: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def avail_gb(self) -> float | None:
        return None if self.avail_bytes is None else self.avail_bytes / GB

    @property
    def used_pct(self) -> float | None:
        """Used share as df prints Use%: used / (used + avail), so root's reserve counts as
        neither."""
        if self.size_bytes is None or self.free_bytes is None or self.avail_bytes is None:
            return None
        used = self.size_bytes - self.free_bytes
        denom = used + self.avail_bytes
        return used / denom * 100.0 if denom > 0 else 0.0

    @property
    def avail_pct(self) -> float | None:
        used = self.used_pct
        return None if used is None else 100.0 - used

    def as_json(self) -> dict:
        return {"path": self.path, "size_bytes": self.size_bytes,
                "avail_bytes": self.avail_bytes, "free_bytes": self.free_bytes,
                "used_pct": self.used_pct, "error": self.error}


def statvfs_path(path: str) -> FreeSpace:
    """Read one path now.  Never raises: a path that cannot be read has `error` set."""
    try:
        st = os.statvfs(path)
        dev = os.stat(path).st_dev
    except OSError as err:
        return FreeSpace(path, error=err.strerror or str(err))
    except ValueError as err:               # a NUL in the path: no file has that name
        return FreeSpace(path, error=str(err))
    frsize = st.f_frsize or st.f_bsize
    return FreeSpace(path, size_bytes=st.f_blocks * frsize, avail_bytes=st.f_bavail * frsize,
                     free_bytes=st.f_bfree * frsize, dev_major=os.major(dev),
                     dev_minor=os.minor(dev))


class FreeSpaceWatch:
    """Free space of `paths`, read by a worker thread so that a hung mount cannot stall
    the caller (gpudisk_top/deadline.py).  read() is meant for one thread (the
    sampler's); close() ends the worker."""

    def __init__(self, paths, timeout_s: float = 1.0, reader=statvfs_path) -> None:
        self.paths = tuple(dict.fromkeys(paths))     # in order, without repeats
        self.timeout_s = timeout_s
        self._reader = reader
        self._lock = threading.Lock()
        self._results: dict[str, FreeSpace] = {}     # this round's, path by path
        self._busy: tuple[str, float] | None = None  # the path the worker is inside, since
        self._worker: DeadlineWorker | None = None

    def _round(self) -> None:
        for path in self.paths:
            with self._lock:
                self._busy = (path, time.monotonic())
            result = self._reader(path)
            with self._lock:
                self._results[path] = result
                self._busy = None

    def read(self) -> list[FreeSpace]:
        """Every watched path, in the configured order.  Waits at most timeout_s; a path
        whose statvfs has not returned by then carries an error ("no answer for 3 s")."""
        if not self.paths:
            return []
        if self._worker is None:
            self._worker = DeadlineWorker(self._round, "gpudisk-top free-space")
        with self._lock:
            stuck = self._busy is not None
            if not stuck:
                self._results = {}   # a fresh round: no old answer is shown as current
        if not stuck:
            self._worker.ask(self.timeout_s)
        with self._lock:
            results, busy = dict(self._results), self._busy
        out = []
        for path in self.paths:
            if path in results:
                out.append(results[path])
            elif busy is not None and path == busy[0]:
                waited = time.monotonic() - busy[1]
                out.append(FreeSpace(path, error=f"no answer for {waited:.1f} s (a hung mount?)"))
            else:
                out.append(FreeSpace(path, error="not read: waiting on another path"))
        return out

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()


def human_bytes(n: float | None) -> str:
    """Decimal units, as df -H: 812.3 GB, 3.8 TB."""
    if n is None:
        return "n/a"
    for unit in ("B", "kB", "MB", "GB", "TB", "PB"):
        if abs(n) < 1000 or unit == "PB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000.0
    return f"{n:.1f} PB"  # pragma: no cover


def format_free_space(fs: FreeSpace) -> str:
    """One line for a screen: '/checkpoints  812.3 GB free of 3.8 TB (79% used)'."""
    if fs.error is not None:
        return f"{fs.path}  n/a: {fs.error}"
    return (f"{fs.path}  {human_bytes(fs.avail_bytes)} free of {human_bytes(fs.size_bytes)} "
            f"({pct(fs.used_pct)} used)")
