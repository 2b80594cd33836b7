"""A real FUSE filesystem for the tests: a read-only passthrough over a source directory
whose every read() costs a fixed latency and whose throughput is capped by one token
bucket that all readers share, the way a network filesystem (or a FUSE data loader's
object store) makes a DataLoader wait.  The sibling of realdisk.py, for FUSE.

It runs as its own process, the daemon, multithreaded (up to 32 libfuse worker threads by
default; the latency is a sleep that releases the GIL), so N readers each wait at once:

    python tests/slowfs.py SRC MOUNTPOINT --latency-ms 5 --mb-s 20 --name slowfs

mounted with fsname and subtype `name`, so /proc/self/mountinfo shows fstype
`fuse.slowfs` and source `slowfs`.  Tests use `mounted()`, which starts it, waits for the
mount and always takes it down again.

The FUSE connection of a mount is /sys/fs/fuse/connections/<N>/, N = the minor number of
the mount's st_dev (see `connection_dir`).  The binding is mfusepy, the maintained fork
of fusepy, over libfuse3."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

SKIP_EXIT = 77            # the daemon's "FUSE cannot be used here" (automake's skip code)
FUSECTL = "/sys/fs/fuse/connections"
STATS = "stats.json"      # next to the mountpoint, written by the daemon


# ---------------------------------------------------------------- the daemon's side

class TokenBucket:
    """`rate_b_s` bytes a second shared by every caller, with at most `burst_b` saved up
    while idle.  A caller takes its bytes at once, going into debt, and sleeps until the
    debt is paid: so reading S bytes from idle takes at least (S - burst_b) / rate_b_s,
    however many threads read."""

    def __init__(self, rate_b_s: float, burst_b: float) -> None:
        self.rate_b_s = rate_b_s
        self.burst_b = burst_b
        self._tokens = burst_b
        self._at = time.monotonic()
        self._lock = threading.Lock()

    def take(self, n: int) -> None:
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.burst_b, self._tokens + (now - self._at) * self.rate_b_s)
            self._at = now
            self._tokens -= n
            wait_s = -self._tokens / self.rate_b_s if self._tokens < 0 else 0.0
        if wait_s > 0:
            time.sleep(wait_s)


class Stats:
    """What the daemon served, for the tests: reads, bytes, reads in flight now and at
    most.  Written whole (a temporary file renamed) at each read's start and end."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.reads = self.bytes = self.in_flight = self.peak_in_flight = 0
        self._lock = threading.Lock()

    def start(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            self._write()

    def end(self, n: int) -> None:
        with self._lock:
            self.in_flight -= 1
            self.reads += 1
            self.bytes += n
            self._write()

    def _write(self) -> None:
        if self.path is None:
            return
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"reads": self.reads, "bytes": self.bytes, "in_flight": self.in_flight,
                       "peak_in_flight": self.peak_in_flight}, f)
        os.replace(tmp, self.path)


