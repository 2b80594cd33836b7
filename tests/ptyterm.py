"""A terminal that can hang up, for the tests of what a command does when its terminal
goes away (an SSH drop, a closed tmux pane or terminal window): a pseudo-terminal made
the controlling terminal of the command started on it, in a session of its own as a
terminal emulator starts a shell.  One owner for the tests and the fault matrix."""

from __future__ import annotations

import errno
import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import termios
import threading


class PtyTerminal:
    """The command `argv` on a pseudo-terminal of rows x cols.  Closing the master
    (hang_up) hangs the terminal up, and the kernel sends the session SIGHUP.  What the
    command draws is read and kept in `screen` (a terminal nobody reads would block it);
    its cursor-position queries are answered.  Its stderr goes to `stderr_path`.
    Raises what pty.openpty and subprocess.Popen raise."""

    def __init__(self, argv: list[str], stderr_path, *, env: dict | None = None,
                 cwd=None, ignore_hup: bool = False, rows: int = 30, cols: int = 100) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.rows, self.cols = rows, cols
        self.err_path = os.fspath(stderr_path)

        def pre():
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
            if ignore_hup:                     # as `nohup` starts it
                signal.signal(signal.SIGHUP, signal.SIG_IGN)
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=err, env=env,
                                         cwd=cwd, preexec_fn=pre)
        os.close(slave)
        self.screen = bytearray()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while not self._stop.is_set():
            try:
                if not select.select([self.master], [], [], 0.1)[0]:
                    continue
                chunk = os.read(self.master, 65536)
            except OSError as err:
                if err.errno in (errno.EIO, errno.EBADF):    # hung up, or closed by us
                    return
                raise
            if not chunk:
                return
            self.screen += chunk
            if b"\x1b[6n" in chunk:
                os.write(self.master, f"\x1b[{self.rows};{self.cols}R".encode())

    @property
    def drawn_bytes(self) -> int:
        """How much the command has drawn so far."""
        return len(self.screen)

    def hang_up(self) -> None:
        """Hang the terminal up, as a closed tmux pane or a dropped SSH session does."""
        self._stop.set()
        self._thread.join(2)
        os.close(self.master)

    def stderr(self) -> str:
        """What the command wrote to its stderr so far."""
        with open(self.err_path, "rb") as f:
            return f.read().decode("utf-8", "replace")
