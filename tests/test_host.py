"""The host collector and model: the real /proc of this machine, a real cgroup v2 group,
and fixture trees (built in tmp_path) for what this kernel cannot show."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import psutil
import pytest

from gpudisk_top.collect import host as host_collect
from gpudisk_top.collect.host import (
    MEMINFO_FIELDS, cgroup2_mounts, forget_cgroup_cache, parse_io_stat, parse_meminfo, parse_psi,
    read_host,
)
from gpudisk_top.collect.roots import Roots
from gpudisk_top.collect.sample import CgroupIo, CpuTimes, HostRaw, PsiTotals
from gpudisk_top.model.host import HOST_FIELDS, HostView, host_as_json, host_view

REPO = Path(__file__).resolve().parent.parent
CPU_PCT_FIELDS = ("cpu_user_pct", "cpu_nice_pct", "cpu_system_pct", "cpu_iowait_pct",
                  "cpu_steal_pct", "cpu_idle_pct")


def _write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


STAT = "cpu  {u} 0 {s} {i} 10 0 5 0 0 0\ncpu0 1 0 1 1 0 0 0 0 0 0\ncpu1 1 0 1 1 0 0 0 0 0 0\nintr 1 2 3\n"
MEMINFO = "MemTotal:       16000000 kB\nMemAvailable:    8000000 kB\nCached:  4000 kB\n"


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1


# ---------------------------------------------------------------------------- real /proc
def test_real_cpu_counters_increase_after_busy_loop():
    before = read_host(Roots())
    _busy(0.4)
    after = read_host(Roots())
    assert before.cpu is not None and after.cpu is not None
    # nice counts: under `nice` (as CI or a busy machine may run the suite) the loop is nice time
    busy = lambda c: c.user + c.nice + c.system
    assert busy(after.cpu) > busy(before.cpu)
    assert after.ncpu == os.cpu_count()


def test_real_host_view_cpu_percentages_sum_to_100():
    t0 = time.monotonic()
    before = read_host(Roots())
    _busy(0.5)
    after = read_host(Roots())
    view = host_view(after, before, time.monotonic() - t0)
    values = [getattr(view, f) for f in CPU_PCT_FIELDS]
    assert all(v is not None and 0.0 <= v <= 100.0 for v in values)
    assert sum(values) == pytest.approx(100.0, abs=0.01)
    # one busy thread on this machine's CPUs: at least a good part of one CPU is busy time
    # (user, or nice when the suite runs under `nice`; other load only adds to it)
    busy_pct = view.cpu_user_pct + view.cpu_nice_pct + view.cpu_system_pct
    assert busy_pct > 100.0 / os.cpu_count() / 2


@pytest.mark.skipif(not os.path.exists("/proc/pressure/io"), reason="no PSI on this kernel")
def test_real_psi_present_and_percentages_in_range():
    t0 = time.monotonic()
    before = read_host(Roots())
    time.sleep(0.3)
    after = read_host(Roots())
    assert set(after.psi) == {"io", "cpu", "memory"}
    for resource, totals in after.psi.items():
        assert totals.some_us >= before.psi[resource].some_us
    view = host_view(after, before, time.monotonic() - t0)
    for resource in ("io", "cpu", "memory"):
        some = getattr(view, f"psi_{resource}_some_pct")
        assert some is not None and 0.0 <= some <= 100.0


def test_real_meminfo_matches_psutil():
    raw = read_host(Roots())
    assert raw.meminfo_kb["MemTotal"] == psutil.virtual_memory().total // 1024
    assert "HugePages_Total" not in raw.meminfo_kb  # a page count, not kB
    view = host_view(raw, None, 1.0)
    assert view.mem_total_kb == raw.meminfo_kb["MemTotal"]
    assert view.cached_kb == raw.meminfo_kb["Cached"]
    assert view.cpu_user_pct is None  # no previous sample: no rate


def test_real_read_host_is_cheap():
    read_host(Roots())
    t0 = time.perf_counter()
    for _ in range(50):
        read_host(Roots())
    assert (time.perf_counter() - t0) / 50 < 0.005


def _cgroup2_mountpoint() -> str | None:
    with open("/proc/self/mountinfo") as f:
        for root, mountpoint in cgroup2_mounts(f.read()):
            if root == "/":
                return mountpoint
    return None


CGROUP_CHILD = textwrap.dedent("""
    import json, os, sys
    from gpudisk_top.collect.host import read_host
    from gpudisk_top.collect.roots import Roots
    group, parent = sys.argv[1], sys.argv[2]
    with open(os.path.join(group, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))
    try:
        cg = read_host(Roots()).cgroup
        print(json.dumps(None if cg is None else {
            "path": cg.path, "io_stat": cg.io_stat,
            "has_io_stat": os.path.exists(os.path.join(group, "io.stat")),
            "pressure": None if cg.io_pressure is None else cg.io_pressure.some_us}))
    finally:
        with open(os.path.join(parent, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
""")


@pytest.mark.root(reason="making a cgroup and moving a process into it needs root")
def test_real_cgroup_v2_group_is_found(tmp_path):
    """A process moved into a new cgroup v2 group finds that group and its io.pressure."""
    mountpoint = _cgroup2_mountpoint()
    if mountpoint is None:
        pytest.skip("needs a cgroup2 mount")
    name = f"gdt-test-{uuid.uuid4().hex[:8]}"
    group = os.path.join(mountpoint, name)
    try:
        os.mkdir(group)
    except OSError as e:
        pytest.skip(f"cannot create a cgroup here: {e}")
    try:
        out = subprocess.run([sys.executable, "-c", CGROUP_CHILD, group, mountpoint],
                             cwd=REPO, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        cg = json.loads(out.stdout)
    finally:
        os.rmdir(group)
    assert cg is not None and cg["path"] == "/" + name
    if not cg["has_io_stat"]:
        assert cg["io_stat"] == {}  # e.g. the io controller is bound to cgroup v1 here
    if os.path.exists("/proc/pressure/io"):
        assert cg["pressure"] is not None


def test_real_root_cgroup_without_io_stat_is_none():
    with open("/proc/self/cgroup") as f:
        ours = host_collect.parse_self_cgroup(f.read())
    mountpoint = _cgroup2_mountpoint()
    if ours != "/" or mountpoint is None or os.path.exists(os.path.join(mountpoint, "io.stat")):
        pytest.skip("this process is not in a root cgroup without io.stat")
    assert read_host(Roots()).cgroup is None


# ---------------------------------------------------------------------------- fixtures
def _host_tree(tmp_path: Path, *, psi: dict[str, str] | None = None, stat: str | None = None,
               meminfo: str = MEMINFO) -> Roots:
    proc = tmp_path / "proc"
    _write(proc, "stat", stat if stat is not None else STAT.format(u=100, s=50, i=800))
    _write(proc, "meminfo", meminfo)
    for resource, text in (psi or {}).items():
        _write(proc, f"pressure/{resource}", text)
    return Roots(procfs=str(proc), sysfs=str(tmp_path / "sys"))


def test_fixture_missing_psi_is_absent_and_na(tmp_path):
    roots = _host_tree(tmp_path)
    raw = read_host(roots)
    assert raw.psi == {}
    assert raw.cgroup is None  # no self/cgroup in the tree
    view = host_view(raw, raw, 1.0)
    for resource in ("io", "cpu", "memory"):
        assert getattr(view, f"psi_{resource}_some_pct") is None
        assert getattr(view, f"psi_{resource}_full_pct") is None


def test_fixture_psi_without_full_line(tmp_path):
    # /proc/pressure/cpu before Linux 5.13 had only the "some" line
    before = _host_tree(tmp_path / "a", psi={
        "cpu": "some avg10=0.00 avg60=0.00 avg300=0.00 total=1000000\n",
        "io": "some avg10=1.00 avg60=0.50 avg300=0.10 total=0\n"
              "full avg10=1.00 avg60=0.50 avg300=0.10 total=0\n"})
    after = _host_tree(tmp_path / "b", psi={
        "cpu": "some avg10=0.00 avg60=0.00 avg300=0.00 total=1250000\n",
        "io": "some avg10=1.00 avg60=0.50 avg300=0.10 total=500000\n"
              "full avg10=1.00 avg60=0.50 avg300=0.10 total=3000000\n"})
    prev, cur = read_host(before), read_host(after)
    assert cur.psi["cpu"] == PsiTotals(some_us=1250000, full_us=None)
    assert "memory" not in cur.psi
    view = host_view(cur, prev, 1.0)
    assert view.psi_cpu_some_pct == pytest.approx(25.0)
    assert view.psi_cpu_full_pct is None
    assert view.psi_io_some_pct == pytest.approx(50.0)
    assert view.psi_io_full_pct == 100.0  # 3 s of stall in 1 s: clamped
    assert view.psi_memory_some_pct is None


def test_parse_psi_rejects_garbage():
    assert parse_psi("") is None
    assert parse_psi("some avg10=x total=abc\n") is None
    assert parse_psi("full avg10=0 total=5\n") is None  # no some line
    assert parse_psi("some total=7\nfull total=bad\n") == PsiTotals(7, None)


def test_fixture_garbled_meminfo(tmp_path):
    text = ("MemTotal:       16000000 kB\n"
            "garbage line without colon\n"
            "MemAvailable:   lots kB\n"
            "Dirty:            1234 kB\n"
            "HugePages_Total:     4\n"
            ": 5 kB\n"
            "Writeback:  0 kB\n")
    assert parse_meminfo(text) == {"MemTotal": 16000000, "Dirty": 1234, "Writeback": 0}
    raw = read_host(_host_tree(tmp_path, meminfo=text))
    view = host_view(raw, None, 1.0)
    assert view.mem_total_kb == 16000000
    assert view.mem_available_kb is None
    assert view.dirty_kb == 1234 and view.writeback_kb == 0


def test_a_real_meminfo_keeps_the_figures_the_model_reads_and_no_other():
    """Of this machine's /proc/meminfo (some 50 lines) the six the model reads are kept,
    each as the file gives it: the rest would be read, checked and recorded every second
    for nothing (issue 41: a day's recording)."""
    with open("/proc/meminfo") as f:
        text = f.read()
    every = {line.split(":")[0]: int(line.split()[1]) for line in text.splitlines()
             if line.endswith(" kB")}
    kept = parse_meminfo(text)
    assert len(every) > 2 * len(MEMINFO_FIELDS)
    assert set(kept) == set(MEMINFO_FIELDS) <= set(every)
    # each as the file says it (the file moves between two reads: the total does not)
    assert kept["MemTotal"] == every["MemTotal"]
    view = host_view(HostRaw(meminfo_kb=kept), None, 1.0)
    shown = (view.mem_total_kb, view.mem_available_kb, view.cached_kb, view.buffers_kb,
             view.dirty_kb, view.writeback_kb)
    assert sorted(shown) == sorted(kept.values())      # every one kept is one shown


def test_fixture_unreadable_stat_is_na(tmp_path):
    roots = _host_tree(tmp_path)
    os.remove(os.path.join(roots.procfs, "stat"))
    raw = read_host(roots)
    assert raw.cpu is None and raw.ncpu == 1
    view = host_view(raw, raw, 1.0)
    assert all(getattr(view, f) is None for f in CPU_PCT_FIELDS)


def test_fixture_old_kernel_stat_pads_missing_fields(tmp_path):
    # 2.6.11 - 2.6.23: no guest, no guest_nice
    raw = read_host(_host_tree(tmp_path, stat="cpu  1 2 3 4 5 6 7 8\ncpu0 1 2 3 4 5 6 7 8\n"))
    assert raw.cpu == CpuTimes(1, 2, 3, 4, 5, 6, 7, 8, 0, 0)
    assert raw.ncpu == 1


def test_cpu_formula_is_iostat_avg_cpu():
    prev = HostRaw(cpu=CpuTimes(user=100, nice=0, system=50, idle=800, iowait=10, irq=5,
                                softirq=5, steal=0, guest=40, guest_nice=0))
    # +50 user (20 of them guest, already inside user), +10 nice, +20 system, +5 irq,
    # +5 softirq, +100 idle, +10 iowait: 200 ticks in all
    cur = HostRaw(cpu=CpuTimes(user=150, nice=10, system=70, idle=900, iowait=20, irq=10,
                               softirq=10, steal=0, guest=60, guest_nice=0))
    view = host_view(cur, prev, 1.0)
    assert view.cpu_user_pct == pytest.approx(25.0)
    assert view.cpu_nice_pct == pytest.approx(5.0)
    assert view.cpu_system_pct == pytest.approx(15.0)
    assert view.cpu_iowait_pct == pytest.approx(5.0)
    assert view.cpu_steal_pct == 0.0
    assert view.cpu_idle_pct == pytest.approx(50.0)


def test_cpu_counter_going_back_reads_zero():
    # dyn-tick kernels can move idle (or iowait) back by a tick: iostat shows 0, not < 0
    prev = HostRaw(cpu=CpuTimes(user=100, idle=1000, iowait=50))
    cur = HostRaw(cpu=CpuTimes(user=200, idle=999, iowait=49))
    view = host_view(cur, prev, 1.0)
    assert view.cpu_idle_pct == 0.0 and view.cpu_iowait_pct == 0.0
    assert view.cpu_user_pct > 0
    same = host_view(prev, prev, 1.0)  # no tick at all: itv is 1, every share 0
    assert all(getattr(same, f) == 0.0 for f in CPU_PCT_FIELDS)


# ---------------------------------------------------------------------------- cgroup fixtures
IO_STAT_1 = ("8:0 rbytes=1048576 wbytes=0 rios=10 wios=0 dbytes=0 dios=0\n"
             "253:0 rbytes=0 wbytes=4096 rios=0 wios=1 dbytes=0 dios=0\n")
IO_STAT_2 = ("8:0 rbytes=3145728 wbytes=1024 rios=30 wios=2 dbytes=0 dios=0\n"
             "253:0 rbytes=0 wbytes=0 rios=0 wios=0 dbytes=0 dios=0\n"
             "259:0 rbytes=512 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n")


def _cgroup_tree(tmp_path: Path, *, self_cgroup: str, mountinfo: str, group_dir: str,
                 io_stat: str | None, io_pressure: str | None = None) -> Roots:
    roots = _host_tree(tmp_path)
    proc, sys_ = Path(roots.procfs), Path(roots.sysfs)
    _write(proc, "self/cgroup", self_cgroup)
    _write(proc, "self/mountinfo", mountinfo)
    group = sys_ / group_dir
    group.mkdir(parents=True, exist_ok=True)
    if io_stat is not None:
        (group / "io.stat").write_text(io_stat)
    if io_pressure is not None:
        (group / "io.pressure").write_text(io_pressure)
    return roots


MOUNTINFO_V2 = ("22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
                "35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw\n")


def test_fixture_cgroup_io_stat_and_rates(tmp_path):
    kw = dict(self_cgroup="0::/user.slice/job.scope\n", mountinfo=MOUNTINFO_V2,
              group_dir="fs/cgroup/user.slice/job.scope")
    prev = read_host(_cgroup_tree(tmp_path / "a", io_stat=IO_STAT_1,
                                  io_pressure="some avg10=0 total=100\nfull avg10=0 total=0\n", **kw))
    cur = read_host(_cgroup_tree(tmp_path / "b", io_stat=IO_STAT_2,
                                 io_pressure="some avg10=0 total=200100\nfull avg10=0 total=100000\n", **kw))
    assert cur.cgroup == CgroupIo(
        path="/user.slice/job.scope",
        io_stat=parse_io_stat(IO_STAT_2),
        io_pressure=PsiTotals(200100, 100000))
    # the counters read, not the discards (nor iocost's cost.* keys)
    assert cur.cgroup.io_stat["8:0"] == {"rbytes": 3145728, "wbytes": 1024, "rios": 30,
                                         "wios": 2}
    view = host_view(cur, prev, 2.0)
    assert view.cgroup_path == "/user.slice/job.scope"
    assert view.cgroup_io["8:0"] == {"read_kb_s": 1024.0, "write_kb_s": 0.5, "r_s": 10.0, "w_s": 1.0}
    # a counter that went down (the group was recreated) is n/a, not negative
    assert view.cgroup_io["253:0"]["write_kb_s"] is None
    assert view.cgroup_io["253:0"]["r_s"] == 0.0
    assert "259:0" not in view.cgroup_io  # appeared: no previous counters
    assert view.cgroup_io_some_pct == pytest.approx(10.0)
    assert view.cgroup_io_full_pct == pytest.approx(5.0)
    doc = host_as_json(view)
    assert list(doc) == list(HOST_FIELDS)
    json.dumps(doc)


def test_a_cgroups_counters_are_kept_as_far_as_they_are_read(tmp_path):
    """A kernel's full io.stat line (iocost's cost.* keys moving every second) and cpu.stat
    give the host's cgroup the counters the model reads, and the view the same figures as
    from those alone: nothing else is kept to be recorded each second."""
    kw = dict(self_cgroup="0::/job.scope\n", mountinfo=MOUNTINFO_V2, group_dir="fs/cgroup/job.scope")
    cost = " cost.vrate=100.00 cost.usage=12345 cost.wait=678 cost.indebt=0 cost.indelay=0"
    lines = [IO_STAT_1.splitlines()[0] + cost + "\n", IO_STAT_2.splitlines()[0] + cost + "\n"]
    cpu = ["usage_usec {u}\nuser_usec {u}\nsystem_usec 9\nnice_usec 7\nnr_periods {p}\n"
           "nr_throttled 1\nthrottled_usec 5\nnr_bursts 0\nburst_usec 0\n"
           "core_sched.force_idle_usec 0\n".format(u=u, p=p) for u, p in ((1000, 10), (3000, 20))]
    raws = []
    for i in range(2):
        roots = _cgroup_tree(tmp_path / str(i), io_stat=lines[i], **kw)
        (Path(roots.sysfs) / kw["group_dir"] / "cpu.stat").write_text(cpu[i])
        raws.append(read_host(roots))
    for raw in raws:
        assert set(raw.cgroup.io_stat["8:0"]) == {"rbytes", "wbytes", "rios", "wios"}
        assert set(raw.cgroup.cpu_stat) == {"usage_usec", "nr_periods", "nr_throttled"}
    view = host_view(raws[1], raws[0], 2.0)
    assert view.cgroup_io["8:0"] == {"read_kb_s": 1024.0, "write_kb_s": 0.5, "r_s": 10.0, "w_s": 1.0}
    assert view.cgroup_cpu_used_cpus == pytest.approx(0.001)
    assert view.cgroup_throttled_pct == 0.0


def test_fixture_cgroup_in_container_mount_root(tmp_path):
    # Without a cgroup namespace, a container sees its own cgroup's subtree mounted at
    # /sys/fs/cgroup: mountinfo's root field is that cgroup, not "/".
    mountinfo = ("600 500 0:30 /system.slice/docker-abc.scope /sys/fs/cgroup ro,nosuid - "
                 "cgroup2 cgroup rw\n")
    roots = _cgroup_tree(tmp_path, self_cgroup="0::/system.slice/docker-abc.scope/worker\n",
                         mountinfo=mountinfo, group_dir="fs/cgroup/worker", io_stat=IO_STAT_1)
    cg = read_host(roots).cgroup
    assert cg is not None and cg.path == "/system.slice/docker-abc.scope/worker"
    assert cg.io_stat == parse_io_stat(IO_STAT_1)
    assert cg.io_pressure is None


def test_fixture_cgroup_namespace_root_with_io_stat(tmp_path):
    # With a cgroup namespace the container's cgroup reads as "/" and has io.stat
    roots = _cgroup_tree(tmp_path, self_cgroup="0::/\n", mountinfo=MOUNTINFO_V2,
                         group_dir="fs/cgroup", io_stat=IO_STAT_1)
    cg = read_host(roots).cgroup
    assert cg is not None and cg.path == "/" and "8:0" in cg.io_stat


def test_fixture_root_cgroup_without_io_stat_is_none(tmp_path):
    roots = _cgroup_tree(tmp_path, self_cgroup="12:blkio:/\n0::/\n", mountinfo=MOUNTINFO_V2,
                         group_dir="fs/cgroup", io_stat=None,
                         io_pressure="some avg10=0 total=1\nfull avg10=0 total=0\n")
    assert read_host(roots).cgroup is None


def test_fixture_hybrid_unified_mount_and_escaped_mountpoint(tmp_path):
    mountinfo = MOUNTINFO_V2.replace("/sys/fs/cgroup ", "/sys/fs/cgroup/uni\\040fied ")
    roots = _cgroup_tree(tmp_path, self_cgroup="0::/app\n", mountinfo=mountinfo,
                         group_dir="fs/cgroup/uni fied/app", io_stat=IO_STAT_1)
    cg = read_host(roots).cgroup
    assert cg is not None and cg.path == "/app" and cg.io_stat


def test_fixture_v1_only_host_has_no_cgroup(tmp_path):
    roots = _cgroup_tree(tmp_path, self_cgroup="12:blkio:/user.slice\n1:name=systemd:/\n",
                         mountinfo=MOUNTINFO_V2, group_dir="fs/cgroup/user.slice",
                         io_stat=IO_STAT_1)
    assert read_host(roots).cgroup is None


def test_fixture_cgroup_lookup_cached_then_refreshed(tmp_path):
    roots = _cgroup_tree(tmp_path, self_cgroup="0::/a\n", mountinfo=MOUNTINFO_V2,
                         group_dir="fs/cgroup/a", io_stat=IO_STAT_1)
    (Path(roots.sysfs) / "fs/cgroup/b").mkdir()
    (Path(roots.sysfs) / "fs/cgroup/b/io.stat").write_text(IO_STAT_2)
    assert read_host(roots).cgroup.path == "/a"
    _write(Path(roots.procfs), "self/cgroup", "0::/b\n")
    # within CGROUP_RESOLVE_S the lookup is not repeated, but io.stat is read every time
    (Path(roots.sysfs) / "fs/cgroup/a/io.stat").write_text(IO_STAT_2)
    cg = read_host(roots).cgroup
    assert cg.path == "/a" and "259:0" in cg.io_stat
    forget_cgroup_cache()
    assert read_host(roots).cgroup.path == "/b"


def test_host_view_without_prev_is_all_na_but_memory(tmp_path):
    raw = read_host(_host_tree(tmp_path, psi={"io": "some total=1\nfull total=1\n"}))
    view = host_view(raw, None, 1.0)
    doc = host_as_json(view)
    assert doc["mem_total_kb"] == 16000000 and doc["ncpu"] == 2
    for key in HOST_FIELDS:
        if key.endswith("_pct") or key == "cgroup_io":
            assert doc[key] is None, key
    assert host_view(raw, raw, 0.0).psi_io_some_pct is None  # no valid interval
    assert isinstance(HostView(), HostView)


def test_collectors_and_models_do_not_import_textual():
    code = ("import sys\n"
            "import gpudisk_top.collect.host, gpudisk_top.collect.pidmap\n"
            "import gpudisk_top.collect.procio, gpudisk_top.model.host, gpudisk_top.model.procs\n"
            "assert not [m for m in sys.modules if m.split('.')[0] == 'textual']\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_a_cgroups_cpu_quota_and_throttling_over_an_interval():
    """cpu.max and cpu.stat as the kernel writes them (Documentation/admin-guide/cgroup-v2.rst)."""
    from gpudisk_top.collect.host import parse_flat_keyed
    from gpudisk_top.model.host import cpu_limit

    assert cpu_limit("400000 100000") == 4.0 and cpu_limit("max 100000") is None
    assert cpu_limit(None) is None and cpu_limit("garbage") is None
    stat = ("usage_usec 1000000\nuser_usec 800000\nsystem_usec 200000\nnr_periods 100\n"
            "nr_throttled 10\nthrottled_usec 50000\nnr_bursts 0\nburst_usec 0\n")
    before = parse_flat_keyed(stat)
    assert before["nr_throttled"] == 10 and before["usage_usec"] == 1_000_000
    mem = parse_flat_keyed("anon 1\nfile 4096000\nfile_dirty 8192\nkernel x\n",
                           ("file", "file_dirty", "file_writeback"))
    assert mem == {"file": 4096000, "file_dirty": 8192}
    after = dict(before, usage_usec=4_900_000, nr_periods=110, nr_throttled=14)
    prev = HostRaw(cgroup=CgroupIo("/job", pid=7, cpu_stat=before, cpu_max="400000 100000",
                                   cpu_pressure=PsiTotals(0, 0), memory_stat=mem))
    cur = HostRaw(cgroup=CgroupIo("/job", pid=7, cpu_stat=after, cpu_max="400000 100000",
                                  cpu_pressure=PsiTotals(300_000, 100_000), memory_stat=mem))
    view = host_view(cur, prev, 1.0)
    assert view.cgroup_pid == 7 and view.cgroup_cpu_limit_cpus == 4.0
    assert view.cgroup_throttled_pct == pytest.approx(40.0)       # 4 of 10 periods
    assert view.cgroup_cpu_used_cpus == pytest.approx(3.9)
    assert view.cgroup_cpu_some_pct == pytest.approx(30.0)
    assert view.cgroup_page_cache_kb == 4000 and view.cgroup_dirty_kb == 8
    # a cgroup without the cpu controller (no nr_periods) says nothing of throttling
    bare = HostRaw(cgroup=CgroupIo("/job", cpu_stat={"usage_usec": 5}))
    assert host_view(bare, bare, 1.0).cgroup_throttled_pct is None
