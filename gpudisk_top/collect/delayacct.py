"""Turning the kernel's per-task delay accounting on for the duration of a run (--delayacct).

Since Linux 5.14 the time each task spends blocked on block I/O (/proc/PID/stat field 42,
what iotop shows as IO>) is accounted only while the sysctl kernel.task_delayacct is 1,
and it is 0 by default: the accounting costs a little on every context switch.  Without
it the loaders' blocked time is estimated (model/loaders.py).  Root may ask gpudisk-top to
switch it on while it runs.

The sysctl is node-wide: every gpudisk-top on the node (and iotop, and anyone) sees it.
So each gpudisk-top --delayacct holds a file of its own, flock'd for its lifetime, in
LOCK_DIR, and the one that switched it on leaves a marker there (SWITCHED_ON): the last
of them to exit switches it off, and only when a gpudisk-top switched it on; while another
still holds its file it stays on.  A file no one holds any more (a gpudisk-top killed
with SIGKILL) is cleared by the next one.  Where no such file can be kept (a read-only
/run), the setting is left on at exit: switching it off might pull it from under another
gpudisk-top, which would then estimate again.

A task forked while accounting was off is never accounted (field 42 stays 0 for ever):
collect/procio.py believes field 42 only where it can be non-zero.
"""

from __future__ import annotations

import fcntl
import os
import stat
import time

SYSCTL = "/proc/sys/kernel/task_delayacct"
LOCK_DIR = "/run/gpudisk-top/delayacct"
GUARD = ".guard"                # held while an instance joins or leaves
SWITCHED_ON = "switched-on"     # a gpudisk-top switched the setting on: off after the last
GUARD_WAIT_S = 2.0
OFF_WARNING = ("kernel.task_delayacct is off: the time the job's loaders are blocked on reads "
               "is estimated from reads x r_await; `sysctl kernel.task_delayacct=1` (or "
               "--delayacct, as root) measures it")
NODE_WIDE = "node-wide: every task on this node is accounted, other tools see it"


class DelayAccounting:
    """enable() switches kernel.task_delayacct on and says what it did (one line);
    restore() puts back what was there when no other gpudisk-top --delayacct still runs,
    and says so (one line) where it leaves it on for others.  Neither raises."""

    def __init__(self, path: str = SYSCTL, lock_dir: str = LOCK_DIR) -> None:
        self.path = path
        self.lock_dir = lock_dir
        self._fd: int | None = None         # our instance file, flock'd while we run
        self._mine: str | None = None

    # ------------------------------------------------------------------ public
    def enable(self) -> str | None:
        try:
            was = self._read()
        except FileNotFoundError:
            return ("--delayacct: this kernel has no kernel.task_delayacct (before 5.14, "
                    "delay accounting is on unless booted with nodelayacct)")
        except OSError as err:
            return f"--delayacct: cannot read {self.path}: {err.strerror or err}"
        try:
            guard = self._guard()
        except OSError as err:
            return self._enable_unlocked(was, err)
        try:
            others = self._live_others()
            try:
                self._join()
            except OSError as err:
                return self._enable_unlocked(was, err)
            marker = os.path.join(self.lock_dir, SWITCHED_ON)
            if was == "1":
                if os.path.exists(marker):
                    who = (f"by gpudisk-top (pid {', '.join(others)})" if others else
                           "by a gpudisk-top that has exited")
                    return (f"--delayacct: kernel.task_delayacct is on, switched on {who} "
                            f"({NODE_WIDE}); it is switched off when the last gpudisk-top "
                            "--delayacct exits")
                return (f"--delayacct: kernel.task_delayacct is on already ({NODE_WIDE}); "
                        "it is left on at exit")
            try:
                self._write("1")
            except OSError as err:
                self._leave()
                return (f"--delayacct: cannot switch delay accounting on ({err.strerror or err}; "
                        "it needs root and a writable /proc/sys); blocked time is estimated")
            _touch(marker)
            return (f"--delayacct: kernel.task_delayacct switched on ({NODE_WIDE}); it is "
                    "switched off at exit unless another gpudisk-top --delayacct still runs")
        finally:
            os.close(guard)

    def restore(self) -> str | None:
        if self._fd is None:
            return None
        try:
            guard = self._guard()
        except OSError:
            self._leave()       # without the guard: left on, another may be joining
            return None
        try:
            self._leave()
            others = self._live_others()
            marker = os.path.join(self.lock_dir, SWITCHED_ON)
            if others:
                return (f"kernel.task_delayacct is left on: gpudisk-top --delayacct "
                        f"(pid {', '.join(others)}) still uses it")
            if os.path.exists(marker):
                try:
                    self._write("0")
                    os.unlink(marker)
                except OSError:
                    pass
            return None
        finally:
            os.close(guard)

    # ------------------------------------------------------------------ the sysctl
    def _read(self) -> str:
        with open(self.path, encoding="ascii") as f:
            return f.read().strip()

    def _write(self, value: str) -> None:
        with open(self.path, "w", encoding="ascii") as f:
            f.write(value + "\n")

    def _enable_unlocked(self, was: str, err: OSError) -> str | None:
        if was == "1":
            return (f"--delayacct: kernel.task_delayacct is on already ({NODE_WIDE}); "
                    "it is left on at exit")
        try:
            self._write("1")
        except OSError as werr:
            return (f"--delayacct: cannot switch delay accounting on ({werr.strerror or werr}; "
                    "it needs root and a writable /proc/sys); blocked time is estimated")
        return (f"--delayacct: kernel.task_delayacct switched on ({NODE_WIDE}); it is left on "
                f"at exit: {self.lock_dir} cannot hold the lock that tells whether another "
                f"gpudisk-top uses it ({err.strerror or err}); `sysctl kernel.task_delayacct=0` "
                "switches it off")

    # ------------------------------------------------------------------ the lock files
    def _guard(self) -> int:
        """The directory made (root's, no link), and its guard file flock'd; raises
        OSError where it cannot be, or when another holds it GUARD_WAIT_S."""
        # each level made with its own mode (makedirs gives the ones above 0o777 less umask)
        os.makedirs(os.path.dirname(self.lock_dir), mode=0o755, exist_ok=True)
        os.makedirs(self.lock_dir, mode=0o700, exist_ok=True)
        st = os.lstat(self.lock_dir)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            raise OSError(0, "not a directory of ours")
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


def _open(path: str, create: bool = True) -> int:
    return os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_CREAT if create else 0),
                   0o600)


def _touch(path: str) -> None:
    try:
        os.close(_open(path))
    except OSError:
        pass
