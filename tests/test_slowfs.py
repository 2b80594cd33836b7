"""slowfs, the tests' FUSE filesystem, on this machine's real /dev/fuse: it mounts as
fuse.slowfs, serves the source's bytes, holds reads to its throughput cap and latency,
serves readers at once, shows as waiting requests in fusectl, and is what the product
will see when a process is blocked on a FUSE mount: a read syscall in /proc/PID/syscall
on an fd whose target lies on the mount.  Every test skips, saying why, where FUSE cannot
be mounted."""

from __future__ import annotations

import errno
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

import slowfs

MIB = 1 << 20

# The read family's syscall numbers, as /proc/PID/syscall's first field gives them while a
# process is blocked in one.  x86_64: arch/x86/entry/syscalls/syscall_64.tbl; aarch64
# uses the generic table, include/uapi/asm-generic/unistd.h.  glibc's read, pread64,
# readv, preadv and preadv2 (flags 0) each make the syscall of their name.
READ_SYSCALLS = {
    "x86_64": {"read": 0, "pread64": 17, "readv": 19, "preadv": 295, "preadv2": 327},
    "aarch64": {"read": 63, "readv": 65, "pread64": 67, "preadv": 69, "preadv2": 286},
}

# A reader that stays blocked in one syscall of the family on a file, read after read.
READER = r"""
import ctypes, os, sys
call, path = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(4096)
iov = iovec(ctypes.cast(buf, ctypes.c_void_p), 4096)
off = ctypes.c_int64(0)
fd = os.open(path, os.O_RDONLY)
calls = {
    "read": lambda: libc.read(fd, buf, ctypes.c_size_t(4096)),
    "pread64": lambda: libc.pread64(fd, buf, ctypes.c_size_t(4096), off),
    "readv": lambda: libc.readv(fd, ctypes.byref(iov), 1),
    "preadv": lambda: libc.preadv(fd, ctypes.byref(iov), 1, off),
    "preadv2": lambda: libc.preadv2(fd, ctypes.byref(iov), 1, off, 0),
}
for name in calls:
    getattr(libc, name).restype = ctypes.c_ssize_t
while True:
    if call in ("read", "readv"):
        os.lseek(fd, 0, os.SEEK_SET)
    if calls[call]() < 0:
        sys.exit(ctypes.get_errno())
"""


def data_file(path, size: int) -> bytes:
    data = os.urandom(size)
    with open(path, "wb") as f:
        f.write(data)
    return data


