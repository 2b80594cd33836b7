"""The detector's states and one interval's state: the one list of states with how every
surface marks each (STATES, STATE_GLYPH, STATE_BADGE, STATE_WORD), the starved ones, and
IntervalState, what classify.py and its rules (storage.py, cpu.py, checkpoint.py) make of
one interval, with the evidence that proves it."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudisk_top.verdict.detect.evidence import Culprit
from gpudisk_top.verdict.whatif import WhatIf

# The one list of states, each with how every surface marks it: its glyph on the
# dashboard's timeline and in the report's charts, its banner on the dashboard, its word
# in the fleet's table (narrower).  A mark never rests on colour alone.  "unavailable"
# (no GPU can be read: no driver, an NVML error, a hung driver, every GPU lost) is last so
# that the recorder's state codes keep their values.
_STATE_MARKS = (
    # state               glyph  banner                 fleet table
    ("idle",              " ", "○ IDLE",              "○ IDLE"),
    ("healthy",           "·", "● HEALTHY",           "● HEALTHY"),
    ("disk-starved",      "D", "▲ DISK-STARVED",      "▲ DISK-STARVED"),
    ("cpu-starved",       "C", "▲ CPU-STARVED",       "▲ CPU-STARVED"),
    ("checkpoint-stall",  "K", "▲ CHECKPOINT-STALL",  "▲ CHECKPOINT"),
    ("straggler",         "S", "▲ STRAGGLER",         "▲ STRAGGLER"),
    ("undiagnosed-stall", "?", "▲ UNDIAGNOSED STALL", "◇ UNDIAGNOSED"),
    ("unavailable",       "×", "⊘ NO GPUS",           "⊘ NO GPUS"),
)
STATES = tuple(state for state, *_ in _STATE_MARKS)
STARVED_STATES = frozenset(STATES[2:7])
UNAVAILABLE = STATES[7]
# The starved states whose cause is the node's own input or output path (its storage, its
# CPUs, its checkpoint writes): a node in one of these holds its GPUs back by itself.
# straggler and undiagnosed-stall are left out: on the nodes of a multi-node job they are
# what waiting on a slower peer looks like (GPUs spinning in NCCL, or idle with nothing
# saturated).  The one definition for the exporter's gpudisk_top_gpus_starved, the fleet's
# straggler rule and starved counts, and the fleet alert rules' state regex
# (examples/prometheus-rules.yml; tests/test_fleet_model.py checks they agree).
OWN_CAUSE_STATES = ("disk-starved", "cpu-starved", "checkpoint-stall")
# one glyph per state, the same on the dashboard's timeline and in the report's charts
STATE_GLYPH = {state: glyph for state, glyph, _, _ in _STATE_MARKS}
STATE_BADGE = {state: badge for state, _, badge, _ in _STATE_MARKS}
STATE_WORD = {state: word for state, _, _, word in _STATE_MARKS}

@dataclass
class IntervalState:
    state: str
    gpus: list[int] = field(default_factory=list)
    kind: str | None = None             # disk: saturated | latency-bound | remote-mount; cpu: own | others | throttled | trainer
    devices: list[str] = field(default_factory=list)
    processes: list[int] = field(default_factory=list)
    gpu_util_pct: float | None = None   # mean utilization of `gpus`
    detail: str = ""                    # the evidence after the GPU part
    advice: str | None = None
    # the processes outside the job named in `detail` as reading the blamed device, with
    # their share of its reads (verdict/detect/evidence.py): every surface's "who"
    culprits: list[Culprit] = field(default_factory=list)
    # what each fix would gain, best first (verdict/whatif.py)
    whatif: list[WhatIf] = field(default_factory=list)


def gpu_ranges(indexes: list[int]) -> str:
    """[0, 1, 2, 3, 6] -> 'GPU 0-3,6'."""
    idx = sorted(set(indexes))
    runs: list[str] = []
    start = prev = None
    for i in idx + [None]:
        if start is None:
            start = prev = i
        elif i is not None and i == prev + 1:
            prev = i
        else:
            runs.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = i
    return "GPU " + ",".join(runs)


def mean(values: list[float | None]) -> float | None:
    """The mean of the values that are known (None: none is)."""
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None
