"""This machine's real disk, for the tests that load it: files of random data on it, loop
devices over them, and an IOPS cap (a cloud volume's provisioned IOPS) for one cgroup.

One owner for what test_integration_fio, test_detect_real_disk, test_real_jobs,
test_probe_real and tests/corpus/record_real.py all need."""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import stat
import subprocess
import time

import pytest

BASE = "/var/tmp" if os.path.isdir("/var/tmp") else "/tmp"   # a real disk, not tmpfs


def whole_disk(path: str) -> str:
    """The whole disk a file lives on (or a block device node names), as the kernel names
    it: a partition gives its disk."""
    st = os.stat(path)
    dev = st.st_rdev if stat.S_ISBLK(st.st_mode) else st.st_dev
    name = os.path.basename(os.path.realpath(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}"))
    if os.path.exists(f"/sys/class/block/{name}/partition"):
        name = os.path.basename(os.path.dirname(os.path.realpath(f"/sys/class/block/{name}")))
    return name


def random_file(path: str, mib: int) -> str:
    """`mib` MiB of random data (not one block repeated), written and synced."""
    with open(path, "wb") as f:
        chunk = os.urandom(1 << 20)
        for i in range(mib):
            f.write(chunk[i % 64:] + chunk[:i % 64])
        f.flush()
        os.fsync(f.fileno())
    return path


def qd1_reads_per_s(path: str, seconds: float = 1.0) -> float:
    """How many random 4 KiB O_DIRECT reads a second one synchronous reader gets from
    `path` now (a DataLoader worker's view of the disk, as tests/jobs/loader_job.py reads)."""
    import mmap
    import random
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        blocks = os.lseek(fd, 0, os.SEEK_END) // 4096
        buf = mmap.mmap(-1, 4096)
        n, start = 0, time.monotonic()
        while time.monotonic() - start < seconds:
            os.preadv(fd, [buf], random.randrange(blocks) * 4096)
            n += 1
        return n / (time.monotonic() - start)
    finally:
        os.close(fd)


def starving_reads(path: str, workers: int, least: int = 32, factor: float = 3.0) -> int:
    """Reads a sample for loader_job.py's `disk` mode that starve its GPU on this disk as
    it is now: `factor` times what `workers` synchronous readers can deliver at its
    healthy rate (50 steps a second of 8 samples).  A disk served from a host's cache
    answers a 4 KiB read in 30 us, a loaded one in 1 ms: a fixed count starves the job on
    one and not the other."""
    deliverable = qd1_reads_per_s(path) * workers
    return max(least, math.ceil(factor * deliverable / (50 * 8)))


def loop_unavailable() -> str | None:
    """Why a loop device cannot be made here, or None."""
    if os.geteuid() != 0 or shutil.which("losetup") is None:
        return "a loop device needs root and losetup"
    return None


@contextlib.contextmanager
def loop_device(mib: int, name: str = "loop"):
    """(device node, backing file) of a loop device with direct I/O over `mib` MiB of
    random data on the real disk; pytest.skip() where none can be made."""
    reason = loop_unavailable()
    if reason:
        pytest.skip(reason)
    path = random_file(os.path.join(BASE, f"gdt-{name}-{os.getpid()}.img"), mib)
    proc = subprocess.run(["losetup", "--direct-io=on", "--show", "-f", path],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        os.unlink(path)
        pytest.skip(f"losetup failed: {proc.stderr.strip()}")
    dev = proc.stdout.strip()
    try:
        yield dev, path
    finally:
        subprocess.run(["losetup", "-d", dev])
        os.unlink(path)


class IopsCap:
    """A cgroup whose reads from one disk are capped at `iops` (v1 blkio, else v2 io.max).

    Constructing it raises pytest.skip when neither controller is usable here."""

    def __init__(self, majmin: str, iops: int) -> None:
        name = f"gdt-test-{os.getpid()}-{id(self)}"
        v1 = "/sys/fs/cgroup/blkio"
        if os.path.exists(os.path.join(v1, "blkio.throttle.read_iops_device")):
            self.path = os.path.join(v1, name)
            os.makedirs(self.path, exist_ok=True)
            self._write("blkio.throttle.read_iops_device", f"{majmin} {iops}")
            return
        v2 = "/sys/fs/cgroup"
        try:
            with open(os.path.join(v2, "cgroup.controllers")) as f:
                has_io = "io" in f.read().split()
        except OSError:
            has_io = False
        if not has_io:
            pytest.skip("no block I/O throttle here (neither cgroup v1 blkio nor v2 io)")
        with open(os.path.join(v2, "cgroup.subtree_control"), "w") as f:
            f.write("+io")
        self.path = os.path.join(v2, name)
        os.makedirs(self.path, exist_ok=True)
        self._write("io.max", f"{majmin} riops={iops}")

    @classmethod
    def for_disk_of(cls, path: str, iops: int) -> "IopsCap":
        with open(f"/sys/block/{whole_disk(path)}/dev") as f:
            return cls(f.read().strip(), iops)

    def _write(self, name: str, text: str) -> None:
        with open(os.path.join(self.path, name), "w") as f:
            f.write(text)

    def enter(self, pid: int) -> None:
        self._write("cgroup.procs", str(pid))

    def enter_self(self) -> None:
        """For preexec_fn: the child about to run enters the cgroup."""
        self.enter(os.getpid())

    def remove(self) -> None:
        for _ in range(50):  # the cgroup empties once its processes have been reaped
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)
