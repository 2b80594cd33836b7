"""The apps as a UI test drives them: the dashboard on the simulated node at seed 0 unless
a source is given, at 1 Hz, not started (the test calls app.advance()), without its own
process in the views; the replay screen over a recording file.  One owner for what every
Pilot test of the two builds."""

from __future__ import annotations

import dataclasses

from gpudisk_top.collect.source import Source, simulated_source
from gpudisk_top.record import Recording
from gpudisk_top.sim import Simulator, builtin
from gpudisk_top.ui.app import GpuDiskApp
from gpudisk_top.ui.replay_app import ReplayApp

ORIGIN = simulated_source("demo", 0)


def dashboard_app(source=None, *, scenario: str = "demo", origin: Source = ORIGIN,
                  interval_s: float = 1.0, **kwargs) -> GpuDiskApp:
    """A GpuDiskApp over `source` (else `scenario` simulated at seed 0); kwargs go to the
    app as they are (dev_filter, hooks, on_sample, ...)."""
    return GpuDiskApp(source or Simulator(builtin(scenario), seed=0), interval_s, origin,
                      autostart=False, show_self=False, **kwargs)


def replay_screen_app(path, origin: Source, start_index: int = 0) -> ReplayApp:
    """The replay screen over the recording at `path` (of a simulated node, `origin`'s),
    labelled as `gpudisk-top replay` labels it, at sample `start_index`.  Raises what
    Recording.open raises."""
    return ReplayApp(Recording.open(path),
                     dataclasses.replace(origin, label=f"replay of {path} (simulated)"),
                     start_index=start_index, show_self=False)
