"""The free-space watch: statvfs of real paths, and a hung mount that must not stall the
sampler."""

from __future__ import annotations

import os
import threading
import time

from gpudisk_top.watch import FreeSpace, FreeSpaceWatch, format_free_space, statvfs_path

GB = 1000**3


def test_a_real_path(tmp_path):
    fs = statvfs_path(str(tmp_path))
    st = os.statvfs(tmp_path)
    assert fs.ok and fs.path == str(tmp_path)
    assert fs.size_bytes == st.f_blocks * st.f_frsize > 0
    assert 0 <= fs.avail_bytes <= fs.free_bytes <= fs.size_bytes
    dev = os.stat(tmp_path).st_dev
    assert (fs.dev_major, fs.dev_minor) == (os.major(dev), os.minor(dev))
    assert 0 <= fs.used_pct <= 100


def test_a_missing_path_is_a_value_not_an_exception(tmp_path):
    fs = statvfs_path(str(tmp_path / "gone"))
    assert not fs.ok and fs.error == "No such file or directory" and fs.avail_bytes is None
    assert format_free_space(fs) == f"{tmp_path}/gone  n/a: No such file or directory"


def test_watch_reads_every_path_in_order(tmp_path):
    watch = FreeSpaceWatch([str(tmp_path), "/", str(tmp_path)])
    try:
        got = watch.read()
        assert [f.path for f in got] == [str(tmp_path), "/"] and all(f.ok for f in got)
        assert watch.read()[1].size_bytes == got[1].size_bytes
    finally:
        watch.close()
    assert FreeSpaceWatch([]).read() == []


def test_a_hung_mount_does_not_stall_the_sampler():
    release = threading.Event()
    calls = []

    def reader(path):
        calls.append(path)
        if path == "/nfs/hung":
            release.wait(30)
        return FreeSpace(path, size_bytes=100 * GB, avail_bytes=50 * GB, free_bytes=55 * GB)

    watch = FreeSpaceWatch(["/local", "/nfs/hung", "/after"], timeout_s=1.0, reader=reader)
    try:
        t0 = time.monotonic()
        first = watch.read()
        assert time.monotonic() - t0 < 5
        assert first[0].ok and first[0].avail_gb == 50
        assert first[1].error.startswith("no answer for ") and first[1].error.endswith(" s (a hung mount?)")
        assert first[2].error == "not read: waiting on another path"
        t0 = time.monotonic()
        second = watch.read()           # still stuck: answers at once, queues nothing
        assert time.monotonic() - t0 < 0.5     # not the 1 s timeout
        assert not second[1].ok and calls == ["/local", "/nfs/hung"]
        release.set()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and len(calls) < 3:
            time.sleep(0.01)
        third = watch.read()
        assert all(f.ok for f in third) and calls[3:] == ["/local", "/nfs/hung", "/after"]
    finally:
        release.set()
        watch.close()


def test_format_for_a_panel():
    fs = FreeSpace("/checkpoints", size_bytes=3_840_000_000_000, avail_bytes=812_300_000_000,
                   free_bytes=1_000_000_000_000)
    assert format_free_space(fs) == "/checkpoints  812.3 GB free of 3.8 TB (78% used)"
    assert fs.used_pct + fs.avail_pct == 100
