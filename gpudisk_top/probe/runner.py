"""The three tests of a probe inside one time budget, and the result as one JSON object
(what `probe --json` prints and what the results file keeps)."""

from __future__ import annotations

import math
import os
import random
import stat
import time
from dataclasses import dataclass, field
from typing import Callable

from gpudisk_top.errors import RuntimeFailure
from gpudisk_top.probe import builtin, fio
from gpudisk_top.probe.spec import TESTS, TestResult
from gpudisk_top.probe.target import Target

ENGINES = ("fio", "builtin")
MIN_TEST_S = 0.5     # shorter, and a test's start and end dominate what it measures
# Each test's first moments are not measured (fio's ramp_time): threads or fio starting,
# the queue filling, and a burst that a throttle or a cloud volume's token bucket lets
# through after the gentler test before it (a blkio cap was seen 8 % over for 1.5 s).
RAMP_FRACTION, MAX_RAMP_S = 0.1, 0.25
# A test that measured less than this share of its time was cut short (a read error, a
# file that ended, fio stopping early): its rate is not the device's.  Load on the
# machine only makes a test run longer, never shorter.
MIN_MEASURED_SHARE = 0.5


@dataclass
class ProbeResult:
    target: Target
    engine: str
    seconds: float                 # the budget asked for, all three tests together
    measured_at_s: float           # wall clock, seconds since the epoch, at the start
    tests: dict[str, TestResult] = field(default_factory=dict)

    def to_json(self) -> dict:
        t = self.target
        return {
            "device": t.device, "identity": t.identity, "identity_weak": t.identity_weak,
            "model": t.model, "argument": t.arg, "target": t.path, "target_kind": t.kind,
            "span_bytes": t.span_bytes, "engine": self.engine, "seconds": self.seconds,
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.measured_at_s)),
            "measured_at_s": round(self.measured_at_s, 3),
            "tests": {name: r.to_json() for name, r in self.tests.items()},
            "ceiling": self.ceiling(), "notes": list(t.notes),
        }

    def ceiling(self) -> dict:
        def get(name: str, attr: str):
            r = self.tests.get(name)
            return None if r is None else round(getattr(r, attr), 2)

        return {"randread_qd32_iops": get("randread_4k_qd32", "iops"),
                "randread_qd1_iops": get("randread_4k_qd1", "iops"),
                "seq_read_mib_s": get("read_1m_qd8", "read_mib_s")}


def fingerprint(target: Target) -> tuple | str:
    """What must not change while a test reads `target`: a file's inode, size and
    modification time; a device's number and size.  A string says why it cannot be read."""
    try:
        st = os.stat(target.path)
        if not stat.S_ISBLK(st.st_mode):
            return ("file", st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        fd = os.open(target.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY)
        try:
            return ("device", st.st_rdev, os.lseek(fd, 0, os.SEEK_END))
        finally:
            os.close(fd)
    except OSError as err:
        return err.strerror or str(err)


def check(spec, r: TestResult, asked_s: float, target: Target, before, after) -> None:
    """Raise RuntimeFailure (the reason; the probe then keeps nothing) when a test's
    figures cannot be the device's ceiling: no reads, a rate of 0 or not a number, a run
    cut short, or a target that changed or went away while it was read."""
    what = f"the {spec.label} test of {target.path}"
    if isinstance(after, str) or isinstance(before, str):
        raise RuntimeFailure(f"{what} failed: {target.path} could not be checked after it "
                             f"({after if isinstance(after, str) else before}); nothing kept")
    size = {"file": 3, "device": 2}[before[0]]
    if before != after or after[size] < target.span_bytes:
        if before[:size] != after[:size]:
            why = "was replaced while it was read"
        elif after[size] < target.span_bytes:
            why = (f"shrank to {after[size]} bytes (the test read up to "
                   f"{target.span_bytes})")
        else:
            why = "changed (its size or modification time) while it was read"
        raise RuntimeFailure(f"{what} failed: {target.path} {why}; nothing kept")
    if r.ios <= 0:
        raise RuntimeFailure(f"{what} failed: no reads completed; nothing kept")
    for name, value in (("IOPS", r.iops), ("MiB/s", r.read_mib_s)):
        if not (math.isfinite(value) and value > 0):
            raise RuntimeFailure(f"{what} failed: a rate of {value} {name}; nothing kept")
    if not (math.isfinite(r.seconds) and r.seconds >= MIN_MEASURED_SHARE * asked_s):
        raise RuntimeFailure(f"{what} failed: it measured {r.seconds:.2f} s of the "
                             f"{asked_s:.2f} s asked (cut short); nothing kept")


def _sequential_start(spec, span_bytes: int) -> int:
    """Where sequential reads begin: somewhere in the first half, block-aligned, never at
    0 each time, so that a second probe does not read what a hypervisor's or an array's
    cache kept from the first.  Random tests start at 0 (their offsets are random)."""
    if spec.rw != "read":
        return 0
    return random.randrange(span_bytes // 2 // spec.block_bytes) * spec.block_bytes


def run_probe(target: Target, seconds: float, engine: str,
              on_test: Callable[[TestResult], None] | None = None) -> ProbeResult:
    """Run the three tests on `target`, `seconds` in all, each a third of it (the first
    tenth of which, up to MAX_RAMP_S, is not measured), with `engine` ("fio" or
    "builtin").  Raises RuntimeFailure from the engine, or when a test's figures cannot
    be a ceiling (check()); a
    KeyboardInterrupt stops the test under way and passes through."""
    if engine not in ENGINES:
        raise ValueError(f"no probe engine {engine!r}")
    each_s = max(MIN_TEST_S, seconds / len(TESTS))
    ramp_s = min(MAX_RAMP_S, RAMP_FRACTION * each_s)
    result = ProbeResult(target=target, engine=engine, seconds=seconds,
                         measured_at_s=time.time())
    for spec in TESTS:
        start = _sequential_start(spec, target.span_bytes)
        run = fio.run if engine == "fio" else builtin.run
        before = fingerprint(target)
        r = run(spec, target.path, target.span_bytes, each_s - ramp_s, ramp_s, start)
        check(spec, r, each_s - ramp_s, target, before, fingerprint(target))
        result.tests[spec.name] = r
        if on_test is not None:
            on_test(r)
    return result
