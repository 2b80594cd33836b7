"""PATH|DEVICE -> the block device whose ceiling is measured, and what is read for it.

What is honest to read:
- the device node itself measures the device; it needs read permission on the node,
  which on most systems means root (or the disk group);
- a large regular file on it measures the filesystem path to the device: O_DIRECT reads
  of a file are mapped through its extents, close to the device's own figures but not
  the same thing, so the result says which was measured.
A partition is measured as its whole disk, an NVMe path as its head, and a dm or md
device that lies on one disk as that disk (their ceilings are the disk's); a dm or md
device over several disks is measured as a whole.  Nothing here ever opens anything for
writing: the only opens are O_RDONLY.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field

from gpudisk_top.collect import diskstats
from gpudisk_top.collect.blockdev import BlockDevices, device_stack, read_identity
from gpudisk_top.collect.mounts import unescape_mountinfo
from gpudisk_top.collect.roots import Roots, read_first_line, read_text
from gpudisk_top.collect.sample import DeviceInfo
from gpudisk_top.errors import RuntimeFailure, UsageError
from gpudisk_top.model.metric import KIB
from gpudisk_top.model import present

MIN_SPAN_BYTES = 256 * 2**20   # below this, random reads mostly measure caches
ALIGN_BYTES = 4096             # every offset and length read is a multiple of this
# a directory is searched this far for a large file, and no further: a probe must start
# at once, not after a walk of a dataset with millions of files
_WALK_MAX_ENTRIES = 20000
_WALK_MAX_DEPTH = 3


@dataclass
class Target:
    """What one probe reads."""

    arg: str                    # what the user gave, or the current directory
    device: str                 # kernel name of the device whose ceiling this is ("vda")
    path: str                   # what is read: a device node or a regular file
    kind: str                   # "device" (the node) or "file" (through a filesystem)
    span_bytes: int             # reads fall in [0, span_bytes), a multiple of ALIGN_BYTES
    identity: str               # the key results are kept under ("serial:BTLJ...")
    identity_weak: bool         # True: no WWN or serial; the model and kernel name
    model: str | None = None
    notes: list[str] = field(default_factory=list)  # how the argument was resolved


def describe_devices(roots: Roots) -> dict[str, DeviceInfo]:
    counters, _warnings = diskstats.read(roots)
    return BlockDevices(roots).describe(counters)


def ceiling_device(infos: dict[str, DeviceInfo], name: str) -> tuple[str, str | None]:
    """(the device whose ceiling `name` has, a note saying why when it is another)."""
    info = infos.get(name)
    if info is None:
        return name, None
    if info.kind in ("partition", "nvme-path") and info.parent:
        what = "a partition" if info.kind == "partition" else "a path"
        return info.parent, f"{name} is {what} of {info.parent}: measuring {info.parent}"
    if info.kind in ("dm", "md") and info.slaves:
        leaves = sorted(_leaf_disks(infos, name))
        label = f"{name} ({info.display_name})" if info.display_name != name else name
        if len(leaves) == 1:
            return leaves[0], f"{label} lies on {leaves[0]} alone: measuring {leaves[0]}"
        if leaves:
            return name, f"{label} spans {', '.join(leaves)}: measuring {name} as a whole"
    return name, None


def _leaf_disks(infos: dict[str, DeviceInfo], name: str) -> set[str]:
    """The disks at the bottom of name's stack: neither a dm/md device over others nor a
    partition (whose disk is in the stack too)."""
    def stacked(info: DeviceInfo | None) -> bool:
        return info is not None and ((info.kind in ("dm", "md") and bool(info.slaves))
                                     or (info.kind == "partition" and bool(info.parent)))
    return {n for n in device_stack(infos, name) if not stacked(infos.get(n))}


def identity(roots: Roots, infos: dict[str, DeviceInfo], name: str) -> tuple[str, bool]:
    """(key, weak): the WWN or serial of `name` from sysfs ("wwid:naa.5000c500a1b2",
    "serial:BTLJ0123"), else its model and kernel name, which is weak: another disk put
    in its place later gets the same key.  A serial that two devices here share (virtual
    disks given the same one) is qualified by the kernel name, and is weak too."""
    found = read_identity(roots, name)
    if found is not None:
        key = f"{found[0]}:{found[1]}"
        shared = [other for other in infos if other != name and infos[other].kind not in
                  ("partition", "nvme-path") and read_identity(roots, other) == found]
        if not shared:
            return key, False
        return f"{key}/{name}", True
    info = infos.get(name)
    model = info.model if info is not None and info.model else None
    return (f"model:{model}/{name}" if model else f"name:{name}"), True


def _node_for(roots: Roots, name: str, devdir: str = "/dev") -> str | None:
    """The /dev node of kernel device `name`, checked by device number."""
    majmin = read_first_line(roots.sys("class", "block", name, "dev"))
    candidates = [os.path.join(devdir, name)]
    if majmin:
        candidates.append(os.path.join(devdir, "block", majmin))
    for path in candidates:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if stat.S_ISBLK(st.st_mode) and (
                not majmin or f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}" == majmin):
            return path
    return None


def _size_bytes(roots: Roots, name: str) -> int:
    text = read_first_line(roots.sys("class", "block", name, "size"))
    try:
        return int(text) * 512 if text else 0   # always 512-byte units, whatever the LBA
    except ValueError:
        return 0


def _name_of_devno(roots: Roots, dev: int) -> str | None:
    link = roots.sys("dev", "block", f"{os.major(dev)}:{os.minor(dev)}")
    return os.path.basename(os.path.realpath(link)) if os.path.exists(link) else None


def _mount_of(path: str, procfs: str) -> tuple[str, str, str] | None:
    """(mountpoint, fstype, source) of the mount holding `path`, from mountinfo."""
    real = os.path.realpath(path)
    text = read_text(os.path.join(procfs, "self", "mountinfo")) or ""
    best = None
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if not sep or len(fields) < 5 or len(rfields) < 2:
            continue
        mp = unescape_mountinfo(fields[4])
        if (real == mp or real.startswith(mp.rstrip("/") + "/")) and (
                best is None or len(mp) >= len(best[0])):
            best = (mp, rfields[0], rfields[1])
    return best


def _device_under(roots: Roots, infos: dict[str, DeviceInfo], path: str, st) -> str:
    """The kernel name of the block device a file or directory lives on."""
    name = _name_of_devno(roots, st.st_dev)
    if name is not None:
        return name
    mount = _mount_of(path, roots.procfs)
    if mount is not None and mount[2].startswith("/dev/"):
        # btrfs and others report an anonymous device number; the source names it
        base = os.path.basename(mount[2])
        for info in infos.values():
            if base in (info.name, info.display_name):
                return info.name
    fs = f" ({mount[1]} {mount[2]})" if mount else ""
    raise UsageError(f"{path} is on a filesystem with no block device here{fs}: probe "
                     "measures block devices; give a device or a path on a local disk")


def _allocated(st) -> bool:
    # a sparse file's holes are read as zeros without touching the device.  (Extents
    # that fallocate reserved but nothing wrote count as allocated and read as zeros
    # too; st_blocks cannot tell them apart, FIEMAP could.)
    return st.st_blocks * 512 >= 0.9 * st.st_size


def _readable(path: str) -> OSError | None:
    """None when `path` opens for O_DIRECT reading, else why not."""
    try:
        # O_NONBLOCK: a FIFO put there since it was looked at is not waited on
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT | os.O_CLOEXEC | os.O_NOCTTY
                     | os.O_NONBLOCK)
    except OSError as err:
        return err
    os.close(fd)
    return None


def _large_file_in(directory: str, dev: int) -> str | None:
    """The largest readable, allocated regular file of MIN_SPAN_BYTES or more under
    `directory` on the same filesystem, searched breadth-first within the walk limits."""
    best, best_size, seen = None, 0, 0
    level = [directory]
    for _depth in range(_WALK_MAX_DEPTH):
        below = []
        for d in level:
            try:
                entries = os.scandir(d)
            except OSError:
                continue
            with entries:
                for entry in entries:
                    seen += 1
                    if seen > _WALK_MAX_ENTRIES:
                        return best
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if st.st_dev != dev:
                        continue
                    if stat.S_ISDIR(st.st_mode):
                        below.append(entry.path)
                    elif (stat.S_ISREG(st.st_mode) and st.st_size >= MIN_SPAN_BYTES
                          and st.st_size > best_size and _allocated(st)
                          and _readable(entry.path) is None):
                        best, best_size = entry.path, st.st_size
        level = below
    return best


def _size_text(n_bytes: int) -> str:
    if n_bytes < KIB:
        return f"{n_bytes} bytes"
    return present.size(n_bytes / KIB, ("GiB", "MiB", "KiB"))


def _because(err: OSError | None) -> str:
    if err is None:
        return ""
    reason = (err.strerror or str(err)).lower()
    # EACCES is the node's permissions; EPERM here is a devices cgroup or a missing
    # capability (a container), which root does not get around either
    return f" ({reason}{': it needs root' if err.errno == errno.EACCES else ''})"


def _kind_word(mode: int) -> str:
    for test, word in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device")):
        if test(mode):
            return word
    return "not a file, directory or block device"


def _cannot_read(path: str, err: OSError, device: bool = False) -> RuntimeFailure:
    if err.errno == errno.EACCES:
        hint = (" (reading a device node needs root or the disk group; or give a file of "
                f"{MIN_SPAN_BYTES // 2**20} MiB or more on it)") if device else ""
        return RuntimeFailure(f"cannot read {path}: permission denied{hint}")
    if err.errno == errno.EPERM:
        hint = (" (a devices cgroup or a missing capability forbids it, for root too; give "
                f"a file of {MIN_SPAN_BYTES // 2**20} MiB or more on it)") if device else ""
        return RuntimeFailure(f"cannot read {path}: operation not permitted{hint}")
    if err.errno == errno.EINVAL:
        return RuntimeFailure(f"cannot read {path} with O_DIRECT: its filesystem does not "
                              "support direct I/O")
    return RuntimeFailure(f"cannot read {path}: {err.strerror or err}")


def resolve(arg: str | None, roots: Roots | None = None, devdir: str = "/dev") -> Target:
    """The Target for PATH|DEVICE (a device node, a kernel name such as "nvme0n1", a file
    or a directory), or for the current directory when `arg` is None.

    Raises UsageError for an argument that names nothing probe can measure (no such path
    or device, a FIFO, a directory without a large file on a device we may not read, a
    file on a filesystem with no block device) and RuntimeFailure when the thing named
    cannot be read (permission denied, no O_DIRECT)."""
    roots = roots or Roots()
    label = arg if arg is not None else os.getcwd()
    path = label
    infos = describe_devices(roots)
    if (arg is not None and "/" not in arg and arg not in (".", "..")
            and os.path.isfile(roots.sys("class", "block", arg, "dev"))):   # a kernel name
        node = _node_for(roots, arg, devdir)
        if node is None:
            raise UsageError(f"{arg}: no device node for it under {devdir}")
        path = node
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UsageError(f"{label}: no such file, directory or block device") from None
    except OSError as err:
        raise _cannot_read(label, err) from None

    if stat.S_ISBLK(st.st_mode):
        given = _name_of_devno(roots, st.st_rdev)
        if given is None:
            raise UsageError(f"{label}: a block device that sysfs does not know "
                             f"({os.major(st.st_rdev)}:{os.minor(st.st_rdev)})")
        dev, note = ceiling_device(infos, given)
        node = path if dev == given else _node_for(roots, dev, devdir)
        if node is None:
            raise UsageError(f"{label}: no device node for {dev} under {devdir}")
        err = _readable(node)
        if err is not None:
            raise _cannot_read(node, err, device=True)
        return _device_target(roots, infos, label, dev, node, [note] if note else [])

    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        raise UsageError(f"{label} is {_kind_word(st.st_mode)}: probe reads a block device, "
                         "or a file or directory on one")
    under = _device_under(roots, infos, path, st)
    dev, note = ceiling_device(infos, under)
    notes = [note] if note else []
    node = _node_for(roots, dev, devdir)

    if stat.S_ISREG(st.st_mode):
        err = _readable(path)
        if err is not None:
            raise _cannot_read(path, err)
        if st.st_size >= MIN_SPAN_BYTES and _allocated(st):
            return _file_target(roots, infos, label, dev, path, st, notes)
        node_err = _readable(node) if node else None
        why = (f"{path} is sparse (holes are not read from the device)" if
               st.st_size >= MIN_SPAN_BYTES else
               f"{path} is {_size_text(st.st_size)}, too small for random reads "
               f"(they need {MIN_SPAN_BYTES // 2**20} MiB or more)")
        if node and node_err is None:
            return _device_target(roots, infos, label, dev, node,
                                  notes + [f"{why}: reading the device {node} instead"])
        raise UsageError(f"{why}, and the device {node or dev} is not readable here"
                         f"{_because(node_err)}")

    # a directory (or the current one): the device itself when we may read it, else
    # the largest file on it that we may
    node_err = _readable(node) if node else None
    if node and node_err is None:
        return _device_target(roots, infos, label, dev, node, notes)
    big = _large_file_in(path, st.st_dev)
    if big is not None:
        why = f"{node} is not readable{_because(node_err)}" if node \
            else f"no device node for {dev}"
        return _file_target(roots, infos, label, dev, big, os.stat(big),
                            notes + [f"{why}: reading the file {big} instead"])
    raise UsageError(f"no file of {MIN_SPAN_BYTES // 2**20} MiB or more under {path}, and "
                     f"the device {node or dev} is not readable here{_because(node_err)}; "
                     "give a device or a large file")


def _device_target(roots, infos, label, dev, node, notes) -> Target:
    size = _size_bytes(roots, dev)
    if size < MIN_SPAN_BYTES:
        raise UsageError(f"{dev} holds {_size_text(size)}, too small for random reads "
                         f"(they need {MIN_SPAN_BYTES // 2**20} MiB or more)")
    return _target(roots, infos, label, dev, node, "device", size, notes)


def _file_target(roots, infos, label, dev, path, st, notes) -> Target:
    return _target(roots, infos, label, dev, path, "file", st.st_size,
                   notes + [f"measured through the filesystem: {path} on {dev}"])


def _target(roots, infos, label, dev, path, kind, size, notes) -> Target:
    key, weak = identity(roots, infos, dev)
    if weak:
        notes = notes + [f"sysfs gives {dev} no WWN or serial of its own: its results are "
                         f"kept under the weak identity {key!r}"]
    info = infos.get(dev)
    return Target(arg=label, device=dev, path=path, kind=kind,
                  span_bytes=size - size % ALIGN_BYTES, identity=key, identity_weak=weak,
                  model=info.model if info is not None else None, notes=notes)