def wait_for(predicate, timeout_s: float = 10.0, every_s: float = 0.005):
    """predicate()'s first true value within timeout_s, else its last (false) one."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(every_s)


def test_mount_shows_in_mountinfo_as_fuse_slowfs(tmp_path):
    with slowfs.mounted(tmp_path) as (mnt, daemon):
        entry = slowfs.mount_entry(mnt)
        assert entry["fstype"] == "fuse.slowfs"
        assert entry["source"] == "slowfs"
        assert "ro" in entry["options"]
        # an anonymous device: major 0, the minor names its fusectl connection
        assert entry["majmin"] == f"0:{os.minor(os.stat(mnt).st_dev)}"
        assert os.major(os.stat(mnt).st_dev) == 0
    assert slowfs.mount_entry(mnt) is None
    assert daemon.returncode == 0


@pytest.mark.parametrize("direct_io", [False, True], ids=["page-cache", "direct-io"])
def test_files_read_through_it_have_the_source_bytes(tmp_path, direct_io):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    sizes = {"empty": 0, "one": 1, "page-less-one": 4095, "sub/odd": MIB + 123}
    want = {name: data_file(src / name, size) for name, size in sizes.items()}
    with slowfs.mounted(src, latency_ms=1, mb_s=500, direct_io=direct_io) as (mnt, _):
        assert sorted(os.listdir(mnt)) == ["empty", "one", "page-less-one", "sub"]
        for name, data in want.items():
            with open(os.path.join(mnt, name), "rb") as f:
                assert f.read() == data, name
            assert os.stat(os.path.join(mnt, name)).st_size == len(data)
        with pytest.raises(OSError) as e:
            open(os.path.join(mnt, "one"), "r+b")
        assert e.value.errno == errno.EROFS


def _read_whole(path: str) -> None:
    """One open() of the file, read to its end."""
    with open(path, "rb") as f:
        while f.read(MIB):
            pass


def _settled_reads(mnt: str) -> int:
    """The daemon's count of reads once its stats file stops moving (it writes them
    after each read)."""
    count = slowfs.read_stats(mnt)["reads"]
    for _ in range(20):
        time.sleep(0.1)
        now = slowfs.read_stats(mnt)["reads"]
        if now == count:
            return count
        count = now
    return count


@pytest.mark.parametrize("kernel_cache", [False, True], ids=["default", "kernel-cache"])
def test_a_file_read_whole_is_read_again_from_the_daemon_after_an_open_unless_kept(
        tmp_path, kernel_cache):
    """FUSE drops a file's page cache at every open() unless the filesystem keeps it
    (kernel_cache): a test that warms a file through the mount and then starts readers
    that open it must ask for kernel_cache, or its readers go to the daemon again."""
    data_file(tmp_path / "f", 4 * MIB)
    with slowfs.mounted(tmp_path, latency_ms=0, mb_s=1000,
                        kernel_cache=kernel_cache) as (mnt, _):
        path = os.path.join(mnt, "f")
        _read_whole(path)
        served = _settled_reads(mnt)
        assert served > 0
        _read_whole(path)
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:     # the daemon writes its stats after a read
            again = slowfs.read_stats(mnt)["reads"] - served
            if again and not kernel_cache:
                break
            time.sleep(0.1)
    assert (again == 0) if kernel_cache else (again > 0), again


def test_reading_4_mib_at_20_mb_s_takes_the_cap_at_least(tmp_path):
    data = data_file(tmp_path / "big", 4 * MIB)
    burst_kib = 64
    with slowfs.mounted(tmp_path, latency_ms=5, mb_s=20, burst_kib=burst_kib) as (mnt, _):
        start = time.monotonic()
        with open(os.path.join(mnt, "big"), "rb", buffering=0) as f:
            got = f.read()
        elapsed_s = time.monotonic() - start
    assert got == data
    # a lower bound only: a shared machine can be slower, never faster than the bucket
    assert elapsed_s >= (4 * MIB - burst_kib * 1024) / 20e6   # 0.206 s


def test_the_cap_is_shared_by_all_readers(tmp_path):
    for i in range(4):
        data_file(tmp_path / f"part{i}", MIB)
    with slowfs.mounted(tmp_path, latency_ms=0, mb_s=20, burst_kib=64) as (mnt, _):
        def read(i):
            with open(os.path.join(mnt, f"part{i}"), "rb", buffering=0) as f:
                f.read()
        readers = [threading.Thread(target=read, args=(i,)) for i in range(4)]
        start = time.monotonic()
        for r in readers:
            r.start()
        for r in readers:
            r.join()
        elapsed_s = time.monotonic() - start
    assert elapsed_s >= (4 * MIB - 64 * 1024) / 20e6   # four readers, one 20 MB/s


def test_every_read_waits_the_latency(tmp_path):
    data_file(tmp_path / "f", MIB)
    with slowfs.mounted(tmp_path, latency_ms=50, mb_s=1000, direct_io=True) as (mnt, _):
        fd = os.open(os.path.join(mnt, "f"), os.O_RDONLY)
        try:
            start = time.monotonic()
            for i in range(8):
                os.pread(fd, 4096, i * 4096)
            elapsed_s = time.monotonic() - start
        finally:
            os.close(fd)
        assert slowfs.read_stats(mnt)["reads"] == 8
    assert elapsed_s >= 8 * 0.050


@pytest.mark.parametrize("direct_io, passes_served", [(False, 1), (True, 2)],
                         ids=["page-cache", "direct-io"])
def test_page_cache_unless_direct_io(tmp_path, direct_io, passes_served):
    """A file read twice in one open reaches the daemon once through the page cache (the
    default, as on any FUSE mount), twice with direct_io."""
    data_file(tmp_path / "f", MIB)
    with slowfs.mounted(tmp_path, latency_ms=0, mb_s=500, direct_io=direct_io) as (mnt, _):
        with open(os.path.join(mnt, "f"), "rb", buffering=0) as f:
            f.read()
            f.seek(0)
            f.read()
        assert slowfs.read_stats(mnt)["bytes"] == passes_served * MIB


def test_waiting_requests_show_in_fusectl_while_readers_wait(tmp_path):
    data_file(tmp_path / "f", MIB)
    stop = threading.Event()
    with slowfs.fusectl() as base, \
            slowfs.mounted(tmp_path, latency_ms=200, mb_s=1000, direct_io=True) as (mnt, _):
        waiting = os.path.join(slowfs.connection_dir(mnt, base), "waiting")
        assert os.path.exists(waiting), "the connection is named by the mount's st_dev minor"

        def read_until_stopped(i):
            fd = os.open(os.path.join(mnt, "f"), os.O_RDONLY)
            try:
                while not stop.is_set():
                    os.pread(fd, 4096, i * 4096)
            finally:
                os.close(fd)

        def count() -> int:
            with open(waiting) as f:
                return int(f.read())

        readers = [threading.Thread(target=read_until_stopped, args=(i,)) for i in range(4)]
        for r in readers:
            r.start()
        try:
            assert wait_for(count) > 0
            # the daemon serves the four at once: each waits its 200 ms, not its turn
            assert wait_for(lambda: slowfs.read_stats(mnt)["peak_in_flight"] >= 4)
        finally:
            stop.set()
            for r in readers:
                r.join()
        assert wait_for(lambda: count() == 0)


def test_sixteen_readers_each_wait_at_once(tmp_path):
    """More readers than libfuse's default 10 worker threads: max_threads lets all in."""
    data_file(tmp_path / "f", MIB)
    with slowfs.mounted(tmp_path, latency_ms=300, mb_s=1000, direct_io=True) as (mnt, _):
        def read(i):
            fd = os.open(os.path.join(mnt, "f"), os.O_RDONLY)
            try:
                os.pread(fd, 4096, i * 4096)
            finally:
                os.close(fd)
        readers = [threading.Thread(target=read, args=(i,)) for i in range(16)]
        for r in readers:
            r.start()
        for r in readers:
            r.join()
        assert slowfs.read_stats(mnt)["peak_in_flight"] == 16


