"""Real /proc files longer than a page, made for the tests of issue 35 item 1 and always
taken down again (tests/test_read_pages.py, tests/faults/cases_r35_pages.py).

The kernel's seq_files (/proc/diskstats, /proc/PID/mountinfo, /proc/PID/mountstats) answer
a read one page at a time, however much was asked for: only a file longer than a page
shows whether a reader goes on to the end, and fixture files, being regular files, never
do.  So the files are made long for real:

- `loop_devices(n, directory)`: n loop devices on sparse files, each read once (iostat
  lists a device only once it has done I/O): /proc/diskstats grows by n lines.
- `NS_DRIVER`: code that, run under `unshare -m --propagation private` (`ns_argv`),
  mounts N small tmpfs in that private mount namespace (mountinfo and mountstats grow by
  a line each, the host sees none of them) and then execs a command; the namespace, and
  every mount in it, goes when its last process ends.
- `iostat_devices()`: the devices the installed `iostat -x -d -k` lists.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time

import realdisk
from fakeprocfs import FakeProcfs

LOOP_CTL_REMOVE = 0x4C81   # linux/loop.h: remove a free loop device (its node goes)
SKIP_EXIT = 77             # NS_DRIVER's "cannot be set up here"


def _block_names() -> set[str]:
    try:
        return set(os.listdir("/sys/block"))
    except OSError:
        return set()


def loops_unavailable() -> str | None:
    """Why loop devices cannot be made here, or None."""
    if not os.path.exists("/dev/loop-control"):
        return "no /dev/loop-control here (no loop driver in this kernel or container)"
    return realdisk.loop_unavailable()


@contextlib.contextmanager
def loop_devices(n: int, directory: str):
    """The kernel names ("loop17") of n loop devices attached to 1 MiB sparse files in
    `directory`, each read once.  On leaving, even by an exception, each is detached, and
    removed where this made it (a device that existed before is left as it was).  Raises
    RuntimeError when losetup fails; check loops_unavailable() first."""
    before = _block_names()
    made: list[str] = []
    try:
        for i in range(n):
            backing = os.path.join(directory, f"loop-{i}.img")
            with open(backing, "wb") as f:
                f.truncate(2**20)
            proc = subprocess.run(["losetup", "--show", "-f", backing], capture_output=True,
                                  text=True, timeout=60)
            if proc.returncode != 0:
                raise RuntimeError(f"losetup failed after {len(made)} devices: "
                                   f"{proc.stderr.strip()}")
            made.append(os.path.basename(proc.stdout.strip()))
        for name in made:
            # one read, past the page cache: a device that has done no I/O is one iostat
            # leaves out
            fd = os.open(f"/dev/{name}", os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                os.pread(fd, 4096, 0)
            finally:
                os.close(fd)
        yield made
    finally:
        for name in made:
            subprocess.run(["losetup", "-d", f"/dev/{name}"], capture_output=True, timeout=60)
        new = [name for name in made if name not in before]
        if new:
            try:
                ctl = os.open("/dev/loop-control", os.O_RDWR | os.O_CLOEXEC)
            except OSError:
                ctl = None
            if ctl is not None:
                for name in new:
                    _remove(ctl, int(name[len("loop"):]))
                os.close(ctl)


def _remove(ctl: int, number: int) -> None:
    """LOOP_CTL_REMOVE, tried again for a while on EBUSY: a device someone still has open
    (a reader of every /dev node, this test's own read a moment ago) is detached only when
    it is closed, and cannot be removed before."""
    for _ in range(50):
        try:
            fcntl.ioctl(ctl, LOOP_CTL_REMOVE, number)
            return
        except OSError as err:
            if err.errno != errno.EBUSY:
                return
        time.sleep(0.1)


def iostat_devices() -> list[str] | None:
    """The devices `iostat -x -d -k` lists (its JSON), or None without iostat."""
    if shutil.which("iostat") is None:
        return None
    proc = subprocess.run(["iostat", "-x", "-d", "-k", "-o", "JSON"], capture_output=True,
                          text=True, timeout=60)
    data = json.loads(proc.stdout)
    stats = data["sysstat"]["hosts"][0]["statistics"][0]
    return [d["disk_device"] for d in stats["disk"]]


NS_DRIVER = r'''
import ctypes, json, os, sys
cfg = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
base, n = cfg["base"], cfg["mounts"]
last = base
for i in range(n):
    last = os.path.join(base, f"m{i:04d}")
    os.makedirs(last, exist_ok=True)
    size = cfg.get("last_size", "64k") if i == n - 1 else "64k"
    if libc.mount(b"tmpfs", last.encode(), b"tmpfs", 0, f"size={size}".encode()) != 0:
        why = os.strerror(ctypes.get_errno())
        print(f"manypages: cannot mount tmpfs on {last}: {why}", file=sys.stderr)
        sys.exit(77)
if cfg.get("file_mib"):
    with open(os.path.join(last, "data.bin"), "wb") as f:
        for _ in range(cfg["file_mib"]):
            f.write(os.urandom(2**20))
argv = [a.replace("{last}", last) for a in cfg["argv"]]
os.execvp(argv[0], argv)
'''


def ns_unavailable() -> str | None:
    """Why a private mount namespace cannot be made here, or None."""
    if os.geteuid() != 0:
        return "a mount namespace and its mounts need root"
    if shutil.which("unshare") is None:
        return "no unshare here (util-linux)"
    return None


def ns_argv(base: str, mounts: int, argv: list[str], *, last_size: str = "64k",
            file_mib: int = 0) -> list[str]:
    """The command line that runs `argv` in a private mount namespace after mounting
    `mounts` tmpfs under `base` (m0000, m0001, ...; the last `last_size`, with a file
    data.bin of `file_mib` MiB of random data when asked).  "{last}" in argv is replaced
    by the last mount's path.  It exits SKIP_EXIT, saying why, where a mount fails."""
    cfg = {"base": base, "mounts": mounts, "argv": argv, "last_size": last_size,
           "file_mib": file_mib}
    return ["unshare", "-m", "--propagation", "private", sys.executable, "-c", NS_DRIVER,
            json.dumps(cfg)]


# the /proc files `--once` reads of the node (not of its processes), copied for a
# --procfs tree served through FUSE in short pieces
PROC_FILES = ("diskstats", "stat", "meminfo", "uptime", "loadavg", "vmstat", "pressure/io",
              "pressure/cpu", "pressure/memory", "self/mountinfo", "self/mountstats",
              "self/cgroup", "1/mountinfo", "1/cgroup", "cmdline")


def procfs_copy(dst: str) -> str:
    """A copy of this machine's PROC_FILES under dst (those that can be read), read whole
    with Python's own reader (it reads until read() returns nothing)."""
    FakeProcfs(dst).copy(*PROC_FILES)
    return dst
