"""What a source of samples must provide (SampleSource), and what one does where it has
nothing of it (SourceDefaults).

The live Sampler (collect/sampler.py) and the simulator (sim/simulator.py) are sources.
The commands, the live Feed (session/live.py) and the dashboard call these members and
never ask a source which of them it has: a source that cannot scan the node, wait for a
health reading or say a note takes SourceDefaults' answer.

A source never prints (a collector only returns what it has to say): its notes, what
starting or closing it did or could not do (--delayacct's switch of a node-wide setting,
one line each), are kept until the command that opened it drains them and says them
(commands/common.py say_notes).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from gpudisk_top.collect.sample import Sample


@runtime_checkable
class SampleSource(Protocol):
    """A source of raw Samples, one per call of sample()."""

    # the sampling interval (the dashboard's + and - set it): the live sampler times its
    # NVML deadline by it, the simulator advances its clock by it
    interval_s: float
    # the I/O process view is open: a source that scans the node scans it more often
    io_view: bool

    @property
    def scan_open_s(self) -> float | None:
        """Seconds between scans of the node's processes while the I/O view is open;
        None: the source scans no node (it shows what it simulates)."""

    def sample(self) -> Sample:
        """Read everything once.  Never raises for a part that cannot be read: that is a
        warning in the sample."""

    def cover_next_interval(self) -> None:
        """Make the interval after the next sample name everyone who did block I/O in it
        (--once's one interval)."""

    def wait_health(self, timeout_s: float) -> bool:
        """Wait at most timeout_s for the first reading of the disks' health; False
        where it is not in by then.  Never raises."""

    def drain_notes(self) -> list[str]:
        """The notes kept since the last drain, oldest first, each given once.  Never
        raises."""

    def close(self) -> None:
        """Stop reading and put back what starting changed; what that says is a note
        (drain_notes).  Never raises for a part that cannot be put back."""


class SourceDefaults:
    """The members of SampleSource a source that has nothing of them inherits: no node to
    scan, no health to wait for, no notes."""

    io_view = False          # set by the dashboard; nothing here reads it
    scan_open_s: float | None = None

    def cover_next_interval(self) -> None:
        """Nothing to cover: every interval already names what it simulates."""

    def wait_health(self, timeout_s: float) -> bool:
        """No health poller runs beside this source: nothing to wait for."""
        return True

    def drain_notes(self) -> list[str]:
        return []
