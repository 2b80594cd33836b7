"""Real jobs in real cgroups, laid out as Slurm, Kubernetes, Docker and Podman lay them
out, with the environment those schedulers set, on a node of stand-in GPUs that follow
each job's own progress: the harness of the per-job tests (issue 37).

What it owns:
  - the layouts: functions returning the cgroup path (relative to a hierarchy's root) a
    scheduler gives a job's processes (`slurm_v2`, `slurm_v1`, `k8s_systemd`,
    `k8s_cgroupfs`, `docker_systemd`, `docker_cgroupfs`, `podman`), and the environment
    it sets (`slurm_env`, `torchrun_env`, `k8s_env`);
  - (from tests/cgroup_job.py, which owns making, entering and removing cgroups) `CgJob`:
    one job's process started inside its own cgroup (it enters the cgroup before it execs
    the job, so every child inherits it), and the cgroup removed afterwards, its processes
    killed first (only those positively ours: in a cgroup this harness made);
  - `HostRoot`: what a node keeps about its pods and containers (/var/log/pods/NS_POD_UID,
    /var/lib/docker/containers/ID/config.v2.json), made under a temporary directory, never
    the real one; gpudisk-top is told where by its --rootfs (`Node.source_args`);
  - `Node`: several such jobs on one node of stand-in GPUs (tests/standin.py), each job's
    GPUs following its trainers' progress, and gpudisk-top's real command line on it
    (`--once --json`; `record` with a --once in the middle, then `report --json`);
  - `observe`, `report_json`: that record-then-report sequence, for tests/jobrun.py too.

The trees: `tree="v2"` makes the path in the cgroup v2 tree (/sys/fs/cgroup, or
/sys/fs/cgroup/unified on a hybrid host: cgscan.cgroup2_root finds it); `tree="v1"` in the
v1 hierarchies of V1_HIERARCHIES that the host mounts (name=systemd, cpu, freezer);
`tree="both"` in all of them.  Where none can be made (no such tree, read-only, not root)
CgJob raises CgroupUnavailable, which a test turns into a skip (`skip_unless_cgroups`).

A test on two jobs (`data` is a large file on the real disk, tests/realdisk.py):

    node = Node(tmp_path, data=data_file)          # GPUs are numbered in add() order
    a = node.add("a", slurm_v2(jid := unique_job_id()), mode="disk", gpus=4,
                 launcher="torchrun", workers=2, args=("--reads", "128"),
                 env=lambda gpus: slurm_env(jid, name="train.py", gpus=gpus))
    uid, cid = pod_uid(), container_id("b")
    node.host.pod("team-a", "llama-0", uid)
    b = node.add("b", k8s_systemd(uid, cid), mode="healthy", gpus=1,
                 env=k8s_env("llama-0"))
    with node:                                      # started; stopped and removed on exit
        once = node.once()                          # `--once --json`, parsed
        seen = node.record(16, once_at_s=8)         # seen.once, seen.report, seen.rec
        job_b = node.report(seen.rec, "--job", "k8s:" + uid)    # `report --json --job ...`
    # a.gpus == [0, 1, 2, 3], a.trainers: its 4 GPU processes (under one launcher,
    # a.pid), b.gpus == [4]; a.cgroup == "/system.slice/slurmstepd.scope/job_N/...";
    # starved_share(a.truth(rank)): whether rank really was starved (its steps a second)

`node.pause(b)` / `node.resume(b)` stop and continue every process of b's cgroup (its
GPU reads ~0 % meanwhile); `node.end(b)` ends b while the others go on.  For a run that
goes on while the test acts (a job ending mid-recording, `serve`), start it yourself on
the node's stand-in GPUs: `standin.popen(["record", "-o", rec, ..., *node.source_args],
**node.gpu())`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Mapping

import standin
from cgroup_job import ROOT, CgJob, CgroupUnavailable, hierarchies, skip_unless_cgroups  # noqa: F401
from gpudisk_top.verdict.detect import Thresholds
from slack import slack

JOBS = os.path.join(ROOT, "tests", "jobs")
LOADER_JOB = os.path.join(JOBS, "loader_job.py")
LAUNCHER = os.path.join(JOBS, "launcher.py")
HEALTHY_STEPS_S = 50.0          # loader_job.py: 1 / STEP_S
_ids = itertools.count()


# ---------------------------------------------------------------------------- layouts
def container_id(seed: str = "") -> str:
    """A 64-hex container id, unique to this process and call (`seed` only for reading)."""
    return hashlib.sha256(f"{seed}-{os.getpid()}-{next(_ids)}-{time.time_ns()}".encode()).hexdigest()


def pod_uid() -> str:
    """A Kubernetes pod UID (a UUID, with its dashes)."""
    return str(uuid.uuid4())


def unique_job_id() -> int:
    """A Slurm job id no concurrent test of this machine uses (the cgroup path holds it)."""
    return 100_000 + (os.getpid() * 1009 + next(_ids) * 7919 + time.time_ns() // 1000) % 899_999


def slurm_v2(job_id: int, step: int | str = 0, task: int = 0, uid: int | None = None) -> str:
    """slurmstepd's cgroup v2 path of a task (cgroup/v2 plugin; `uid` is not in it)."""
    return f"system.slice/slurmstepd.scope/job_{job_id}/step_{step}/user/task_{task}"


