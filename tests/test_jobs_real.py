"""Every job on a shared node its own verdict, proven on real jobs (issue 37).

Real jobs (tests/jobs/loader_job.py: a trainer fed by DataLoader-like worker processes)
in real cgroups laid out as Slurm, Kubernetes and Docker lay them out, with the
environment those schedulers set (tests/cgjobs.py); stand-in GPUs each following its own
job's real progress; gpudisk-top's real command line (`--once --json`, `record`, `report
--json`).  What each must read, whatever else loads the machine:
  - two jobs with different causes (disk-latency beside one fed from memory; CPU-bound
    beside disk-latency): each job's own verdict, in --once and in the recording's
    episodes, the node's verdict the starved one's;
  - one job of four ranks under a launcher beside four single-GPU jobs: five jobs;
  - a job that ends while another goes on: its episode closes, the other's goes on;
  - a neighbour job whose reads load the disk another job reads from: the victim names it.
"""

from __future__ import annotations

import os

import pytest

import realdisk
from cgjobs import (Node, container_id, docker_systemd, k8s_env, k8s_systemd, pod_uid,
                    skip_unless_cgroups, slurm_env, slurm_v2, starved_share, unique_job_id)

pytestmark = [pytest.mark.integration, pytest.mark.root]

DATA_MIB = 768
RECORD_S = 16


@pytest.fixture(scope="module")
def data_file():
    path = realdisk.random_file(os.path.join(realdisk.BASE, f"gdt-jobs-{os.getpid()}.bin"),
                                DATA_MIB)
    yield path
    os.unlink(path)


def _job(d: dict, job_id: str) -> dict:
    jobs = {j["id"]: j for j in d["jobs"]}
    assert job_id in jobs, sorted(jobs)
    return jobs[job_id]


def _episodes(report: dict, job_id: str) -> list[dict]:
    return [e for e in report["episodes"] if e["job_id"] == job_id]


def _starved_run(episodes: list[dict], state: str) -> float:
    return sum(e["duration_s"] for e in episodes if e["state"] == state)


def test_two_jobs_with_different_causes_each_get_their_own_verdict(tmp_path, data_file):
    skip_unless_cgroups()
    node = Node(tmp_path, data=data_file)
    sid = unique_job_id()
    a = node.add("a", slurm_v2(sid), mode="disk", gpus=2, workers=2, args=("--reads", "128"),
                 env=lambda gpus: slurm_env(sid, name="train.py", gpus=gpus))
    uid, cid = pod_uid(), container_id("b")
    node.host.pod("team-a", "llama-0", uid)
    b = node.add("b", k8s_systemd(uid, cid), mode="healthy", gpus=2, env=k8s_env("llama-0"))
    with node:
        seen = node.record(RECORD_S, once_at_s=RECORD_S / 2)
        report = node.report(seen.rec)
        truth_a, truth_b = a.truth(), b.truth()
    assert starved_share(truth_a) >= 0.6 and starved_share(truth_b) <= 0.3, (truth_a, truth_b)
    once = seen.once
    ja, jb = _job(once, f"slurm:{sid}"), _job(once, f"k8s:{uid}")
    assert ja["gpus"] == a.gpus and jb["gpus"] == b.gpus
    assert ja["name"] == f"slurm {sid} (loader_job.py)" and jb["name"] == "pod team-a/llama-0"
    assert ja["cgroup"] == a.cgroup and jb["cgroup"] == b.cgroup
    assert ja["verdict"]["state"] == "disk-starved", ja
    assert jb["verdict"]["state"] == "healthy", jb
    assert set(ja["verdict"]["gpus"]) == set(a.gpus) and a.trainers[0] in ja["verdict"]["processes"]
    # the node's verdict is the starved job's, and the healthy job's loss is nothing lost
    assert once["verdict"]["state"] == "disk-starved" and once["verdict"]["job_id"] == ja["id"]
    assert jb["ledger"]["lost_gpu_s"] == 0
    # the recording: the starved job's episodes cover most of the run; the healthy one has none
    assert _starved_run(_episodes(report, ja["id"]), "disk-starved") >= RECORD_S - 6, report["episodes"]
    assert not _episodes(report, jb["id"]), report["episodes"]


