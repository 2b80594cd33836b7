"""The three tests of a probe and what each one yields, whichever engine ran it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TestSpec:
    __test__ = False     # not a pytest test class, whatever its name
    name: str            # the key in --json and in the results file
    label: str           # what the text table calls it
    rw: str              # "randread" | "read" (sequential)
    block_bytes: int
    queue_depth: int


# The folklore figures: random 4 KiB reads at QD1 (latency-bound, what one data loader
# worker sees) and QD32 (the device's IOPS ceiling), and 1 MiB sequential reads at QD8
# (its bandwidth ceiling; CrystalDiskMark's SEQ1M Q8T1).
TESTS = (
    TestSpec("randread_4k_qd1", "4 KiB random read, QD1", "randread", 4096, 1),
    TestSpec("randread_4k_qd32", "4 KiB random read, QD32", "randread", 4096, 32),
    TestSpec("read_1m_qd8", "1 MiB sequential read, QD8", "read", 2**20, 8),
)
BY_NAME = {t.name: t for t in TESTS}


@dataclass
class TestResult:
    __test__ = False
    name: str
    engine: str          # "fio" | "builtin"
    seconds: float       # how long the reads ran
    ios: int             # reads completed
    iops: float
    read_mib_s: float    # MiB (2^20 bytes) per second, as iostat's MB
    lat_mean_ms: float   # issue to completion, per read
    lat_p99_ms: float

    def to_json(self) -> dict:
        return {"engine": self.engine, "seconds": round(self.seconds, 3), "ios": self.ios,
                "iops": round(self.iops, 1), "read_mib_s": round(self.read_mib_s, 2),
                "lat_mean_ms": round(self.lat_mean_ms, 4),
                "lat_p99_ms": round(self.lat_p99_ms, 4)}
