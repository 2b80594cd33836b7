"""The TOML config file: $XDG_CONFIG_HOME/gpudisk-top/config.toml (~/.config/... by default).

    [detector]                 # thresholds of the starvation detector
    gpu_low_util_pct = 70
    enter_intervals = 3
    [detector.queue_size]      # per device class: NVMe, SSD, HDD, virtual, unknown
    NVMe = 32
    [[alerts]] ...             # alert rules (gpudisk_top/alerts/rules.py)
    [devices."nvme0n1"] ...    # labels on a device's metrics (gpudisk_top/exporter/labels.py)
    [watch] paths = [...]      # free space to watch (gpudisk_top/watch/config.py)
    [health] interval_s = 600  # seconds between device health reads; 0: never
    [ledger] gpu_hour_cost = 2.5  # the price of a GPU-hour (no default), currency = "USD"

A bad file is a ConfigError whose message names the file and the line.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field, fields

from gpudisk_top.alerts.rules import parse_alerts
from gpudisk_top.collect.health import DEFAULT_INTERVAL_S as DEFAULT_HEALTH_INTERVAL_S
from gpudisk_top.configlines import LineIndex
from gpudisk_top.exporter.labels import parse_devices
from gpudisk_top.tomlread import tomllib
from gpudisk_top.verdict.detect.thresholds import FIELD_NAMES, PER_CLASS_FIELDS, Thresholds
from gpudisk_top.verdict.ledger import Price
from gpudisk_top.watch.config import parse_watch

class ConfigError(Exception):
    """The config file cannot be used; str() is one line naming the file and the line."""


@dataclass
class Config:
    path: str | None = None
    thresholds: Thresholds = field(default_factory=Thresholds)
    # other top-level sections, each as its SECTION_PARSERS entry returned it
    sections: dict[str, object] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)   # a default file that could not be read


class Context:
    """Given to a section parser: `fail(table, key, message)` raises a ConfigError naming
    the line where `key` is set in [table] (or where the table starts)."""

    def __init__(self, path: str, text: str) -> None:
        self.path, self.text = path, text
        # one index for every lookup: a rule's line read by scanning the file for each
        # rule made 5,000 rules a 36 s load (configlines.py)
        self.lines = LineIndex(text)

    def fail(self, table: str, key: str | None, message: str):
        _raise_at(self.path, self.lines.line_of(table, key), message)

    def line_of(self, table: str, key: str | None) -> int | None:
        return self.lines.line_of(table, key)

    def entry_line(self, table: str, index: int, key: str | None) -> int | None:
        return self.lines.entry_line(table, index, key)

    def fail_entry(self, table: str, index: int, key: str | None, message: str):
        """Like fail(), inside the index-th (0-based) [[table]] entry: names the line where
        `key` is set in that entry, or the entry's own [[table]] line."""
        _raise_at(self.path, self.lines.entry_line(table, index, key), message)


def _detector_section(value, ctx: Context) -> Thresholds:
    if not isinstance(value, dict):
        ctx.fail("detector", None, "[detector] must be a table")
    return _thresholds(ctx.path, ctx.text, value)


@dataclass(frozen=True)
class HealthConfig:
    """[health]: how often each disk's SMART / NVMe health is read (collect/health.py);
    0 never.  --health-interval overrides it."""

    interval_s: float = DEFAULT_HEALTH_INTERVAL_S


MAX_HEALTH_INTERVAL_S = 86400.0


def _health_section(value, ctx: Context) -> HealthConfig:
    if not isinstance(value, dict):
        ctx.fail("health", None, "[health] must be a table, e.g. [health] interval_s = 600")
    for key in value:
        if key != "interval_s":
            ctx.fail("health", key, f"unknown setting health.{key} (known: interval_s)")
    interval = value.get("interval_s", DEFAULT_HEALTH_INTERVAL_S)
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not (
            0 <= interval <= MAX_HEALTH_INTERVAL_S):
        ctx.fail("health", "interval_s", "health.interval_s must be a number of seconds from "
                 f"0 (never) to {MAX_HEALTH_INTERVAL_S:.0f}")
    return HealthConfig(float(interval))


MAX_CURRENCY_CHARS = 8


def _ledger_section(value, ctx: Context) -> Price:
    """[ledger]: gpu_hour_cost (no default: without it no surface shows a cost) and the
    currency's word it is in."""
    if not isinstance(value, dict):
        ctx.fail("ledger", None, "[ledger] must be a table, e.g. [ledger] gpu_hour_cost = 2.5")
    for key in value:
        if key not in ("gpu_hour_cost", "currency"):
            ctx.fail("ledger", key, f"unknown setting ledger.{key} (known: gpu_hour_cost, "
                     "currency)")
    cost = value.get("gpu_hour_cost")
    if cost is not None and (isinstance(cost, bool) or not isinstance(cost, (int, float))
                             or not 0 <= cost < 1e9 or cost != cost):
        ctx.fail("ledger", "gpu_hour_cost", "ledger.gpu_hour_cost must be the price of one "
                 "GPU-hour, a number from 0, e.g. 2.5")
    currency = value.get("currency", "")
    if not isinstance(currency, str) or len(currency) > MAX_CURRENCY_CHARS or not all(
            ch.isprintable() and not ch.isspace() for ch in currency):
        ctx.fail("ledger", "currency", f"ledger.currency must be a word of at most "
                 f"{MAX_CURRENCY_CHARS} printable characters, e.g. \"USD\"")
    if currency and cost is None:
        ctx.fail("ledger", "currency", "ledger.currency without ledger.gpu_hour_cost: give "
                 "the price of one GPU-hour too")
    return Price(None if cost is None else float(cost), currency)


