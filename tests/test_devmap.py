"""GPU processes found by the device files they hold open (collect/devmap.py), with real
processes and the real /proc: their fd links and maps are what is read.  The device files
are stand-ins in a temporary directory (a /dev/nvidiaN node cannot be opened here without
the driver)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from proctree import children, kill

from gpudisk_top.collect import devmap
from gpudisk_top.collect.roots import Roots
from gpudisk_top.collect.sample import (MAPPED_BY_DEVICE_FILE, GpuProcessRaw, GpuRaw,
                                        GpuSnapshot)

HOLDER = textwrap.dedent("""
    import mmap, os, sys, time
    files, map_mib, fork = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[3] == "fork"
    fds = [os.open(f, os.O_RDWR) for f in files]
    m = mmap.mmap(fds[0], map_mib << 20, mmap.MAP_SHARED, mmap.PROT_READ) if map_mib else None
    if fork and os.fork() == 0:          # a DataLoader worker: inherits the descriptors
        time.sleep(60)
        os._exit(0)
    print("ready", flush=True)
    time.sleep(60)
""")


@pytest.fixture
def dev_dir(tmp_path, monkeypatch):
    for name in ("nvidia0", "nvidia1", "nvidiactl"):
        with open(tmp_path / name, "wb") as f:
            f.truncate(128 << 20)
    monkeypatch.setattr(devmap, "DEV_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def holders():
    started = []

    def start(*files, map_mib: int = 0, fork: bool = False) -> int:
        p = subprocess.Popen([sys.executable, "-c", HOLDER, ",".join(map(str, files)),
                              str(map_mib), "fork" if fork else "no"],
                             stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "ready"
        started.append(p)
        return p.pid

    yield start
    for p in started:
        workers = children(p.pid)     # before the kill: then they are orphans of init
        p.kill()
        p.wait()
        for child in workers:
            kill(child)



def snapshot(*gpus: list[tuple[int, int | None]]) -> GpuSnapshot:
    """GPUs 0, 1, ... (minor numbers = indexes) with NVML's entries (host PID, used bytes)
    that no PID resolved: what a container's own PID namespace gives."""
    return GpuSnapshot(status="ok", gpus=[
        GpuRaw(index=i, minor_number=i, processes=[
            GpuProcessRaw(pid=pid, used_gpu_mem_bytes=used, mapped=False) for pid, used in entries])
        for i, entries in enumerate(gpus)])


def test_the_one_holder_is_the_process_and_its_forked_workers_are_not(dev_dir, holders):
    trainer = holders(dev_dir / "nvidia0", dev_dir / "nvidiactl", map_mib=16, fork=True)
    assert children(trainer), "the worker was not forked"
    snap = snapshot([(4_000_001, 2 << 30)])
    warnings = devmap.DeviceFileMapper(Roots()).apply(snap)
    p = snap.gpus[0].processes[0]
    assert warnings == []
    assert p.mapped and p.mapped_by == MAPPED_BY_DEVICE_FILE
    assert p.pid == 4_000_001                       # NVML's (host) PID is kept
    assert p.local_pid == trainer and p.ns_pid == trainer
    assert p.name == "python3" or p.name.startswith("python")
    assert "import mmap" in p.cmdline


def test_two_unrelated_holders_for_one_entry_are_reported_not_guessed(dev_dir, holders):
    a = holders(dev_dir / "nvidia0")
    b = holders(dev_dir / "nvidia0")
    snap = snapshot([(4_000_001, 2 << 30)])
    warnings = devmap.DeviceFileMapper(Roots()).apply(snap)
    assert not snap.gpus[0].processes[0].mapped
    assert snap.gpus[0].processes[0].local_pid is None
    assert len(warnings) == 1 and "not matched" in warnings[0]
    assert str(a) in warnings[0] and str(b) in warnings[0] and "GPU 0" in warnings[0]


def test_several_holders_are_matched_by_gpu_memory_when_the_orders_are_strict(dev_dir, holders):
    small = holders(dev_dir / "nvidia0", map_mib=16)
    big = holders(dev_dir / "nvidia0", map_mib=64)
    snap = snapshot([(4_000_001, 30 << 30), (4_000_002, 1 << 30)])
    assert devmap.DeviceFileMapper(Roots()).apply(snap) == []
    by_pid = {p.pid: p.local_pid for p in snap.gpus[0].processes}
    assert by_pid == {4_000_001: big, 4_000_002: small}


