"""The binding limit of a what-if prediction: which stage of the input pipeline stops the
job going faster after a fix, as a key (`Limit`), with the one sentence every surface
prints for it beside it (`Cap`).  Code asks the key, never the sentence: the sentence is
for people, and its wording may change without a consumer noticing."""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple


class Limit(Enum):
    """The stage whose load reaches 1 first (verdict/whatif/solver.py Stages)."""

    GPU = "gpu"                            # the GPU busy all the time
    LOADERS = "loaders"                    # the loaders' own cycle (never printed: solve())
    TRAINER = "trainer"                    # the trainer's own step on a CPU
    CPUS = "cpus"                          # the CPUs the job may use
    DEVICE_SEEN = "device-seen"            # no probe: the highest rate the device was seen at
    DEVICE_BANDWIDTH = "device-bandwidth"  # the probe's 1 MiB reads
    DEVICE_QD32 = "device-qd32"            # the probe's random reads at QD32


# the device's own limits, for a reader that asks "is it the device?"
DEVICE_LIMITS = frozenset({Limit.DEVICE_SEEN, Limit.DEVICE_BANDWIDTH, Limit.DEVICE_QD32})

# each limit's sentence from its figures (the model's own, never text from the machine)
_SENTENCE = {
    Limit.GPU: lambda: "capped by the GPU: 100%",
    Limit.LOADERS: lambda: "capped by the loaders",
    Limit.TRAINER: lambda on_cpu: (
        f"capped by the trainer's own step ({on_cpu * 100:.0f}% on a CPU)"),
    Limit.CPUS: lambda cpus, cpus_from: (
        f"capped by the CPUs: {cpus:.1f} "
        f"{'(cpu.max)' if cpus_from == 'cpu.max' else 'on the host'}"),
    Limit.DEVICE_SEEN: lambda peak, unit="r/s": (
        f"capped by the device: {peak:.0f} {unit}, the highest seen (no probe)"),
    Limit.DEVICE_BANDWIDTH: lambda mib_s: (
        f"capped by the device: {mib_s:.0f} MiB/s (the probe's 1 MiB reads)"),
    Limit.DEVICE_QD32: lambda iops: f"capped by the device: {iops / 1000:.0f}k r/s at QD32",
}


class Cap(NamedTuple):
    """A binding limit and its sentence (a tuple, cheap to make: a solve makes one)."""

    limit: Limit
    sentence: str

    @classmethod
    def of(cls, limit: Limit, *figures: float | str) -> "Cap":
        """The limit with its sentence made from its figures (those _SENTENCE takes).
        Raises TypeError where the figures are not the ones its sentence takes."""
        return cls(limit, _SENTENCE[limit](*figures))
