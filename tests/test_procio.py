"""ProcIoCollector and the process model against real processes this test starts (a parent
with two reader children, as a DataLoader has workers), a real unprivileged reader, and
fixture procfs trees (built in tmp_path) for what this kernel does not show."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from dataclasses import asdict
from pathlib import Path

import psutil
import pytest

from gpudisk_top.collect.pidfiles import parse_maps_devices, parse_pid_stat
from gpudisk_top.collect.procio import ProcIoCollector
from gpudisk_top.collect.roots import Roots
from gpudisk_top.collect.sample import ProcIoRaw
from gpudisk_top.model.procs import ProcView, proc_views, tree_totals

FILE_BYTES = 8 << 20


def _block_name(path: str) -> str:
    st = os.stat(path)
    link = os.readlink(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
    return os.path.basename(link)


def _wait_for(predicate, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.02)


@pytest.fixture
def data_dir(tmp_path):
    """A directory on a block device of its own (a loop-mounted ext4) when this machine
    allows it, so the device found through the readers' open files is not merely the
    one their libraries are mapped from; tmp_path otherwise."""
    tools = all(shutil.which(t) for t in ("losetup", "mkfs.ext4", "mount", "umount"))
    if os.geteuid() != 0 or not tools:
        yield tmp_path, False
        return
    image, mnt = tmp_path / "fs.img", tmp_path / "mnt"
    mnt.mkdir()
    with open(image, "wb") as f:
        f.truncate(64 << 20)
    loop = None
    try:
        subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, capture_output=True)
        loop = subprocess.run(["losetup", "-f", "--show", str(image)], check=True,
                              capture_output=True, text=True).stdout.strip()
        subprocess.run(["mount", loop, str(mnt)], check=True, capture_output=True)
    except (subprocess.CalledProcessError, OSError):
        if loop:
            subprocess.run(["losetup", "-d", loop], capture_output=True)
        yield tmp_path, False
        return
    try:
        yield mnt, True
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
        subprocess.run(["losetup", "-d", loop], capture_output=True)


READER = textwrap.dedent("""
    import mmap, os, sys, time
    path, mode, ready, stop = sys.argv[1:5]
    buf = mmap.mmap(-1, 1 << 20)  # page-aligned, as O_DIRECT needs
    fd = None
    if mode == "direct":
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        except OSError:
            mode = "fadvise"      # a filesystem without O_DIRECT
    if fd is None:
        fd = os.open(path, os.O_RDONLY)
    passes = 0
    while not os.path.exists(stop):
        if mode == "fadvise":
            # drop the file's clean pages so the next pass reads from the disk again
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.lseek(fd, 0, os.SEEK_SET)
        while (os.readv(fd, [buf]) if mode == "direct" else len(os.read(fd, 1 << 20))) > 0:
            pass
        passes += 1
        if passes == 1:
            open(ready, "w").close()
        time.sleep(0.005)
""")

PARENT = textwrap.dedent("""
    import subprocess, sys
    reader, d, stop = sys.argv[1:4]
    kids = [subprocess.Popen([sys.executable, "-c", reader, f"{d}/data{i}", mode,
                              f"{d}/ready{i}", stop])
            for i, mode in enumerate(("fadvise", "direct"))]
    for k in kids:
        k.wait()
