"""The built-in scenarios: the situations gpudisk-top must tell apart, and a long demo.

Each is a TOML file shipped in the package, gpudisk_top/sim/scenarios/<name>.toml, in the
format of gpudisk_top/sim/scenario_toml.py, and is loaded fresh on every call (scenarios
are mutable dataclasses).  Numbers are meant to be realistic for an 8-GPU node: a SATA
SSD serves ~540 MB/s, an H100 draws ~600 W busy and ~70 W idle, and NCCL spinning at an
allreduce shows as ~100 % utilization at low power.  Each file's description says what
it is and which labels it carries.
"""

from __future__ import annotations

from importlib import resources

from gpudisk_top.sim.scenario import BUILTIN_NAMES, Scenario
from gpudisk_top.sim.scenario_toml import loads


def path(name: str):
    """The packaged TOML file of built-in `name` (a Traversable; it may sit in a zip).
    Raises KeyError naming the known ones."""
    if name not in BUILTIN_NAMES:
        raise KeyError(f"no built-in scenario {name!r}; known: {', '.join(BUILTIN_NAMES)}")
    return resources.files("gpudisk_top.sim") / "scenarios" / f"{name}.toml"


def build(name: str) -> Scenario:
    """A fresh built-in scenario.  Raises KeyError for an unknown name, ScenarioError for
    a shipped file that does not load (a packaging bug), OSError if it is missing."""
    source = path(name)
    return loads(source.read_text(encoding="utf-8"), source=f"built-in scenario {name}")


builtin = build     # the name the package exports: sim.builtin("demo")