def slurm_v1(job_id: int, uid: int | None = None, step: int | str = 0, task: int = 0) -> str:
    """slurmstepd's cgroup v1 path of a task (cgroup/v1 plugin), for tree="v1"."""
    uid = os.getuid() if uid is None else uid
    return f"slurm/uid_{uid}/job_{job_id}/step_{step}/task_{task}"


def k8s_systemd(pod: str, cid: str, qos: str = "burstable") -> str:
    """The kubelet's path of a container with the systemd cgroup driver (containerd)."""
    slice_ = f"kubepods-{qos}-pod{pod.replace('-', '_')}.slice"
    return f"kubepods.slice/kubepods-{qos}.slice/{slice_}/cri-containerd-{cid}.scope"


def k8s_cgroupfs(pod: str, cid: str, qos: str = "besteffort") -> str:
    """The kubelet's path of a container with the cgroupfs driver."""
    return f"kubepods/{qos}/pod{pod}/{cid}"


def docker_systemd(cid: str) -> str:
    return f"system.slice/docker-{cid}.scope"


def docker_cgroupfs(cid: str) -> str:
    return f"docker/{cid}"


def podman(cid: str) -> str:
    return f"machine.slice/libpod-{cid}.scope"


def slurm_env(job_id: int, *, name: str = "train.py", step: int | str = 0, procid: int = 0,
              localid: int = 0, gpus=()) -> dict[str, str]:
    """What slurmstepd sets in a task's environment (srun's per-task SLURM_PROCID and
    SLURM_LOCALID: a launcher's children get theirs from it, tests/jobs/launcher.py)."""
    visible = ",".join(str(g) for g in gpus)
    return {"SLURM_JOB_ID": str(job_id), "SLURM_JOBID": str(job_id), "SLURM_JOB_NAME": name,
            "SLURM_STEP_ID": str(step), "SLURM_STEPID": str(step), "SLURM_PROCID": str(procid),
            "SLURM_LOCALID": str(localid), "SLURM_NODEID": "0", "SLURM_JOB_UID": str(os.getuid()),
            "SLURM_JOB_GPUS": visible, "CUDA_VISIBLE_DEVICES": visible}


def torchrun_env(run_id: str, *, rank: int = 0, world_size: int = 1,
                 master_addr: str = "127.0.0.1") -> dict[str, str]:
    """What torchrun sets in a rank's environment (the launcher's table)."""
    from jobs.launcher import rank_env
    return rank_env(rank, world_size, run_id=run_id, master_addr=master_addr)


def k8s_env(pod_name: str, service_host: str = "10.96.0.1") -> dict[str, str]:
    """What every container of a pod has: the API service's address and the pod's name as
    its HOSTNAME."""
    return {"KUBERNETES_SERVICE_HOST": service_host, "KUBERNETES_SERVICE_PORT": "443",
            "HOSTNAME": pod_name}


