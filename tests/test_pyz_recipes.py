"""docs/containers.md's recipes for the one file, each done as such, with what this
machine has in place of a container engine and a cluster (tests/pyz_container.py: a
process in its own mount, PID and UTS namespaces, with a read-only root of its own, a
noexec /tmp, no /sys and no package of ours):

- `docker cp` + `docker exec -it`: the zip written into the running container's root
  from outside (`/proc/PID/root/tmp/`), then run inside it by entering its namespaces as
  user nobody (`nsenter -t PID -m -p -u` + `setpriv`), with each CPython 3.10-3.13 here:
  `--once --json`, and the dashboard under tmux;
- `kubectl cp`: a tar stream untarred inside (`tar cf - | ... tar xmf - -C /tmp`, what
  kubectl cp runs), and the no-tar pipe (`sh -c 'cat > /tmp/gpudisk-top.pyz'`);
- `kubectl debug --target`: a second container in the first one's PID namespace with a
  mount namespace and root of its own, holding the zip.

What each says it cannot see (no /sys, the container's PID namespace, not root) is checked
against what that container lacks.  The PID namespace is said only where there are GPUs:
for it, the zip's own modules run with a stand-in GPU (tests/standin.py) listing the
job's host PID, as NVML would."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest

import pyz_build
import standin
from pythons import ENDS, PYENV, python_for
from pyz_container import NOBODY, Container

IN_CONTAINER = "/tmp/gpudisk-top.pyz"
NEEDS = ("unshare", "nsenter", "setpriv", "pivot_root", "tar", "sha256sum")

NO_SYSFS = "no /sys/block: device classes"
NOT_ROOT = "not root: other users' processes' I/O counters"
PID_NS = "/proc belongs to a container's PID namespace: NVML's host PIDs name nothing here"

pytestmark = pytest.mark.root(reason="namespaces, mounts and running as nobody need root")


@pytest.fixture(scope="module")
def pyz() -> Path:
    missing = [tool for tool in NEEDS if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"no {', '.join(missing)} on this machine: cannot make a container")
    return pyz_build.built()[0]


def _in_image(python: str) -> list[str]:
    """What the container's image must carry for `python` to run: its pyenv prefix
    (a system python3.X is under /usr, which every container here has)."""
    prefix = Path(python).resolve().parent.parent
    return [str(prefix)] if prefix.is_relative_to(PYENV) else []


def _sha256_line(pyz: Path) -> str:
    return (pyz.parent / "gpudisk-top.pyz.sha256").read_text().split()[0]


def _standin(where: Container, argv: list[str], python: str = "python3",
             job: Container | None = None) -> list[str]:
    """The zip's own modules (from the copy in the container `where`, through zipimport)
    with a stand-in GPU whose one process is `job`'s PID 1 (`where`'s by default), by its
    host PID as NVML gives it."""
    cmd, env = standin.command(argv, gpus=1, processes={0: [(job or where).pid]})
    return where.exec_argv([python, "-c", cmd[2]], env={
        "PYTHONPATH": f"{IN_CONTAINER}/lib", "GDT_STANDIN": env["GDT_STANDIN"],
        "TERM": "xterm-256color"})


def _what_the_container_lacks(job: Container) -> None:
    """The three things the zip is to say it cannot see, and the rest of what makes it a
    container: checked from inside, as nobody, so that a flag is never asserted of a
    container that has what the flag says is missing."""
    probe = job.exec(["sh", "-c", "id -u; hostname; test -e /sys && echo has-sys; "
                      "grep ' / / ' /proc/self/mountinfo; grep ' /tmp ' /proc/self/mountinfo; "
                      "readlink /proc/self/ns/pid; touch /w 2>&1; ls /tmp"])
    uid, hostname, root_mount, tmp_mount, pid_ns, touched, *listing = probe.stdout.splitlines()
    assert uid == str(NOBODY) and hostname == "job-container", probe
    assert "has-sys" not in probe.stdout                        # no /sys
    assert pid_ns != os.readlink("/proc/self/ns/pid")           # its own PID namespace
    assert root_mount.split()[5].startswith("ro,") and "Read-only file system" in touched
    assert "noexec" in tmp_mount.split()[5]
    assert listing == ["gpudisk-top.pyz"]


@pytest.mark.parametrize("version", ENDS)
def test_docker_cp_then_docker_exec_once_json(pyz, tmp_path, version):
    """`docker cp dist/gpudisk-top.pyz JOB:/tmp/` then `docker exec JOB python3
    /tmp/gpudisk-top.pyz --once --json`, as nobody, with CPython `version` in the image."""
    python = str(Path(python_for(version)).resolve())   # a venv's python: its base
    with Container(tmp_path, pythons=_in_image(python)) as job:
        shutil.copyfile(pyz, job.path(IN_CONTAINER))                # docker cp
        _what_the_container_lacks(job)
        assert job.exec([python, "-c", "import gpudisk_top"]).returncode == 1   # not ours
        proc = job.exec([python, IN_CONTAINER, "--once", "--json"])         # docker exec
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)
        assert doc["host_name"] == "job-container"
        said = [w for w in doc["warnings"] if not w.startswith("GPUs unavailable")]
        assert [w[:len(NO_SYSFS)] for w in said[:1]] == [NO_SYSFS], said
        assert [w[:len(NOT_ROOT)] for w in said[1:2]] == [NOT_ROOT], said
        assert "Traceback" not in proc.stderr
        # a GPU whose process is the job: the container's PID namespace is said first
        proc = subprocess.run(_standin(job, ["--once", "--json"], python), capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)
        assert doc["warnings"][0].startswith(PID_NS), doc["warnings"]
        assert [w for w in doc["warnings"] if w.startswith((NO_SYSFS, NOT_ROOT))]
        listed, = doc["gpus"][0]["processes"]
        assert (listed["pid"], listed["mapped"]) == (job.pid, False)   # no host PID here
        # record and report, into the container's one writable place
        proc = job.exec([python, IN_CONTAINER, "record", "-o", "/tmp/r.gdtrec", "--duration",
                         "2", "--demo", "-q"])
        assert proc.returncode == 0, proc.stderr
        proc = job.exec([python, IN_CONTAINER, "report", "/tmp/r.gdtrec"])
        assert proc.returncode == 0, proc.stderr
        assert "3 samples" in proc.stdout and "Time in each state, per GPU" in proc.stdout


@pytest.mark.skipif(shutil.which("tmux") is None, reason="no tmux on this machine")
@pytest.mark.parametrize("version", ENDS)
def test_docker_exec_it_the_dashboard_in_tmux(pyz, tmp_path, version):
    """`docker exec -it JOB python3 /tmp/gpudisk-top.pyz`: the dashboard on a terminal,
    as nobody, with CPython `version` in the image; its header's flags are what the
    container lacks: NO /sys and NOT ROOT, and CONTAINER PIDS once there is a GPU whose
    processes it must find."""
    from slack import slack
    from test_ui_terminal import Tmux
    python = str(Path(python_for(version)).resolve())   # a venv's python: its base
    with Container(tmp_path, pythons=_in_image(python)) as job:
        shutil.copyfile(pyz, job.path(IN_CONTAINER))
        _what_the_container_lacks(job)
        for argv, flags, absent in (
                (job.exec_argv([python, IN_CONTAINER], env={"TERM": "xterm-256color"}),
                 ("NO /sys", "NOT ROOT"), "CONTAINER PIDS"),
                (_standin(job, [], python), ("NO /sys", "NOT ROOT", "CONTAINER PIDS"), "NO GPUS")):
            t = Tmux(shlex.join(argv))
            try:
                screen = t.wait_for("job-container", *flags, "Quit", timeout_s=30 * slack())
                header = screen.splitlines()[0]
                assert header.startswith("gpudisk-top job-container ") and all(
                    f in header for f in flags), header
                assert absent not in screen and "Traceback" not in screen, screen
                t.keys("q")
                deadline = time.monotonic() + 10 * slack()
                while t.alive() and time.monotonic() < deadline:
                    time.sleep(0.1)
                assert not t.alive(), "q did not quit"
            finally:
                t.close()


def test_kubectl_cp_as_a_tar_stream_and_the_no_tar_pipe(pyz, tmp_path):
    """`kubectl cp dist/gpudisk-top.pyz NS/POD:/tmp/gpudisk-top.pyz`: kubectl runs
    `tar cf -` here and `tar -xmf - -C /tmp` in the container, joined by a pipe; where the
    container has no tar, `kubectl exec -i ... -- sh -c 'cat > /tmp/gpudisk-top.pyz'`.
    Each copy's sha256sum, taken inside, is the build's; each runs."""
    want = _sha256_line(pyz)
    with Container(tmp_path) as job:
        for how, argv in (
                ("tar", ["tar", "-xmf", "-", "-C", "/tmp"]),
                ("cat", ["sh", "-c", f"cat > {IN_CONTAINER}"])):
            if how == "tar":
                tar = subprocess.Popen(["tar", "cf", "-", "-C", str(pyz.parent), pyz.name],
                                       stdout=subprocess.PIPE)
                proc = job.exec(argv, stdin=tar.stdout)
                tar.stdout.close()
                assert tar.wait(timeout=60) == 0
            else:
                with open(pyz, "rb") as stdin:
                    proc = job.exec(argv, stdin=stdin)
            assert proc.returncode == 0, (how, proc.stderr)
            _what_the_container_lacks(job)
            summed = job.exec(["sha256sum", IN_CONTAINER]).stdout.split()
            assert summed == [want, IN_CONTAINER], how
            proc = job.exec(["python3", IN_CONTAINER, "--once", "--json"])
            assert proc.returncode == 0, (how, proc.stderr)
            assert json.loads(proc.stdout)["host_name"] == "job-container"
            job.exec(["rm", IN_CONTAINER])


def test_kubectl_debug_target_sees_the_jobs_processes_not_their_files(pyz, tmp_path):
    """`kubectl debug POD --target=CONTAINER`: an ephemeral container in the job's PID
    namespace, with its own root (the zip copied there, not into the job's).  It sees the
    job's processes and their command lines; as root (kubectl debug's default) it reads
    their I/O counters and, through /proc/PID/root, the job's files; as nobody, neither:
    what the zip then says (NOT ROOT) is what it cannot read."""
    with Container(tmp_path) as job, Container(tmp_path, name="debug",
                                                 share_pid_with=job.pid) as debug:
        job.path("/tmp/job-file").write_text("the job's\n")
        shutil.copyfile(pyz, debug.path(IN_CONTAINER))
        assert not job.path(IN_CONTAINER).exists()          # a root of its own
        assert debug.exec(["ls", "/tmp"]).stdout == "gpudisk-top.pyz\n"
        assert debug.exec(["hostname"]).stdout == "debug-container\n"
        read = ("cat /proc/1/cmdline | tr '\\0' ' '; echo; grep -c rchar /proc/1/io; "
                "cat /proc/1/root/tmp/job-file")
        as_root = debug.exec(["sh", "-c", read], user=None)
        assert as_root.stdout.splitlines() == ["sleep 100000 ", "1", "the job's"], as_root
        as_nobody = debug.exec(["sh", "-c", read])
        assert as_nobody.stdout.splitlines() == ["sleep 100000 "], as_nobody
        assert "/proc/1/io: Permission denied" in as_nobody.stderr
        assert "/proc/1/root/tmp/job-file: Permission denied" in as_nobody.stderr
        for user, blind in ((None, []), (NOBODY, [NOT_ROOT])):
            proc = debug.exec(["python3", IN_CONTAINER, "--once", "--json"], user=user)
            assert proc.returncode == 0, proc.stderr
            doc = json.loads(proc.stdout)
            assert doc["host_name"] == "debug-container"
            said = [w for w in doc["warnings"] if w.startswith((NO_SYSFS, NOT_ROOT))]
            assert [w[:len(NO_SYSFS)] for w in said[:1]] == [NO_SYSFS]
            assert [w[:len(NOT_ROOT)] for w in said[1:]] == blind, (user, said)
        proc = subprocess.run(_standin(debug, ["--once", "--json"], job=job),
                              capture_output=True, text=True, timeout=120)
        assert json.loads(proc.stdout)["warnings"][0].startswith(PID_NS), proc.stderr
