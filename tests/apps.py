"""The dashboard app as a UI test drives it: on the simulated node at seed 0 unless a
source is given, at 1 Hz, not started (the test calls app.advance()), without its own
process in the views.  One owner for what every Pilot test of the dashboard builds."""

from __future__ import annotations

from gpudisk_top.collect.source import Source, simulated_source
from gpudisk_top.sim import Simulator, builtin
from gpudisk_top.ui.app import GpuDiskApp

ORIGIN = simulated_source("demo", 0)


def dashboard_app(source=None, *, scenario: str = "demo", origin: Source = ORIGIN,
                  interval_s: float = 1.0, **kwargs) -> GpuDiskApp:
    """A GpuDiskApp over `source` (else `scenario` simulated at seed 0); kwargs go to the
    app as they are (dev_filter, hooks, on_sample, ...)."""
    return GpuDiskApp(source or Simulator(builtin(scenario), seed=0), interval_s, origin,
                      autostart=False, show_self=False, **kwargs)
