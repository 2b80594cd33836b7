"""PidMapper on this machine's real /proc (the initial PID namespace), inside a real new
PID namespace (unshare), and on fixture procfs trees built in tmp_path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import sys
import textwrap
from pathlib import Path

import pytest

from gpudisk_top.collect.pidmap import PROC_PID_INIT_INO, PidMapper, parse_nspid
from gpudisk_top.collect.roots import Roots

REPO = Path(__file__).resolve().parent.parent
UNMAPPED = (None, None, None, None, False)


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


# ---------------------------------------------------------------------------- real /proc
def test_real_own_pid_is_identity_and_mapped():
    if os.readlink("/proc/self/ns/pid") != f"pid:[{PROC_PID_INIT_INO}]":
        pytest.skip("this test process is not in the initial PID namespace")
    mapper = PidMapper(Roots())
    pid = os.getpid()
    local, ns_pid, name, cmdline, mapped = mapper.resolve(pid)
    assert (local, ns_pid, mapped) == (pid, pid, True)
    assert name == _read(f"/proc/{pid}/comm").strip()
    assert cmdline == _read(f"/proc/{pid}/cmdline").replace("\0", " ").strip()
    assert mapper.host_namespace is True and mapper.reason is None


def test_real_child_process_and_exited_pid():
    if os.readlink("/proc/self/ns/pid") != f"pid:[{PROC_PID_INIT_INO}]":
        pytest.skip("this test process is not in the initial PID namespace")
    mapper = PidMapper(Roots())
    child = subprocess.Popen(["sleep", "30"])
    try:
        # Popen returns after fork; wait for the exec so comm and cmdline are sleep's
        deadline = time.monotonic() + 5
        while _read(f"/proc/{child.pid}/comm").strip() != "sleep" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert mapper.resolve(child.pid) == (child.pid, child.pid, "sleep", "sleep 30", True)
    finally:
        child.kill()
        child.wait()
    assert mapper.resolve(child.pid) == UNMAPPED  # exited and reaped
    assert mapper.resolve(0) == UNMAPPED and mapper.resolve(-5) == UNMAPPED


def test_real_resolved_process_is_kept_while_it_lives_and_re_read():
    """NVML lists the same processes every sample: the answer is kept (no file read), but
    a process that execs is renamed within refresh_s, and one that exits is gone at once."""
    if os.readlink("/proc/self/ns/pid") != f"pid:[{PROC_PID_INIT_INO}]":
        pytest.skip("this test process is not in the initial PID namespace")
    mapper = PidMapper(Roots(), refresh_s=0.5)
    child = subprocess.Popen(["sh", "-c", "read line; exec sleep 30"], stdin=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 5
        while _read(f"/proc/{child.pid}/comm").strip() != "sh" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert mapper.resolve(child.pid)[2] == "sh"
        child.stdin.write(b"go\n")
        child.stdin.flush()
        while _read(f"/proc/{child.pid}/comm").strip() != "sleep" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert mapper.resolve(child.pid)[2] == "sh"          # kept: not re-read yet
        time.sleep(0.6)
        assert mapper.resolve(child.pid)[2:4] == ("sleep", "sleep 30")
    finally:
        child.kill()
        child.wait()
    assert mapper.resolve(child.pid) == UNMAPPED
    mapper.close()


UNSHARED = textwrap.dedent("""
    import json, sys
    from gpudisk_top.collect.pidmap import PidMapper
    from gpudisk_top.collect.roots import Roots
    mapper = PidMapper(Roots())
    print(json.dumps({"host": mapper.host_namespace, "reason": mapper.reason,
                      "resolved": mapper.resolve(int(sys.argv[1])),
                      "own": mapper.resolve(1)}))
""")


@pytest.mark.root(reason="unshare --pid needs root")
def test_real_private_pid_namespace_does_not_map_host_pids():
    """In a new PID namespace with its own /proc (what a container has), host PIDs
    name nothing: even PID 1 there is not the host's PID 1."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    host_pid = os.getpid()
    out = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", UNSHARED,
         str(host_pid)],
        cwd=REPO, capture_output=True, text=True, timeout=60)
    if out.returncode != 0 and "unshare" in out.stderr:
        pytest.skip(f"unshare is not permitted here: {out.stderr.strip()}")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["host"] is False
    assert "container" in doc["reason"]
    assert tuple(doc["resolved"]) == UNMAPPED
    assert tuple(doc["own"]) == UNMAPPED


