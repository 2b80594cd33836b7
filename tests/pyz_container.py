"""A running "container" for the one file's recipe tests (tests/test_pyz_recipes.py), made
of what a container is to the kernel, with no container engine (none runs here): a
process in new mount, PID and UTS namespaces whose root is a filesystem of its own.

That root is a tmpfs, pivoted into and then made read-only: the host's /usr bound
read-only (with bin, lib, lib64, sbin linked into it, as Debian lays them out), a few
files of /etc copied, the pyenv Pythons asked for bound read-only at their own paths
(as an image would carry one), /dev holding only null, zero, random, urandom, tty and
the host's pts, its own /proc for its own PID namespace, its own empty /tmp mounted
noexec, and no /sys (as many containers have none).  Nothing of this checkout and no
site-packages of ours is in it.  Its PID 1 is the "job" (`sleep`), run as root.

`share_pid_with`: the debug container of `kubectl debug --target`: it joins that
container's PID namespace (sees the job's processes) with a mount namespace and root of
its own.

    with Container(tmp_path, pythons=["/root/.pyenv/versions/3.12.1"]) as job:
        shutil.copyfile(pyz, job.path("/tmp/gpudisk-top.pyz"))      # docker cp
        job.exec(["python3", "/tmp/gpudisk-top.pyz", "--once"])       # docker exec
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

NOBODY = 65534
ETC_FILES = ("passwd", "group", "ld.so.cache", "nsswitch.conf", "os-release")


def _setup_script(root: Path, pythons: list[str], hostname: str) -> str:
    binds = "".join(f'mkdir -p "$R{p}" && mount --bind "{p}" "$R{p}" && '
                    f'mount -o remount,bind,ro "$R{p}"\n' for p in pythons)
    etc = " ".join(f'"/etc/{name}"' for name in ETC_FILES if os.path.exists(f"/etc/{name}"))
    devs = "".join(f'touch "$R/dev/{d}" && mount --bind "/dev/{d}" "$R/dev/{d}"\n'
                   for d in ("null", "zero", "random", "urandom", "tty"))
    return f'''set -e
R={shlex.quote(str(root))}
mount -t tmpfs -o size=16m,mode=755 tmpfs "$R"
mkdir -p "$R/usr" "$R/etc" "$R/tmp" "$R/proc" "$R/dev/pts" "$R/old"
ln -s usr/bin "$R/bin"; ln -s usr/lib "$R/lib"; ln -s usr/sbin "$R/sbin"
[ -e /usr/lib64 ] && ln -s usr/lib64 "$R/lib64"
mount --rbind /usr "$R/usr" && mount -o remount,bind,ro "$R/usr"
cp {etc} "$R/etc/"
{binds}{devs}mount --bind /dev/pts "$R/dev/pts"
mount -t proc proc "$R/proc"
mount -t tmpfs -o noexec,nosuid,nodev,mode=1777,size=64m tmpfs "$R/tmp"
hostname {shlex.quote(hostname)}
cd "$R" && pivot_root . old && umount -l /old && rmdir /old
mount -o remount,bind,ro /
echo ready
exec sleep 100000
'''


class Container:
    """The container's PID 1 (as the host sees it) is `pid`; `exec` is `docker exec`.
    Raises RuntimeError where the container cannot be made (its setup's stderr)."""

    def __init__(self, tmp_path: Path, pythons: list[str] = (), name: str = "job",
                 share_pid_with: int | None = None) -> None:
        self.root = tmp_path / f"{name}-root"
        self.root.mkdir()
        script = _setup_script(self.root, list(pythons), f"{name}-container")
        if share_pid_with is None:
            argv = ["unshare", "-m", "-u", "-p", "-f", "--propagation", "private"]
        else:
            # a debug container: the target's PID namespace, a mount and UTS namespace of
            # its own (unshare -m -u after entering the PID namespace; the fork that
            # joins it is nsenter's)
            argv = ["nsenter", "-t", str(share_pid_with), "-p", "--",
                    "unshare", "-m", "-u", "--propagation", "private"]
        self._proc = subprocess.Popen([*argv, "sh", "-c", script], stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self._proc.stdout.readline()
        if line != "ready\n":
            self._proc.kill()
            raise RuntimeError(f"the container was not made: {self._proc.stderr.read()}")
        self.pid = self._pid_one()

    def _pid_one(self) -> int:
        """The `sleep` the setup script became: the newest descendant of what we started."""
        pid = self._proc.pid
        while True:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                children = f.read().split()
            if not children:
                return pid
            pid = int(children[-1])

    def path(self, inside: str) -> Path:
        """Where a path inside the container is from the host (docker cp writes there)."""
        return Path(f"/proc/{self.pid}/root") / inside.lstrip("/")

    def exec_argv(self, argv: list[str], user: int | None = NOBODY,
                  env: dict[str, str] | None = None) -> list[str]:
        """`docker exec [-u USER]`: the container's namespaces, its root as / and cwd,
        a fresh environment, as `user` (None: root)."""
        as_user = ([] if user is None else
                   ["setpriv", "--reuid", str(user), "--regid", str(user), "--clear-groups"])
        full_env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/", "LANG": "C.UTF-8",
                    **(env or {})}
        return ["nsenter", "-t", str(self.pid), "-m", "-p", "-u", "--", *as_user,
                "env", "-i", *(f"{k}={v}" for k, v in full_env.items()), *argv]

    def exec(self, argv: list[str], user: int | None = NOBODY, env: dict[str, str] | None = None,
             timeout: float = 120, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(self.exec_argv(argv, user, env), capture_output=True, text=True,
                              timeout=timeout, **kw)

    def close(self) -> None:
        self._proc.kill()   # unshare/nsenter: its child, PID 1 of the namespace, goes with it
        try:
            os.kill(self.pid, 9)
        except ProcessLookupError:
            pass
        self._proc.wait(timeout=30)
        self._proc.stdout.close()
        self._proc.stderr.close()

    def __enter__(self) -> "Container":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
