"""Device identity on a fixture sysfs (partitions, dm/LVM on md, NVMe multipath) and on
this machine's real /sys."""

from __future__ import annotations

import dataclasses
import os

import pytest

from fakeprocfs import FakeProcfs, FakeSysfs
from gpudisk_top.collect import diskstats
from gpudisk_top.collect.blockdev import ATTRIBUTES_RECHECK_S, BlockDevices
from gpudisk_top.collect.roots import Roots
from gpudisk_top.model.select import DeviceFilter

# name -> (major, minor, rotational, extra sysfs files)
DEVICES = {
    "sda": (8, 0, "1", {"device/model": "ST8000NM000A", "device/vendor": "ATA"}),
    "sdb": (8, 16, "0", {"device/model": "Samsung SSD 870", "device/vendor": "ATA"}),
    "sdc": (8, 32, "0", {"device/model": "Samsung SSD 870", "device/vendor": "ATA"}),
    "nvme0n1": (259, 0, "0", {"device/model": "SAMSUNG MZQL23T8HCLS"}),
    "nvme1n1": (259, 5, "0", {}),
    "nvme1c1n1": (259, 6, "0", {"hidden": "1"}),
    "dm-0": (253, 0, "0", {"dm/name": "vg-data"}),
    "md0": (9, 0, "0", {"md/level": "raid1"}),
    "loop0": (7, 0, "0", {}),
    "sr0": (11, 0, "1", {}),
    "sdd": (8, 48, "0", {"device/model": "QEMU HARDDISK", "device/vendor": "ATA"}),
}
PARTITIONS = {"sda1": ("sda", 8, 1), "sda2": ("sda", 8, 2), "sdb1": ("sdb", 8, 17),
              "sdc1": ("sdc", 8, 33), "nvme0n1p1": ("nvme0n1", 259, 1)}
SLAVES = {"dm-0": ["md0"], "md0": ["sdb1", "sdc1"]}


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


@pytest.fixture
def tree(tmp_path):
    """A sysfs and procfs laid out as the kernel does, for a host with LVM on RAID1."""
    sysfs, procfs = FakeSysfs(tmp_path / "sys"), FakeProcfs(tmp_path / "proc")
    under = "devices/pci0000:00"
    lines = []
    for name, (major, minor, rot, extra) in DEVICES.items():
        sysfs.block_device(name, major, minor, {"queue/rotational": rot, **extra},
                           under=under, slaves=tuple(SLAVES.get(name, [])))
        lines.append(f"{major} {minor} {name} 10 0 80 5 0 0 0 0 0 4 5 0 0 0 0 0 0")
    for name, (parent, major, minor) in PARTITIONS.items():
        sysfs.partition(name, parent, major, minor, under=under)
        lines.append(f"{major} {minor} {name} 10 0 80 5 0 0 0 0 0 4 5 0 0 0 0 0 0")
    lines.append("252 0 zram0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0")  # no sysfs entry
    procfs.write("diskstats", lines)
    procfs.write("self/mountinfo", [
        "22 1 8:1 / /boot rw,relatime - ext4 /dev/sda1 rw",
        "23 1 253:0 / /data rw,relatime - xfs /dev/mapper/vg-data rw",
        "24 23 253:0 /ckpt /data/my\\040ckpt rw,relatime - xfs /dev/mapper/vg-data rw",
        "25 1 0:45 / /scratch rw,relatime - btrfs /dev/nvme0n1p1 rw",
        "26 1 0:21 / /proc rw - proc proc rw",
    ])
    return Roots(procfs=str(procfs), sysfs=str(sysfs))


def describe(roots):
    counters, warnings = diskstats.read(roots)
    assert warnings == []
    return counters, BlockDevices(roots).describe(counters)


