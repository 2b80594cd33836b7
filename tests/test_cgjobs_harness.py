"""The per-job harness itself (tests/cgjobs.py, tests/cgroup_job.py, tests/standin.py's
per-GPU progress, tests/jobs/launcher.py), on this machine's real cgroups and processes:

  - each layout's job really is in its cgroup (/proc/PID/cgroup shows the path, in the v2
    tree and, for Slurm's v1 layout, in the v1 hierarchies), and its children are born
    there; the scheduler's environment is in /proc/PID/environ, and the test's own
    scheduler variables are not;
  - a launcher's ranks are its children, in its cgroup, each with its rank's environment;
  - each stand-in GPU follows its own job: a job stopped with SIGSTOP reads ~0 % on its
    GPUs while the other's stay high, and NVML's processes of a GPU are its job's trainer;
  - cleanup leaves no cgroup and no process, a daemonized grandchild included, and never
    touches a process outside the job's cgroup.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

import pytest

import cgjobs
import cgroup_job
import standin
from cgjobs import (CgJob, HostRoot, Node, container_id, docker_cgroupfs, docker_systemd,
                    k8s_cgroupfs, k8s_env, k8s_systemd, pod_uid, podman, skip_unless_cgroups,
                    slurm_env, slurm_v1, slurm_v2, unique_job_id)
from slack import slack

ROOT_REASON = "making cgroups and moving processes into them needs root"
DATA = "/etc/hostname"           # loader_job.py's healthy mode reads nothing from it


def _layouts():
    uid, cid = pod_uid(), container_id()
    return {"slurm_v2": (slurm_v2(unique_job_id()), "v2"),
            "slurm_v1": (slurm_v1(unique_job_id()), "v1"),
            "k8s_systemd": (k8s_systemd(uid, cid), "v2"),
            "k8s_cgroupfs": (k8s_cgroupfs(uid, cid), "v2"),
            "docker_systemd": (docker_systemd(cid), "v2"),
            "docker_cgroupfs": (docker_cgroupfs(cid), "v2"),
            "podman": (podman(cid), "v2")}


LAYOUTS = _layouts()


def cgroup_paths(pid: int) -> list[str]:
    """The paths of /proc/PID/cgroup's lines; [] once the process is gone."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            return [line.rstrip("\n").split(":", 2)[2] for line in f]
    except OSError:
        return []


