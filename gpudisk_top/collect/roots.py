"""Where /proc and /sys live (`--procfs`, `--sysfs`), like node_exporter's `--path.procfs`."""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass


@dataclass(frozen=True)
class Roots:
    """The procfs and sysfs trees every collector reads from."""

    procfs: str = "/proc"
    sysfs: str = "/sys"
    # the host's own files read for names (a pod's, a container's: collect/jobid.py)
    rootfs: str = "/"

    def proc(self, *parts: str) -> str:
        return os.path.join(self.procfs, *parts)

    def sys(self, *parts: str) -> str:
        return os.path.join(self.sysfs, *parts)


MAX_FILE_BYTES = 16 * 2**20   # the largest /proc file we read (diskstats of ~100k devices)

# statfs f_type of the pseudo filesystems whose files regenerate on every read from
# offset 0 (linux/magic.h): only these may be kept open and read again with pread
_PSEUDO_FS = frozenset((0x9FA0,        # PROC_SUPER_MAGIC
                        0x62656572,    # SYSFS_MAGIC
                        0x27E0EB,      # CGROUP_SUPER_MAGIC
                        0x63677270))   # CGROUP2_SUPER_MAGIC
_fstatfs = None


def _fs_type(fd: int) -> int | None:
    """statfs f_type of the filesystem fd is on; None when it cannot be told."""
    global _fstatfs
    if _fstatfs is None:
        import ctypes

        try:
            _fstatfs = ctypes.CDLL(None, use_errno=True).fstatfs
        except (OSError, AttributeError):
            _fstatfs = False
    if not _fstatfs:
        return None
    import ctypes

    buf = ctypes.create_string_buffer(256)        # struct statfs; f_type is its first field
    if _fstatfs(fd, buf) != 0:
        return None
    return ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF


def open_source_file(path: str) -> int:
    """An fd for reading a source file, opened so that nothing can block or flood us: a
    FIFO is opened non-blocking and refused, as is anything that is not a regular file (a
    symlink to /dev/zero, a device, a socket).  Raises OSError with a clear strerror."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, f"not a regular file ({_kind(st.st_mode)})", path)
    return fd


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a file"


def _read_at(fd: int, n: int, _offset: int) -> bytes:
    return os.read(fd, n)


def read_fd(fd: int, path: str = "", max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The whole file behind fd, from offset 0 (pread: the fd may be read again later).
    The one read loop of every source file: it reads until a read returns nothing, never
    stopping at a short one, because the kernel's seq_files (/proc/diskstats, mountinfo,
    mountstats) answer a page a read however much is asked (`pread(fd, 65536, 0)` on the
    mountinfo of 800 mounts gives a page or less), and a FUSE file may answer in any
    piece.  A file that cannot be pread (ESPIPE: fusectl's) is read with read() from where
    a freshly opened fd is, its start.  Raises OSError (EFBIG) past max_bytes, and what
    the reads raise."""
    chunk = 65536
    parts = []
    total = 0
    read_at = os.pread
    while True:
        try:
            data = read_at(fd, chunk, total)
        except OSError as err:
            if err.errno != errno.ESPIPE or total or read_at is _read_at:
                raise
            read_at = _read_at
            continue
        if not data:
            break
        parts.append(data)
        total += len(data)
        if total > max_bytes:
            size = (f"{max_bytes // 2**20} MiB" if max_bytes >= 2**20
                    else f"{max_bytes // 1024} KiB")     # a cgroup file's bound is 64 KiB
            raise OSError(errno.EFBIG, f"larger than {size}; not read", path)
    return b"".join(parts)


def read_bytes(path: str, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """A source file's bytes (see open_source_file and read_fd).  Raises OSError."""
    fd = open_source_file(path)
    try:
        return read_fd(fd, path, max_bytes)
    finally:
        os.close(fd)


def read_text(path: str) -> str | None:
    """The file's text, or None when it is missing or unreadable (a value, not an error)."""
    try:
        return read_bytes(path).decode("utf-8", errors="replace")
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
    cost most of a cold sample.  Only files on procfs, sysfs and cgroupfs are kept open:
    a regular file elsewhere (a --procfs copy on a disk) may be replaced by a rename,
    and an fd kept open would read the old one for ever, so such files are opened on each
    read.  A file that stops reading (a process exited, a device went away) is closed and
    opened afresh next time.  Reads never block and are bounded (open_source_file,
    read_fd).  Thread-compatible, not shared between threads.
    """

    def __init__(self, max_files: int = 512, max_bytes: int = MAX_FILE_BYTES) -> None:
        self.max_files = max_files
        self.max_bytes = max_bytes      # a file past it is not read (EFBIG: in .errors)
        self._fds: dict[str, int] = {}
        # path -> why its last read failed, for a file that is there (a missing one, such
        # as PSI on an old kernel, is no news)
        self.errors: dict[str, str] = {}

    def read(self, path: str) -> str | None:
        """The file's text, or None when it cannot be read (a value, not an error; why
        is in .errors[path])."""
        fd = self._fds.get(path)
        if fd is not None:
            try:
                return read_fd(fd, path, self.max_bytes).decode("utf-8", errors="replace")
            except OSError:
                self._drop(path)
        try:
            fd = open_source_file(path)
        except FileNotFoundError:
            self.errors.pop(path, None)
            return None
        except OSError as err:
            self.errors[path] = err.strerror or str(err)
            return None
        try:
            text = read_fd(fd, path, self.max_bytes).decode("utf-8", errors="replace")
        except OSError as err:
            os.close(fd)
            self.errors[path] = err.strerror or str(err)
            return None
        self.errors.pop(path, None)
        if _fs_type(fd) not in _PSEUDO_FS:
            os.close(fd)               # read it afresh each time: it may be replaced
            return text
        if len(self._fds) >= self.max_files:
            self._drop(next(iter(self._fds)))  # the oldest: a process long gone
        self._fds[path] = fd
        return text

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
