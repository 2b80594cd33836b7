"""Scenarios in TOML.  Keys are the dataclass fields of gpudisk_top.sim.scenario, with
`class` accepted for a disk's dev_class.  An unknown key, a wrong type or a bad value is a
ScenarioError that names the file and the place ("phases[3] 'ckpt': unknown key ...").

    name = "my-node"
    noise_pct = 3
    [gpus]
    count = 8
    [[disks]]
    name = "sda"
    class = "SSD"
    mountpoint = "/data"
    health = { idle_temp_c = 45, reallocated_sectors = 8 }  # its simulated health where
                                          # it is not its class's (sim/scenario.py HealthSpec)
    [job]
    dataset_disk = "sda"
    workers = 8
    visible = false                       # in a PID namespace we cannot see into
    [[others]]
    pid = 9100
    name = "rsync"
    disk = "sdb"
    read_mb_s = 400
    [[phases]]
    name = "train"
    duration_s = 60
    label = "healthy"
    gpu_util_pct = 97
    read_mb_s = 300
    gpu_util_by_gpu = { 3 = 40 }          # TOML keys are strings; "3" means GPU 3
    gpu_throttle_pct = { sw_power_cap = 42 }   # share of the time the clocks are held
                                          # down, by reason (the job's GPUs; NVML's
                                          # clock-event durations on the stand-in)
    gpu_throttle_by_gpu = { 5 = { sw_thermal = 10 } }
    disks.sdb = { read_latency_ms = 25, util_pct = 100 }
    others.rsync = { read_mb_s = 0, cpu_pct = 0 }  # the phase's rates of an [[others]]
    [[phases]]                            # a group: phases played `repeat` times
    repeat = 5
    [[phases.phases]]
    name = "ckpt"
    duration_s = 10
    write_mb_s = 4000
"""

from __future__ import annotations

import dataclasses
import types
import typing

from gpudisk_top.sim.scenario import (DiskSpec, DiskState, GpuSpec, HealthSpec, HostSpec,
                                      JobSpec, OtherLoad, OtherProcess, Phase, PhaseGroup,
                                      Scenario, ScenarioError)
from gpudisk_top.tomlread import tomllib

_ALIASES = {DiskSpec: {"class": "dev_class"}}


def loads(text: str, source: str = "<string>") -> Scenario:
    """Parse TOML text into a validated Scenario.  Raises ScenarioError."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ScenarioError(f"{source}: not valid TOML: {err}") from None
    try:
        scenario = from_dict(data)
        scenario.validate()
    except ScenarioError as err:
        raise ScenarioError(f"{source}: {err}") from None
    return scenario


def from_dict(data: dict) -> Scenario:
    """A Scenario from plain dicts and lists (parsed TOML or JSON).  Raises ScenarioError."""
    if not isinstance(data, dict):
        raise ScenarioError("a scenario must be a table")
    data = dict(data)
    phases = data.pop("phases", None)
    if not isinstance(phases, list) or not phases:
        raise ScenarioError("phases: missing; give at least one [[phases]] table")
    data["phases"] = [_phase_or_group(p, f"phases[{i}]") for i, p in enumerate(phases, 1)]
    return _build(Scenario, data, "scenario", done={"phases"})


def _phase_or_group(data, where: str) -> Phase | PhaseGroup:
    if not isinstance(data, dict):
        raise ScenarioError(f"{where}: must be a table, not {type(data).__name__}")
    if "phases" in data:
        sub = data["phases"]
        if not isinstance(sub, list) or not sub:
            raise ScenarioError(f"{where}: a group's phases must be a non-empty array of tables")
        rest = dict(data)
        rest["phases"] = [_phase_or_group(p, f"{where}.phases[{i}]") for i, p in enumerate(sub, 1)]
        return _build(PhaseGroup, rest, where, done={"phases"})
    name = data.get("name")
    return _build(Phase, data, f"{where} {name!r}" if isinstance(name, str) else where)


def _build(cls, data: dict, where: str, done: frozenset | set = frozenset()):
    aliases = _ALIASES.get(cls, {})
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls) if f.init}
    kwargs = {}
    for key, value in data.items():
        attr = aliases.get(key, key)
        if attr not in known:
            raise ScenarioError(f"{where}: unknown key {key!r} (known: {', '.join(sorted(known))})")
        kwargs[attr] = value if attr in done else _convert(value, hints[attr], f"{where}: {key}")
    missing = [f.name for f in dataclasses.fields(cls)
               if f.init and f.name not in kwargs
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ScenarioError(f"{where}: missing key(s) {', '.join(missing)}")
    try:
        return cls(**kwargs)
    except ScenarioError as err:
        raise ScenarioError(f"{where}: {err}") from None


_DATACLASSES = (GpuSpec, DiskSpec, HostSpec, JobSpec, OtherProcess, OtherLoad, DiskState,
                HealthSpec)


def _convert(value, hint, where: str):
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _convert(value, inner, where)
    if hint in _DATACLASSES:
        if not isinstance(value, dict):
            raise ScenarioError(f"{where}: must be a table")
        return _build(hint, value, where)
    if origin is list:
        (inner,) = typing.get_args(hint)
        if not isinstance(value, list):
            raise ScenarioError(f"{where}: must be an array")
        return [_convert(v, inner, f"{where}[{i}]") for i, v in enumerate(value, 1)]
    if origin is tuple:
        inner = typing.get_args(hint)[0]
        if not isinstance(value, list):
            raise ScenarioError(f"{where}: must be an array")
        return tuple(_convert(v, inner, f"{where}[{i}]") for i, v in enumerate(value, 1))
    if origin is dict:
        key_type, value_type = typing.get_args(hint)
        if not isinstance(value, dict):
            raise ScenarioError(f"{where}: must be a table")
        return {_key(k, key_type, where): _convert(v, value_type, f"{where}.{k}")
                for k, v in value.items()}
    if hint is bool:
        if not isinstance(value, bool):
            raise ScenarioError(f"{where}: must be true or false, not {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ScenarioError(f"{where}: must be an integer, not {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ScenarioError(f"{where}: must be a number, not {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ScenarioError(f"{where}: must be a string, not {value!r}")
        return value
    raise ScenarioError(f"{where}: cannot read a value of type {hint}")  # a field we forgot


def _key(key: str, key_type, where: str):
    if key_type is int:
        try:
            return int(key)
        except ValueError:
            raise ScenarioError(f"{where}: key {key!r} must be a GPU index") from None
    return key


def loads_toml(text: str, source: str = "<string>") -> Scenario:
    """A Scenario from TOML text.  Raises ScenarioError naming the source and the problem."""
    return loads(text, source)


def load_toml(path: str) -> Scenario:
    """A Scenario from a TOML file.  Raises ScenarioError (a bad file) or OSError."""
    with open(path, "rb") as f:
        data = f.read()
    return loads(data.decode("utf-8", errors="replace"), source=path)