def test_kinds_parents_and_names(tree):
    _, info = describe(tree)
    assert info["sda"].kind == "disk" and info["sda1"].kind == "partition"
    assert info["sda1"].parent == "sda" and info["nvme0n1p1"].parent == "nvme0n1"
    assert info["dm-0"].kind == "dm" and info["dm-0"].display_name == "vg-data"
    assert info["dm-0"].slaves == ("md0",) and info["md0"].kind == "md"
    assert info["md0"].slaves == ("sdb1", "sdc1")
    assert info["nvme1c1n1"].kind == "nvme-path" and info["nvme1c1n1"].hidden
    assert info["nvme1c1n1"].parent == "nvme1n1"
    assert info["loop0"].kind == "loop" and info["sr0"].kind == "sr"
    assert info["zram0"].kind == "zram"  # no sysfs entry: kind from the name


def test_classes_from_rotational_model_and_stack(tree):
    _, info = describe(tree)
    assert info["sda"].dev_class == "HDD" and info["sda"].rotational is True
    assert info["sda1"].dev_class == "HDD"  # a partition takes its disk's queue flags
    assert info["sdb"].dev_class == "SSD"
    assert info["nvme0n1"].dev_class == "NVMe"
    assert info["sdd"].dev_class == "virtual"  # QEMU HARDDISK
    assert info["md0"].dev_class == "SSD" and info["dm-0"].dev_class == "SSD"
    assert info["loop0"].dev_class == "virtual"


def test_mountpoints_follow_dm_md_stacks_and_partitions(tree):
    _, info = describe(tree)
    assert info["sda1"].mountpoints == ("/boot",) and info["sda"].mountpoints == ("/boot",)
    # /data is LVM (dm-0) on md0 on sdb1 + sdc1: every layer carries it
    for dev in ("dm-0", "md0", "sdb1", "sdc1", "sdb", "sdc"):
        assert info[dev].mountpoints == ("/data", "/data/my ckpt"), dev
    # btrfs reports an anonymous 0:N device; the source names the partition
    assert info["nvme0n1p1"].mountpoints == ("/scratch",)
    assert info["nvme0n1"].mountpoints == ("/scratch",)
    assert info["nvme1n1"].mountpoints == ()


def test_default_selection_is_whole_disks_and_dm_md_with_io(tree):
    counters, info = describe(tree)
    default = DeviceFilter()
    picked = {n for n in info if default.selected(info[n], counters[n])}
    assert picked == {"sda", "sdb", "sdc", "sdd", "nvme0n1", "nvme1n1", "dm-0", "md0"}
    everything = DeviceFilter(all_devices=True)
    assert {n for n in info if everything.selected(info[n], counters[n])} == set(info)
    by_name = DeviceFilter.from_option(False, "sda*,/dev/vg-data")
    assert {n for n in info if by_name.selected(info[n], counters[n])} == {"sda", "sda1", "sda2", "dm-0"}


def test_idle_disk_is_not_selected_by_default(tree):
    counters, info = describe(tree)
    idle = diskstats.parse("8 0 sda 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")["sda"]
    assert not DeviceFilter().selected(info["sda"], idle)


def test_no_sysfs_still_names_kinds(tmp_path, tree):
    roots = Roots(procfs=tree.procfs, sysfs=str(tmp_path / "missing"))
    _, info = describe(roots)
    assert info["sda1"].kind == "partition" and info["sda1"].parent == "sda"
    assert info["dm-0"].kind == "dm" and info["nvme1c1n1"].kind == "nvme-path"
    assert info["sda"].dev_class == "unknown"
    assert info["sda"].mountpoints == ("/boot",)  # mountinfo still works


def test_this_machines_root_disk():
    roots = Roots()
    counters, info = describe(roots)
    root_dev = os.stat("/").st_dev
    link = f"/sys/dev/block/{os.major(root_dev)}:{os.minor(root_dev)}"
    if not os.path.exists(link):
        pytest.skip("/ is not on a block device here")
    name = os.path.basename(os.path.realpath(link))
    assert name in info
    disk = info[name].parent if info[name].kind == "partition" else name
    assert "/" in info[name].mountpoints and "/" in info[disk].mountpoints
    rot = open(f"/sys/block/{disk}/queue/rotational").read().strip()
    assert info[disk].rotational is (rot == "1")
    assert info[disk].dev_class in ("NVMe", "SSD", "HDD", "virtual")


# ---------------------------------------------------------------------- described again
class Clock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


def _fields(infos):
    return {name: dataclasses.asdict(info) for name, info in infos.items()}