def test_the_daemon_holds_dev_fuse_open(tmp_path):
    with slowfs.mounted(tmp_path) as (_, daemon):
        fd_dir = f"/proc/{daemon.pid}/fd"
        targets = []
        for fd in os.listdir(fd_dir):
            try:
                targets.append(os.readlink(os.path.join(fd_dir, fd)))
            except FileNotFoundError:
                pass   # closed meanwhile
        assert "/dev/fuse" in targets


@pytest.mark.parametrize("call", ["read", "pread64", "readv", "preadv", "preadv2"])
def test_a_blocked_reader_shows_its_read_syscall_on_an_fd_on_the_mount(tmp_path, call):
    numbers = READ_SYSCALLS.get(platform.machine())
    if numbers is None:
        pytest.skip(f"no read syscall numbers for {platform.machine()} here")
    data_file(tmp_path / "f", MIB)
    with slowfs.mounted(tmp_path, latency_ms=500, mb_s=1000, direct_io=True) as (mnt, _):
        reader = subprocess.Popen([sys.executable, "-c", READER, call, os.path.join(mnt, "f")])
        try:
            def blocked_on_mount():
                # "nr arg0 .. arg5 sp pc", args in hex; "running" or "-1 sp pc" otherwise
                with open(f"/proc/{reader.pid}/syscall") as f:
                    fields = f.read().split()
                if len(fields) < 2 or fields[0] != str(numbers[call]):
                    return None
                try:
                    target = os.readlink(f"/proc/{reader.pid}/fd/{int(fields[1], 16)}")
                except OSError:
                    return None
                return target if target.startswith(mnt + os.sep) else None

            assert wait_for(blocked_on_mount) == os.path.join(mnt, "f")
            assert reader.poll() is None
        finally:
            reader.kill()   # it leaves once the daemon answers the read in hand
            reader.wait()


def test_no_mount_is_left_behind_when_the_test_fails_mid_read(tmp_path):
    data_file(tmp_path / "f", MIB)
    errors = []

    def read(mnt):
        try:
            with open(os.path.join(mnt, "f"), "rb", buffering=0) as f:
                while f.read(4096):
                    pass
        except OSError as e:
            errors.append(e)

    with pytest.raises(ZeroDivisionError):
        with slowfs.mounted(tmp_path, latency_ms=1000, mb_s=1000, direct_io=True) as (mnt, daemon):
            reader = threading.Thread(target=read, args=(mnt,))
            reader.start()
            assert wait_for(lambda: slowfs.read_stats(mnt)["in_flight"] > 0)
            1 / 0   # the test fails with a reader blocked in the mount, its file open
    reader.join(30)
    assert not reader.is_alive()
    assert slowfs.mount_entry(mnt) is None
    assert daemon.poll() is not None


def test_the_mount_goes_when_the_process_that_made_it_is_killed(tmp_path):
    """The daemon outlives a test run killed with SIGKILL by at most a second, and takes
    its mount with it."""
    data_file(tmp_path / "f", 4096)
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time, slowfs\n"
         "with slowfs.mounted(sys.argv[1]) as (mnt, daemon):\n"
         "    print(mnt, daemon.pid, flush=True)\n"
         "    time.sleep(60)\n", str(tmp_path)],
        stdout=subprocess.PIPE, text=True, cwd=os.path.dirname(slowfs.__file__),
        env={**os.environ, "PYTHONPATH": os.path.dirname(slowfs.__file__)})
    try:
        line = child.stdout.readline().split()
        if not line:
            child.wait()
            pytest.skip("slowfs could not mount in a child process")
        mnt, daemon_pid = line[0], int(line[1])
        assert slowfs.mount_entry(mnt) is not None
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert wait_for(lambda: slowfs.mount_entry(mnt) is None, timeout_s=10)
    assert wait_for(lambda: gone(daemon_pid), timeout_s=10)
    shutil.rmtree(os.path.dirname(mnt))


def gone(pid: int) -> bool:
    """Exited: no such process, or a zombie that nobody reaps (pid 1 in a container)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True
