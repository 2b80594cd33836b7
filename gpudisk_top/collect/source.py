"""Where samples come from: the one Source type, for every surface that says it.

A Source is live (this machine's collectors), simulated (sim/, with its scenario and seed
in the label) or unknown (a recording's session header that was lost or damaged and what
remains of it cannot tell).  The dashboard flags DEMO for a simulated one by its kind, the
recorder writes its label and kind into the session header, --once and the exporter print
its label, and record/sources.py reads it back from a header (source_of, salvage): one
meaning of "source" from the command line to the report.

It lives here, below record/, so that --once, the exporter and the dashboard can name a
source without loading the recorder.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field

LIVE, SIMULATED, UNKNOWN = "live", "simulated", "unknown"


@dataclass(frozen=True)
class Source:
    kind: str                  # LIVE, SIMULATED or UNKNOWN
    host_name: str | None
    label: str                 # what the header says ("live", "simulated, scenario demo, seed 0")
    damaged: bool = False      # its header failed its CRC or was lost
    # the kernel it ran ("simulated" for the simulator), for headers and the dashboard;
    # what cannot be seen from here (collect/visibility.py's blind spot keys), which the
    # dashboard flags.  Neither tells two sources apart (readers group by kind and host)
    kernel: str | None = field(default=None, compare=False)
    blind_spots: tuple[str, ...] = field(default=(), compare=False)

    def describe(self) -> str:
        """'live on node-17', 'simulated, scenario demo, seed 0 on demo-node',
        'unknown source (session header damaged)'."""
        if self.kind == UNKNOWN:
            return "unknown source (session header damaged)"
        text = self.label if self.kind == SIMULATED else "live"
        text += f" on {self.host_name}" if self.host_name else ""
        return text + (" (session header damaged)" if self.damaged else "")


def live_source(blind_spots=()) -> Source:
    """This machine, now."""
    return Source(LIVE, platform.node(), LIVE, kernel=platform.release(),
                  blind_spots=tuple(blind_spots))


def simulated_source(scenario: str, seed: int, host_name: str = "demo-node") -> Source:
    """The simulator running built-in `scenario` with `seed`, as node `host_name`."""
    return Source(SIMULATED, host_name, f"simulated, scenario {scenario}, seed {seed}",
                  kernel="simulated")
