"""One job's process in a cgroup of its own, made for a test and removed after it: the
cgroup of a path a scheduler uses (tests/cgjobs.py has the layouts), entered by the process
before it execs the job, so that every child it makes is born inside.

What it owns: which hierarchies a tree is (`hierarchies`: cgroup v2 where the host has a
v2 tree, found as the product finds it, cgscan.cgroup2_root; the v1 hierarchies of
V1_HIERARCHIES on a v1 or hybrid host), making and removing the directories (shared
ancestors such as system.slice are counted in a registry all the harness's tests share,
under a lock, so that concurrent tests remove only what no other still uses), and killing
a job's processes: only those positively ours, each held by a pidfd and checked to be in
the cgroup (which this harness made, and which did not exist before) before a signal.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from typing import Iterator, Mapping

from gpudisk_top.collect.cgscan import cgroup2_root
from gpudisk_top.collect.roots import Roots
from slack import slack

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
V1_ROOT = "/sys/fs/cgroup"
V1_HIERARCHIES = ("systemd", "cpu", "freezer")     # under V1_ROOT; never memory or cpuset
# what a job would otherwise inherit from the test's own environment
SCHEDULER_VARS = ("SLURM_", "TORCHELASTIC_", "KUBERNETES_", "RANK", "LOCAL_RANK", "WORLD_SIZE",
                  "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
                  "CUDA_VISIBLE_DEVICES")
# the harness's own record of the cgroup directories it made, shared by concurrent tests:
# an ancestor one test made (system.slice) may still hold another's job when it ends
_REGISTRY = os.path.join(tempfile.gettempdir(), "gdt-cgjobs.dirs")


class CgroupUnavailable(Exception):
    """No cgroup of the asked layout can be made here (no such tree, read-only, not root)."""


def hierarchies(tree: str) -> list[str]:
    """The mount points `tree` ("v2", "v1", "both") makes a job's cgroup in, on this host.
    Raises CgroupUnavailable where there is none."""
    if tree not in ("v2", "v1", "both"):
        raise ValueError(f"tree is v2, v1 or both, not {tree!r}")
    found = []
    if tree in ("v2", "both"):
        v2 = cgroup2_root(Roots())
        if v2 is None:
            raise CgroupUnavailable("no cgroup v2 tree here")
        found.append(v2)
    if tree in ("v1", "both"):
        v1 = [os.path.join(V1_ROOT, h) for h in V1_HIERARCHIES
              if os.path.exists(os.path.join(V1_ROOT, h, "tasks"))]
        if not v1:
            raise CgroupUnavailable(f"no cgroup v1 hierarchy of {', '.join(V1_HIERARCHIES)} here")
        found += v1
    return found


def skip_unless_cgroups(tree: str = "v2") -> None:
    """pytest.skip where no job cgroup of `tree` can be made and entered here (not root, no
    such tree, a read-only or delegated-away one): tried once a process and tree."""
    import pytest

    if os.geteuid() != 0:
        pytest.skip("making cgroups needs root")
    why = _unavailable(tree)
    if why:
        pytest.skip(why)


@functools.lru_cache(maxsize=None)
def _unavailable(tree: str) -> str:
    """Why a job cgroup of `tree` cannot be made and entered here; "" where it can (a
    process that does nothing started in a cgroup of its own, then all of it removed)."""
    try:
        with CgJob(f"gdt-probe-{os.getpid()}", [sys.executable, "-c", "pass"], tree=tree):
            pass
    except (CgroupUnavailable, OSError) as err:
        return str(err)
    return ""


@contextmanager
def _registry() -> Iterator[set[str]]:
    """The harness's made-and-not-yet-removed cgroup directories, locked for the block."""
    fd = os.open(_REGISTRY, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with os.fdopen(os.dup(fd), "r+") as f:
            made = {line.strip() for line in f if line.strip()}
            try:
                yield made
            finally:
                f.seek(0)
                f.truncate()
                f.write("".join(f"{d}\n" for d in sorted(made)))
    finally:
        os.close(fd)


# enters the cgroups (argv[1]: their cgroup.procs files, JSON), then execs the job: the job's
# first instruction already runs inside, so every child it makes is born there
_ENTER = r'''
import json, os, sys
for procs in json.loads(sys.argv[1]):
    try:
        with open(procs, "w") as f:
            f.write(str(os.getpid()))
    except OSError as err:
        sys.stderr.write(f"cgjobs: cannot enter {procs}: {err}\n")
        os._exit(126)
os.execv(sys.argv[2], sys.argv[2:])
'''


class CgJob:
    """A job's process started in the cgroup `path` of `tree` (module docstring), as a
    context manager: entered, the cgroup exists and the process runs inside it (`pid`);
    left (or `stop()`), every process of the cgroup is killed and the cgroup removed.

    argv[0] must be an executable path (sys.executable for a script).  env: added to the
    test's environment, from which the scheduler variables are first removed.
    Raises CgroupUnavailable where the cgroup cannot be made or entered here, FileExistsError
    where `path` exists already (another job's), TimeoutError where the process does not
    show in the cgroup in time."""

    def __init__(self, path: str, argv: list[str], *, tree: str = "v2",
                 env: Mapping[str, str] | None = None, cwd: str = ROOT, stdout=None,
                 stderr=None) -> None:
        if not path or path.startswith("/") or ".." in path.split("/"):
            raise ValueError(f"a cgroup path relative to the hierarchy's root, not {path!r}")
        self.path, self.argv, self.tree = path, list(argv), tree
        base = {k: v for k, v in os.environ.items() if not k.startswith(SCHEDULER_VARS)}
        self.env = dict(base, **(env or {}))
        self.cwd, self.stdout, self.stderr = cwd, stdout, stderr
        self.mounts: list[str] = []       # the hierarchies it is made in
        self.dirs: list[str] = []         # the job's cgroup in each of them
        self.proc: subprocess.Popen | None = None

    @property
    def cgroup(self) -> str:
        """The path as /proc/PID/cgroup shows it."""
        return "/" + self.path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def __enter__(self) -> "CgJob":
        self._make()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _ENTER,
                 json.dumps([os.path.join(d, "cgroup.procs") for d in self.dirs]), *self.argv],
                env=self.env, cwd=self.cwd, stdout=self.stdout, stderr=self.stderr)
            self._wait_inside()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _make(self) -> None:
        # one each: on a v1 host cpu may be a link to the cpu,cpuacct hierarchy
        self.mounts = list(dict.fromkeys(os.path.realpath(m) for m in hierarchies(self.tree)))
        with _registry() as made:
            for mount in self.mounts:
                leaf = os.path.join(mount, self.path)
                if os.path.exists(leaf):
                    raise FileExistsError(errno.EEXIST, "a cgroup of another job", leaf)
            for mount in self.mounts:
                leaf = os.path.join(mount, self.path)
                parts = self.path.split("/")
                for depth in range(1, len(parts) + 1):
                    d = os.path.join(mount, *parts[:depth])
                    try:
                        os.mkdir(d)
                    except FileExistsError:
                        continue
                    except OSError as err:
                        self._remove(made)
                        raise CgroupUnavailable(f"cannot make {d}: {err.strerror}") from err
                    made.add(d)
                self.dirs.append(leaf)

    def _wait_inside(self) -> None:
        deadline = time.monotonic() + 10 * slack()
        while not self.is_member(self.proc.pid):
            code = self.proc.poll()
            if code == 126:
                raise CgroupUnavailable(f"cannot enter {self.cgroup}")
            if code is not None:
                return          # the job ended already (it ran inside: it wrote no error)
            if time.monotonic() > deadline:
                raise TimeoutError(f"pid {self.proc.pid} did not enter {self.cgroup}")
            time.sleep(0.01)

    def is_member(self, pid: int) -> bool:
        """Whether `pid` is in this job's cgroup in every hierarchy it has one in."""
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                paths = [line.rstrip("\n").split(":", 2)[2] for line in f if line.count(":") >= 2]
        except OSError:
            return False
        return paths.count(self.cgroup) >= len(self.dirs) > 0

    def pids(self) -> list[int]:
        """The processes in the job's cgroup now (every hierarchy's, once each)."""
        found: set[int] = set()
        for d in self.dirs:
            try:
                with open(os.path.join(d, "cgroup.procs")) as f:
                    found.update(int(p) for p in f.read().split())
            except (OSError, ValueError):
                pass
        return sorted(found)

    def signal(self, sig: int) -> int:
        """Send `sig` to every process of the job's cgroup: each one held by a pidfd, then
        checked to be in the cgroup, so a PID reused meanwhile is never signalled.  Returns
        how many were signalled."""
        sent = 0
        for pid in self.pids():
            try:
                fd = os.pidfd_open(pid)
            except OSError:
                continue                    # gone already
            try:
                if self.is_member(pid):
                    signal.pidfd_send_signal(fd, sig)
                    sent += 1
            except ProcessLookupError:
                pass
            finally:
                os.close(fd)
        return sent

    def stop(self) -> None:
        """Kill the job's processes (ours: the PID it spawned, and what its cgroup holds) and
        remove the cgroups this harness made.  Raises TimeoutError where they outlive it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait(30)
        deadline = time.monotonic() + 20 * slack()
        while self.dirs and self.signal(signal.SIGKILL) + len(self.pids()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.cgroup} still holds {self.pids()}")
            time.sleep(0.02)
        with _registry() as made:
            self._remove(made)

    def _remove(self, made: set[str]) -> None:
        """rmdir, from the leaf up, every directory of the path the harness made (by this
        job or another, since gone); stop at the first that is still in use."""
        parts = self.path.split("/")
        for mount in self.mounts:
            for depth in range(len(parts), 0, -1):
                d = os.path.join(mount, *parts[:depth])
                if d not in made:
                    break
                for _ in range(50):            # a killed process leaves its cgroup in a moment
                    try:
                        os.rmdir(d)
                        made.discard(d)
                        break
                    except FileNotFoundError:
                        made.discard(d)
                        break
                    except OSError as err:
                        if err.errno != errno.EBUSY or depth < len(parts):
                            break
                        time.sleep(0.02)
                if d in made:
                    break
        self.dirs = []
