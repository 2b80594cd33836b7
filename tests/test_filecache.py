"""FileCache: files read every sample stay open and are re-read from offset 0."""

from __future__ import annotations

import os

from gpudisk_top.collect.roots import FileCache


def test_rereads_see_new_content_of_a_real_proc_file():
    cache = FileCache()
    first = cache.read(f"/proc/{os.getpid()}/stat")
    sum(i * i for i in range(2_000_000))  # burn CPU: utime moves
    second = cache.read(f"/proc/{os.getpid()}/stat")
    assert first is not None and second is not None
    utime = lambda text: int(text.rsplit(")", 1)[1].split()[11])  # noqa: E731
    assert utime(second) > utime(first)
    assert len(cache._fds) == 1   # one open file, read twice
    cache.close()


def test_a_regular_file_rewritten_in_place(tmp_path):
    path = tmp_path / "f"
    path.write_text("one\n")
    cache = FileCache()
    assert cache.read(str(path)) == "one\n"
    with open(path, "r+") as f:
        f.write("two, longer\n")
    assert cache.read(str(path)) == "two, longer\n"


def test_large_files_are_read_whole(tmp_path):
    path = tmp_path / "big"
    text = "x" * (65536 * 2 + 17)
    path.write_text(text)
    assert FileCache().read(str(path)) == text


def test_a_file_that_goes_away_is_none_then_reopened(tmp_path):
    cache = FileCache()
    assert cache.read(str(tmp_path / "missing")) is None
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    path = f"/proc/{pid}/stat"
    assert cache.read(path) is not None   # a zombie still has its stat
    os.waitpid(pid, 0)
    assert cache.read(path) is None       # reaped: gone, and the file is dropped
    assert path not in cache._fds


def test_open_files_are_bounded():
    cache = FileCache(max_files=3)
    names = ("stat", "statm", "status", "io", "cmdline", "comm")
    for name in names:
        assert cache.read(f"/proc/self/{name}") is not None
    assert len(cache._fds) == 3
    cache.forget("/proc/self/")
    assert cache._fds == {}


def test_only_pseudo_files_stay_open(tmp_path):
    """A file on a disk (a --procfs copy) may be replaced by a rename: it is opened on
    every read, so the new one is read; /proc files stay open."""
    path = tmp_path / "f"
    path.write_text("one\n")
    cache = FileCache()
    assert cache.read(str(path)) == "one\n" and cache._fds == {}
    assert cache.read("/proc/self/stat") is not None and len(cache._fds) == 1
