"""Inside a container: a real job in its own PID and mount namespace, the tool run inside
it (nsenter), unprivileged, with /sys hidden, and stand-in GPUs that report the job's
host PID exactly as a real driver does.  The job's trainer holds a stand-in for
/dev/nvidia0 open (a device node cannot be opened without the driver) before its
DataLoader-like workers fork, as PyTorch's does; its workers do real O_DIRECT reads."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

import realdisk
from proctree import children, kill
import standin
from jobrun import HEALTHY_STEPS_S, JOB

NOBODY = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")

pytestmark = [
    pytest.mark.root(reason="needs root: unshare and nsenter of a PID and mount namespace"),
    pytest.mark.integration,
]


def _missing() -> str | None:
    for tool in ("unshare", "nsenter", "setpriv", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (util-linux)"
    probe = subprocess.run(["unshare", "--pid", "--mount", "--fork", "--mount-proc", "true"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return f"cannot make a PID namespace here: {probe.stderr.strip()}"
    return None


@pytest.fixture(scope="module")
def box():
    """A directory everyone may use, on the real disk: the job's data, its progress file
    and the stand-in device files."""
    why = _missing()
    if why:
        pytest.skip(why)
    d = tempfile.mkdtemp(prefix="gdt-container-", dir=realdisk.BASE)
    os.chmod(d, 0o777)
    data = realdisk.random_file(os.path.join(d, "data.bin"), 512)
    os.chmod(data, 0o644)
    dev = os.path.join(d, "dev")
    os.mkdir(dev, 0o755)
    for name in ("nvidia0", "nvidiactl", "nvidia-uvm"):
        with open(os.path.join(dev, name), "wb") as f:
            f.truncate(128 << 20)
        os.chmod(os.path.join(dev, name), 0o666)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _child(pid: int, timeout_s: float = 10.0) -> int:
    """The one child of pid (unshare --fork's: the namespace's PID 1), once it exists."""
    end = time.time() + timeout_s
    while time.time() < end:
        kids = children(pid)
        if kids:
            return kids[0]
        time.sleep(0.05)
    raise AssertionError("the namespace's first process did not start")


class Container:
    """The job as PID 1 of a new PID and mount namespace, run as nobody."""

    def __init__(self, box: str, mode: str, workers: int, seconds: float) -> None:
        self.box = box
        self.progress = os.path.join(box, f"progress-{mode}")
        self.proc = subprocess.Popen(
            ["unshare", "--pid", "--mount", "--fork", "--mount-proc", *NOBODY,
             sys.executable, JOB, mode, "--workers", str(workers), "--seconds", str(seconds),
             "--data", os.path.join(box, "data.bin"), "--progress", self.progress,
             "--gpu-device", os.path.join(box, "dev", "nvidia0"),
             "--reads", str(realdisk.starving_reads(os.path.join(box, "data.bin"), workers, 128)
                            if mode == "disk" else 128)])
        self.host_pid = _child(self.proc.pid)

    def gdt(self, argv: list[str], hide_sys: bool = True, timeout: float = 60):
        """gpudisk-top `argv` inside the namespace, as nobody, with stand-in GPUs whose one
        compute process is the job's trainer under its host PID."""
        cmd, env = standin.command(argv, gpus=1, processes={0: [self.host_pid]},
                                   progress=self.progress, healthy_steps_s=HEALTHY_STEPS_S,
                                   dev_dir=os.path.join(self.box, "dev"))
        inner = " ".join(["exec", *NOBODY, *map(_quote, cmd)])
        if hide_sys:
            inner = "mount -t tmpfs none /sys && " + inner
        return subprocess.run(["nsenter", "-t", str(self.host_pid), "--pid", "--mount",
                               "--", "sh", "-c", inner],
                              env=env, capture_output=True, text=True, timeout=timeout,
                              cwd=standin.ROOT)

    def stop(self) -> None:
        self.proc.kill()       # unshare; its namespace's PID 1 and the workers go with it
        kill(self.host_pid)
        self.proc.wait()


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"


