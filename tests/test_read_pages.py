"""Issue 35 item 1: every source file is read to its end, whatever pieces it comes in.

The kernel's seq_files answer a read one page at a time however much is asked for, so a
reader that takes a short read for the end sees the first page only: 73 of 102 disks,
no mount past the first ~30.  Fixture files are regular files and never answer short, so
these tests make the long files for real (tests/manypages.py): 100 loop devices in
/proc/diskstats, 200 tmpfs in a private mount namespace for mountinfo and mountstats; and
a --procfs copy served by a FUSE daemon that answers every read in 100-byte pieces, which
catches any reader of a source that stops at a short read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import cli_run
import manypages
import slowfs
from slack import slack

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.sysconf("SC_PAGE_SIZE")


def gdt(*args: str) -> subprocess.CompletedProcess:
    """The command line with this checkout first on the path, its bound scaled by load."""
    return cli_run.gdt(*args, env=dict(os.environ, PYTHONPATH=ROOT), timeout=60.0 * slack())


def first_piece(path: str) -> bytes:
    """What the kernel answers to one pread(fd, 65536, 0)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.pread(fd, 65536, 0)
    finally:
        os.close(fd)


# 100 loop devices change the device list every test sees, and iostat is the judge: the
# test runs alone, with the real-load tests (`sysstat`; tests/conftest.py's REAL_LOAD)


@pytest.mark.root(reason="loop devices need root")
@pytest.mark.sysstat
def test_once_lists_every_one_of_100_loop_devices_as_iostat_does(tmp_path):
    why = manypages.loops_unavailable()
    if why:
        pytest.skip(why)
    if manypages.iostat_devices() is None:
        pytest.skip("sysstat's iostat is not installed")
    with manypages.loop_devices(100, str(tmp_path)) as made:
        with open("/proc/diskstats", "rb") as f:
            whole = f.read()
        piece = first_piece("/proc/diskstats")
        by_iostat = manypages.iostat_devices()
        run = gdt("--once", "--json", "-a", "-i", "0.3")
    # the file really is longer than one answer of the kernel: else this proves nothing
    assert len(whole) > PAGE and len(piece) < len(whole), (len(piece), len(whole))
    assert run.returncode == 0, run.stderr
    listed = [d["name"] for d in json.loads(run.stdout)["disks"]]
    assert not [n for n in made if n not in listed], f"{len(listed)} listed"
    assert not [n for n in by_iostat if n not in listed], (by_iostat, listed)
    assert len(by_iostat) >= 100


# run in a private mount namespace after 200 tmpfs: what the readers make of the long
# mountinfo and mountstats, beside Python's own reader (it reads until read() gives
# nothing)
_IN_NAMESPACE = r'''
import json, os, sys
from gpudisk_top.collect import mounts, roots
from gpudisk_top.errors import UsageError
from gpudisk_top.probe import target

last = sys.argv[1]
out = {"pieces": {}, "same": {}}
for name in ("mountinfo", "mountstats"):
    path = f"/proc/self/{name}"
    with open(path, "rb") as f:
        whole = f.read()
    fd = os.open(path, os.O_RDONLY)
    out["pieces"][name] = [len(os.pread(fd, 65536, 0)), len(whole)]
    os.close(fd)
    cache = roots.FileCache()      # kept open (procfs) and read again from offset 0
    out["same"][name] = [roots.read_bytes(path) == whole,
                         cache.read(path) == whole.decode(), cache.read(path) == whole.decode()]
    cache.close()
    out[name] = whole.decode()
st = os.stat(last)
found = mounts.MountTable(roots.Roots()).of(os.getpid(), 0.0).get((os.major(st.st_dev),
                                                                    os.minor(st.st_dev)))
out["found"] = None if found is None else [found.mountpoint, found.kind]
try:
    target.resolve(os.path.join(last, "data.bin"))
    out["probe"] = "resolved"
except UsageError as err:
    out["probe"] = str(err)
print(json.dumps(out))
'''


