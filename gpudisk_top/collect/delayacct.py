"""Turning the kernel's per-task delay accounting on for the duration of a run (--delayacct).

Since Linux 5.14 the time each task spends blocked on block I/O (/proc/PID/stat field 42,
what iotop shows as IO>) is accounted only while the sysctl kernel.task_delayacct is 1,
and it is 0 by default: the accounting costs a little on every context switch.  Without
it the loaders' blocked time is estimated (model/loaders.py).  Root may ask gpudisk-top to
switch it on while it runs.

The sysctl is one per kernel: every gpudisk-top on the node, in a container or not (and
iotop, and anyone) sees it.  So each gpudisk-top --delayacct holds a file of its own,
flock'd for its lifetime, in a lock directory every instance on the kernel shares
(collect/delayacct_place.py; where none can be shared, the setting is not switched), and
the one that switches it on leaves a marker there (SWITCHED_ON, naming the boot and its
pid).  The marker passes from instance to instance while one of them still runs; the
last to exit switches the setting off, and only then: when the marker is there, and the
setting still reads the 1 it wrote.

A marker whose instances have all exited (SIGKILL: the one signal no process can
answer; the commands restore on every other, session/ticker.py StopSignals) is stale: the
1 may be someone else's by now (an admin's `sysctl kernel.task_delayacct=1` cannot be told
from ours), so the next instance removes the marker, says so, and leaves the setting as it
is.  Nothing in the lock directory is followed: a link, or anything not a regular file of
ours, at the marker or the guard is never written through nor taken for ours, and the
setting is then not switched.

A task forked while accounting was off is never accounted (field 42 stays 0 for ever):
collect/procio.py believes field 42 only where it can be non-zero.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
from dataclasses import dataclass

from gpudisk_top.collect.delayacct_place import Place, lock_place

SYSCTL = "/proc/sys/kernel/task_delayacct"
GUARD = ".guard"                # held while an instance joins or leaves
SWITCHED_ON = "switched-on"     # a gpudisk-top switched the setting on: off after the last
MARKER_MAX_BYTES = 128
GUARD_WAIT_S = 2.0
OFF_WARNING = ("kernel.task_delayacct is off: the time the job's loaders are blocked on reads "
               "is estimated from reads x r_await; `sysctl kernel.task_delayacct=1` (or "
               "--delayacct, as root) measures it")
NODE_WIDE = "node-wide: every task on this node is accounted, other tools see it"


@dataclass(frozen=True, slots=True)
class Marker:
    """What is at SWITCHED_ON: nothing, a marker (this boot's or not; the pid that wrote
    it where it says), or something that is not ours (`foreign`: why, one clause)."""

    present: bool = False
    this_boot: bool = False
    pid: int | None = None
    foreign: str = ""


class DelayAccounting:
    """enable() switches kernel.task_delayacct on and says what it did (one line);
    restore() puts back what was there when no other gpudisk-top --delayacct still runs,
    and says so (one line) where it leaves it on.  Neither raises.

    place: where the lock lives (default: delayacct_place.lock_place(), found at enable)."""

    def __init__(self, path: str = SYSCTL, place: Place | None = None) -> None:
        self.path = path
        self._place = place
        self.lock_dir: str | None = None
        self._boot_id = ""
        self._fd: int | None = None         # our instance file, flock'd while we run
        self._mine: str | None = None
        self._switched = False              # this process wrote the 1

    # ------------------------------------------------------------------ public
    def enable(self) -> str | None:
        try:
            was = self._read()
        except FileNotFoundError:
            return ("--delayacct: this kernel has no kernel.task_delayacct (before 5.14, "
                    "delay accounting is on unless booted with nodelayacct)")
        except OSError as err:
            return f"--delayacct: cannot read {self.path}: {_why(err)}"
        place = self._place or lock_place()
        if place.lock_dir is None:
            return _refused(was, place.why)
        self.lock_dir, self._boot_id = place.lock_dir, place.boot_id
        try:
            guard = self._guard()
        except OSError as err:
            return _refused(was, f"{self.lock_dir} cannot hold the lock ({_why(err)})")
        try:
            others = self._live_others()
            try:
                self._join()
            except OSError as err:
                return _refused(was, f"{self.lock_dir} cannot hold the lock ({_why(err)})")
            marker = self._marker()
            if marker.foreign:
                self._leave()
                return _refused(was, f"{self._marker_path()} is {marker.foreign}, not a "
                                "marker of ours (never followed nor written through; "
                                "remove it to use --delayacct)")
            mine = marker.present and marker.this_boot
            if was == "1":
                if mine and others:
                    return (f"--delayacct: kernel.task_delayacct is on, switched on by "
                            f"gpudisk-top (pid {', '.join(others)}) ({NODE_WIDE}); it is "
                            "switched off when the last gpudisk-top --delayacct exits")
                if marker.present:
                    # stale: the 1 may be an admin's by now, which cannot be told from ours
                    self._unlink_marker()
                    who = f" (pid {marker.pid})" if marker.pid else ""
                    return (f"--delayacct: kernel.task_delayacct is on, switched on by a "
                            f"gpudisk-top that has exited{who} without switching it off "
                            f"({NODE_WIDE}); it may be someone else's setting by now, so it "
                            "is left on at exit (`sysctl kernel.task_delayacct=0` switches "
                            "it off)")
                return (f"--delayacct: kernel.task_delayacct is on already ({NODE_WIDE}); "
                        "it is left on at exit")
            if marker.present:
                self._unlink_marker()   # stale, or switched off under the ones that run
            try:
                self._write("1")
            except OSError as err:
                self._leave()
                return (f"--delayacct: cannot switch delay accounting on ({_why(err)}; "
                        "it needs root and a writable /proc/sys); blocked time is estimated")
            self._switched = True
            try:
                self._put_marker()
            except OSError as err:
                # without its marker no one would ever switch it off: take it back now
                self._take_back()
                self._leave()
                return _refused("0", f"its marker cannot be written in {self.lock_dir} "
                                f"({_why(err)})")
            return (f"--delayacct: kernel.task_delayacct switched on ({NODE_WIDE}); it is "
                    "switched off at exit unless another gpudisk-top --delayacct still runs")
        finally:
            os.close(guard)

    def restore(self) -> str | None:
        if self._fd is None:
            return None
        try:
            guard = self._guard()
        except OSError as err:
            self._leave()       # without the guard: left on, another may be joining
            if not self._switched:
                return None
            return (f"kernel.task_delayacct is left on: the lock in {self.lock_dir} could not "
                    f"be taken ({_why(err)}); `sysctl kernel.task_delayacct=0` switches it off")
        try:
            self._leave()
            others = self._live_others()
            if others:
                if self._read_or_none() != "1":
                    return None
                return (f"kernel.task_delayacct is left on: gpudisk-top --delayacct "
                        f"(pid {', '.join(others)}) still uses it")
            marker = self._marker()
            if marker.present and marker.this_boot and not marker.foreign:
                self._unlink_marker()
                self._take_back()
            return None
        finally:
            os.close(guard)

    # ------------------------------------------------------------------ the sysctl
    def _read(self) -> str:
        with open(self.path, encoding="ascii") as f:
            return f.read(16).strip()

    def _read_or_none(self) -> str | None:
        try:
            return self._read()
        except (OSError, ValueError):
            return None

    def _write(self, value: str) -> None:
        with open(self.path, "w", encoding="ascii") as f:
            f.write(value + "\n")

    def _take_back(self) -> None:
        """0 where the setting still reads the 1 a gpudisk-top wrote; a 0 someone wrote
        meanwhile is theirs already."""
        if self._read_or_none() == "1":
            try:
                self._write("0")
            except OSError:
                pass

    # ------------------------------------------------------------------ the lock files
    def _guard(self) -> int:
        """The directory made (root's alone, no link on the way), and its guard file
        flock'd; raises OSError where it cannot be, or when another holds it
        GUARD_WAIT_S."""
        _own_dir(os.path.dirname(self.lock_dir), 0o755)
        _own_dir(self.lock_dir, 0o700)
        fd = _open(os.path.join(self.lock_dir, GUARD))
        deadline = time.monotonic() + GUARD_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise OSError(0, "its guard is held by another process")
                time.sleep(0.05)
            except OSError:
                os.close(fd)
                raise

    def _join(self) -> None:
        path = os.path.join(self.lock_dir, str(os.getpid()))
        fd = _open(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError:
            os.close(fd)
            raise
        self._fd, self._mine = fd, path

    def _leave(self) -> None:
        if self._mine is not None:
            try:
                os.unlink(self._mine)
            except OSError:
                pass
        if self._fd is not None:
            os.close(self._fd)
        self._fd = self._mine = None

    def _live_others(self) -> list[str]:
        """Pids of the other instances whose file is held; files no one holds are removed
        (their gpudisk-top exited without restore: SIGKILL, a crash)."""
        live = []
        try:
            names = sorted(os.listdir(self.lock_dir))
        except OSError:
            return live
        for name in names:
            path = os.path.join(self.lock_dir, name)
            if not name.isdigit() or path == self._mine:
                continue
            try:
                fd = _open(path, create=False)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                live.append(name)
                continue
            except OSError:
                continue
            finally:
                os.close(fd)
            try:
                os.unlink(path)
            except OSError:
                pass
        return sorted(live, key=int)

    # ------------------------------------------------------------------ the marker
    def _marker_path(self) -> str:
        return os.path.join(self.lock_dir, SWITCHED_ON)

    def _marker(self) -> Marker:
        """What is at the marker's path, looked at without following a link."""
        path = self._marker_path()
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return Marker()
        except OSError as err:
            return Marker(True, foreign=f"unreadable ({_why(err)})")
        if stat.S_ISLNK(st.st_mode):
            return Marker(True, foreign="a symbolic link")
        if not stat.S_ISREG(st.st_mode):
            return Marker(True, foreign="not a regular file")
        if st.st_uid != os.geteuid():
            return Marker(True, foreign=f"owned by uid {st.st_uid}")
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as err:
            return Marker(True, foreign=f"unreadable ({_why(err)})")
        try:
            text = os.read(fd, MARKER_MAX_BYTES + 1).decode("ascii", "replace")
        except OSError as err:
            return Marker(True, foreign=f"unreadable ({_why(err)})")
        finally:
            os.close(fd)
        # "gpudisk-top BOOT_ID PID"; an empty file is the marker of a version before
        # boot ids (taken as this boot's: /run is a tmpfs on every node it ran on)
        words = text.split()
        if not words:
            return Marker(True, this_boot=True)
        if (len(words) == 3 and words[0] == "gpudisk-top" and words[2].isdigit()
                and len(words[2]) <= 10):
            return Marker(True, this_boot=words[1] == self._boot_id, pid=int(words[2]))
        return Marker(True)      # not a marker this version can read: never trusted

    def _put_marker(self) -> None:
        fd = os.open(self._marker_path(), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, f"gpudisk-top {self._boot_id} {os.getpid()}\n".encode())
        finally:
            os.close(fd)

    def _unlink_marker(self) -> None:
        try:
            os.unlink(self._marker_path())      # the entry itself: unlink follows no link
        except OSError:
            pass


def _refused(was: str, why: str) -> str:
    """The line for a setting not switched: left as it is, and why."""
    if was == "1":
        return (f"--delayacct: kernel.task_delayacct is on already ({NODE_WIDE}); it is left "
                "on at exit")
    return (f"--delayacct: kernel.task_delayacct is not switched on: {why}; blocked time is "
            "estimated (`sysctl kernel.task_delayacct=1` switches it on by hand)")


def _why(err: OSError) -> str:
    return err.strerror or str(err)


def _own_dir(path: str, mode: int) -> None:
    """path a directory of this user's, writable by no one else, and not a link; made if
    missing.  Raises OSError otherwise."""
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise OSError(errno.ELOOP, f"{path} is a symbolic link")
    if not stat.S_ISDIR(st.st_mode):
        raise OSError(errno.ENOTDIR, f"{path} is not a directory")
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise OSError(errno.EPERM, f"{path} is not this user's alone")


def _open(path: str, create: bool = True) -> int:
    """A regular file opened read-write without following a link (a FIFO or a device at
    the path is refused, never waited on).  Raises OSError."""
    fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
                 | (os.O_CREAT if create else 0), 0o600)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, f"{path} is not a regular file")
    return fd
