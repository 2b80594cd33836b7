"""Probe results kept per device identity, and the ceilings read back for the detector.

The file is $XDG_STATE_HOME/gpudisk-top/probes.json (~/.local/state/... by default):

    {"format": "gpudisk-top probes", "version": 1,
     "devices": {IDENTITY: the object `probe --json` printed, less "stored"}}

IDENTITY is the device's WWN or serial from sysfs ("wwid:...", "serial:..."), else its
model and kernel name ("model:.../sdb", "name:vdb"), which is weak (probe/target.py).
A device keeps its latest probe.  The file is replaced whole (outfile.replaced: a
temporary file, then rename; the umask applies) under an flock on its directory, so two
probes at once do not lose each other's results.  It is a regular file or nothing: a link,
FIFO or device at its path is refused when writing (never written through) and when
reading (never waited on).
"""

from __future__ import annotations

import errno
import fcntl
import json
import math
import os
from dataclasses import dataclass
from typing import Iterable

from gpudisk_top import outfile
from gpudisk_top.collect.roots import Roots, read_bytes
from gpudisk_top.collect.sample import DeviceInfo
from gpudisk_top.errors import RuntimeFailure
from gpudisk_top.probe.target import ceiling_device, describe_devices, identity

FORMAT = "gpudisk-top probes"
VERSION = 1
_MAX_BYTES = 16 * 2**20   # a results file larger than this is not ours


def state_path() -> str:
    """Where results are kept.  XDG says a relative $XDG_STATE_HOME is to be ignored."""
    base = os.environ.get("XDG_STATE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "gpudisk-top", "probes.json")


def load(path: str | None = None) -> dict[str, dict]:
    """{identity: probe object} from the results file; {} when there is none.  Raises
    RuntimeFailure (one line) when it cannot be read or is not a results file."""
    path = path or state_path()
    try:
        # the bounded reader: a FIFO, a device or a link to one is refused at once, never
        # waited on or read for ever
        data = read_bytes(path, _MAX_BYTES)
    except FileNotFoundError:
        return {}
    except OSError as err:
        if err.errno != errno.EFBIG:
            raise RuntimeFailure(f"cannot read {path}: {err.strerror or err}") from None
        data = None
    try:
        doc = json.loads(data) if data is not None else None
    except ValueError:
        doc = None
    if not (isinstance(doc, dict) and doc.get("format") == FORMAT
            and isinstance(doc.get("devices"), dict)):
        raise RuntimeFailure(f"{path} is not a gpudisk-top probe results file")
    if doc.get("version") != VERSION:
        raise RuntimeFailure(f"{path} is version {doc.get('version')!r} of the results "
                             f"file; this gpudisk-top reads version {VERSION}")
    return {k: v for k, v in doc["devices"].items() if isinstance(v, dict)}


def check_writable(path: str | None = None) -> None:
    """Raise RuntimeFailure when the results file is there and is not a regular file (a
    link, a FIFO, a device): save() would refuse it."""
    path = path or state_path()
    try:
        if outfile.inspect(path)[0] == "special":
            raise RuntimeFailure(outfile.not_regular(path))
    except outfile.OutputError as err:
        raise RuntimeFailure(str(err)) from None


def save(result: dict, path: str | None = None) -> tuple[str, str | None]:
    """Keep `result` (ProbeResult.to_json()) under its identity, beside the other
    devices' results.  Returns (the file's path, a warning or None: a results file that
    could not be read is replaced).  Raises RuntimeFailure when it cannot be written."""
    path = path or state_path()
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)   # XDG: 0700 for new dirs
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as err:
        raise RuntimeFailure(f"cannot keep the results in {directory}: "
                             f"{err.strerror or err}") from None
    warning = None
    try:
        fcntl.flock(dir_fd, fcntl.LOCK_EX)
        # the results file is ours alone: a link, a FIFO or a device there is refused, not
        # written through (a root-owned link to another file was overwritten)
        check_writable(path)
        try:
            devices = load(path)
        except RuntimeFailure as err:
            devices, warning = {}, f"{err}; replacing it"
        devices[result["identity"]] = {k: v for k, v in result.items() if k != "stored"}
        doc = {"format": FORMAT, "version": VERSION, "devices": devices}
        try:
            with outfile.replaced(path, in_place=False) as f:
                f.write(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        except outfile.OutputError as err:
            raise RuntimeFailure(str(err)) from None
    finally:
        os.close(dir_fd)   # and the lock with it
    return path, warning


@dataclass(frozen=True)
class Ceiling:
    """A device's measured ceiling.  A figure the probe did not get is None."""

    device: str                      # the kernel name measured ("vda")
    identity: str
    randread_qd32_iops: float | None
    randread_qd1_iops: float | None
    seq_read_mib_s: float | None     # MiB (2^20 bytes) per second
    measured_at_s: float | None      # seconds since the epoch
    engine: str | None               # "fio" | "builtin"
    target_kind: str | None          # "device" (its node was read) | "file" (through a filesystem)

    @classmethod
    def from_json(cls, doc: dict) -> "Ceiling":
        c = doc.get("ceiling") if isinstance(doc.get("ceiling"), dict) else {}

        def num(value):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            return float(value) if ok else None

        def rate(value):
            # a ceiling of 0 (a probe cut short, kept by an older gpudisk-top) or one that
            # is not a number would make every busy device look saturated
            value = num(value)
            return value if value is not None and 0 < value < math.inf else None

        return cls(device=str(doc.get("device", "")), identity=str(doc.get("identity", "")),
                   randread_qd32_iops=rate(c.get("randread_qd32_iops")),
                   randread_qd1_iops=rate(c.get("randread_qd1_iops")),
                   seq_read_mib_s=rate(c.get("seq_read_mib_s")),
                   measured_at_s=num(doc.get("measured_at_s")),
                   engine=doc.get("engine"), target_kind=doc.get("target_kind"))


def load_ceilings(devices: Iterable[str | DeviceInfo], roots: Roots | None = None,
                  path: str | None = None,
                  infos: dict[str, DeviceInfo] | None = None) -> dict[str, Ceiling]:
    """{kernel name: Ceiling} for those of `devices` (kernel names or DeviceInfo) whose
    device has been probed on this host: each is matched by the identity sysfs gives the
    device whose ceiling it has (a partition's disk, the one disk under a dm device), the
    same way `probe` keyed it.  Never raises: no results file, an unreadable one, or a
    device that was never probed gives no entry."""
    try:
        stored = load(path)
    except RuntimeFailure:
        return {}
    if not stored:
        return {}
    roots = roots or Roots()
    if infos is None:
        try:
            infos = describe_devices(roots)
        except OSError:
            return {}
    out: dict[str, Ceiling] = {}
    for dev in devices:
        name = dev.name if isinstance(dev, DeviceInfo) else str(dev)
        measured, _note = ceiling_device(infos, name)
        key, _weak = identity(roots, infos, measured)
        if key in stored:
            out[name] = Ceiling.from_json(stored[key])
    return out
