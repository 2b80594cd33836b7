"""Simulation: a fake NVML (the only one in the project) and what drives it.

    from gpudisk_top.sim import Simulator, builtin
    sim = Simulator(builtin("demo"), seed=0)
    sample = sim.sample()       # a raw Sample, as the live Sampler returns one
    sample.health               # the disks' simulated health (sim/health.py)
"""

from gpudisk_top.sim.builtins import builtin
from gpudisk_top.sim.scenario import (BUILTIN_NAMES, DISK_CLASSES, LABELS, DiskSpec, DiskState,
                                      GpuSpec, HealthSpec, HostSpec, JobSpec, OtherLoad,
                                      OtherProcess, Phase, PhaseGroup, Scenario, ScenarioError)
from gpudisk_top.sim.scenario_toml import load_toml, loads_toml
from gpudisk_top.sim.simulator import Simulator

__all__ = [
    "BUILTIN_NAMES", "DISK_CLASSES", "LABELS", "DiskSpec", "DiskState", "GpuSpec", "HealthSpec",
    "HostSpec", "JobSpec", "OtherLoad", "OtherProcess", "Phase", "PhaseGroup", "Scenario",
    "ScenarioError", "Simulator", "builtin", "load_toml", "loads_toml",
]