def make_operations(mfusepy, src: str, latency_s: float, bucket: TokenBucket, stats: Stats,
                    writable: bool = False, short_reads: int = 0):
    """The Operations of a read-only passthrough over `src`: OSErrors from the source
    become their errno (mfusepy's wrapper does that); opening for writing is EROFS, unless
    `writable`: then files can be created, written, cut and synced too (what a recorder
    does), each write passed through at once, so a daemon stopped with SIGSTOP stalls
    every writer on the mount, as a hung network filesystem does.  `short_reads`: every
    read() answers at most that many bytes (with direct_io the reader's read() returns
    them, short, as a kernel seq_file answers a page at a time)."""
    import errno

    class Writable:
        def create(self, path, mode, fi=None):
            return os.open(self._full(path), os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)

        def write(self, path, data, offset, fh):
            return os.pwrite(fh, data, offset)

        def truncate(self, path, length, fh=None):
            if fh is not None:
                os.ftruncate(fh, length)
            else:
                os.truncate(self._full(path), length)
            return 0

        def fsync(self, path, datasync, fh):
            return 0

        def flush(self, path, fh):
            return 0

        def chmod(self, path, mode):
            os.chmod(self._full(path), mode)
            return 0

        def chown(self, path, uid, gid):
            os.chown(self._full(path), uid, gid)
            return 0

        def utimens(self, path, times=None):
            return 0

        def unlink(self, path):
            os.unlink(self._full(path))
            return 0

        def rename(self, old, new):
            os.rename(self._full(old), self._full(new))
            return 0

    class SlowFS(*((Writable,) if writable else ()), mfusepy.Operations):
        use_ns = True   # times in ns, as os.stat gives them

        def _full(self, path: str) -> str:
            return os.path.join(src, path.lstrip("/"))

        def getattr(self, path, fh=None):
            st = os.lstat(self._full(path))
            attrs = {key: getattr(st, key) for key in (
                "st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks")}
            attrs.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
            return attrs

        def readdir(self, path, fh):
            return [".", "..", *os.listdir(self._full(path))]

        def readlink(self, path):
            return os.readlink(self._full(path))

        def statfs(self, path):
            sv = os.statvfs(self._full(path))
            return {key: getattr(sv, key) for key in (
                "f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files",
                "f_ffree", "f_favail", "f_namemax")}

        def open(self, path, flags):
            if writable:
                return os.open(self._full(path),
                               flags & ~(os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NONBLOCK))
            if flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC | os.O_APPEND):
                raise mfusepy.FuseOSError(errno.EROFS)
            return os.open(self._full(path), os.O_RDONLY)

        def read(self, path, size, offset, fh):
            stats.start()
            data = b""
            try:
                time.sleep(latency_s)
                data = os.pread(fh, min(size, short_reads) if short_reads else size, offset)
                bucket.take(len(data))
                return data
            finally:
                stats.end(len(data))

        def release(self, path, fh):
            os.close(fh)
            return 0

    return SlowFS()


def _exit_with_parent() -> None:
    """SIGTERM ourselves when the test process that started us is gone (even killed -9),
    so libfuse leaves its loop and unmounts: no mount outlives its test run."""
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGTERM)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("mountpoint")
    ap.add_argument("--latency-ms", type=float, default=5.0, help="added to every read()")
    ap.add_argument("--mb-s", type=float, default=20.0, help="throughput cap, 10^6 bytes/s")
    ap.add_argument("--burst-kib", type=float, default=64.0, help="the bucket's size")
    ap.add_argument("--name", default="slowfs", help="fsname and subtype")
    ap.add_argument("--writable", action="store_true",
                    help="files can be created and written (passed through at once)")
    ap.add_argument("--direct-io", action="store_true",
                    help="bypass the page cache: every read() reaches the daemon")
    ap.add_argument("--kernel-cache", action="store_true",
                    help="keep the page cache across opens (libfuse's kernel_cache, as "
                         "s3fs -o kernel_cache): by default each open() drops it")
    ap.add_argument("--stats", help="write what was served here, as JSON")
    ap.add_argument("--max-threads", type=int, default=32,
                    help="reads served at once (libfuse's own default is 10)")
    ap.add_argument("--short-reads", type=int, default=0, metavar="BYTES",
                    help="answer every read() with at most BYTES (with --direct-io the "
                         "reader sees short reads, as from a /proc seq_file)")
    args = ap.parse_args(argv)
    try:
        import mfusepy   # raises OSError, not ImportError, when it finds no libfuse
    except (ImportError, OSError) as e:
        print(f"slowfs: mfusepy is unusable here: {e}", file=sys.stderr)
        return SKIP_EXIT
    ops = make_operations(mfusepy, os.path.abspath(args.src), args.latency_ms / 1000,
                          TokenBucket(args.mb_s * 1e6, args.burst_kib * 1024), Stats(args.stats),
                          writable=args.writable, short_reads=args.short_reads)
    threading.Thread(target=_exit_with_parent, daemon=True).start()
    options = {"foreground": True, "fsname": args.name, "subtype": args.name}
    if not args.writable:
        options["ro"] = True
    if (mfusepy.fuse_version_major, mfusepy.fuse_version_minor) >= (3, 12):
        # -o max_threads is libfuse >= 3.12's (fuse_parse_cmdline); without it 3.14 warns
        # "Ignoring invalid max threads value 4294967295" and serves 10 reads at once.
        # (mfusepy loads libfuse 2 first where both are installed: then libfuse 2's limit.)
        options["max_threads"] = args.max_threads
    if args.direct_io:
        options["direct_io"] = True   # libfuse3: fuse_config.direct_io, mfusepy sets it in init
    if args.kernel_cache:
        options["kernel_cache"] = True   # fuse_config.kernel_cache: FOPEN_KEEP_CACHE on open
    try:
        mfusepy.FUSE(ops, args.mountpoint, **options)
    except RuntimeError as e:
        # fuse_main_real() returns 4 when fuse_mount() failed (libfuse 3 helper.c); libfuse
        # or fusermount3 has said why on stderr (no permission, no /dev/fuse, ...)
        if e.args == (4,):
            print("slowfs: mounting is not permitted here (libfuse's reason above)",
                  file=sys.stderr)
            return SKIP_EXIT
        raise
    return 0