class HostRoot:
    """The node's files about its pods and containers, under a temporary `root` (never the
    real /var): gpudisk-top is pointed at it with `--rootfs root`."""

    def __init__(self, root: str) -> None:
        if os.path.realpath(root) == "/":
            raise ValueError("HostRoot is a temporary directory, never /")
        self.root = root
        os.makedirs(root, exist_ok=True)

    def pod(self, namespace: str, pod: str, uid: str) -> str:
        """The kubelet's log directory of a pod, /var/log/pods/NAMESPACE_POD_UID/."""
        path = os.path.join(self.root, "var", "log", "pods", f"{namespace}_{pod}_{uid}")
        os.makedirs(path, exist_ok=True)
        return path

    def docker(self, cid: str, name: str) -> str:
        """dockerd's config of a container, with its name ("/NAME")."""
        path = os.path.join(self.root, "var", "lib", "docker", "containers", cid)
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "config.v2.json"), "w") as f:
            json.dump({"ID": cid, "Name": "/" + name}, f)
        return os.path.join(path, "config.v2.json")



# ---------------------------------------------------------------------------- a node of jobs
@dataclass
class Observation:
    """What gpudisk-top said of a run: its recording, and the `--once --json` taken in the
    middle (None where none was asked)."""

    rec: str
    once: dict | None


def observe(tmp: str, seconds: float, *, once_at_s: float | None = None,
            interval_s: float = 1, args=(), **gpu) -> Observation:
    """`record -i interval_s --duration seconds ARGS` to tmp/run.gdtrec on stand-in GPUs
    `gpu` (tests/standin.py's keywords), with a `--once --json -i 2 ARGS` started
    `once_at_s` into it.  Raises AssertionError where either command fails."""
    rec = os.path.join(str(tmp), "run.gdtrec")
    recorder = standin.popen(["record", "-o", rec, "-i", str(interval_s),
                              "--duration", str(seconds), *args], **gpu)
    once = None
    try:
        if once_at_s is not None:
            time.sleep(once_at_s)
            once = standin.run(["--once", "--json", "-i", "2", *args], **gpu)
        code = recorder.wait(seconds + 60)
    finally:
        if recorder.poll() is None:
            recorder.kill()
            recorder.wait()
    assert code == 0, recorder.stderr.read()
    if once is not None:
        assert once.returncode == 0, once.stderr
    return Observation(rec, json.loads(once.stdout) if once is not None else None)


