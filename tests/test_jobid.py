"""Which job a GPU process belongs to (collect/jobid.py), told from real processes: their
real environment, their real process tree, their real cgroup, and the names a node keeps
for pods and containers (under a --rootfs made by the test, never the real /var).

What must hold (issue 37): Slurm's cgroup or SLURM_JOB_ID makes "slurm:N"; a pod's cgroup
"k8s:UID" named by /var/log/pods; a container's cgroup "docker:ID" named by its
config.v2.json; TORCHELASTIC_RUN_ID "torchelastic:RUN"; ranks under a launcher (torchrun)
one job; multiprocessing's spawn children and forks their parent's job; a sweep's runs
started as programs of their own separate jobs; nothing unreadable or hostile breaks it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

import standin
from gpudisk_top.collect import jobid
from gpudisk_top.collect.cgscan import cgroup2_root
from gpudisk_top.collect.roots import Roots

TRAIN = "import time, sys\nsys.stdout.write('up\\n'); sys.stdout.flush()\ntime.sleep(120)\n"


def _script(tmp_path, name: str, body: str, shebang: bool = False) -> str:
    path = str(tmp_path / name)
    with open(path, "w") as f:
        f.write((f"#!{sys.executable}\n" if shebang else "") + body)
    os.chmod(path, 0o755)
    return path


def _children(pid: int) -> list[int]:
    out = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def _wait_children(pid: int, n: int, timeout_s: float = 30.0) -> list[int]:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        kids = _children(pid)
        if len(kids) >= n:
            return kids
        time.sleep(0.05)
    raise AssertionError(f"pid {pid} has {_children(pid)} children, wanted {n}")


def _cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode().strip()


def _tag(pid: int, rootfs: str = "/") -> jobid.JobTag:
    ident = jobid.JobIdentifier(Roots(), rootfs)
    cmd = _cmdline(pid)
    with open(f"/proc/{pid}/comm") as f:
        comm = f.read().strip()
    return ident.tag(pid, cmd, cmd, comm)


@pytest.fixture
def procs():
    started: list[subprocess.Popen] = []

    def start(argv, **kw) -> subprocess.Popen:
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, **kw)
        started.append(p)
        return p
    yield start
    for p in started:
        # its descendants first (the ranks a launcher started): killing it alone left
        # them to sleep out their two minutes beside the rest of the suite
        for pid in reversed(_descendants(p.pid)):
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        try:
            os.killpg(p.pid, 9) if kw_group(p) else p.kill()
        except OSError:
            pass
        p.wait()


def _descendants(pid: int) -> list[int]:
    """pid's children, theirs, ... as the kernel lists them (task/*/children), parents
    first; what has exited meanwhile is left out."""
    out, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            tids = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{parent}/task/{tid}/children") as f:
                    kids = [int(x) for x in f.read().split()]
            except (OSError, ValueError):
                continue
            out.extend(kids)
            todo.extend(kids)
    return out


def kw_group(p) -> bool:
    try:
        return os.getpgid(p.pid) == p.pid
    except OSError:
        return False


def test_slurm_and_torchelastic_from_the_environment(tmp_path, procs):
    train = _script(tmp_path, "train.py", TRAIN)
    env = dict(os.environ, SLURM_JOB_ID="1001", SLURM_JOB_NAME="llama")
    a = procs([sys.executable, train], env=env)
    b = procs([sys.executable, train], env=dict(os.environ, TORCHELASTIC_RUN_ID="run-7f"))
    c = procs([sys.executable, train], env=dict(os.environ, SLURM_JOB_ID="12; rm -rf /"))
    for p in (a, b, c):
        p.stdout.readline()
    assert _tag(a.pid) == jobid.JobTag("slurm:1001", "slurm", "slurm 1001 (train.py)")
    assert _tag(b.pid) == jobid.JobTag("torchelastic:run-7f", "torchelastic",
                                       "torchrun run-7f (train.py)")
    # a job id that is not a Slurm job id is not taken as one
    assert _tag(c.pid).id == f"pid:{c.pid}"


def test_ranks_under_a_launcher_are_one_job_and_a_sweeps_runs_are_not(tmp_path, procs):
    train = _script(tmp_path, "train.py", TRAIN)
    spawn = (f"import subprocess, sys, time\n"
             f"ps = [subprocess.Popen([sys.executable, {train!r}]) for _ in range(2)]\n"
             f"time.sleep(120)\n")
    # torchrun is a console script: its comm is "torchrun"
    launcher = procs([_script(tmp_path, "torchrun", spawn, shebang=True)])
    sweep = procs([sys.executable, _script(tmp_path, "sweep.py", spawn)])
    ranks = _wait_children(launcher.pid, 2)
    runs = _wait_children(sweep.pid, 2)
    time.sleep(0.3)
    tags = {_tag(r) for r in ranks}
    assert len(tags) == 1
    (tag,) = tags
    assert tag.id == f"pid:{launcher.pid}" and tag.source == "launcher"
    assert tag.name == f"torchrun pid {launcher.pid} (train.py)"
    assert {_tag(r).id for r in runs} == {f"pid:{r}" for r in runs}


def test_multiprocessing_children_and_forks_are_their_parents_job(tmp_path, procs):
    body = ("import multiprocessing as mp, os, time\n"
            "def rank(i):\n    time.sleep(120)\n"
            "if __name__ == '__main__':\n"
            "    ps = [mp.get_context('spawn').Process(target=rank, args=(i,)) for i in range(2)]\n"
            "    [p.start() for p in ps]\n"
            "    if os.fork() == 0:\n        time.sleep(120)\n"
            "    time.sleep(120)\n")
    parent = procs([sys.executable, _script(tmp_path, "train_mp.py", body)])
    kids = _wait_children(parent.pid, 4)     # 2 spawned ranks, a fork, the resource tracker
    ranks = [k for k in kids if "multiprocessing.spawn" in _cmdline(k)
             or _cmdline(k) == _cmdline(parent.pid)]
    assert len(ranks) == 3
    for r in ranks:
        t = _tag(r)
        assert (t.id, t.source) == (f"pid:{parent.pid}", "process")
        assert t.name == f"pid {parent.pid} (train_mp.py)"


def _cgroup(rel: str):
    root = cgroup2_root(Roots())
    if root is None or os.geteuid() != 0:
        pytest.skip("needs root and a cgroup v2 tree")
    path = os.path.join(root, rel)
    os.makedirs(path, exist_ok=True)
    return root, path


def _in_cgroup(path: str, pid: int) -> None:
    with open(os.path.join(path, "cgroup.procs"), "w") as f:
        f.write(str(pid))


def _remove(root: str, path: str) -> None:
    while path != root and path.startswith(root):
        try:
            os.rmdir(path)
        except OSError:
            return
        path = os.path.dirname(path)


UID = "7c1e2b3a-4d5e-6f70-8192-a3b4c5d6e7f8"
CID = "3f2a1b9c0d4e" + "0" * 52


@pytest.mark.root
@pytest.mark.parametrize("rel, want_id, want_name, names", [
    ("system.slice/slurmstepd.scope/job_2002/step_0/user/task_0", "slurm:2002",
     "slurm 2002 (train.py)", {}),
    (f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID.replace('-', '_')}"
     f".slice/cri-containerd-{CID}.scope", f"k8s:{UID}", "pod team-a/llama-0",
     {f"var/log/pods/team-a_llama-0_{UID}/trainer/0.log": ""}),
    (f"kubepods/besteffort/pod{UID}/{CID}", f"k8s:{UID}", f"pod {UID[:8]}", {}),
    (f"system.slice/docker-{CID}.scope", "docker:3f2a1b9c0d4e", "docker trainer-3",
     {f"var/lib/docker/containers/{CID}/config.v2.json": json.dumps({"Name": "/trainer-3"})}),
    (f"machine.slice/libpod-{CID}.scope", "podman:3f2a1b9c0d4e", "podman 3f2a1b9c0d4e", {}),
    ("system.slice/train-llama.service", "systemd:train-llama", "service train-llama.service "
     "(train.py)", {}),
])
def test_jobs_from_their_cgroups(tmp_path, procs, rel, want_id, want_name, names):
    rootfs = tmp_path / "host"
    for name, text in names.items():
        (rootfs / name).parent.mkdir(parents=True, exist_ok=True)
        (rootfs / name).write_text(text)
    root, path = _cgroup("gdt-test-" + str(os.getpid()) + "/" + rel)
    train = _script(tmp_path, "train.py", TRAIN)
    p = procs([sys.executable, train])
    try:
        p.stdout.readline()
        _in_cgroup(path, p.pid)
        t = _tag(p.pid, str(rootfs))
        assert (t.id, t.name) == (want_id, want_name)
    finally:
        p.kill()
        p.wait()
        _remove(root, path)


@pytest.mark.root
def test_hostile_names_are_bounded_and_a_symlinked_config_is_not_followed(tmp_path, procs):
    rootfs = tmp_path / "host"
    evil = "ns_\x1b]2;owned\x07" + "x" * 10_000
    pods = rootfs / "var/log/pods"
    pods.mkdir(parents=True)
    (pods / f"{evil[:200]}_llama_{UID}").mkdir()
    cfg = rootfs / f"var/lib/docker/containers/{CID}"
    cfg.mkdir(parents=True)
    (tmp_path / "secret.json").write_text(json.dumps({"Name": "/followed"}))
    os.symlink(tmp_path / "secret.json", cfg / "config.v2.json")
    train = _script(tmp_path, "train.py", TRAIN)
    for rel, check in ((f"kubepods/pod{UID}/{CID}",
                        lambda t: t.id == f"k8s:{UID}" and len(t.name) <= jobid.MAX_NAME
                        and t.name.startswith("pod ns/\x1b]2;owned\x07xxx")),
                       (f"docker/{CID}", lambda t: t.name == "docker 3f2a1b9c0d4e")):
        root, path = _cgroup(f"gdt-test-{os.getpid()}/{rel}")
        p = procs([sys.executable, train])
        try:
            p.stdout.readline()
            _in_cgroup(path, p.pid)
            t = _tag(p.pid, str(rootfs))
            assert check(t), t
        finally:
            p.kill()
            p.wait()
            _remove(root, path)


@pytest.mark.root
def test_an_environment_it_may_not_read_falls_to_the_next_rule(tmp_path, procs):
    """Not root: another user's /proc/PID/environ cannot be read; the job is then told by
    its process tree, never a guess."""
    train = _script(tmp_path, "train.py", TRAIN)
    p = procs([sys.executable, train], env=dict(os.environ, SLURM_JOB_ID="4004"))
    p.stdout.readline()
    code = ("import os, sys, json; os.setgid(65534); os.setuid(65534)\n"
            "from gpudisk_top.collect import jobid\nfrom gpudisk_top.collect.roots import Roots\n"
            f"t = jobid.JobIdentifier(Roots()).tag({p.pid}, 'k', 'python train.py', 'python')\n"
            "print(json.dumps(t.as_record()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=standin.ROOT, timeout=60,
                         env=dict(os.environ, PYTHONPATH=standin.ROOT))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [f"pid:{p.pid}", "process", "pid %d (train.py)" % p.pid]
    assert _tag(p.pid).id == "slurm:4004"        # as root, the same process is Slurm's


def test_a_thousand_short_lived_gpu_processes_stay_bounded():
    ident = jobid.JobIdentifier(Roots())
    pids = []
    for _ in range(1000):
        p = subprocess.Popen(["true"])
        p.wait()
        pids.append(p.pid)
    for pid in pids:
        t = ident.tag(pid, "k", "true", "true")
        assert t.id == f"pid:{pid}"
    assert len(ident._cache) <= jobid.MAX_CACHED
    ident.forget_gone(set())
    assert not ident._cache


def test_two_jobs_read_apart_on_the_command_line(tmp_path, procs):
    """The real command line, stand-in GPUs: two Slurm jobs on one node are two jobs in
    `--once --json`, each with its GPUs and PIDs, the top-level verdict one of theirs."""
    train = _script(tmp_path, "train.py", TRAIN)
    a = procs([sys.executable, train], env=dict(os.environ, SLURM_JOB_ID="1001"))
    b = procs([sys.executable, train], env=dict(os.environ, SLURM_JOB_ID="1002"))
    a.stdout.readline()
    b.stdout.readline()
    r = standin.run(["--once", "--json", "-i", "0.5"], gpus=4,
                    processes={0: [a.pid], 1: [a.pid], 2: [b.pid], 3: [b.pid]})
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    jobs = {j["id"]: j for j in d["jobs"]}
    assert set(jobs) == {"slurm:1001", "slurm:1002"}
    assert jobs["slurm:1001"]["gpus"] == [0, 1] and jobs["slurm:1001"]["pids"] == [a.pid]
    assert jobs["slurm:1002"]["gpus"] == [2, 3] and jobs["slurm:1002"]["pids"] == [b.pid]
    assert jobs["slurm:1001"]["name"] == "slurm 1001 (train.py)"
    for j in jobs.values():
        assert j["verdict"]["job_id"] == j["id"] and set(j["verdict"]["gpus"]) <= set(j["gpus"])
        assert j["ledger"]["idle_gpu_s"] == 0
    assert d["verdict"]["job_id"] in jobs


def test_an_id_shaped_like_a_label_injection_and_a_name_with_escapes(tmp_path, procs):
    """A run id that would close a Prometheus label is kept to the id's alphabet; a script
    named with an escape sequence and a newline is printed escaped, on one line, and the
    other job's block is whole."""
    evil = tmp_path / "x\x1b]2;pwned\x07\nverdict: healthy"
    evil.mkdir()
    train = _script(evil, "train.py", TRAIN)
    a = procs([sys.executable, train],
              env=dict(os.environ, TORCHELASTIC_RUN_ID='r"} gpudisk_top_state{state="healthy'))
    b = procs([sys.executable, _script(tmp_path, "ok.py", TRAIN)],
              env=dict(os.environ, SLURM_JOB_ID="77"))
    a.stdout.readline()
    b.stdout.readline()
    t = _tag(a.pid)
    assert t.id == "torchelastic:r___gpudisk_top_state_state__healthy" and t.source == "torchelastic"
    r = standin.run(["--once", "-i", "0.5"], gpus=2, processes={0: [a.pid], 1: [b.pid]})
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout
    lines = r.stdout.splitlines()
    assert not any(line.startswith("verdict: healthy") for line in lines)
    assert sum(line.startswith("job ") for line in lines) == 2
    assert any(line.startswith("job slurm 77 (ok.py) [slurm:77], GPU 1, pid ") for line in lines)


@pytest.mark.root
def test_slurm_on_a_cgroup_v1_host(tmp_path):
    """Slurm's cgroup v1 layout (.../slurm/uid_U/job_N/step_S/task_T in the v1 hierarchies,
    nothing in the v2 tree) is a Slurm job too."""
    from cgjobs import slurm_v1, unique_job_id
    from cgroup_job import CgJob, skip_unless_cgroups
    skip_unless_cgroups("v1")
    jid = unique_job_id()
    train = _script(tmp_path, "train.py", TRAIN)
    with CgJob(slurm_v1(jid, uid=0), [sys.executable, train], tree="v1",
               stdout=subprocess.PIPE) as job:
        job.proc.stdout.readline()
        with open(f"/proc/{job.pid}/cgroup") as f:
            text = f.read()
        assert any(f"/slurm/uid_0/job_{jid}/" in line for line in text.splitlines()
                   if not line.startswith("0::")), text       # in a v1 hierarchy
        t = _tag(job.pid)
        assert (t.id, t.source, t.name) == (f"slurm:{jid}", "slurm", f"slurm {jid} (train.py)")
