"""Stand-in GPUs for running gpudisk-top's real command line on this GPU-less machine.

The project's one NVML fake (gpudisk_top/sim/fake_nvml.py) is put where `import pynvml`
finds it, in a fresh interpreter that then runs `gpudisk_top.cli.main(argv)`: every
collector, the sampler, the model and the outputs are the real ones, only the driver is
not.  The fake's clock follows the wall clock, advanced on each utilization read.

    proc = standin.popen(["record", "-o", path], gpus=2,
                         processes={0: [os.getpid()]},        # NVML's compute processes
                         hang={"function": "nvmlDeviceGetPowerUsage", "after_s": 2.0},
                         progress="/tmp/job.progress", healthy_steps_s=20.0)

`hang`: that function blocks from `after_s` seconds after start, or (under load, where
start-up itself may take seconds) from its call after the first `after_calls` ones.

`dev_dir`: a directory of stand-ins for /dev/nvidiaN (a device node cannot be opened
without the driver), for the container tests (collect/devmap.py reads the real fd links).

`progress`: a file a real job rewrites with "<steps done> <time.time()>"; each GPU's
utilization is then the job's step rate over the last second against its healthy rate
(the GPU is busy exactly while the job makes progress), as a training job's GPU is.  One
path: every GPU follows that job.  A file per GPU, for a node of several jobs (each GPU
follows its own job's progress; a GPU with none stays at `util_pct`):

    standin.run(["--once", "--json"], gpus=3, progress={0: job_a, 1: job_a, 2: job_b}, ...)
    standin.run(["--once", "--json"], gpus=3, progress=[job_a, job_a, None], ...)

`env`: variables to add to the command's environment.

`exited_leave`: a listed process that exited (gone, or a zombie) leaves NVML's list, as it
leaves the real driver's: a job that ends is seen to end (by default the list stays as
given, for processes of other PID namespaces that do not exist here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Mapping, Optional, Sequence, Union

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CODE = r'''
import json, os, sys, threading, time
from gpudisk_top.sim.fake_nvml import FakeNvml

cfg = json.loads(os.environ["GDT_STANDIN"])


class LiveFake(FakeNvml):
    """The fake, following the wall clock; utilization from a job's progress file."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self._lock = threading.Lock()
        self._history = {}          # progress file: [(time, steps)] read from it

    def _util_from_progress(self, path):
        try:
            with open(path) as f:
                steps, at = (float(x) for x in f.read().split()[:2])
        except (OSError, ValueError):
            return None
        now = time.time()
        history = self._history.setdefault(path, [])
        history.append((now, steps))
        # the rate over about the last second: keep the newest reading older than that
        older = [i for i, (t, _) in enumerate(history) if now - t > 1.0]
        if older:
            del history[:older[-1]]
        t0, s0 = history[0]
        if now - t0 < 0.5:
            return None
        rate = (steps - s0) / (now - t0)
        return max(0.0, min(100.0, 100.0 * rate / cfg["healthy_steps_s"]))

    def nvmlDeviceGetSamples(self, device, sampling_type, timeStamp):
        with self._lock:
            # every GPU's state from its job's progress at GPU 0's read, before the clock
            # moves: each GPU's samples of the interval then carry its rate of that interval
            if any(cfg["progress"]) and device.index == 0:
                utils = {path: self._util_from_progress(path)
                         for path in set(cfg["progress"]) if path}
                for i, path in enumerate(cfg["progress"][:len(self.gpus)]):
                    util = utils.get(path)
                    if util is not None:
                        self.set_state(i, util_pct=util, mem_util_pct=util / 2,
                                       power_mw=int(100_000 + 5_000 * util))
            self.advance_to(time.time())
            return super().nvmlDeviceGetSamples(device, sampling_type, timeStamp)

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        listed = super().nvmlDeviceGetComputeRunningProcesses(handle)
        if not cfg.get("exited_leave"):
            return listed
        return [p for p in listed if _alive(p.pid)]


def _alive(pid):
    """A process that exited (gone, or a zombie) leaves the driver's list."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return False


nvml = LiveFake(idle_samples=True)
for i in range(cfg["gpus"]):
    from gpudisk_top.sim.fake_nvml import FakeGpu
    nvml.add_gpu(FakeGpu())
    pids = cfg.get("processes", {}).get(str(i), [])
    nvml.set_state(i, util_pct=cfg.get("util_pct", 0.0),
                   processes=[(pid, 2 * 2**30) for pid in pids])
hang = cfg.get("hang")
if hang and "after_calls" in hang:
    nvml.hang(hang["function"], hang.get("gpu"), after_calls=hang["after_calls"])
elif hang:
    def start_hang():
        time.sleep(hang.get("after_s", 0.0))
        nvml.hang(hang["function"], hang.get("gpu"))
    threading.Thread(target=start_hang, daemon=True).start()
sys.modules["pynvml"] = nvml
if cfg.get("dev_dir"):
    # the nvidia device files are stand-ins there (no driver here to open a real node)
    import gpudisk_top.collect.devmap as devmap
    devmap.DEV_DIR = cfg["dev_dir"]
from gpudisk_top.cli import main
sys.exit(main(cfg["argv"]))
'''


Progress = Union[str, Mapping[int, Optional[str]], Sequence[Optional[str]], None]


def progress_per_gpu(progress: Progress, gpus: int) -> list[str | None]:
    """Each GPU's progress file (None: none) from any of `command`'s forms of `progress`.
    Raises ValueError for a GPU index outside 0..gpus-1 or a list longer than `gpus`."""
    if progress is None or isinstance(progress, str):
        return [progress] * gpus
    if isinstance(progress, Mapping):
        if any(not 0 <= int(i) < gpus for i in progress):
            raise ValueError(f"progress names a GPU outside 0..{gpus - 1}: {sorted(progress)}")
        return [progress.get(i) for i in range(gpus)]
    paths = list(progress)
    if len(paths) > gpus:
        raise ValueError(f"progress has {len(paths)} paths for {gpus} GPUs")
    return paths + [None] * (gpus - len(paths))


def command(argv: list[str], *, gpus: int = 1, processes: dict[int, list[int]] | None = None,
            util_pct: float = 0.0, hang: dict | None = None, progress: Progress = None,
            healthy_steps_s: float | None = None, dev_dir: str | None = None,
            env: Mapping[str, str] | None = None,
            exited_leave: bool = False) -> tuple[list[str], dict[str, str]]:
    """(argv, env) for subprocess: gpudisk-top `argv` with stand-in GPUs.  dev_dir: where
    stand-ins for /dev/nvidiaN are (collect/devmap.py).  progress: one path for every GPU,
    or a path per GPU ({index: path} or a list; the module docstring).  env: added to the
    environment.  Raises ValueError as progress_per_gpu does."""
    cfg = {"argv": list(argv), "gpus": gpus, "util_pct": util_pct,
           "processes": {str(k): v for k, v in (processes or {}).items()},
           "hang": hang, "progress": progress_per_gpu(progress, gpus),
           "healthy_steps_s": healthy_steps_s, "dev_dir": dev_dir, "exited_leave": exited_leave}
    full_env = dict(os.environ, **(env or {}), GDT_STANDIN=json.dumps(cfg))
    return [sys.executable, "-c", _CODE], full_env


def run(argv: list[str], timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    cmd, env = command(argv, **kw)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def popen(argv: list[str], **kw) -> subprocess.Popen:
    cmd, env = command(argv, **kw)
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)