@pytest.mark.root(reason="a mount namespace and its mounts need root")
def test_mountinfo_and_mountstats_of_200_mounts_are_read_whole_and_the_last_mount_found(tmp_path):
    why = manypages.ns_unavailable()
    if why:
        pytest.skip(why)
    argv = manypages.ns_argv(str(tmp_path), 200, [sys.executable, "-c", _IN_NAMESPACE,
                                                  "{last}"], last_size="4m", file_mib=1)
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=ROOT), timeout=60 * slack())
    if proc.returncode == manypages.SKIP_EXIT:
        pytest.skip(proc.stderr.strip())
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    last = os.path.join(str(tmp_path), "m0199")
    for name in ("mountinfo", "mountstats"):
        piece, whole = out["pieces"][name]
        assert whole > PAGE and piece < whole, (name, piece, whole)   # answered in pieces
        assert out["same"][name] == [True, True, True], name
    # every mount is in what was read, the last one too, in both files
    points = [line.split()[4] for line in out["mountinfo"].splitlines()]
    assert len(points) >= 200 and points[-1] == last
    stats = [line.split(" mounted on ")[1].split(" with fstype ")[0]
             for line in out["mountstats"].splitlines() if line.startswith("device ")]
    assert stats == points
    # the mount collector and probe's target find the last tmpfs, not the disk under /
    assert out["found"] == [last, "memory"]
    assert "no block device here (tmpfs tmpfs)" in out["probe"], out["probe"]


@pytest.mark.root(reason="mounting FUSE as root (fusermount3 otherwise)")
def test_a_procfs_served_in_100_byte_pieces_gives_the_same_once_as_a_plain_copy(tmp_path):
    """A FUSE daemon answering every read with 100 bytes (direct_io: the reader's read()
    returns short) stands in for a seq_file: any reader of a source that stops at a short
    read gets a different answer than from the same files in a plain directory."""
    plain = manypages.procfs_copy(str(tmp_path / "proc"))
    with slowfs.mounted(plain, latency_ms=0.0, mb_s=1000.0, direct_io=True,
                        short_reads=100) as (mnt, _daemon):
        for rel in manypages.PROC_FILES:
            path = os.path.join(plain, rel)
            if os.path.exists(path) and os.path.getsize(path) > 100:
                assert len(first_piece(os.path.join(mnt, rel))) == 100, rel
        from gpudisk_top.collect.roots import read_bytes
        for rel in manypages.PROC_FILES:
            if os.path.exists(os.path.join(plain, rel)):
                with open(os.path.join(plain, rel), "rb") as f:
                    assert read_bytes(os.path.join(mnt, rel)) == f.read(), rel
        served = gdt("--once", "--json", "-a", "--procfs", mnt, "-i", "0.3")
    direct = gdt("--once", "--json", "-a", "--procfs", plain, "-i", "0.3")
    assert served.returncode == 0 and direct.returncode == 0, served.stderr + direct.stderr
    got, want = json.loads(served.stdout), json.loads(direct.stdout)
    assert len(want["disks"]) >= 2   # more than one diskstats line: several pieces
    for key in ("disks", "host", "mounts", "warnings"):
        assert got[key] == want[key], key


@pytest.mark.root(reason="mounting FUSE and fusectl as root")
def test_fusectl_waiting_which_cannot_be_pread_goes_through_the_one_read_loop(tmp_path):
    """fusectl's files are not seekable (pread gives ESPIPE): the one loop reads them with
    read() from the start, and a FUSE mount's waiting requests are a number, not None."""
    import errno

    from gpudisk_top.collect.mounts import fuse_waiting
    from gpudisk_top.collect.roots import Roots, read_bytes

    with slowfs.fusectl(), slowfs.mounted(str(tmp_path), latency_ms=0.0) as (mnt, _daemon):
        path = os.path.join(slowfs.connection_dir(mnt), "waiting")
        fd = os.open(path, os.O_RDONLY)
        try:
            with pytest.raises(OSError) as caught:
                os.pread(fd, 64, 0)
        finally:
            os.close(fd)
        assert caught.value.errno == errno.ESPIPE
        assert read_bytes(path).strip() == b"0"
        assert fuse_waiting(Roots(), os.minor(os.stat(mnt).st_dev)) == 0
