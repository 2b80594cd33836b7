#!/usr/bin/env python3
"""A launcher of K GPU processes, as one job starts its ranks: the real-job tests' stand-in
for torchrun (and srun, deepspeed, accelerate, mpirun) and torch.multiprocessing.spawn.

It starts K children, each with the environment its rank gets from the launcher, waits
for them, and exits with the worst of their codes; SIGTERM or SIGINT to it stops them.
Each child dies with it (PR_SET_PDEATHSIG), as torchrun's and spawn's children do.

  --style exec    each child is `python JOB ARGS...` started with fork+exec, as torchrun's
                  agent (and srun, mpirun) starts its workers: a process of its own
  --style spawn   each child is a multiprocessing `spawn` process running JOB as
                  __main__, as torch.multiprocessing.spawn starts them: its command line
                  is `python -c "from multiprocessing.spawn import spawn_main; ..."`

usage: launcher.py --nprocs K [--style exec|spawn] [--run-id ID] [--slurm] [--pids FILE]
                   -- JOB [ARGS...]
"{rank}" in ARGS becomes each child's rank (its own --progress file, say).  --pids FILE:
the children's PIDs in rank order, as a JSON list, written once all have started.
--run-id ID: the children get torchrun's TORCHELASTIC_RUN_ID and rendezvous variables;
--slurm: srun's per-task SLURM_PROCID and SLURM_LOCALID.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import runpy
import signal
import subprocess
import sys

MASTER_PORT = 29500      # torchrun's default rendezvous port


def rank_env(rank: int, world_size: int, *, run_id: str | None = None, slurm: bool = False,
             master_addr: str = "127.0.0.1", master_port: int = MASTER_PORT) -> dict[str, str]:
    """The variables a rank of a one-node job gets from its launcher: torch's RANK,
    LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT (torchrun and the
    spawn-based scripts alike); TORCHELASTIC_RUN_ID and torchrun's own with `run_id`;
    srun's SLURM_PROCID and SLURM_LOCALID with `slurm`.  Raises nothing."""
    env = {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world_size),
           "LOCAL_WORLD_SIZE": str(world_size), "GROUP_RANK": "0",
           "MASTER_ADDR": master_addr, "MASTER_PORT": str(master_port)}
    if run_id is not None:
        env.update(TORCHELASTIC_RUN_ID=run_id, TORCHELASTIC_RESTART_COUNT="0",
                   TORCHELASTIC_MAX_RESTARTS="0", ROLE_RANK=str(rank), ROLE_NAME="default")
    if slurm:
        env.update(SLURM_PROCID=str(rank), SLURM_LOCALID=str(rank))
    return env


def _die_with_parent() -> None:
    """PR_SET_PDEATHSIG: the child gets SIGKILL when the launcher goes, however it goes
    (a SIGKILL to the launcher leaves no rank running)."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _spawned(argv: list[str], env: dict[str, str], parent: int) -> None:
    """A spawn child: JOB runs as __main__ in this process, as mp.spawn's function runs."""
    _die_with_parent()
    if os.getppid() != parent:
        os._exit(0)
    os.environ.update(env)
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as end:
        sys.exit(end.code)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nprocs", type=int, required=True)
    ap.add_argument("--style", choices=["exec", "spawn"], default="exec")
    ap.add_argument("--run-id", default=None)
    ap.add_argument("--slurm", action="store_true")
    ap.add_argument("--pids", default=None)
    ap.add_argument("job", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    job = a.job[1:] if a.job[:1] == ["--"] else a.job
    if not job or a.nprocs < 1:
        ap.error("a JOB and --nprocs >= 1 are needed")
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    children: list = []
    for rank in range(a.nprocs):
        argv = [arg.replace("{rank}", str(rank)) for arg in job]
        env = rank_env(rank, a.nprocs, run_id=a.run_id, slurm=a.slurm)
        if a.style == "spawn":
            p = mp.get_context("spawn").Process(target=_spawned, args=(argv, env, os.getpid()))
            p.start()
        else:
            p = subprocess.Popen([sys.executable, *argv], env=dict(os.environ, **env),
                                 preexec_fn=_die_with_parent)
        children.append(p)
    if a.pids:
        with open(a.pids + ".tmp", "w") as f:
            json.dump([p.pid for p in children], f)
        os.replace(a.pids + ".tmp", a.pids)
    codes = []
    for p in children:
        while True:
            if stopping:
                for q in children:
                    q.terminate()
            try:
                code = p.wait(0.2) if a.style == "exec" else (p.join(0.2) or p.exitcode)
            except subprocess.TimeoutExpired:
                continue
            if code is not None:
                codes.append(abs(code))
                break
    return max(codes)


if __name__ == "__main__":
    sys.exit(main())
