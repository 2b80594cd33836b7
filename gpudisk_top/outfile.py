"""Files the user names for output: written without harming anything they did not name.

Every file gpudisk-top writes at someone's request goes through here (`export -o`, `record
-o` and `--record`, an alert's `touch` and `log` files), so one set of rules holds
everywhere.  It often runs as root, in directories others can write to (/tmp, a shared
checkpoint volume), so:

- A path that does not exist is created as a regular file, never through a symbolic link
  (O_NOFOLLOW | O_EXCL: a dangling link is not followed to create its target).
- An existing regular file is replaced whole (a temporary file beside it, then rename), so
  a reader never sees half of it; it keeps its permission bits.
- An existing path that is not a regular file (a character device such as /dev/null or a
  terminal, a FIFO a consumer reads, a socket) is written in place: opened and written,
  never replaced by a file of ours and never created.
- A symbolic link is followed only when its owner is root or the user running us (the
  rule of the kernel's fs.protected_symlinks, for every directory) and it points to
  something that exists; the write then goes in place to what it points to.  /dev/stdout
  is such a link.  A link planted by another user is refused.
- New files get the mode asked for (0o666 by default) less the umask, like a shell's `>`;
  recordings ask for 0o640, because they hold the GPU processes' command lines.
- Unattended writers (alert actions, in the sampler's thread) pass wait=False: a FIFO
  nobody reads, or one whose reader does not keep up, is an OutputError at once, never
  a wait; the user at a terminal (`export -o FIFO`) is told and waits, as with `>`.

Every failure is an OutputError whose message is one line, fit for the user.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from contextlib import contextmanager

from gpudisk_top.errors import note

DEFAULT_MODE = 0o666
PRIVATE_MODE = 0o640


def is_absolute_path(value) -> bool:
    """A path a config file may name (an alert's log or touch file, a watched path): a
    string, absolute, without a NUL (which no path can hold: os calls raise ValueError)."""
    return isinstance(value, str) and os.path.isabs(value) and "\0" not in value


class OutputError(OSError):
    """A path that cannot or must not be written; str() is one line naming it."""

    def __str__(self) -> str:
        return self.args[0] if self.args else "cannot write"


def _reason(err: OSError) -> str:
    return err.strerror or str(err)


def current_umask() -> int:
    """The process umask, read without changing it (os.umask() sets it, which races with
    other threads creating files)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def inspect(path: str) -> tuple[str, str]:
    """(kind, target): kind is "new" (nothing there), "regular" (a regular file, not a
    link), "special" (exists and is not a regular file: written in place), for `path`
    after following a symbolic link we may follow; target is the path to write.  Raises
    OutputError for a link we must not follow or one that points nowhere."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "new", path
    except OSError as err:
        raise OutputError(f"cannot write {path}: {_reason(err)}") from None
    if stat.S_ISLNK(st.st_mode):
        target = os.path.realpath(path)
        if st.st_uid not in (0, os.geteuid()):
            raise OutputError(f"{path} is a symbolic link owned by another user (uid "
                              f"{st.st_uid}); not following it")
        try:
            tst = os.stat(path)
        except OSError:
            raise OutputError(f"{path} is a symbolic link to {target}, which does not "
                              "exist; not creating it through the link") from None
        if stat.S_ISDIR(tst.st_mode):
            raise OutputError(f"{path}: is a directory")
        return "special", path
    if stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{path}: is a directory")
    if stat.S_ISREG(st.st_mode):
        return "regular", path
    return "special", path


def _open_in_place(path: str, append: bool, wait: bool = True) -> int:
    """Open an existing non-regular file (or the target of a link we follow) for writing.
    A FIFO with no reader yet: with `wait`, say so once and wait for one, as a shell's `>`
    does; without, an OutputError.  The fd is blocking with `wait`, else non-blocking."""
    flags = os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC | (os.O_APPEND if append else 0)
    try:
        fd = os.open(path, flags | os.O_NONBLOCK)
    except OSError as err:
        if err.errno != errno.ENXIO or not wait:   # ENXIO: a FIFO nobody reads yet
            why = "a FIFO nobody reads; not waiting" if err.errno == errno.ENXIO else _reason(err)
            raise OutputError(f"cannot write {path}: {why}") from None
        note(f"waiting for a reader on {path}")
        try:
            return _ready(os.open(path, flags), True)
        except OSError as err2:
            raise OutputError(f"cannot write {path}: {_reason(err2)}") from None
    return _ready(fd, wait)


def _ready(fd: int, blocking: bool) -> int:
    os.set_blocking(fd, blocking)
    st = os.fstat(fd)
    if stat.S_ISREG(st.st_mode) and not (os.O_APPEND & _flags(fd)):
        os.ftruncate(fd, 0)     # a link to a regular file: the write replaces its content
    return fd


def _flags(fd: int) -> int:
    import fcntl

    return fcntl.fcntl(fd, fcntl.F_GETFL)


@contextmanager
def replaced(path: str, *, text: bool = True, mode: int = DEFAULT_MODE, wait: bool = True,
             in_place: bool = True):
    """Write `path` whole: `with replaced(p) as f: f.write(...)`.  A new or regular file
    appears only complete (a temporary file, renamed over it when the block ends without
    an exception); a device, FIFO or followed link is written in place, or, without
    `in_place` (a file that is ours alone, such as the probe results), refused: then
    nothing is ever written through a link, and a link swapped in meanwhile is replaced
    by the rename, never followed.  Raises OutputError (one line)."""
    kind, target = inspect(path)
    if kind == "special" and not in_place:
        raise OutputError(not_regular(path))
    if kind == "special":
        fd = _open_in_place(target, append=False, wait=wait)
        try:
            f = _fdopen(fd, text)
        except BaseException:
            os.close(fd)
            raise
        try:
            with f:
                yield f
        except OSError as err:         # a device that refuses (/dev/full), a FIFO full
            if isinstance(err, OutputError):
                raise
            raise OutputError(f"cannot write {path}: {_reason(err)}") from None
        return
    directory = os.path.dirname(os.path.abspath(path))
    keep_mode = None
    if kind == "regular":
        try:
            keep_mode = stat.S_IMODE(os.stat(path).st_mode)
        except OSError:
            keep_mode = None
    tmp = os.path.join(directory, f".{os.path.basename(path)}.tmp-{os.getpid()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
    except OSError as err:
        raise OutputError(f"cannot write {path}: {_reason(err)}") from None
    try:
        os.fchmod(fd, keep_mode if keep_mode is not None else mode & ~current_umask())
        with _fdopen(fd, text) as f:
            yield f
        if kind == "new" and os.path.lexists(path):
            raise OutputError(f"{path} appeared while it was written; not replacing it")
        os.replace(tmp, path)
    except OSError as err:
        if isinstance(err, OutputError):
            raise
        raise OutputError(f"cannot write {path}: {_reason(err)}") from None
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


def _fdopen(fd: int, text: bool):
    if text:
        return io.open(fd, "w", encoding="utf-8", newline="", closefd=True)
    return io.open(fd, "wb", closefd=True)


def open_append(path: str, *, mode: int = DEFAULT_MODE, wait: bool = True) -> int:
    """An fd that appends to `path` (created if new, never through a link we may not
    follow); non-blocking for a device or FIFO without `wait`.  Raises OutputError."""
    kind, target = inspect(path)
    if kind == "special":
        return _open_in_place(target, append=True, wait=wait)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(path, flags, mode)   # the kernel applies the umask
    except OSError as err:
        raise OutputError(f"cannot write {path}: {_reason(err)}") from None


def append_text(path: str, text: str, *, mode: int = DEFAULT_MODE, wait: bool = True) -> None:
    """Append `text` to `path` in one write.  Raises OutputError."""
    fd = open_append(path, mode=mode, wait=wait)
    try:
        data = text.encode("utf-8", errors="replace")
        while data:
            data = data[os.write(fd, data):]
    except OSError as err:
        raise OutputError(f"cannot write {path}: {_reason(err)}") from None
    finally:
        os.close(fd)


def open_regular(path: str, *, mode: int = PRIVATE_MODE) -> int:
    """A read-write fd on `path`, which must be a regular file or not exist (created with
    `mode` less the umask): for a file we keep, seek in, lock and cut (a recording).  A
    symbolic link, a device, a FIFO or a socket is refused without being opened.  Raises
    OutputError."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as err:
        raise OutputError(f"cannot write {path}: {_reason(err)}") from None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise OutputError(f"{path} is a symbolic link (to {os.path.realpath(path)}); "
                              "give the file's own path")
        if stat.S_ISDIR(st.st_mode):
            raise OutputError(f"{path}: is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise OutputError(f"{path} is not a regular file ({_kind(st.st_mode)}); "
                              "a recording needs one")
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, mode)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise OutputError(f"{path} is a symbolic link; give the file's own path") from None
        if err.errno == errno.EISDIR:
            raise OutputError(f"{path}: is a directory") from None
        raise OutputError(f"cannot write {path}: {_reason(err)}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):   # replaced between the lstat and the open
        os.close(fd)
        raise OutputError(f"{path} is not a regular file ({_kind(st.st_mode)}); "
                          "a recording needs one")
    os.set_blocking(fd, True)
    return fd


def not_regular(path: str) -> str:
    """Why `path` (there, and not a regular file) is not written: one line."""
    try:
        st = os.lstat(path)
    except OSError as err:
        return f"cannot write {path}: {_reason(err)}"
    if stat.S_ISLNK(st.st_mode):
        return (f"{path} is a symbolic link (to {os.path.realpath(path)}), not a regular "
                "file; not writing through it")
    return f"{path} is {_kind(st.st_mode)}, not a regular file; not writing to it"


def _kind(st_mode: int) -> str:
    for test, name in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(st_mode):
            return name
    return "not a file"
