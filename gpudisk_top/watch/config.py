"""The [watch] section of the config file: paths whose free space is watched.

    [watch]
    paths = ["/checkpoints", "/datasets/cache"]

Paths named by free_space alert rules are watched too (see watched_paths).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from gpudisk_top.outfile import is_absolute_path

KNOWN_KEYS = ("paths",)


@dataclass(frozen=True)
class WatchConfig:
    paths: tuple[str, ...] = ()


def parse_watch(value, ctx) -> WatchConfig:
    """SECTION_PARSERS["watch"].  Raises ConfigError through ctx.fail, naming the line."""
    if not isinstance(value, dict):
        ctx.fail("watch", None, "[watch] must be a table, e.g. [watch] paths = [\"/checkpoints\"]")
    for key in value:
        if key not in KNOWN_KEYS:
            ctx.fail("watch", key, f"unknown setting watch.{key} (known: {', '.join(KNOWN_KEYS)})")
    paths = value.get("paths", [])
    if not isinstance(paths, list) or not all(isinstance(p, str) and p for p in paths):
        ctx.fail("watch", "paths", "watch.paths must be a list of paths, e.g. [\"/checkpoints\"]")
    for p in paths:
        if not is_absolute_path(p):
            ctx.fail("watch", "paths", f"watch.paths: {p!r} is not an absolute path")
    return WatchConfig(paths=tuple(dict.fromkeys(os.path.normpath(p) for p in paths)))


def watched_paths(sections: dict) -> tuple[str, ...]:
    """[watch] paths, then every path a free_space alert rule names, without repeats."""
    watch = sections.get("watch") or WatchConfig()
    rules = sections.get("alerts") or ()
    extra = [r.free_space for r in rules if getattr(r, "free_space", None)]
    return tuple(dict.fromkeys([*watch.paths, *extra]))