# ---------------------------------------------------------------- the tests' side

def _unescape(field: str) -> str:
    """mountinfo's octal escapes (\\040 for a space) undone."""
    import re
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mount_entry(mountpoint: str) -> dict | None:
    """The last /proc/self/mountinfo entry mounted at `mountpoint` (the one that shows):
    {"majmin", "fstype", "source", "options", "super_options"}, or None."""
    path = os.path.realpath(mountpoint)
    found = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.rstrip("\n").partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) >= 6 and len(tail) >= 3 and _unescape(fields[4]) == path:
                found = {"majmin": fields[2], "options": fields[5].split(","),
                         "fstype": tail[0], "source": _unescape(tail[1]),
                         "super_options": tail[2].split(",")}
    return found


def connection_dir(mountpoint: str, base: str = FUSECTL) -> str:
    """The FUSE connection of a mount in fusectl: <base>/<N>, N = os.minor(st_dev) of the
    mount's root.  The kernel names the directory after fc->dev, the superblock's s_dev
    (fs/fuse/control.c), an anonymous device MKDEV(0, n), and the kernel's MKDEV(0, n) is
    n itself; userspace's st_dev encodes the minor differently above 255, so decode it with
    os.minor() rather than printing st_dev.  It is also the N of mountinfo's "0:N"."""
    return os.path.join(base, str(os.minor(os.stat(mountpoint).st_dev)))