def test_described_again_reads_what_a_fresh_read_gives(tree):
    """A second describe() from the same BlockDevices (its attributes kept) gives the same
    devices as a new one reading all of sysfs, field by field, and new objects: a caller
    that marks one (the sampler's probed ceilings) does not mark the next."""
    counters, _ = diskstats.read(tree)
    kept = BlockDevices(tree, clock=Clock())
    first = kept.describe(counters)
    first["sda"].ceiling_iops = 1234.0
    again = kept.describe(counters)
    assert _fields(again) == _fields(BlockDevices(tree).describe(counters))
    assert again["sda"].ceiling_iops is None and again["sda"] is not first["sda"]


def test_what_changes_in_place_shows_at_once_and_the_rest_within_the_bound(tree):
    """A dm rename, new members of an array and a new mount show at the next describe();
    a device made again under its name (a new sysfs node) is read afresh; an in-place
    write to queue/rotational shows once ATTRIBUTES_RECHECK_S has passed."""
    sysfs = tree.sysfs
    counters, _ = diskstats.read(tree)
    clock = Clock()
    bd = BlockDevices(tree, clock=clock)
    before = bd.describe(counters)
    assert before["sda"].dev_class == "HDD" and before["dm-0"].display_name == "vg-data"

    dm = os.path.realpath(os.path.join(sysfs, "class/block/dm-0"))
    _write(os.path.join(dm, "dm", "name"), "vg-renamed\n")
    md = os.path.realpath(os.path.join(sysfs, "class/block/md0"))
    os.unlink(os.path.join(md, "slaves", "sdc1"))
    mountinfo = os.path.join(tree.procfs, "self", "mountinfo")
    with open(mountinfo, "a") as f:
        f.write("27 1 8:16 / /fresh rw - ext4 /dev/sdb rw\n")
    sda = os.path.realpath(os.path.join(sysfs, "class/block/sda"))
    _write(os.path.join(sda, "queue", "rotational"), "0\n")
    clock.now_s += 1
    now = bd.describe(counters)
    assert now["dm-0"].display_name == "vg-renamed"
    assert now["md0"].slaves == ("sdb1",)
    assert "/fresh" in now["sdb"].mountpoints and "/fresh" not in before["sdb"].mountpoints
    assert now["sda"].rotational is True          # within the bound: as read before

    # sdd made again under its name: a new sysfs node, read at once
    sdd = os.path.realpath(os.path.join(sysfs, "class/block/sdd"))
    os.rename(sdd, sdd + ".old")
    os.makedirs(sdd)
    _write(os.path.join(sdd, "queue", "rotational"), "1\n")
    clock.now_s += 1
    now = bd.describe(counters)
    assert (now["sdd"].rotational, now["sdd"].model, now["sdd"].dev_class) == (True, None, "HDD")

    clock.now_s += ATTRIBUTES_RECHECK_S
    now = bd.describe(counters)
    assert now["sda"].rotational is False and now["sda"].dev_class == "SSD"
    assert _fields(now) == _fields(BlockDevices(tree).describe(counters))


def test_this_machines_devices_described_again_as_afresh():
    """The same on this machine's real /sys: a kept BlockDevices against a new one."""
    roots = Roots()
    counters, _ = diskstats.read(roots)
    kept = BlockDevices(roots)
    kept.describe(counters)
    assert _fields(kept.describe(counters)) == _fields(BlockDevices(roots).describe(counters))


