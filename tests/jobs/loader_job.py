#!/usr/bin/env python3
"""A training job in miniature, with real DataLoader-like workers, for the real-job tests.

The trainer (the process the stand-in GPU reports as its compute process) takes batches
from worker processes through a bounded queue, as torch's DataLoader does
(prefetch_factor 2 per worker), and spends STEP_S per batch on its "GPU step".  When the
workers keep up it makes 1/STEP_S steps a second: its healthy rate.  It rewrites
`--progress` with "<steps done> <time.time()>" after every step, which is what the
stand-in GPU's utilization follows (tests/standin.py), and `--truth` with one JSON line a
second: {"wall", "mode", "steps", "checkpoint": whether it wrote one that second}.

usage: loader_job.py MODE [--workers N] [--seconds S] [--data FILE] [--progress FILE]
                          [--truth FILE] [--reads R]
MODE:
  healthy     samples from memory: the workers keep up easily
  disk        each sample is R random 4 KiB O_DIRECT reads from FILE (32 by default): the
              workers wait on synchronous reads, as small-file datasets make them
  files       each sample is R random 64 KiB buffered reads from FILE: through the page
              cache, as a dataset of files is read (on a network or FUSE mount each one
              that misses the cache waits on the server or the daemon)
  cpu         each sample costs ~10 ms of CPU (a decode stand-in): the workers are busy
  light-cpu   each sample costs ~3 ms of CPU: fine alone, starved when others take the CPUs
  checkpoint  healthy, plus 2 GiB written and fsynced to FILE.ckpt every 10 s
              (--ckpt-mib, --ckpt-every; --ckpt-async: the same save on a thread of its
              own, so the trainer does not wait for it)
  trainer     the workers are light (samples from memory, asleep on a full prefetch queue);
              the trainer's own Python spends ~30 ms of CPU a step before its GPU step:
              the training loop itself is the bottleneck (~20 steps a second alone)
--then MODE2 --switch-s S: the workers turn to MODE2 (healthy: from memory) S seconds in,
  the same trainer going on (a job that was starved, then fixed: the ledger's test).
--gpu-device DEV: the trainer holds DEV open and mapped, as a CUDA process holds
  /dev/nvidiaN (the container tests' stand-in for the device node).
FILE must exist (any large file; the tests make one on the real disk).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import mmap
import multiprocessing as mp
import os
import random
import signal
import sys
import threading
import time

STEP_S = 0.02          # the "GPU step": 50 steps a second when data is ready
TRAINER_CPU_MS = 30.0  # trainer mode: the training loop's own Python, a step
BATCH = 8              # samples a batch
BLOCK = 4096


def _cpu_work(ms: float) -> None:
    end = time.thread_time() + ms / 1000.0
    h = b"x" * 4096
    while time.thread_time() < end:
        h = hashlib.sha256(h).digest() * 128


class Reader:
    def __init__(self, path: str, reads: int, direct: bool = True, block: int = BLOCK) -> None:
        self.fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
        self.blocks = os.lseek(self.fd, 0, os.SEEK_END) // block   # a file or a device
        self.buf = mmap.mmap(-1, block)
        self.block = block
        self.reads = reads

    def sample(self) -> int:
        total = 0
        for _ in range(self.reads):
            total += os.preadv(self.fd, [self.buf], random.randrange(self.blocks) * self.block)
        return total


def _die_with(parent: int) -> None:
    """A worker must not outlive its trainer (a trainer killed with SIGKILL leaves its
    multiprocessing children running, reading and burning CPU for ever): the kernel sends
    SIGKILL when the parent goes (PR_SET_PDEATHSIG), and the loop checks getppid too."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(0)


