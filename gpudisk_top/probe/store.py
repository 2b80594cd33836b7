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

Reading it is bounded: at most _MAX_BYTES, and nested at most MAX_DEPTH deep, checked
before json parses it (json's parser recurses: 100,000 nested brackets were a
RecursionError).  What cannot be used of it (the whole file: damaged, empty, too large,
too deep, a later version; or one device's probe whose figures are no ceiling) is said
once a run by ProbeCeilings, the samplers' source of ceilings; the rest goes on without.
"""

from __future__ import annotations

import errno
import fcntl
import json
import math
import os
import re
from dataclasses import dataclass
from typing import Callable, Iterable

from gpudisk_top import outfile
from gpudisk_top.collect.roots import Roots, read_bytes
from gpudisk_top.collect.sample import DeviceInfo
from gpudisk_top.errors import RuntimeFailure
from gpudisk_top.probe.target import ceiling_device, describe_devices, identity

FORMAT = "gpudisk-top probes"
VERSION = 1
_MAX_BYTES = 16 * 2**20   # a results file larger than this is not ours
MAX_DEPTH = 16            # ours nests 5 deep: the file, devices, a probe, its tests, a test
MAX_ITEMS = 200_000       # strings, and objects and arrays: a probe holds ~60 and ~6
NOT_OURS = "not a gpudisk-top probe results file"
FIGURES = ("randread_qd32_iops", "randread_qd1_iops", "seq_read_mib_s")
# what the nesting check keeps of a file: quotes and brackets (C: bytes.translate)
_OTHER_BYTES = bytes(b for b in range(256) if b not in b'"[]{}')
_STRING = re.compile(rb'"[^"]*"')        # a string once its escapes are gone
_INNERMOST = re.compile(rb"\[\]|\{\}")


class NewerFile(RuntimeFailure):
    """The results file is of a later version than this gpudisk-top reads: never replaced."""


def state_path() -> str:
    """Where results are kept.  XDG says a relative $XDG_STATE_HOME is to be ignored."""
    base = os.environ.get("XDG_STATE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "gpudisk-top", "probes.json")


def nesting_problem(data: bytes, max_depth: int = MAX_DEPTH) -> str | None:
    """Why `data` cannot be parsed within max_depth levels of brackets (None: it can): too
    deep, too many items, or brackets or quotes that do not pair up (cut short).  Only C
    loops over the whole file (replace, translate, count), then at most MAX_ITEMS strings
    and max_depth passes over at most 2 x MAX_ITEMS brackets: bounded whatever it holds."""
    # an escaped backslash, then an escaped quote, is no string's end; the rest of a
    # string's text and everything outside strings but brackets goes
    marks = data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _OTHER_BYTES)
    quotes = marks.count(b'"')
    if quotes > 2 * MAX_ITEMS or len(marks) - quotes > 2 * MAX_ITEMS:
        return f"more than {MAX_ITEMS} strings or {MAX_ITEMS} objects and arrays"
    skeleton = _STRING.sub(b"", marks)
    if b'"' in skeleton:
        return "cut short or damaged (a string never ends)"
    for _ in range(max_depth):
        if not skeleton:
            return None
        peeled = _INNERMOST.sub(b"", skeleton)
        if len(peeled) == len(skeleton):
            return "cut short or damaged (its brackets do not pair up)"
        skeleton = peeled
    return f"nested deeper than {max_depth} levels" if skeleton else None


def _parse(data: bytes, path: str) -> dict:
    """The results file's object.  Raises RuntimeFailure (one line) when it is not one,
    NewerFile when a later gpudisk-top wrote it."""
    why = "empty" if not data.strip() else nesting_problem(data)
    doc = None
    if why is None:
        try:
            doc = json.loads(data)
        except (ValueError, RecursionError) as err:   # (the depth was checked: a belt)
            why = f"not JSON ({str(err)[:80]})"
    if why is not None:
        raise RuntimeFailure(f"{path} is {why}: {NOT_OURS}")
    if not (isinstance(doc, dict) and doc.get("format") == FORMAT
            and isinstance(doc.get("devices"), dict)):
        raise RuntimeFailure(f"{path} is {NOT_OURS}")
    version = doc.get("version")
    if version != VERSION:
        newer = type(version) is int and version > VERSION
        shown = str(version)[:20] if type(version) is int else repr(str(version)[:20])
        raise (NewerFile if newer else RuntimeFailure)(
            f"{path} is version {shown} of the results file"
            + (", written by a newer gpudisk-top" if newer else "")
            + f"; this gpudisk-top reads version {VERSION}")
    return doc


def _read(path: str) -> dict | None:
    """The results file's `devices` as they are ({identity: anything}); None when there
    is no file.  Raises RuntimeFailure, NewerFile (_parse)."""
    try:
        # the bounded reader: a FIFO, a device or a link to one is refused at once, never
        # waited on or read for ever
        data = read_bytes(path, _MAX_BYTES)
    except FileNotFoundError:
        return None
    except OSError as err:
        if err.errno == errno.EFBIG:
            raise RuntimeFailure(f"{path} is larger than {_MAX_BYTES >> 20} MiB: "
                                 f"{NOT_OURS}") from None
        raise RuntimeFailure(f"cannot read {path}: {err.strerror or err}") from None
    return _parse(data, path)["devices"]


def load(path: str | None = None) -> dict[str, dict]:
    """{identity: probe object} from the results file; {} when there is none.  Raises
    RuntimeFailure (one line) when it cannot be read or is not a results file (NewerFile,
    a RuntimeFailure, when a later gpudisk-top wrote it)."""
    devices = _read(path or state_path())
    return {k: v for k, v in (devices or {}).items() if isinstance(v, dict)}


def check_writable(path: str | None = None) -> None:
    """Raise RuntimeFailure when the results file is there and is not a regular file (a
    link, a FIFO, a device), NewerFile when a later gpudisk-top wrote it: save() would
    refuse it."""
    path = path or state_path()
    try:
        if outfile.inspect(path)[0] == "special":
            raise RuntimeFailure(outfile.not_regular(path))
    except outfile.OutputError as err:
        raise RuntimeFailure(str(err)) from None
    try:
        load(path)
    except NewerFile as err:
        raise NewerFile(f"{err}: not replacing it (move it away to probe with this one)") from None
    except RuntimeFailure:
        pass                    # damaged: save() replaces it, and says so


def save(result: dict, path: str | None = None) -> tuple[str, str | None]:
    """Keep `result` (ProbeResult.to_json()) under its identity, beside the other
    devices' results.  Returns (the file's path, a warning or None: a results file that
    could not be read is replaced).  Raises RuntimeFailure when it cannot be written or
    a later gpudisk-top wrote it (NewerFile)."""
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
        except NewerFile as err:
            raise NewerFile(f"{err}: not replacing it") from None
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
    problems: tuple[str, ...] = ()   # why figures it holds are no ceiling (then None above)

    @classmethod
    def from_json(cls, doc: dict) -> "Ceiling":
        c = doc.get("ceiling")
        problems = [] if isinstance(c, dict) else [
            "it holds no ceiling" if c is None else "its ceiling is not an object"]
        c = c if isinstance(c, dict) else {}

        def num(value):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            return float(value) if ok else None

        def rate(key):
            # a ceiling of 0 (a probe cut short, kept by an older gpudisk-top) or one that
            # is not a number would make every busy device look saturated; null is a
            # test the probe did not run
            value = num(c.get(key))
            if value is not None and 0 < value < math.inf:
                return value
            if c.get(key) is not None:
                problems.append(f"its {key} {str(c[key])[:24]!r} is not a rate")
            return None

        figures = {key: rate(key) for key in FIGURES}
        return cls(device=str(doc.get("device", ""))[:64],
                   identity=str(doc.get("identity", ""))[:200], **figures,
                   measured_at_s=num(doc.get("measured_at_s")),
                   engine=doc.get("engine"), target_kind=doc.get("target_kind"),
                   problems=tuple(problems))


def load_ceilings(devices: Iterable[str | DeviceInfo], roots: Roots | None = None,
                  path: str | None = None, infos: dict[str, DeviceInfo] | None = None,
                  stored: dict | None = None,
                  say: Callable[[str], None] | None = None) -> dict[str, Ceiling]:
    """{kernel name: Ceiling} for those of `devices` (kernel names or DeviceInfo) whose
    device has been probed on this host: each is matched by the identity sysfs gives the
    device whose ceiling it has (a partition's disk, the one disk under a dm device), the
    same way `probe` keyed it.  Never raises: no results file, an unreadable one, a
    device that was never probed, or a probe holding a figure that is no ceiling gives no
    entry (say(line): why, for the last).  stored: the file's `devices`, read already."""
    if stored is None:
        try:
            stored = _read(path or state_path()) or {}
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
        if key not in stored:
            continue
        entry = stored[key]
        c = Ceiling.from_json(entry) if isinstance(entry, dict) else None
        problems = ("it is not an object",) if c is None else c.problems
        if problems:
            # as if never probed: one figure that is no ceiling puts the others in doubt
            if say is not None:
                say(f"{path or state_path()}: the probe of {measured} ({key}) is not used: "
                    + "; ".join(problems))
            continue
        out[name] = c
    return out


class ProbeCeilings:
    """The samplers' ceilings (collect/sampler.py `ceilings`): load_ceilings() at each
    device refresh, the file read again only when it changed (one stat otherwise), and
    whatever of it cannot be used said through `warn` once a run, not once a refresh."""

    def __init__(self, warn: Callable[[str], None], path: str | None = None) -> None:
        self._warn = warn
        self._path = path
        self._said: set[str] = set()
        self._key: tuple | None = None
        self._stored: dict = {}

    def _say(self, line: str) -> None:
        if line not in self._said:
            self._said.add(line)
            self._warn(line)

    def stored(self) -> dict:
        """The results file's `devices` ({} when it cannot be used: said once).  Never
        raises."""
        path = self._path or state_path()
        try:
            st = os.stat(path)
            key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        except OSError:
            key = None          # gone, or a dangling link: read_bytes says which
        if key is None or key != self._key:
            self._key = key
            try:
                self._stored = _read(path) or {}
            except RuntimeFailure as err:
                self._stored = {}
                self._say(f"{err}; no ceilings from it")
        return self._stored

    def __call__(self, infos: dict[str, DeviceInfo], roots: Roots) -> dict[str, Ceiling]:
        return load_ceilings(infos.values(), roots, self._path, infos=infos,
                             stored=self.stored(), say=self._say)