def report_json(rec: str, *args: str) -> dict:
    """`report REC --json ARGS...`, parsed.  Raises AssertionError where it fails."""
    done = subprocess.run([sys.executable, "-m", "gpudisk_top", "report", rec, "--json", *args],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def starved_share(truth: list[dict], healthy_steps_s: float = HEALTHY_STEPS_S) -> float:
    """The share of a trainer's seconds (its truth lines) in which it was not fed: under
    gpu_low_util_pct (70 %) of its healthy steps, the stand-in GPU's utilization being its
    progress; 0 without a line."""
    fed_steps = healthy_steps_s * Thresholds().gpu_low_util_pct / 100
    return sum(t["steps"] < fed_steps for t in truth) / len(truth) if truth else 0.0


@dataclass
class NodeJob:
    """One job of a Node: its cgroup (`cg`, `cgroup` as /proc shows it), its GPUs' indices,
    its top process (`pid`: the launcher, or the one trainer) and its GPU processes
    (`trainers`, in rank order), each with its progress file and its truth file
    (loader_job.py's --truth: the steps it really made, one JSON line a second)."""

    name: str
    path: str
    tree: str
    gpus: list[int]
    argv: list[str]
    env: dict[str, str]
    progress: list[str]
    launcher: str | None
    cg: CgJob | None = None
    trainers: list[int] = field(default_factory=list)

    @property
    def cgroup(self) -> str:
        return "/" + self.path

    @property
    def pid(self) -> int:
        return self.cg.pid

    def truth(self, rank: int = 0) -> list[dict]:
        """Rank `rank`'s truth lines so far ([] before its first second)."""
        try:
            with open(self.progress[rank][:-len(".progress")] + ".truth.jsonl") as f:
                return [json.loads(line) for line in f if line.endswith("\n")]
        except FileNotFoundError:
            return []

    def gpu_progress(self) -> dict[int, str]:
        """Each of its GPUs' progress file: GPU k of a launched job follows rank k."""
        if len(self.progress) == 1:
            return {g: self.progress[0] for g in self.gpus}
        return dict(zip(self.gpus, self.progress))

    def gpu_processes(self) -> dict[int, list[int]]:
        """NVML's compute processes of its GPUs: rank k on GPU k, or the one trainer on all."""
        if len(self.trainers) == 1:
            return {g: list(self.trainers) for g in self.gpus}
        return {g: [pid] for g, pid in zip(self.gpus, self.trainers)}


class Node:
    """Jobs on one node of stand-in GPUs (the module docstring has an example).

    `gpus`: the node's GPU count (default: as many as the jobs hold; the rest are idle).
    `data`: the file the jobs read (loader_job.py's --data).  Each job's trainers run
    tests/jobs/loader_job.py MODE; gpudisk-top's live commands run with `source_args`
    (--rootfs host.root: the node's pod and container files).
    `standin_kw`: more tests/standin.py keywords for every gpudisk-top run on the node."""

    def __init__(self, tmp, *, data: str, gpus: int | None = None,
                 healthy_steps_s: float = HEALTHY_STEPS_S, **standin_kw) -> None:
        self.tmp, self.data = str(tmp), data
        self.standin_kw = standin_kw
        self.gpus_total = gpus
        self.healthy_steps_s = healthy_steps_s
        self.host = HostRoot(os.path.join(self.tmp, "host"))
        self.jobs: list[NodeJob] = []

    @property
    def gpu_count(self) -> int:
        used = sum(len(j.gpus) for j in self.jobs)
        return used if self.gpus_total is None else self.gpus_total

    def add(self, name: str, path: str, *, tree: str = "v2", mode: str = "healthy",
            gpus: int = 1, workers: int = 2, launcher: str | None = None,
            env: Mapping[str, str] | Callable[[list[int]], Mapping[str, str]] | None = None,
            run_id: str | None = None, seconds: float = 300, args=()) -> NodeJob:
        """A job to start on entering the node, in cgroup `path` of `tree`, on the next
        `gpus` GPUs.  launcher: None (one trainer process on all its GPUs), "torchrun" (a
        `torchrun` process that fork+execs a trainer per GPU) or "spawn" (a python that
        starts them with multiprocessing spawn, as torch.multiprocessing.spawn does);
        run_id: the ranks' TORCHELASTIC_RUN_ID; the ranks of a job in a Slurm layout also
        get srun's per-task SLURM_PROCID and SLURM_LOCALID.  env: the scheduler's variables
        (slurm_env, k8s_env), or a function of the job's GPU indices that returns them.
        args: more loader_job.py arguments (("--reads", "128") for mode "disk", say).
        Raises ValueError for a launcher it does not know or too few GPUs."""
        if launcher not in (None, "torchrun", "spawn"):
            raise ValueError(f"launcher is None, torchrun or spawn, not {launcher!r}")
        first = sum(len(j.gpus) for j in self.jobs)
        ids = list(range(first, first + gpus))
        if self.gpus_total is not None and ids and ids[-1] >= self.gpus_total:
            raise ValueError(f"job {name} needs GPUs {ids}; the node has {self.gpus_total}")
        tag = os.path.join(self.tmp, f"job-{name}")
        ranked = launcher is not None
        stem = tag + (".{rank}" if ranked else "")
        progress = stem + ".progress"
        trainer = [LOADER_JOB, mode, "--workers", str(workers), "--seconds", str(seconds),
                   "--data", self.data, "--progress", progress,
                   "--truth", stem + ".truth.jsonl", *args]
        if ranked:
            argv = [*self._launcher(launcher), "--nprocs", str(gpus), "--pids", tag + ".pids",
                    "--style", "spawn" if launcher == "spawn" else "exec",
                    *(["--run-id", run_id] if run_id else []),
                    *(["--slurm"] if path.startswith(("system.slice/slurmstepd", "slurm/"))
                      else []), "--", *trainer]
        else:
            argv = [sys.executable, *trainer]
        job = NodeJob(name, path, tree, ids, argv,
                      dict(env(ids) if callable(env) else (env or {})),
                      [progress.replace("{rank}", str(r)) for r in range(gpus)] if ranked
                      else [progress], launcher)
        self.jobs.append(job)
        return job

    def _launcher(self, launcher: str) -> list[str]:
        """The launcher's argv head: `torchrun` is a script of that name (its comm, as the
        real one's, is "torchrun"); `spawn` is the launcher under python."""
        if launcher == "spawn":
            return [sys.executable, LAUNCHER]
        script = os.path.join(self.tmp, "bin", "torchrun")
        if not os.path.exists(script):
            os.makedirs(os.path.dirname(script), exist_ok=True)
            with open(script, "w") as f:
                f.write(f"#!{sys.executable}\nimport runpy, sys\nsys.path.insert(0, {JOBS!r})\n"
                        f"runpy.run_path({LAUNCHER!r}, run_name='__main__')\n")
            os.chmod(script, 0o755)
        return [script]

    def __enter__(self) -> "Node":
        try:
            for job in self.jobs:
                job.cg = CgJob(job.path, job.argv, tree=job.tree, env=job.env).__enter__()
            for job in self.jobs:
                self._wait_ready(job)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _wait_ready(self, job: NodeJob) -> None:
        """Until its trainers are known and each has made a step (its progress file)."""
        deadline = time.monotonic() + 30 * slack()
        pids_file = os.path.join(self.tmp, f"job-{job.name}.pids")
        while True:
            if job.launcher is None:
                job.trainers = [job.cg.pid]
            elif os.path.exists(pids_file):
                with open(pids_file) as f:
                    job.trainers = json.load(f)
            if job.trainers and all(os.path.exists(p) for p in job.progress):
                return
            if job.cg.proc.poll() is not None:
                raise RuntimeError(f"job {job.name} ended at start: {job.cg.proc.returncode}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job.name} made no step in time")
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop every job and remove its cgroups (each job's errors after the others')."""
        errors = []
        for job in self.jobs:
            try:
                if job.cg is not None:
                    job.cg.stop()
            except Exception as err:       # the others' cgroups must go all the same
                errors.append(err)
        if errors:
            raise errors[0]

    def pause(self, job: NodeJob) -> None:
        """SIGSTOP every process of the job's cgroup: its GPUs' utilization falls to 0."""
        job.cg.signal(signal.SIGSTOP)

    def resume(self, job: NodeJob) -> None:
        job.cg.signal(signal.SIGCONT)

    def end(self, job: NodeJob) -> None:
        """The job ends (killed, its cgroup removed) while the others go on."""
        job.cg.stop()

    def gpu(self, **extra) -> dict:
        """tests/standin.py's keywords for this node: its GPUs, each one's processes and
        progress file; the node's standin_kw and `extra` added."""
        processes: dict[int, list[int]] = {}
        progress: dict[int, str] = {}
        for job in self.jobs:
            processes.update(job.gpu_processes())
            progress.update(job.gpu_progress())
        return dict(gpus=self.gpu_count, processes=processes, progress=progress,
                    healthy_steps_s=self.healthy_steps_s, **{**self.standin_kw, **extra})

    @property
    def source_args(self) -> list[str]:
        """What a live command (--once, record, serve, the dashboard) is given on this node:
        --rootfs, the node's HostRoot, where it reads the pods' and containers' names."""
        return ["--rootfs", self.host.root]

    def run(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """gpudisk-top ARGV on this node, as it ran (not checked; add source_args to a
        live command's ARGV)."""
        return standin.run(list(argv), timeout=timeout, **self.gpu())

    def once(self, interval_s: float = 2, *args: str) -> dict:
        """`--once --json -i interval_s ARGS...`, parsed.  Raises AssertionError where it
        fails."""
        done = self.run("--once", "--json", "-i", str(interval_s), *self.source_args, *args)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def record(self, seconds: float, *, once_at_s: float | None = None,
               interval_s: float = 1) -> Observation:
        """`record` for `seconds` (with a --once `once_at_s` into it): see observe()."""
        return observe(self.tmp, seconds, once_at_s=once_at_s, interval_s=interval_s,
                       args=self.source_args, **self.gpu())

    def report(self, rec: str, *args: str) -> dict:
        """`report REC --json ARGS...`, parsed (`"--job", ID` for one job's)."""
        return report_json(rec, *args)