def test_a_disk_read_while_it_is_being_added_is_read_again_once_complete(tree):
    """The kernel shows a new disk in sysfs and diskstats before its queue is registered
    (register_disk() before blk_register_queue()), and describe() runs as soon as the set
    of devices changes: what it read then (no rotational flag, class unknown) is not kept,
    so the next describe() gives the disk's class, not a minute later."""
    sysfs = tree.sysfs
    sde = os.path.join(sysfs, "devices", "pci0000:00", "sde")
    _write(os.path.join(sde, "dev"), "8:64\n")
    _write(os.path.join(sde, "device", "model"), "ST8000NM000A\n")
    for link_dir in ("block", "class/block"):
        os.symlink(sde, os.path.join(sysfs, link_dir, "sde"))
    diskstats_path = os.path.join(tree.procfs, "diskstats")
    with open(diskstats_path, "a") as f:
        f.write("8 64 sde 1 0 8 1 0 0 0 0 0 1 1 0 0 0 0 0 0\n")
    counters, _ = diskstats.read(tree)
    clock = Clock()
    bd = BlockDevices(tree, clock=clock)
    assert bd.describe(counters)["sde"].dev_class == "unknown"
    # the add finishes: its queue, then its partition
    _write(os.path.join(sde, "queue", "rotational"), "1\n")
    _write(os.path.join(sde, "sde1", "partition"), "1\n")
    os.symlink(os.path.join(sde, "sde1"), os.path.join(sysfs, "class/block/sde1"))
    with open(diskstats_path, "a") as f:
        f.write("8 65 sde1 1 0 8 1 0 0 0 0 0 1 1 0 0 0 0 0 0\n")
    counters, _ = diskstats.read(tree)
    clock.now_s += 1
    now = bd.describe(counters)
    assert (now["sde"].rotational, now["sde"].dev_class) == (True, "HDD")
    assert now["sde1"].dev_class == "HDD"
    assert _fields(now) == _fields(BlockDevices(tree).describe(counters))


def test_a_disk_whose_diskseq_moved_is_read_again_at_once(tree):
    """A loop device attached to another file, or a disk whose medium changed, keeps its
    sysfs node and numbers; its diskseq (Linux 5.15+) moves, and its attributes and its
    partitions' are read again at the next describe()."""
    sysfs = tree.sysfs
    sda = os.path.realpath(os.path.join(sysfs, "class/block/sda"))
    _write(os.path.join(sda, "diskseq"), "7\n")
    counters, _ = diskstats.read(tree)
    clock = Clock()
    bd = BlockDevices(tree, clock=clock)
    before = bd.describe(counters)
    assert before["sda"].dev_class == "HDD" and before["sda1"].dev_class == "HDD"
    _write(os.path.join(sda, "queue", "rotational"), "0\n")
    clock.now_s += 1
    assert bd.describe(counters)["sda"].dev_class == "HDD"   # same diskseq: as read before
    _write(os.path.join(sda, "diskseq"), "8\n")
    clock.now_s += 1
    now = bd.describe(counters)
    assert (now["sda"].dev_class, now["sda1"].dev_class) == ("SSD", "SSD")
    assert _fields(now) == _fields(BlockDevices(tree).describe(counters))


# ---------------------------------------------------------------------- loop backing
def test_a_loop_devices_backing_is_the_device_under_the_mount_holding_its_file(tree):
    """loop0 gets its reads again from the device its backing file lives on: the deepest
    mount holding the file's path (sysfs's text, never opened), as mountinfo names it."""
    backing = os.path.join(tree.sysfs, "class", "block", "loop0", "loop", "backing_file")
    for path, device in (("/data/my ckpt/images/ds.img", "dm-0"),   # under /data/my\040ckpt
                         ("/data/ds.img", "dm-0"),
                         ("/scratch/x.img (deleted)", "nvme0n1p1"),  # btrfs: by its source
                         ("/boot/efi.img", "sda1"),
                         ("/bootx/a.img", None),        # not under /boot: no mount holds it
                         ("/proc/a.img", None),         # a mount with no block device
                         ("relative/a.img", None)):
        _write(backing, path + "\n")
        infos = describe(tree)[1]
        assert infos["loop0"].backing == device, path
        assert all(i.backing is None for n, i in infos.items() if n != "loop0")
    os.remove(backing)                                   # detached: no loop/ directory
    assert describe(tree)[1]["loop0"].backing is None


@pytest.mark.root(reason="a loop device needs root")
def test_this_machines_loop_device_is_backed_by_the_disk_holding_its_file():
    import realdisk

    with realdisk.loop_device(1, "backing") as (dev, path):
        st = os.stat(path)
        link = f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
        if not os.path.exists(link):
            pytest.skip(f"{path} is not on a block device's filesystem here")
        infos = describe(Roots())[1]
        assert infos[os.path.basename(dev)].backing == os.path.basename(os.path.realpath(link))