def test_cpu_bound_beside_disk_latency(tmp_path, data_file):
    skip_unless_cgroups()
    node = Node(tmp_path, data=data_file)
    cid = container_id("c")
    node.host.docker(cid, "decoder-1")
    c = node.add("c", docker_systemd(cid), mode="cpu", gpus=1, workers=1)
    sid = unique_job_id()
    d = node.add("d", slurm_v2(sid), mode="disk", gpus=1, workers=2, args=("--reads", "128"),
                 env=lambda gpus: slurm_env(sid, gpus=gpus))
    with node:
        once = node.once(2)
        truth = c.truth(), d.truth()
    jc, jd = _job(once, f"docker:{cid[:12]}"), _job(once, f"slurm:{sid}")
    assert jc["name"] == "docker decoder-1"
    assert jc["verdict"]["state"] == "cpu-starved", (jc, truth)
    assert jd["verdict"]["state"] == "disk-starved", (jd, truth)
    # neither job's evidence names the other's processes as its own
    assert c.trainers[0] not in jd["verdict"]["processes"]
    assert d.trainers[0] not in jc["verdict"]["processes"]


def test_four_ranks_under_a_launcher_beside_four_single_gpu_jobs_are_five_jobs(tmp_path, data_file):
    skip_unless_cgroups()
    node = Node(tmp_path, data=data_file)
    sid = unique_job_id()
    big = node.add("big", slurm_v2(sid), mode="healthy", gpus=4, launcher="torchrun",
                   env=lambda gpus: slurm_env(sid, gpus=gpus))
    # the single-GPU runs of a sweep, each started on its own (no scheduler): their trees
    singles = [node.add(f"s{i}", f"gdt-sweep-{os.getpid()}/run{i}", mode="healthy", gpus=1)
               for i in range(4)]
    with node:
        once = node.once(1)
    ids = [j["id"] for j in once["jobs"]]
    assert len(ids) == 5, ids
    big_job = _job(once, f"slurm:{sid}")
    assert big_job["gpus"] == big.gpus and sorted(big_job["pids"]) == sorted(big.trainers)
    for s in singles:
        (job,) = [j for j in once["jobs"] if j["gpus"] == s.gpus]
        assert job["pids"] == s.trainers and job["id"] == f"pid:{s.trainers[0]}"


def test_a_job_that_ends_closes_its_episode_and_leaves_the_other_alone(tmp_path, data_file):
    skip_unless_cgroups()
    node = Node(tmp_path, data=data_file)
    sa, sb = unique_job_id(), unique_job_id()
    a = node.add("a", slurm_v2(sa), mode="disk", gpus=1, workers=2, args=("--reads", "128"),
                 env=lambda gpus: slurm_env(sa, gpus=gpus))
    b = node.add("b", slurm_v2(sb), mode="disk", gpus=1, workers=2, args=("--reads", "128"),
                 env=lambda gpus: slurm_env(sb, gpus=gpus))
    import threading
    with node:
        timer = threading.Timer(RECORD_S / 2, node.end, args=(b,))
        timer.start()
        try:
            seen = node.record(RECORD_S)
        finally:
            timer.cancel()
        report = node.report(seen.rec)
        assert starved_share(a.truth()) >= 0.6
    ea, eb = _episodes(report, f"slurm:{sa}"), _episodes(report, f"slurm:{sb}")
    assert eb and all(e["end_s"] <= report["start_s"] + RECORD_S / 2 + 4 for e in eb), eb
    # a's starvation goes on through b's end: one episode that outlives it
    assert ea and max(e["end_s"] for e in ea) >= report["start_s"] + RECORD_S - 4, ea
    assert _starved_run(ea, "disk-starved") >= RECORD_S - 6, ea


def test_a_neighbour_job_loading_the_disk_is_named_by_the_victim(tmp_path, data_file):
    skip_unless_cgroups()
    node = Node(tmp_path, data=data_file)
    sv, sn = unique_job_id(), unique_job_id()
    victim = node.add("v", slurm_v2(sv), mode="disk", gpus=1, workers=1, args=("--reads", "64"),
                      env=lambda gpus: slurm_env(sv, gpus=gpus))
    node.add("n", slurm_v2(sn), mode="disk", gpus=1, workers=12, args=("--reads", "256"),
             env=lambda gpus: slurm_env(sn, gpus=gpus))
    with node:
        once = node.once(2)
    jv = _job(once, f"slurm:{sv}")
    assert jv["verdict"]["state"] == "disk-starved", jv
    named = [c for c in jv["verdict"]["culprits"] if c["job_id"] == f"slurm:{sn}"]
    assert named, jv["verdict"]
    assert f"job slurm {sn} (loader_job.py)" in jv["verdict"]["reason"]
    assert named[0]["read_share_pct"] > 50
    assert victim.trainers[0] not in named[0]["pids"]
