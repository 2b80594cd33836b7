"""User labels per block device, from the config file's [devices] tables.

    [devices."nvme0n1"]
    purpose = "training_data"
    group = "worker-group-a"
    [devices."sd*"]              # a glob, matched against the kernel and the /dev/mapper name
    purpose = "archive"

Every disk series the exporter renders carries these labels; a device that no table names
gets them empty (Prometheus treats an empty label as an absent one).  When several tables
match, globs apply in file order and an exact name last, so it wins.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field

LABEL_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
# labels the exporter sets itself, and Prometheus's target labels
RESERVED_LABELS = frozenset((
    "device", "mountpoint", "class", "gpu", "uuid", "name", "pci_bus_id", "state", "path",
    "alert", "mode", "resource", "pid", "comm", "version", "source", "job", "instance",
))


def _has_glob(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


@dataclass
class DeviceLabels:
    """(device glob, {label: value}) in file order."""

    entries: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def names(self) -> tuple[str, ...]:
        """Every user label name, sorted: the extra label names of each disk series."""
        return tuple(sorted({k for _, labels in self.entries for k, _ in labels}))

    def for_device(self, name: str, display_name: str | None = None) -> dict[str, str]:
        """The labels of one device ({} when no table names it)."""
        key = (name, display_name)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        names = {name, display_name or name, "mapper/" + (display_name or name)}
        merged: dict[str, str] = {}
        exact = []
        for pattern, labels in self.entries:
            if not _has_glob(pattern):
                if pattern.removeprefix("/dev/") in names:
                    exact.append(labels)
                continue
            if any(fnmatch.fnmatchcase(n, pattern.removeprefix("/dev/")) for n in names):
                merged.update(labels)
        for labels in exact:
            merged.update(labels)
        self._cache[key] = merged
        return merged


def table_of(ctx, section: str, name: str, key: str | None) -> str:
    """The spelling of [section.name] that the file uses, so ctx.fail finds its line:
    [devices."nvme0n1"], [devices.nvme0n1] or [devices.'nvme0n1']."""
    variants = (f'{section}."{name}"', f"{section}.{name}", f"{section}.'{name}'")
    for table in variants:
        if ctx.line_of(table, key) is not None:
            return table
    for table in variants:
        if ctx.line_of(table, None) is not None:
            return table
    return variants[0]


def parse_devices(value, ctx) -> DeviceLabels:
    """SECTION_PARSERS["devices"].  Raises ConfigError through ctx.fail, naming the line."""
    if not isinstance(value, dict):
        ctx.fail("devices", None, '[devices] must hold tables, e.g. [devices."nvme0n1"] '
                                  'purpose = "training_data"')
    entries = []
    for name, labels in value.items():
        if not isinstance(labels, dict):
            ctx.fail("devices", name, f'devices.{name} must be a table of labels, e.g. '
                                      f'[devices."{name}"] purpose = "training_data"')
        table = table_of(ctx, "devices", name, None)
        pairs = []
        for key, v in labels.items():
            where = table_of(ctx, "devices", name, key)
            if not LABEL_NAME_RE.match(key) or key.startswith("__"):
                ctx.fail(where, key, f"devices.{name}: {key!r} is not a Prometheus label name "
                                     "(letters, digits and _, not starting with a digit or __)")
            if key in RESERVED_LABELS:
                ctx.fail(where, key, f"devices.{name}: label {key!r} is set by gpudisk-top "
                                     "itself; choose another name")
            if not isinstance(v, str):
                ctx.fail(where, key, f"devices.{name}.{key} must be a string, e.g. "
                                     f'{key} = "training_data"')
            pairs.append((key, v))
        if not pairs:
            ctx.fail(table, None, f"devices.{name} has no labels")
        entries.append((name, tuple(pairs)))
    return DeviceLabels(tuple(entries))