# section name -> parser(value, ctx) -> parsed object; an absent section is parsed from {}
SECTION_PARSERS = {"detector": _detector_section, "alerts": parse_alerts,
                   "devices": parse_devices, "watch": parse_watch, "health": _health_section,
                   "ledger": _ledger_section}


def default_path() -> str:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "gpudisk-top", "config.toml")


def entry_line(text: str, table: str, index: int, key: str | None) -> int | None:
    """The line (1-based) where `key` is set in the index-th (0-based) [[table]] entry, or
    where that entry's [[table]] header is; None when the file has no such entry."""
    return LineIndex(text).entry_line(table, index, key)


def _line_of(text: str, table: str, key: str | None) -> int | None:
    """The line (1-based) where `key` is set inside [table], or where [table] starts."""
    return LineIndex(text).line_of(table, key)


def _fail(path: str, text: str, table: str, key: str | None, message: str):
    _raise_at(path, _line_of(text, table, key), message)


def _raise_at(path: str, line: int | None, message: str):
    where = f"{path}: line {line}" if line else path
    raise ConfigError(f"{where}: {message}")


MAX_CONFIG_BYTES = 1 << 20   # a config file is a few hundred lines; more is not one


def load(path: str | None = None, required: bool = False) -> Config:
    """Read the config file.  With no path, the XDG default is read if it exists, and
    one that cannot be read (another user's HOME, as with `su` or `docker exec -u`) gives
    the defaults and a line in Config.warnings.  Raises ConfigError for a file that is
    missing (when required), unreadable (when required), not a regular file, too large,
    not TOML, or holds an unknown key or a bad value."""
    path = path or default_path()
    try:
        data = _read(path)
    except FileNotFoundError:
        if required:
            raise ConfigError(f"{path}: no such config file") from None
        return _defaults(path)
    except OSError as err:
        if required:
            raise ConfigError(f"{path}: cannot read: {err.strerror or err}") from None
        config = _defaults(path)
        config.warnings.append(f"cannot read the config file {path} ({err.strerror or err}); "
                               "using the default settings")
        return config
    text = data.decode("utf-8", errors="replace")
    try:
        doc = tomllib.loads(text)
    except RecursionError:
        raise ConfigError(f"{path}: not valid TOML: nested too deeply") from None
    except tomllib.TOMLDecodeError as err:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(err))
        msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(err))
        where = f"{path}: line {m.group(1)}" if m else path
        raise ConfigError(f"{where}: not valid TOML: {msg}") from None
    config = Config(path=path)
    for section in doc:
        if section not in SECTION_PARSERS:
            _fail(path, text, section, None,
                  f"unknown section [{section}] (known: {', '.join(SECTION_PARSERS)})")
    ctx = Context(path, text)
    for name, parse_section in SECTION_PARSERS.items():
        config.sections[name] = parse_section(doc.get(name, {}), ctx)
    config.thresholds = config.sections["detector"]
    return config


def _defaults(path: str) -> Config:
    config = Config()
    ctx = Context(path, "")
    config.sections = {name: parse({}, ctx) for name, parse in SECTION_PARSERS.items()}
    config.thresholds = config.sections["detector"]
    return config


def _read(path: str) -> bytes:
    """The file's bytes.  Raises OSError (FileNotFoundError when there is none; ENOTDIR
    counts as none), or ConfigError for a FIFO, device or directory (never opened to
    block) or a file too large to be a config."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except NotADirectoryError:
        raise FileNotFoundError(path) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{path}: not a regular file")
        if st.st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path}: {st.st_size} bytes is too large for a config file")
        chunks, total = [], 0
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
            total += len(chunk)
            if total > MAX_CONFIG_BYTES:
                raise ConfigError(f"{path}: too large for a config file")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _thresholds(path: str, text: str, table: dict) -> Thresholds:
    t = Thresholds()
    types = {f.name: f.type for f in fields(Thresholds)}
    for key, value in table.items():
        if key not in FIELD_NAMES:
            _fail(path, text, "detector", key,
                  f"unknown setting detector.{key} (known: {', '.join(FIELD_NAMES)})")
        if key in PER_CLASS_FIELDS:
            if not isinstance(value, dict):
                _fail(path, text, "detector", key,
                      f"detector.{key} must be a table of device classes, e.g. "
                      f"[detector.{key}] NVMe = 1")
            merged = dict(getattr(t, key))
            for cls, v in value.items():
                merged[cls] = v
                problems = Thresholds(**{key: {cls: v}}).validate()
                if problems:
                    _fail(path, text, f"detector.{key}", cls, f"detector.{problems[0]}")
            setattr(t, key, merged)
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            _fail(path, text, "detector", key, f"detector.{key} must be a number")
        if "int" in str(types[key]) and not isinstance(value, int):
            _fail(path, text, "detector", key, f"detector.{key} must be a whole number")
        setattr(t, key, value)
    problems = t.validate()
    if problems:
        key = problems[0].split(":")[0].split(".")[0]
        _fail(path, text, "detector", key if key in FIELD_NAMES else None,
              f"detector.{problems[0]}")
    return t