def environ(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        pairs = [item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item]
    return {k.decode(): v.decode(errors="replace") for k, v in pairs}


def children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


def hold(pids) -> list[int]:
    """A pidfd of each process: it turns readable when that process ends, whatever PID
    the kernel hands out meanwhile."""
    return [os.pidfd_open(pid) for pid in pids]


def all_ended(fds: list[int]) -> bool:
    """Whether every held process has ended, waiting a moment for the last ones."""
    try:
        return all(select.select([fd], [], [], 5 * slack())[0] for fd in fds)
    finally:
        for fd in fds:
            os.close(fd)


def wait_for(what, seconds: float = 10):
    deadline = time.monotonic() + seconds * slack()
    while not (value := what()):
        assert time.monotonic() < deadline, "not in time"
        time.sleep(0.05)
    return value


def loader(seconds: float = 60, workers: int = 2, progress: str | None = None) -> list[str]:
    return [sys.executable, cgjobs.LOADER_JOB, "healthy", "--workers", str(workers),
            "--seconds", str(seconds), "--data", DATA,
            *(["--progress", progress] if progress else [])]


# ---------------------------------------------------------------------------- layouts
def test_layouts_are_the_paths_the_schedulers_use():
    uid, cid = "0f3c-41", "ab" * 32
    assert slurm_v2(1001) == "system.slice/slurmstepd.scope/job_1001/step_0/user/task_0"
    assert slurm_v2(7, step="batch", task=3).endswith("job_7/step_batch/user/task_3")
    assert slurm_v1(1001, uid=1000) == "slurm/uid_1000/job_1001/step_0/task_0"
    assert k8s_systemd(uid, cid) == ("kubepods.slice/kubepods-burstable.slice/"
                                     f"kubepods-burstable-pod0f3c_41.slice/cri-containerd-{cid}.scope")
    assert k8s_cgroupfs(uid, cid) == f"kubepods/besteffort/pod{uid}/{cid}"
    assert docker_systemd(cid) == f"system.slice/docker-{cid}.scope"
    assert docker_cgroupfs(cid) == f"docker/{cid}"
    assert podman(cid) == f"machine.slice/libpod-{cid}.scope"
    ids = {container_id("x") for _ in range(50)}
    assert len(ids) == 50 and all(len(i) == 64 and int(i, 16) >= 0 for i in ids)
    assert len({unique_job_id() for _ in range(50)}) == 50


def test_standin_takes_a_progress_file_per_gpu_or_one_for_all():
    assert standin.progress_per_gpu("p", 2) == ["p", "p"]
    assert standin.progress_per_gpu(None, 2) == [None, None]
    assert standin.progress_per_gpu({0: "a", 2: "b"}, 3) == ["a", None, "b"]
    assert standin.progress_per_gpu(["a"], 3) == ["a", None, None]
    with pytest.raises(ValueError):
        standin.progress_per_gpu({3: "a"}, 3)
    with pytest.raises(ValueError):
        standin.progress_per_gpu(["a", "b"], 1)


def test_host_root_writes_the_nodes_pod_and_container_files_under_its_own_root(tmp_path):
    host = HostRoot(str(tmp_path / "host"))
    uid, cid = pod_uid(), container_id()
    pod = host.pod("team-a", "llama-0", uid)
    assert pod == str(tmp_path / "host" / "var" / "log" / "pods" / f"team-a_llama-0_{uid}")
    assert os.path.isdir(pod)
    import json
    with open(host.docker(cid, "trainer-b")) as f:
        assert json.load(f)["Name"] == "/trainer-b"
    with pytest.raises(ValueError):
        HostRoot("/")


# ---------------------------------------------------------------------------- cgroups
@pytest.mark.root(reason=ROOT_REASON)
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_each_layout_holds_the_job_and_its_children_and_cleanup_leaves_nothing(layout):
    path, tree = LAYOUTS[layout]
    skip_unless_cgroups(tree)
    top = path.split("/")[0]
    before = {m: os.path.exists(os.path.join(m, top)) for m in cgjobs.hierarchies(tree)}
    with CgJob(path, loader(workers=2), tree=tree) as job:
        workers = wait_for(lambda: len(children(job.pid)) == 2 and children(job.pid))
        expected = 1 if tree == "v2" else len(job.dirs)
        for pid in [job.pid, *workers]:
            # in the job's cgroup in every hierarchy the tree has, from its first instruction
            assert cgroup_paths(pid).count("/" + path) == expected, (pid, cgroup_paths(pid))
        assert set(job.pids()) >= {job.pid, *workers}
        dirs, seen = list(job.dirs), hold(job.pids())
    assert all_ended(seen)
    for d in dirs:
        assert not os.path.exists(d), d
    with cgroup_job._registry():        # no concurrent test makes or removes one meanwhile
        for mount, existed in before.items():
            # the ancestors the harness made went with it (where no other test's job holds one)
            assert existed or not os.path.exists(os.path.join(mount, top)) or _in_use(mount, top)


def _in_use(mount: str, top: str) -> bool:
    """Whether another test's job (run concurrently) still holds a cgroup under mount/top."""
    return any(len(dirs) for _, dirs, _ in os.walk(os.path.join(mount, top)))


@pytest.mark.root(reason=ROOT_REASON)
def test_slurm_v1_on_a_hybrid_host_is_in_both_trees():
    skip_unless_cgroups("both")
    path = slurm_v1(unique_job_id())
    with CgJob(path, loader(workers=1), tree="both") as job:
        paths = cgroup_paths(job.pid)
        assert paths.count("/" + path) == len(job.dirs) >= 2, paths
        assert any(line.startswith("0::/" + path) for line in open(f"/proc/{job.pid}/cgroup"))


@pytest.mark.root(reason=ROOT_REASON)
def test_cleanup_kills_a_daemonized_grandchild_and_nothing_outside_the_cgroup(tmp_path):
    skip_unless_cgroups("v2")
    outside = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    pidfile = str(tmp_path / "grandchild")
    # the job's child leaves its parent (setsid, double fork): init adopts it, no PID of
    # ours is its ancestor any more; only its cgroup says it is the job's
    code = ("import os, time\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    if os.fork() == 0:\n"
            f"        open({pidfile!r} + '.tmp', 'w').write(str(os.getpid()))\n"
            f"        os.rename({pidfile!r} + '.tmp', {pidfile!r})\n"
            "        time.sleep(120)\n"
            "    os._exit(0)\n"
            "time.sleep(120)\n")
    try:
        with CgJob(docker_cgroupfs(container_id()), [sys.executable, "-c", code]) as job:
            wait_for(lambda: os.path.exists(pidfile))
            with open(pidfile) as f:
                grandchild = int(f.read())
            assert grandchild not in children(job.pid)
            assert job.is_member(grandchild) and not job.is_member(outside.pid)
            ours = hold(job.pids())
            job.signal(signal.SIGSTOP)        # stopped processes go too
        assert all_ended(ours)
        assert outside.poll() is None, "a process outside the job's cgroup was touched"
    finally:
        outside.kill()
        outside.wait()


@pytest.mark.root(reason=ROOT_REASON)
def test_a_path_in_use_is_refused_and_its_job_left_alone():
    skip_unless_cgroups("v2")
    path = docker_systemd(container_id())
    with CgJob(path, loader(workers=0)) as first:
        with pytest.raises(FileExistsError):
            with CgJob(path, loader(workers=0)):
                pass
        assert first.proc.poll() is None and first.is_member(first.pid)


# ---------------------------------------------------------------------------- environment
@pytest.mark.root(reason=ROOT_REASON)
def test_the_schedulers_environment_is_set_and_the_tests_own_is_not(tmp_path, monkeypatch):
    skip_unless_cgroups("v2")
    monkeypatch.setenv("SLURM_JOB_ID", "999")         # as if the test itself ran under Slurm
    monkeypatch.setenv("RANK", "5")
    node = Node(tmp_path, data=DATA)
    jid = unique_job_id()
    a = node.add("a", slurm_v2(jid), gpus=2, launcher="torchrun", run_id=f"run-{jid}",
                 env=lambda gpus: slurm_env(jid, name="train.py", gpus=gpus))
    b = node.add("b", k8s_systemd(pod_uid(), container_id()), gpus=1, env=k8s_env("llama-0"))
    c = node.add("c", docker_systemd(container_id()), gpus=1)
    with node:
        for rank, pid in enumerate(a.trainers):
            env = environ(pid)
            assert env["SLURM_JOB_ID"] == str(jid) and env["SLURM_JOB_NAME"] == "train.py"
            assert env["CUDA_VISIBLE_DEVICES"] == "0,1"
            assert env["RANK"] == env["LOCAL_RANK"] == env["SLURM_PROCID"] == str(rank)
            assert env["WORLD_SIZE"] == "2" and env["TORCHELASTIC_RUN_ID"] == f"run-{jid}"
            assert env["MASTER_ADDR"] == "127.0.0.1"
        assert environ(a.pid)["SLURM_JOB_ID"] == str(jid) and "RANK" not in environ(a.pid)
        env = environ(b.trainers[0])
        assert env["HOSTNAME"] == "llama-0" and env["KUBERNETES_SERVICE_HOST"]
        env = environ(c.trainers[0])
        assert "SLURM_JOB_ID" not in env and "RANK" not in env


@pytest.mark.root(reason=ROOT_REASON)
@pytest.mark.parametrize("launcher", ["torchrun", "spawn"])
def test_a_launchers_ranks_are_its_children_in_its_cgroup(tmp_path, launcher):
    skip_unless_cgroups("v2")
    node = Node(tmp_path, data=DATA)
    job = node.add("a", docker_systemd(container_id()), gpus=3, launcher=launcher)
    with node:
        assert len(job.trainers) == 3 and set(job.trainers) <= set(children(job.pid))
        for pid in [job.pid, *job.trainers]:
            assert job.cg.is_member(pid)
        with open(f"/proc/{job.pid}/comm") as f:
            comm = f.read().strip()
        with open(f"/proc/{job.trainers[0]}/cmdline", "rb") as f:
            cmdline = f.read().replace(b"\0", b" ").decode()
        if launcher == "torchrun":
            assert comm == "torchrun" and "loader_job.py" in cmdline
        else:
            assert "spawn_main" in cmdline        # torch.multiprocessing.spawn's children
        assert job.gpu_processes() == {0: [job.trainers[0]], 1: [job.trainers[1]],
                                       2: [job.trainers[2]]}


# ---------------------------------------------------------------------------- stand-in GPUs
@pytest.mark.root(reason=ROOT_REASON)
def test_each_gpu_follows_its_own_job_and_a_stopped_job_reads_zero(tmp_path):
    skip_unless_cgroups("v2")
    node = Node(tmp_path, data=DATA, gpus=5)
    a = node.add("a", slurm_v2(unique_job_id()), gpus=2, launcher="torchrun")
    b = node.add("b", docker_systemd(container_id()), gpus=2)      # one process, two GPUs
    with node:
        node.pause(b)
        try:
            once = node.once()
        finally:
            node.resume(b)
        util = {g["index"]: g["util_pct"] for g in once["gpus"]}
        pids = {g["index"]: [p["pid"] for p in g["processes"]] for g in once["gpus"]}
        assert pids == {0: [a.trainers[0]], 1: [a.trainers[1]], 2: [b.pid], 3: [b.pid], 4: []}
        # a's GPUs busy with a's steps (50 a second when fed), b's idle while b is stopped,
        # the GPU no job holds at the stand-in's resting 0 %
        high = 40 / slack()
        assert util[0] >= high and util[1] >= high, util
        assert util[2] <= 1 and util[3] <= 1 and util[4] == 0, util
        again = node.once()
        util = {g["index"]: g["util_pct"] for g in again["gpus"]}
        assert min(util[i] for i in range(4)) >= high, util


@pytest.mark.root(reason=ROOT_REASON)
def test_a_node_records_and_reports_and_an_ended_job_leaves_its_gpus(tmp_path):
    skip_unless_cgroups("v2")
    node = Node(tmp_path, data=DATA)
    a = node.add("a", docker_systemd(container_id()), gpus=1)
    b = node.add("b", podman(container_id()), gpus=1)
    with node:
        seen = node.record(6, once_at_s=2)
        node.end(b)
        assert b.cg.dirs == [] and a.cg.proc.poll() is None
        after = node.once()
    assert {g["index"] for g in seen.once["gpus"]} == {0, 1}
    # its trainer's own account of its steps, a line a second (what a verdict is judged on)
    assert len(a.truth()) >= 5 and all(t["mode"] == "healthy" for t in a.truth())
    report = node.report(seen.rec)
    assert set(report["states"]) == {"0", "1"}, report["states"]
    assert [p["pid"] for p in after["gpus"][0]["processes"]] == [a.pid]