""")


@pytest.mark.integration
def test_real_parent_with_two_reader_children(data_dir, tmp_path):
    directory, own_device = data_dir
    for i in range(2):
        with open(directory / f"data{i}", "wb") as f:
            f.write(os.urandom(FILE_BYTES))
            f.flush()
            os.fsync(f.fileno())  # dirty pages would survive FADV_DONTNEED
    stop = tmp_path / "stop"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, READER, str(directory), str(stop)])
    try:
        _wait_for(lambda: all((directory / f"ready{i}").exists() for i in range(2)))
        collector = ProcIoCollector(Roots())
        t0 = time.monotonic()
        prev = collector.collect({parent.pid: parent.pid})
        time.sleep(0.6)
        cur = collector.collect({parent.pid: parent.pid})
        views = proc_views(cur, prev, time.monotonic() - t0)
    finally:
        stop.touch()
        parent.wait(timeout=30)

    children = [raw for raw in cur.values() if raw.ppid == parent.pid]
    assert len(children) == 2, cur
    assert set(cur) == {parent.pid} | {c.pid for c in children}
    device = _block_name(str(directory / "data0"))
    for child in children:
        assert child.root_pid == parent.pid
        assert child.name == "python" or child.name.startswith("python")
        assert "data" in child.cmdline
        v = views[child.pid]
        assert v.read_kb_s is not None and v.read_kb_s > 0, v
        assert v.rchar_kb_s is not None and v.rchar_kb_s > 0, v
        assert v.cpu_pct is not None and v.cpu_pct >= 0
        assert device in child.devices
    if own_device:
        # the parent never opened the data files: their device is not among its own
        assert device not in cur[parent.pid].devices
    totals = tree_totals(views, parent.pid)
    assert totals["nprocs"] == 3
    assert totals["read_kb_s"] >= sum(views[c.pid].read_kb_s for c in children)
    assert device in totals["devices"]
    # the readers' rates are real disk reads: at least a few MB over the interval
    assert totals["read_kb_s"] > 1024


def test_real_cpu_ticks_match_psutil():
    collector = ProcIoCollector(Roots())
    raw = collector.collect({os.getpid(): os.getpid()})[os.getpid()]
    collector.close()
    times = psutil.Process().cpu_times()
    ticks = (times.user + times.system) * os.sysconf("SC_CLK_TCK")
    assert abs(raw.cpu_ticks - ticks) <= 5
    assert abs(raw.sys_ticks - times.system * os.sysconf("SC_CLK_TCK")) <= 5
    assert 0 <= raw.sys_ticks <= raw.cpu_ticks


def test_real_kernel_time_is_told_from_user_time():
    """A process that spends its time in read() of /dev/zero (the kernel's) and one that
    spends it hashing in Python (its own): sys_ticks is most of the first's CPU and little
    of the second's, as pidstat's %system says."""
    kernel = ("import os, time\nfd = os.open('/dev/zero', os.O_RDONLY)\nend = time.thread_time() + 0.6\n"
              "while time.thread_time() < end: os.read(fd, 4 << 20)\nprint('done', flush=True)\n"
              "input()")
    user = ("import hashlib, time\nend = time.thread_time() + 0.6\nh = b'x'\n"
            "while time.thread_time() < end:\n"
            "    for _ in range(20000): h = hashlib.sha256(h).digest()\n"
            "print('done', flush=True)\ninput()")
    shares = {}
    for name, code in (("kernel", kernel), ("user", user)):
        p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
        try:
            assert p.stdout.readline().strip() == "done"
            raw = ProcIoCollector(Roots()).collect({p.pid: p.pid})[p.pid]
            shares[name] = raw.sys_ticks / raw.cpu_ticks
        finally:
            p.kill()
            p.wait()
    assert shares["kernel"] > 0.6 and shares["user"] < 0.4, shares
    assert raw.rchar is not None and raw.rchar > 0


REAPER = textwrap.dedent("""
    import subprocess, sys
    p = subprocess.Popen(["sleep", "30"])
    print(p.pid, flush=True)
    sys.stdin.readline()
    p.kill()
    p.wait()
    print("reaped", flush=True)
    sys.stdin.readline()
""")


def test_real_exited_processes_are_dropped_and_forgotten():
    collector = ProcIoCollector(Roots())
    root = subprocess.Popen([sys.executable, "-c", REAPER], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        child_pid = int(root.stdout.readline())
        first = collector.collect({root.pid: root.pid})
        assert set(first) == {root.pid, child_pid}
        root.stdin.write("\n")
        root.stdin.flush()
        assert root.stdout.readline().strip() == "reaped"
        second = collector.collect({root.pid: root.pid})
        assert set(second) == {root.pid}
        assert set(collector._known) == {root.pid}  # the exited child is forgotten
        views = proc_views(second, first, 1.0)
        assert set(views) == {root.pid}
    finally:
        root.stdin.close()
        root.wait(timeout=30)
    assert collector.collect({root.pid: root.pid}) == {}  # the GPU process itself exited
    assert not collector._known


def test_real_zombie_and_vanished_pid_never_raise():
    zombie = subprocess.Popen(["true"])
    _wait_for(lambda: psutil.Process(zombie.pid).status() == psutil.STATUS_ZOMBIE)
    collector = ProcIoCollector(Roots())
    out = collector.collect({zombie.pid: zombie.pid, 2 ** 22 + 12345: 7})
    zombie.wait()
    assert 2 ** 22 + 12345 not in out
    if zombie.pid in out:
        assert out[zombie.pid].root_pid == zombie.pid


UNPRIVILEGED = 65534  # nobody


@pytest.mark.root(reason="needs root to drop to another user")
def test_real_unreadable_io_is_none_for_an_unprivileged_reader():
    """A reader without ptrace access to a process (here: user nobody reading a root
    process) gets None for io and devices, and still its stat fields."""
    target = subprocess.Popen(["sleep", "30"])
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the reader, as nobody
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(UNPRIVILEGED)
            os.setuid(UNPRIVILEGED)
            raws = ProcIoCollector(Roots()).collect({target.pid: target.pid})
            doc = {str(k): asdict(v) for k, v in raws.items()}
        except BaseException as e:  # report anything, never run pytest on in the child
            doc = {"error": repr(e)}
        os.write(w, json.dumps(doc).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        doc = json.loads(f.read())
    os.waitpid(pid, 0)
    target.kill()
    target.wait()
    assert "error" not in doc, doc
    raw = doc[str(target.pid)]
    assert raw["rchar"] is None and raw["read_bytes"] is None and raw["write_bytes"] is None
    assert raw["devices"] is None
    assert raw["name"] == "sleep" and raw["cmdline"] == "sleep 30"
    assert raw["ppid"] == os.getpid() and raw["cpu_ticks"] is not None


def test_real_collect_cost_stays_small():
    collector = ProcIoCollector(Roots())
    me = {os.getpid(): os.getpid()}
    collector.collect(me)  # the first call scans fds and maps
    t0 = time.perf_counter()
    for _ in range(20):
        collector.collect(me)
    spent_s = (time.perf_counter() - t0) / 20
    collector.close()
    assert spent_s < 0.05


# ---------------------------------------------------------------------------- fixtures
def _stat_line(pid: int, comm: str, ppid: int, utime: int, stime: int, start: int) -> str:
    fields = ["S", ppid, pid, pid, 0, -1, 4194304, 100, 0, 0, 0, utime, stime, 0, 0, 20, 0,
              3, 0, start, 1000, 50]
    return f"{pid} ({comm}) " + " ".join(str(f) for f in fields) + "\n"


def _fixture_proc(tmp_path: Path, procs: dict[int, dict], *, children_files: bool = True,
                  dev_block: dict[str, str] | None = None) -> Roots:
    proc, sys_ = tmp_path / "proc", tmp_path / "sys"
    proc.mkdir(parents=True, exist_ok=True)
    for pid, p in procs.items():
        d = proc / str(pid)
        (d / "task" / str(pid)).mkdir(parents=True, exist_ok=True)
        (d / "stat").write_text(_stat_line(pid, p.get("comm", "python"), p["ppid"],
                                           p.get("utime", 10), p.get("stime", 5),
                                           p.get("start", 1000 + pid)))
        if children_files:
            kids = [str(k) for k, q in procs.items() if q["ppid"] == pid]
            (d / "task" / str(pid) / "children").write_text(" ".join(kids) + (" " if kids else ""))
        io = p.get("io", (100, 10, 4096, 0))
        if io == "unreadable":
            (d / "io").mkdir()  # open() fails, as for a process we may not trace
        else:
            (d / "io").write_text(
                f"rchar: {io[0]}\nwchar: {io[1]}\nsyscr: 1\nsyscw: 1\n"
                f"read_bytes: {io[2]}\nwrite_bytes: {io[3]}\ncancelled_write_bytes: 0\n")
        (d / "cmdline").write_bytes(p.get("cmdline", b"python\0x.py\0"))
        if "maps" in p:
            (d / "maps").write_text(p["maps"])
    (sys_ / "dev" / "block").mkdir(parents=True, exist_ok=True)
    for majmin, name in (dev_block or {}).items():
        os.symlink(f"../../devices/virtual/block/{name}", sys_ / "dev" / "block" / majmin)
    return Roots(procfs=str(proc), sysfs=str(sys_))


MAPS = ("55d0a0000000-55d0a0001000 r--p 00000000 fd:00 1835042   /usr/bin/python3.11\n"
        "7f0000000000-7f0000100000 r--s 00000000 103:02 77   /data/shard-0001.bin\n"
        "7f0000200000-7f0000300000 rw-p 00000000 00:00 0 \n"
        "7f0000400000-7f0000401000 rw-s 00000000 00:05 1234   /dev/shm/torch_123\n"
        "7f0000500000-7f0000501000 r--p 00000000 08:10 99   /mnt/unknown/file\n"
        "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0   [vsyscall]\n")
DEV_BLOCK = {"253:0": "dm-0", "259:2": "nvme0n1p2"}


def test_parse_pid_stat_with_spaces_and_parentheses_in_comm():
    st = parse_pid_stat(_stat_line(42, "my (weird) proc) x", 7, 30, 12, 5555))
    assert (st.comm, st.ppid, st.cpu_ticks, st.start_ticks) == ("my (weird) proc) x", 7, 42, 5555)
    assert parse_pid_stat("42 (x) S") is None
    assert parse_pid_stat("garbage") is None


def test_parse_maps_devices():
    assert parse_maps_devices(MAPS) == {(0xfd, 0), (0x103, 2), (0, 5), (8, 16)}


def test_fixture_children_files_tree_and_devices(tmp_path):
    procs = {
        100: {"ppid": 1, "maps": MAPS, "comm": "pt_main_thread"},
        101: {"ppid": 100, "comm": "pt_data_worker", "io": (5000, 0, 4096 * 3, 0)},
        102: {"ppid": 100, "io": "unreadable"},
        103: {"ppid": 101},
        200: {"ppid": 1},  # not under a GPU process
    }
    roots = _fixture_proc(tmp_path, procs, dev_block=DEV_BLOCK)
    out = ProcIoCollector(roots).collect({100: 4100})
    assert set(out) == {100, 101, 102, 103}
    assert all(r.root_pid == 4100 for r in out.values())
    # fd:00 -> dm-0 and 103:02 -> nvme0n1p2; 00:05 (shm) and unresolvable 8:16 skipped
    assert out[100].devices == ("dm-0", "nvme0n1p2")
    assert out[100].name == "pt_main_thread" and out[100].cmdline == "python x.py"
    assert out[101].read_bytes == 12288 and out[101].rchar == 5000
    assert out[102].rchar is None and out[102].read_bytes is None  # not an exception
    assert out[103].ppid == 101
    assert out[101].devices is None  # no fd dir, no maps: unknown, not "none"


def test_fixture_scan_without_children_files(tmp_path):
    procs = {10: {"ppid": 1}, 11: {"ppid": 10}, 12: {"ppid": 11}, 13: {"ppid": 1}}
    roots = _fixture_proc(tmp_path, procs, children_files=False)
    collector = ProcIoCollector(roots)
    assert set(collector.collect({10: 10})) == {10, 11, 12}
    assert collector._children_files is False  # CONFIG_PROC_CHILDREN off: scan from now on
    assert set(collector.collect({10: 10, 13: 13})) == {10, 11, 12, 13}


def test_fixture_nested_gpu_process_roots_its_own_tree(tmp_path):
    # a launcher on the GPU that spawns per-rank GPU processes with their own workers
    procs = {50: {"ppid": 1}, 51: {"ppid": 50}, 52: {"ppid": 51}, 53: {"ppid": 50}}
    for children_files in (True, False):
        roots = _fixture_proc(tmp_path / str(children_files), procs,
                              children_files=children_files)
        out = ProcIoCollector(roots).collect({50: 9050, 51: 9051})
        assert {pid: r.root_pid for pid, r in out.items()} == \
            {50: 9050, 51: 9051, 52: 9051, 53: 9050}


def test_fixture_devices_refreshed_at_most_every_interval(tmp_path):
    procs = {100: {"ppid": 1, "maps": MAPS}}
    roots = _fixture_proc(tmp_path, procs, dev_block=DEV_BLOCK)
    collector = ProcIoCollector(roots)
    assert collector.collect({100: 100})[100].devices == ("dm-0", "nvme0n1p2")
    maps = Path(roots.procfs) / "100" / "maps"
    maps.write_text(MAPS.splitlines()[0] + "\n")
    assert collector.collect({100: 100})[100].devices == ("dm-0", "nvme0n1p2")  # cached
    collector.devices_refresh_s = 0.0
    # due, but its fds and its address space's size are as they were: not scanned again
    assert collector.collect({100: 100})[100].devices == ("dm-0", "nvme0n1p2")
    # the mapping went away: the address space shrank (stat's vsize), so it is scanned
    stat = Path(roots.procfs) / "100" / "stat"
    stat.write_text(stat.read_text().replace(" 1000 50\n", " 900 50\n"))
    assert collector.collect({100: 100})[100].devices == ("dm-0",)


def test_fixture_reused_pid_rereads_cmdline(tmp_path):
    roots = _fixture_proc(tmp_path, {100: {"ppid": 1, "start": 1000}})
    collector = ProcIoCollector(roots)
    assert collector.collect({100: 100})[100].cmdline == "python x.py"
    d = Path(roots.procfs) / "100"
    (d / "cmdline").write_bytes(b"other\0")
    assert collector.collect({100: 100})[100].cmdline == "python x.py"  # cached per pid
    (d / "stat").write_text(_stat_line(100, "other", 1, 0, 0, 99999))  # a new process
    assert collector.collect({100: 100})[100].cmdline == "other"


def test_fixture_missing_procfs_never_raises(tmp_path):
    assert ProcIoCollector(Roots(procfs=str(tmp_path / "none"))).collect({1: 1}) == {}


# ---------------------------------------------------------------------------- model
def _raw(pid, root=1, **kw) -> ProcIoRaw:
    base = dict(rchar=0, wchar=0, read_bytes=0, write_bytes=0, cpu_ticks=0)
    base.update(kw)
    return ProcIoRaw(pid=pid, ppid=1, root_pid=root, name="w", cmdline="w", **base)


def test_proc_views_rates():
    prev = {5: _raw(5, rchar=0, wchar=0, read_bytes=0, write_bytes=1024, cpu_ticks=100)}
    cur = {5: _raw(5, rchar=4096, wchar=2048, read_bytes=2048, write_bytes=3072,
                   cpu_ticks=150, devices=("vda",))}
    v = proc_views(cur, prev, 2.0, clk_tck=100)[5]
    assert v == ProcView(5, 1, "w", "w", read_kb_s=1.0, write_kb_s=1.0, rchar_kb_s=2.0,
                         wchar_kb_s=1.0, cpu_pct=25.0, devices=("vda",))
    assert proc_views(cur, prev, 1.0, clk_tck=250)[5].cpu_pct == 20.0


def test_proc_views_na_cases():
    prev = {5: _raw(5, rchar=100, read_bytes=None), 6: _raw(6, root=1), 7: _raw(7, root=1)}
    cur = {5: _raw(5, rchar=50, read_bytes=4096),       # rchar went down: PID reused
           6: _raw(6, root=2, rchar=10),                # now under another GPU process
           7: _raw(7, read_bytes=None, rchar=None),     # io became unreadable
           8: _raw(8)}                                  # new
    views = proc_views(cur, prev, 1.0, clk_tck=100)
    assert views[5].rchar_kb_s is None and views[5].read_kb_s is None
    assert views[5].cpu_pct == 0.0
    assert views[6].rchar_kb_s is None
    assert views[7].read_kb_s is None and views[7].rchar_kb_s is None
    assert views[8].read_kb_s is None and views[8].cpu_pct is None
    assert all(v.read_kb_s is None for v in proc_views(cur, None, 1.0).values())
    assert all(v.rchar_kb_s is None for v in proc_views(cur, prev, 0.0).values())


def test_tree_totals():
    views = {
        1: ProcView(1, 9001, "main", None, 0.0, 10.0, 1.0, 10.0, 90.0, ("vda",)),
        2: ProcView(2, 9001, "worker", None, 500.0, None, 800.0, None, 50.0, ("nvme0n1p2",)),
        3: ProcView(3, 9001, "worker", None, None, None, None, None, None, None),
        4: ProcView(4, 9002, "other", None, 7.0, 7.0, 7.0, 7.0, 7.0, ("sda",)),
    }
    t = tree_totals(views, 9001)
    # of 801 kB/s read through read(), 500 made block I/O: 37.6% came from the page cache
    assert t == {"read_kb_s": 500.0, "rchar_kb_s": 801.0, "write_kb_s": 10.0,
                 "wchar_kb_s": 10.0, "cpu_pct": 140.0, "cache_pct": 100 * (1 - 500 / 801),
                 "devices": ("nvme0n1p2", "vda"), "nprocs": 3}
    none_known = tree_totals({3: views[3]}, 9001)
    assert none_known["read_kb_s"] is None and none_known["nprocs"] == 1
    assert none_known["cache_pct"] is None
    assert tree_totals(views, 1234) == {"read_kb_s": None, "rchar_kb_s": None,
                                        "write_kb_s": None, "wchar_kb_s": None,
                                        "cpu_pct": None, "cache_pct": None, "devices": (),
                                        "nprocs": 0}
    # a worker with files on a network or FUSE mount: its reads never count in read_bytes
    views[2].mounts = ("/mnt/ds",)
    assert tree_totals(views, 9001)["cache_pct"] is None


def test_maps_count_data_files_but_not_code():
    from gpudisk_top.collect.pidfiles import parse_maps_devices

    maps = "\n".join([
        # the interpreter and a shared library: code, on the root disk (fe:00)
        "55d0c0000000-55d0c0001000 r--p 00000000 fe:00 1311 /usr/bin/python3.11",
        "55d0c0001000-55d0c0002000 r-xp 00001000 fe:00 1311 /usr/bin/python3.11",
        "7f0000000000-7f0000001000 r--p 00000000 fe:00 2222 /usr/lib/libc.so.6",
        "7f0000001000-7f0000002000 r-xp 00001000 fe:00 2222 /usr/lib/libc.so.6",
        # a memory-mapped dataset on an NVMe partition (103:01)
        "7f1000000000-7f2000000000 r--s 00000000 103:01 777 /data/train.bin",
        "7f3000000000-7f3000001000 rw-p 00000000 00:00 0 ",
    ])
    assert parse_maps_devices(maps) == {(0x103, 0x01)}


def test_descendants_are_looked_for_afresh_every_few_seconds(monkeypatch):
    """Finding descendants may read every /proc/PID/stat: done at most every
    TREES_REFRESH_S, except that a new GPU process or an exited member triggers it."""
    import subprocess
    import sys
    import time

    from gpudisk_top.collect import procio
    from gpudisk_top.collect.roots import Roots

    parent = subprocess.Popen([sys.executable, "-c",
                               "import subprocess, sys, time\n"
                               "time.sleep(0.5)\n"
                               "subprocess.Popen(['sleep', '30'])\n"
                               "time.sleep(30)\n"])
    # however long the child takes to come on a busy machine, the first search is not due
    monkeypatch.setattr(procio, "TREES_REFRESH_S", 3600.0)
    try:
        collector = procio.ProcIoCollector(Roots())
        first = collector.collect({parent.pid: parent.pid})
        assert set(first) == {parent.pid}
        deadline = time.monotonic() + 30      # the child exists (however busy the machine)
        while not _children(parent.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _children(parent.pid)
        cached = collector.collect({parent.pid: parent.pid})
        assert set(cached) == {parent.pid}    # not looked for yet
        monkeypatch.setattr(procio, "TREES_REFRESH_S", 0.0)
        fresh = collector.collect({parent.pid: parent.pid})
        assert len(fresh) == 2                # found on the next search
        child = next(pid for pid in fresh if pid != parent.pid)
        assert fresh[child].root_pid == parent.pid and fresh[child].name == "sleep"
    finally:
        subprocess.run(["pkill", "-P", str(parent.pid)], capture_output=True)
        parent.kill()
        parent.wait()


def _children(pid: int) -> list[str]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return f.read().split()


def test_data_files_say_o_direct_and_the_buffered_working_set():
    """Two real readers of one 8 MiB file on this machine's disk: one opened O_DIRECT, one
    through the page cache.  The collector reads their fdinfo flags: the first reads past
    the cache (direct_reads True), the second through it, with the file's size as the
    working set the cache would have to hold.  A process with no data file says None."""
    base = "/var/tmp" if os.path.isdir("/var/tmp") else "/tmp"
    path = os.path.join(base, f"gdt-direct-{os.getpid()}.bin")
    with open(path, "wb") as f:
        f.write(os.urandom(FILE_BYTES))
    if os.major(os.stat(path).st_dev) == 0:
        os.unlink(path)
        pytest.skip(f"{base} is not on a block device here")
    hold = ("import os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY | "
            "(os.O_DIRECT if sys.argv[2] == 'direct' else 0)); print('ok', flush=True); "
            "time.sleep(60)")
    procs = []
    try:
        for mode in ("direct", "buffered"):
            p = subprocess.Popen([sys.executable, "-c", hold, path, mode],
                                 stdout=subprocess.PIPE, text=True)
            assert p.stdout.readline().strip() == "ok"
            procs.append(p)
        # started like the readers: while an interpreter still starts, it has its modules'
        # files open, which are data files of a sort (a loaded machine caught it so)
        idle = subprocess.Popen([sys.executable, "-c",
                                 "import time; print('ok', flush=True); time.sleep(60)"],
                                stdout=subprocess.PIPE, text=True)
        procs.append(idle)
        assert idle.stdout.readline().strip() == "ok"
        raws = ProcIoCollector(Roots()).collect({p.pid: p.pid for p in procs})
        direct, buffered, none = (raws[p.pid] for p in procs)
        assert (direct.direct_reads, direct.data_kb) == (True, None)
        assert (buffered.direct_reads, buffered.data_kb) == (False, FILE_BYTES // 1024)
        assert (none.direct_reads, none.data_kb) == (None, None)
        views = proc_views(raws, raws, 1.0)
        assert views[procs[0].pid].direct_reads is True
        assert views[procs[1].pid].data_kb == FILE_BYTES // 1024
    finally:
        for p in procs:
            p.kill()
            p.wait()
        os.unlink(path)
