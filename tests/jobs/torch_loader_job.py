#!/usr/bin/env python3
"""loader_job.py's `disk` mode with a real torch.utils.data.DataLoader, for where torch is
installed (tests/whatif_harness.py's `torch-latency-2` scenario): DataLoader worker
processes (num_workers, prefetch_factor 2) each reading a sample as R random 4 KiB
O_DIRECT reads, batches of 8, and a trainer that spends STEP_S per batch on its "GPU
step" and rewrites `--progress` with "<steps done> <time.time()>" after every step.

usage: torch_loader_job.py disk [--workers N] [--seconds S] --data FILE [--progress FILE]
                                [--reads R]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch.utils.data as tud  # noqa: E402

from loader_job import BATCH, STEP_S, Reader  # noqa: E402


class Blocks(tud.Dataset):
    """Sample i: `reads` random 4 KiB O_DIRECT reads; the file opened once per worker."""

    def __init__(self, path: str, reads: int) -> None:
        self.path, self.reads = path, reads
        self.reader: Reader | None = None
        self.pid = None

    def __len__(self) -> int:
        return 1 << 40

    def __getitem__(self, i: int) -> int:
        if self.pid != os.getpid():          # a DataLoader worker's first sample
            self.reader, self.pid = Reader(self.path, self.reads), os.getpid()
        return self.reader.sample()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["disk"])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--data", required=True)
    ap.add_argument("--progress", default=None)
    ap.add_argument("--reads", type=int, default=32)
    a, _rest = ap.parse_known_args()
    loader = tud.DataLoader(Blocks(a.data, a.reads), batch_size=BATCH, num_workers=a.workers,
                            prefetch_factor=2)
    t0, steps = time.time(), 0
    for _batch in loader:
        time.sleep(STEP_S)                   # the GPU step
        steps += 1
        now = time.time()
        if a.progress:
            tmp = a.progress + ".tmp"
            with open(tmp, "w") as f:
                f.write(f"{steps} {now:.3f}\n")
            os.replace(tmp, a.progress)
        if now - t0 >= a.seconds:
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
