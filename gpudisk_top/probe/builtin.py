"""One probe test through our own O_DIRECT reader, for machines without fio.

Queue depth N is N threads, each with one read in flight: os.preadv releases the GIL
for the system call, so the device sees N reads at once, as fio's libaio does with one
thread.  The difference is CPU: every read costs a trip through the interpreter and a
GIL hand-off, so on a machine with few cores a fast device's QD32 ceiling is out of
reach, and latencies include the wait for the GIL.  Buffers are anonymous mmaps:
page-aligned, as O_DIRECT needs.  The file is opened O_RDONLY; nothing here writes.
"""

from __future__ import annotations

import itertools
import math
import mmap
import os
import random
import stat
import threading
import time
from array import array

from gpudisk_top.errors import RuntimeFailure
from gpudisk_top.probe.spec import TestResult, TestSpec

HUNG_GRACE_S = 10.0   # reads still out this long after the end: the device is hung


class _Run:
    """State shared by one test's threads."""

    def __init__(self, spec: TestSpec, fd: int, span_bytes: int, seconds: float,
                 ramp_s: float, start_bytes: int) -> None:
        self.spec, self.fd, self.seconds, self.ramp_s = spec, fd, seconds, ramp_s
        self.blocks = span_bytes // spec.block_bytes
        self.stop = threading.Event()
        self.barrier = threading.Barrier(spec.queue_depth, action=self._start)
        self.start_ns = self.measure_ns = self.deadline_ns = 0
        # next() is atomic under the GIL: each sequential read takes the next block
        self.next_block = itertools.count(start_bytes // spec.block_bytes)
        self.latencies: list[array] = []
        self.ends_ns: list[int] = []
        self.errors: list[OSError] = []

    def _start(self) -> None:
        self.start_ns = time.perf_counter_ns()
        self.measure_ns = self.start_ns + int(self.ramp_s * 1e9)
        self.deadline_ns = self.measure_ns + int(self.seconds * 1e9)

    def worker(self) -> None:
        bs, blocks, fd = self.spec.block_bytes, self.blocks, self.fd
        buf = mmap.mmap(-1, bs)
        bufs = [buf]
        lat = array("q")
        # fresh offsets on every run (fio's randrepeat=0): a repeated sequence would be
        # served from the caches of a hypervisor or array that the last probe warmed
        rnd = random.Random(os.urandom(16)).randrange
        sequential = self.spec.rw == "read"
        nxt, perf, preadv, stop = self.next_block, time.perf_counter_ns, os.preadv, self.stop
        try:
            self.barrier.wait()
            measure, deadline = self.measure_ns, self.deadline_ns
            t0 = perf()
            while t0 < deadline and not stop.is_set():
                off = (next(nxt) % blocks if sequential else rnd(blocks)) * bs
                if preadv(fd, bufs, off) != bs:   # only past the end: the file shrank
                    raise OSError(f"a short read at offset {off}: did it shrink?")
                t1 = perf()
                if t1 >= measure:
                    lat.append(t1 - t0)
                t0 = t1
        except threading.BrokenBarrierError:
            return
        except OSError as err:
            self.errors.append(err)
            self.stop.set()
        finally:
            buf.close()
            self.latencies.append(lat)
            self.ends_ns.append(time.perf_counter_ns())


def run(spec: TestSpec, path: str, span_bytes: int, seconds: float,
        ramp_s: float = 0.0, start_bytes: int = 0) -> TestResult:
    """Run one test for `ramp_s` unmeasured, then `seconds` measured; sequential reads
    start at `start_bytes` and wrap at the end of the span.  Raises
    RuntimeFailure when the reads fail or hang; KeyboardInterrupt passes through once
    the threads have stopped."""
    try:
        # non-blocking, then checked: a FIFO swapped in since the target was resolved is
        # refused, never waited on; the reads themselves block as usual
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT | os.O_CLOEXEC | os.O_NOCTTY
                     | os.O_NONBLOCK)
    except OSError as err:
        raise RuntimeFailure(f"cannot open {path} for direct reads: "
                             f"{err.strerror or err}") from None
    mode = os.fstat(fd).st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISBLK(mode)):
        os.close(fd)
        raise RuntimeFailure(f"{path} is no longer a file or a block device; not read")
    os.set_blocking(fd, True)
    state = _Run(spec, fd, span_bytes, seconds, ramp_s, start_bytes)
    threads = [threading.Thread(target=state.worker, daemon=True,
                                name=f"probe-{spec.name}-{i}")
               for i in range(spec.queue_depth)]
    hung = False
    try:
        for t in threads:
            t.start()
        give_up = time.monotonic() + ramp_s + seconds + HUNG_GRACE_S
        for t in threads:
            while t.is_alive() and time.monotonic() < give_up:
                t.join(timeout=0.2)   # short waits: a signal is handled promptly
        hung = any(t.is_alive() for t in threads)
    except BaseException:
        state.stop.set()
        state.barrier.abort()
        for t in threads:
            t.join(timeout=2)
        raise
    finally:
        state.stop.set()
        if not hung:   # a thread still in preadv keeps using the fd; leave it open
            os.close(fd)
    if hung:
        raise RuntimeFailure(f"reads of {path} did not complete within {HUNG_GRACE_S:.0f} s "
                             "of the end: the device may be hung")
    if state.errors:
        err = state.errors[0]
        raise RuntimeFailure(f"reading {path} failed: {err.strerror or err}")
    return _result(spec, state)


def _result(spec: TestSpec, state: _Run) -> TestResult:
    lat = sorted(itertools.chain.from_iterable(state.latencies))
    if not lat:
        raise RuntimeFailure("the built-in reader completed no reads")
    elapsed_s = (max(state.ends_ns) - state.measure_ns) / 1e9
    p99 = lat[max(0, math.ceil(0.99 * len(lat)) - 1)]   # nearest rank
    return TestResult(name=spec.name, engine="builtin", seconds=elapsed_s, ios=len(lat),
                      iops=len(lat) / elapsed_s,
                      read_mib_s=len(lat) * spec.block_bytes / 2**20 / elapsed_s,
                      lat_mean_ms=sum(lat) / len(lat) / 1e6, lat_p99_ms=p99 / 1e6)