def worker(mode: str, path: str, reads: int, out: mp.Queue, parent: int,
           then: str | None = None, switch_at: float = 0.0) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with(parent)
    reader = (Reader(path, reads) if mode == "disk" else
              Reader(path, reads, direct=False, block=16 * BLOCK) if mode == "files" else None)
    while os.getppid() == parent:
        if then is not None and time.time() >= switch_at:
            mode, reader, then = then, None, None
        for _ in range(BATCH):
            if reader is not None:
                reader.sample()
            elif mode == "cpu":
                _cpu_work(10)
            elif mode == "light-cpu":
                _cpu_work(3)
        out.put(b"b" * 64)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["healthy", "disk", "files", "cpu", "light-cpu", "checkpoint",
                                       "trainer"])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--data", required=True)
    ap.add_argument("--progress", default=None)
    ap.add_argument("--truth", default=None)
    ap.add_argument("--reads", type=int, default=32)
    ap.add_argument("--ckpt-every", type=float, default=10.0,
                    help="checkpoint mode: seconds between the end of one save and the next")
    ap.add_argument("--ckpt-mib", type=int, default=2048, help="checkpoint mode: MiB a save")
    ap.add_argument("--ckpt-file", default=None, help="checkpoint mode: where (FILE.ckpt)")
    ap.add_argument("--ckpt-async", action="store_true",
                    help="checkpoint mode: save on a thread, the trainer going on meanwhile")
    ap.add_argument("--then", choices=["healthy", "cpu", "light-cpu"], default=None)
    ap.add_argument("--switch-s", type=float, default=0.0)
    ap.add_argument("--gpu-device", default=None,
                    help="a file to hold open and map as a CUDA process holds /dev/nvidiaN, "
                         "before the workers fork (they inherit it, as DataLoader's do)")
    a = ap.parse_args()
    if a.gpu_device:
        gpu_fd = os.open(a.gpu_device, os.O_RDWR)
        a.gpu_map = mmap.mmap(gpu_fd, 64 << 20, mmap.MAP_SHARED, mmap.PROT_READ)
    ctx = mp.get_context("fork")
    queue = ctx.Queue(maxsize=2 * a.workers)
    switch_at = time.time() + a.switch_s
    procs = [ctx.Process(target=worker, args=(a.mode, a.data, a.reads, queue, os.getpid(),
                                              a.then, switch_at), daemon=True)
             for _ in range(a.workers)]
    for p in procs:
        p.start()
    truth = open(a.truth, "a") if a.truth else None
    t0 = last = last_ckpt = time.time()
    steps = second_steps = 0
    ckpt: tuple[float, float] | None = None   # the latest checkpoint's (start, end)
    saver = None                               # --ckpt-async: the thread that saves

    def save() -> None:
        with open(a.ckpt_file or a.data + ".ckpt", "wb") as f:
            chunk = os.urandom(1 << 20)
            for _ in range(a.ckpt_mib):
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())

    def save_every() -> None:
        while True:
            time.sleep(a.ckpt_every)
            save()

    def log_seconds(now: float) -> None:
        """One truth line per whole second since the last one: the steps made in the
        first, none in those a checkpoint held the trainer in."""
        nonlocal last, second_steps
        while truth is not None and now - last >= 1:
            end = last + 1 if now - last >= 2 else now
            in_ckpt = ckpt is not None and ckpt[0] < end and ckpt[1] > last
            truth.write(json.dumps({"wall": round(end, 3), "mode": a.mode,
                                    "steps": second_steps, "checkpoint": in_ckpt}) + "\n")
            truth.flush()
            second_steps, last = 0, end

    try:
        while time.time() - t0 < a.seconds:
            queue.get()
            if a.mode == "trainer":
                _cpu_work(TRAINER_CPU_MS)            # the training loop's own Python
            time.sleep(STEP_S)                       # the GPU step
            steps += 1
            second_steps += 1
            now = time.time()
            if a.progress:
                tmp = a.progress + ".tmp"
                with open(tmp, "w") as f:
                    f.write(f"{steps} {now:.3f}\n")
                os.replace(tmp, a.progress)
            log_seconds(now)
            if a.mode == "checkpoint" and a.ckpt_async:
                if saver is None:
                    saver = threading.Thread(target=save_every, daemon=True)
                    saver.start()
            elif a.mode == "checkpoint" and now - last_ckpt >= a.ckpt_every:
                start = time.time()
                save()
                last_ckpt = time.time()
                ckpt = (start, last_ckpt)
                log_seconds(last_ckpt)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.join(5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