def test_a_disk_starved_job_in_its_own_pid_namespace_is_found_by_its_device_file(box):
    job = Container(box, "disk", workers=2, seconds=40)
    try:
        time.sleep(4)
        once = job.gdt(["--once", "--json", "-i", "2"])
        text = job.gdt(["--once", "-i", "1"])
    finally:
        job.stop()
    assert once.returncode == 0 and "Traceback" not in once.stderr, once.stderr
    d = json.loads(once.stdout)
    warnings = "\n".join(d["warnings"])
    # what cannot be seen is said, each with its fix
    assert "no /sys/block" in warnings and "--sysfs" in warnings, warnings
    assert "container's PID namespace" in warnings and "--pid=host" in warnings, warnings
    assert "not root" in warnings, warnings
    # the trainer: NVML's host PID, found here as the namespace's PID 1 by /dev/nvidia0
    p = d["gpus"][0]["processes"][0]
    assert p["pid"] == job.host_pid
    assert p["mapped"] and p["mapped_by"] == "device-file", p
    assert p["local_pid"] == 1 and p["ns_pid"] == 1, p
    assert p["tree_processes"] >= 3, p          # the trainer and its two workers
    assert p["read_kb_s"] > 0, p                 # the workers' O_DIRECT reads
    disk = realdisk.whole_disk(os.path.join(box, "data.bin"))
    assert disk in p["devices"] or any(dev.startswith(disk) for dev in p["devices"]), p
    verdict = d["verdict"]
    assert verdict["state"] == "disk-starved", verdict
    assert job.host_pid in verdict["processes"], verdict
    assert any(dev.startswith(disk) for dev in verdict["devices"]), verdict
    # the process view names the container PID beside the host's
    assert text.returncode == 0, text.stderr
    assert f"{job.host_pid}=1" in text.stdout, text.stdout


def test_with_sys_visible_only_the_namespace_is_warned(box):
    job = Container(box, "healthy", workers=1, seconds=20)
    try:
        time.sleep(2)
        once = job.gdt(["--once", "--json", "-i", "1"], hide_sys=False)
    finally:
        job.stop()
    assert once.returncode == 0, once.stderr
    d = json.loads(once.stdout)
    warnings = "\n".join(d["warnings"])
    assert "no /sys/block" not in warnings and "container's PID namespace" in warnings
    assert d["gpus"][0]["processes"][0]["mapped_by"] == "device-file"


def _cpu_cgroup_parent() -> tuple[str | None, str | None]:
    """A cgroup v2 directory whose children can have a cpu.max, or (None, why not)."""
    from gpudisk_top.collect.host import cgroup2_mounts

    with open("/proc/self/mountinfo") as f:
        mounts = cgroup2_mounts(f.read())
    why = "no cgroup v2 hierarchy is mounted (a cgroup v1 host)"
    for _root, mountpoint in mounts:
        try:
            with open(os.path.join(mountpoint, "cgroup.controllers")) as f:
                controllers = f.read().split()
        except OSError:
            continue
        if "cpu" in controllers:
            return mountpoint, None
        why = (f"the cpu controller is bound to cgroup v1 on this host (the cgroup v2 "
               f"hierarchy at {mountpoint} offers only: {' '.join(controllers) or 'nothing'})")
    return None, why


def test_a_cpu_quotad_job_is_cpu_starved_by_its_throttling(box, tmp_path):
    parent, why = _cpu_cgroup_parent()
    if parent is None:
        pytest.skip(why)
    group = os.path.join(parent, f"gdt-quota-{os.getpid()}")
    try:
        with open(os.path.join(parent, "cgroup.subtree_control"), "w") as f:
            f.write("+cpu")
        os.mkdir(group)
        with open(os.path.join(group, "cpu.max"), "w") as f:
            f.write("20000 100000")          # a fifth of a CPU
    except OSError as err:
        pytest.skip(f"cannot make a cgroup with a CPU quota here: {err}")
    job = None
    try:
        job = subprocess.Popen([sys.executable, JOB, "cpu", "--workers", "2", "--seconds", "30",
                                "--data", os.path.join(box, "data.bin"),
                                "--progress", str(tmp_path / "progress")],
                               preexec_fn=lambda: _join(group))
        time.sleep(4)
        once = standin.run(["--once", "--json", "-i", "2"], gpus=1, processes={0: [job.pid]},
                           progress=str(tmp_path / "progress"), healthy_steps_s=HEALTHY_STEPS_S)
    finally:
        if job is not None:
            workers = children(job.pid)
            job.kill()
            job.wait()
            for child in workers:
                kill(child)
        time.sleep(0.5)
        try:
            os.rmdir(group)
        except OSError:
            pass
    assert once.returncode == 0, once.stderr
    d = json.loads(once.stdout)
    assert d["host"]["cgroup_pid"] == job.pid and d["host"]["cgroup_throttled_pct"] >= 20, d["host"]
    v = d["verdict"]
    assert v["state"] == "cpu-starved" and v["kind"] == "throttled", v
    assert "CPU throttled" in v["reason"] and "limit 0.2 CPUs" in v["reason"], v


def _join(group: str) -> None:
    with open(os.path.join(group, "cgroup.procs"), "w") as f:
        f.write("0")