@contextlib.contextmanager
def fusectl():
    """/sys/fs/fuse/connections with fusectl mounted on it (mounted here as root when it
    was not, and unmounted again); pytest.skip() where it cannot be."""
    import pytest
    if mount_entry(FUSECTL) is not None and mount_entry(FUSECTL)["fstype"] == "fusectl":
        yield FUSECTL
        return
    if os.geteuid() != 0 or not os.path.isdir(FUSECTL):
        pytest.skip(f"fusectl is not mounted on {FUSECTL} and only root can mount it")
    proc = subprocess.run(["mount", "-t", "fusectl", "fusectl", FUSECTL],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount fusectl on {FUSECTL}: {proc.stderr.strip()}")
    try:
        yield FUSECTL
    finally:
        subprocess.run(["umount", FUSECTL], capture_output=True)


def fuse_unavailable() -> str | None:
    """Why a FUSE filesystem cannot be mounted here, as far as can be told without trying,
    or None.  (mfusepy without libfuse, and a refused mount, the daemon reports.)"""
    import importlib.util
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse here (FUSE is not available in this kernel or container)"
    if importlib.util.find_spec("mfusepy") is None:
        return "mfusepy is not installed (pip install -e '.[test]')"
    if os.geteuid() != 0 and shutil.which("fusermount3") is None:
        return "a user who is not root mounts FUSE with fusermount3 (Debian: fuse3)"
    return None


def read_stats(mountpoint: str) -> dict:
    """What the daemon of `mounted()` has served: reads, bytes, in_flight, peak_in_flight."""
    try:
        with open(os.path.join(os.path.dirname(mountpoint), STATS)) as f:
            return json.load(f)
    except FileNotFoundError:
        return {"reads": 0, "bytes": 0, "in_flight": 0, "peak_in_flight": 0}


def _unmount(mountpoint: str, lazy: bool) -> bool:
    if os.geteuid() == 0 or shutil.which("fusermount3") is None:
        cmd = ["umount", *(["-l"] if lazy else []), mountpoint]
    else:
        cmd = ["fusermount3", "-u", *(["-z"] if lazy else []), mountpoint]
    return subprocess.run(cmd, capture_output=True).returncode == 0


def _take_down(mountpoint: str, daemon: subprocess.Popen) -> None:
    """Unmount and stop the daemon whatever state they are in: a clean unmount ends the
    daemon by itself; a busy mount (a reader still in it) or a stuck daemon gets
    SIGTERM (libfuse finishes the reads in hand, unmounts, exits), then SIGKILL, and a
    mount still there at the end is detached lazily."""
    if daemon.poll() is None and mount_entry(mountpoint) is not None \
            and _unmount(mountpoint, lazy=False):
        with contextlib.suppress(subprocess.TimeoutExpired):
            daemon.wait(5)
    if daemon.poll() is None:
        daemon.terminate()
        try:
            daemon.wait(10)
        except subprocess.TimeoutExpired:
            daemon.kill()   # closes /dev/fuse: the kernel aborts the connection
            daemon.wait()
    if mount_entry(mountpoint) is not None:
        _unmount(mountpoint, lazy=True)


@contextlib.contextmanager
def mounted(src: str, latency_ms: float = 5.0, mb_s: float = 20.0, direct_io: bool = False,
            burst_kib: float = 64.0, max_threads: int = 32, name: str = "slowfs",
            timeout_s: float = 15.0, writable: bool = False, kernel_cache: bool = False,
            short_reads: int = 0):
    """(mountpoint, daemon Popen) of slowfs over `src`, mounted until the block ends: every
    read() of the daemon waits `latency_ms`, all of them share `mb_s` (10^6 bytes a second,
    `burst_kib` saved up while idle), up to `max_threads` served at once.  Reads go through
    the page cache as on any FUSE mount (a file read twice in one open reaches the daemon
    once) unless `direct_io`; a new open() drops what the cache held of the file (FUSE's
    default) unless `kernel_cache`.

    Raises pytest.skip() with the reason where FUSE cannot be used (no /dev/fuse, no
    mfusepy or libfuse, mounting refused); RuntimeError if the daemon fails otherwise or
    the mount does not appear within `timeout_s`.  On leaving, even by an exception, the
    mount is taken down and the daemon stopped."""
    import pytest
    reason = fuse_unavailable()
    if reason:
        pytest.skip(reason)
    top = tempfile.mkdtemp(prefix="gdt-slowfs-")
    mountpoint = os.path.join(top, "mnt")
    os.mkdir(mountpoint)
    log = tempfile.TemporaryFile()
    cmd = [sys.executable, os.path.abspath(__file__), os.path.abspath(src), mountpoint,
           "--latency-ms", str(latency_ms), "--mb-s", str(mb_s), "--burst-kib", str(burst_kib),
           "--max-threads", str(max_threads),
           "--name", name, "--stats", os.path.join(top, STATS),
           *(["--direct-io"] if direct_io else []), *(["--writable"] if writable else []),
           *(["--kernel-cache"] if kernel_cache else []),
           *(["--short-reads", str(short_reads)] if short_reads else [])]
    # its own session: a ^C to pytest must not kill the daemon before the unmount below
    daemon = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)

    def said() -> str:
        log.seek(0)
        return log.read().decode(errors="replace").strip()

    try:
        deadline = time.monotonic() + timeout_s
        while True:
            entry = mount_entry(mountpoint)
            if entry is not None and entry["fstype"] == f"fuse.{name}":
                break
            if daemon.poll() is not None:
                if daemon.returncode == SKIP_EXIT:
                    pytest.skip(said())
                raise RuntimeError(f"slowfs exited {daemon.returncode}: {said()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"slowfs did not mount within {timeout_s} s: {said()}")
            time.sleep(0.02)
        yield mountpoint, daemon
    finally:
        with contextlib.suppress(OSError):
            os.kill(daemon.pid, signal.SIGCONT)     # a test may have paused it
        _take_down(mountpoint, daemon)
        log.close()
        if mount_entry(mountpoint) is None:
            shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