def test_holders_that_map_the_same_cannot_be_told_apart(dev_dir, holders):
    holders(dev_dir / "nvidia0", map_mib=16)
    holders(dev_dir / "nvidia0", map_mib=16)
    snap = snapshot([(4_000_001, 30 << 30), (4_000_002, 1 << 30)])
    warnings = devmap.DeviceFileMapper(Roots()).apply(snap)
    assert not any(p.mapped for p in snap.gpus[0].processes)
    assert "not matched" in warnings[0]


def test_each_gpu_is_matched_by_its_own_minor_number(dev_dir, holders):
    on0 = holders(dev_dir / "nvidia0")
    on1 = holders(dev_dir / "nvidia1")
    snap = snapshot([(4_000_001, 1 << 30)], [(4_000_002, 1 << 30)])
    assert devmap.DeviceFileMapper(Roots()).apply(snap) == []
    assert snap.gpus[0].processes[0].local_pid == on0
    assert snap.gpus[1].processes[0].local_pid == on1


def test_without_a_holder_of_the_gpu_file_the_control_file_is_the_fallback(dev_dir, holders):
    ctl = holders(dev_dir / "nvidiactl")
    snap = snapshot([], [(4_000_002, 1 << 30)])
    assert devmap.DeviceFileMapper(Roots()).apply(snap) == []
    assert snap.gpus[1].processes[0].local_pid == ctl


def test_nothing_is_scanned_when_every_process_is_mapped(dev_dir, holders, monkeypatch):
    holders(dev_dir / "nvidia0")
    snap = snapshot([(os.getpid(), 1 << 30)])
    snap.gpus[0].processes[0].mapped = True
    mapper = devmap.DeviceFileMapper(Roots())
    monkeypatch.setattr(mapper, "_scan", lambda: pytest.fail("scanned /proc"))
    assert mapper.apply(snap) == []


def test_the_monitor_holding_the_files_itself_is_never_the_job(dev_dir, holders):
    """NVML holds /dev/nvidiactl and the GPUs' files open in our own process once
    initialised (issue 38): the job beside it is still the one holder, and with no job
    holding them we are not taken for it."""
    ours = [os.open(dev_dir / name, os.O_RDONLY) for name in ("nvidia0", "nvidiactl")]
    try:
        alone = snapshot([(4_000_001, 2 << 30)])
        devmap.DeviceFileMapper(Roots()).apply(alone)
        assert not alone.gpus[0].processes[0].mapped        # never ourselves
        trainer = holders(dev_dir / "nvidia0", dev_dir / "nvidiactl")
        snap = snapshot([(4_000_001, 2 << 30)])
        warnings = devmap.DeviceFileMapper(Roots()).apply(snap)
        assert warnings == [] and snap.gpus[0].processes[0].local_pid == trainer
    finally:
        for fd in ours:
            os.close(fd)


@pytest.mark.root
def test_a_process_it_may_not_read_forbids_a_match(dev_dir, holders):
    """Not root: another user's process may be the job, so the one holder we can read is
    not taken for it; the warning says why."""
    trainer = holders(dev_dir / "nvidia0")          # root's: unreadable to nobody
    os.chmod(dev_dir, 0o755)
    code = textwrap.dedent(f"""
        import json, os
        os.setgid(65534); os.setuid(65534)
        from gpudisk_top.collect import devmap
        from gpudisk_top.collect.roots import Roots
        from gpudisk_top.collect.sample import GpuProcessRaw, GpuRaw, GpuSnapshot
        devmap.DEV_DIR = {str(dev_dir)!r}
        snap = GpuSnapshot(status="ok", gpus=[GpuRaw(index=0, minor_number=0, processes=[
            GpuProcessRaw(pid=4000001, used_gpu_mem_bytes=1 << 30, mapped=False)])])
        w = devmap.DeviceFileMapper(Roots()).apply(snap)
        print(json.dumps([snap.gpus[0].processes[0].local_pid, w]))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=os.getcwd()))
    assert out.returncode == 0, out.stderr
    import json
    local, warnings = json.loads(out.stdout)
    assert local is None and trainer
    assert len(warnings) == 1 and "cannot be read (not root): not matched" in warnings[0]