# ---------------------------------------------------------------------------- fixtures
def _proc(tmp_path: Path, *, ns_link: str | None, self_status: str | None = None,
          self_ns_link: str | None = None) -> Path:
    proc = tmp_path / "proc"
    (proc / "1" / "ns").mkdir(parents=True)
    if ns_link is not None:
        os.symlink(ns_link, proc / "1" / "ns" / "pid")
    if self_status is not None or self_ns_link is not None:
        (proc / "self" / "ns").mkdir(parents=True)
        if self_status is not None:
            (proc / "self" / "status").write_text(self_status)
        if self_ns_link is not None:
            os.symlink(self_ns_link, proc / "self" / "ns" / "pid")
    return proc


def _process(proc: Path, pid: int, *, nspid: str, comm: str, cmdline: bytes) -> None:
    d = proc / str(pid)
    d.mkdir(parents=True, exist_ok=True)
    (d / "status").write_text(f"Name:\t{comm}\nTgid:\t{pid}\nPid:\t{pid}\nNSpid:\t{nspid}\n")
    (d / "comm").write_text(comm + "\n")
    (d / "cmdline").write_bytes(cmdline)


def test_fixture_non_init_namespace_is_unmapped(tmp_path):
    proc = _proc(tmp_path, ns_link="pid:[4026532000]")
    # the procfs has a process 1234, but its PID 1234 is the container's, not the host's
    _process(proc, 1234, nspid="1234", comm="python", cmdline=b"python\0train.py\0")
    mapper = PidMapper(Roots(procfs=str(proc)))
    assert mapper.resolve(1234) == UNMAPPED
    assert mapper.resolve(1) == UNMAPPED
    assert mapper.host_namespace is False


def test_fixture_init_namespace_maps_with_container_pid(tmp_path):
    proc = _proc(tmp_path, ns_link=f"pid:[{PROC_PID_INIT_INO}]")
    # a containerised trainer: host PID 4242, PID 7 in its own namespace
    _process(proc, 4242, nspid="4242\t7", comm="pt_main_thread",
             cmdline=b"python\0-m\0torch.distributed.run\0\0")
    mapper = PidMapper(Roots(procfs=str(proc)))
    assert mapper.resolve(4242) == (4242, 7, "pt_main_thread", "python -m torch.distributed.run", True)
    assert mapper.resolve(4243) == UNMAPPED


def test_fixture_unreadable_fields_are_none(tmp_path):
    proc = _proc(tmp_path, ns_link=f"pid:[{PROC_PID_INIT_INO}]")
    (proc / "77").mkdir()  # a process whose status, comm and cmdline cannot be read
    (proc / "78").mkdir()
    (proc / "78" / "status").write_text("Name:\tzombie\n")  # pre-4.1 kernel: no NSpid
    (proc / "78" / "cmdline").write_bytes(b"")              # zombie / kernel thread
    mapper = PidMapper(Roots(procfs=str(proc)))
    assert mapper.resolve(77) == (77, None, None, None, True)
    assert mapper.resolve(78) == (78, None, None, None, True)


def test_fixture_fallback_to_self_when_pid1_unreadable(tmp_path):
    # a non-root reader cannot follow /proc/1/ns/pid; our own link names the procfs's
    # namespace when our NSpid has a single entry
    proc = _proc(tmp_path, ns_link=None, self_status="NSpid:\t999\n",
                 self_ns_link=f"pid:[{PROC_PID_INIT_INO}]")
    _process(proc, 999, nspid="999", comm="me", cmdline=b"me\0")
    assert PidMapper(Roots(procfs=str(proc))).resolve(999) == (999, 999, "me", "me", True)

    proc2 = _proc(tmp_path / "c", ns_link=None, self_status="NSpid:\t5\n",
                  self_ns_link="pid:[4026532111]")
    assert PidMapper(Roots(procfs=str(proc2))).host_namespace is False


def test_fixture_undecidable_namespace_is_unmapped(tmp_path):
    # NSpid with two entries: the procfs belongs to an ancestor namespace whose inode we
    # cannot read, so it may or may not be the host's
    proc = _proc(tmp_path, ns_link=None, self_status="NSpid:\t3000\t12\n",
                 self_ns_link="pid:[4026532111]")
    _process(proc, 3000, nspid="3000\t12", comm="me", cmdline=b"me\0")
    mapper = PidMapper(Roots(procfs=str(proc)))
    assert mapper.host_namespace is None
    assert "cannot tell" in mapper.reason
    assert mapper.resolve(3000) == UNMAPPED


def test_fixture_missing_procfs_never_raises(tmp_path):
    mapper = PidMapper(Roots(procfs=str(tmp_path / "nothing")))
    assert mapper.resolve(1) == UNMAPPED
    assert mapper.host_namespace is None


def test_parse_nspid():
    assert parse_nspid("Name:\tx\nNSpid:\t10\t3\t1\n") == [10, 3, 1]
    assert parse_nspid("Name:\tx\n") is None
    assert parse_nspid("NSpid:\tgarbled\n") is None
