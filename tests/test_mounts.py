"""Which mounts a process's files live on (collect/mounts.py), on this machine's real
/proc: its mountinfo, and a real process holding a file on a tmpfs and on the root disk."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

from gpudisk_top.collect.mounts import MountTable, mount_kind, parse_mountinfo, unescape_mountinfo
from gpudisk_top.collect.roots import Roots


def test_mount_kinds():
    assert mount_kind("nfs4", 0) == "nfs" and mount_kind("lustre", 0) == "lustre"
    for fuse in ("fuse", "fuse.s3fs", "fuse.gcsfuse", "fuse.mountpoint-s3", "fuseblk"):
        assert mount_kind(fuse, 0) == "fuse"
    assert mount_kind("cifs", 0) == "network" and mount_kind("wekafs", 0) == "network"
    assert mount_kind("tmpfs", 0) == "memory" and mount_kind("overlay", 0) == "overlay"
    assert mount_kind("proc", 0) == "pseudo" and mount_kind("ext4", 8) == "block"


def test_every_mount_of_this_machine_is_found_by_its_device_numbers():
    with open("/proc/self/mountinfo") as f:
        text = f.read()
    table = parse_mountinfo(text)
    # the root and /proc, by the st_dev a file on them has
    for path in ("/", "/proc"):
        st = os.stat(path)
        info = table[(os.major(st.st_dev), os.minor(st.st_dev))]
        assert os.path.samefile(info.mountpoint, path) or info.mountpoint == path
    assert table[(os.major(os.stat("/proc").st_dev), os.minor(os.stat("/proc").st_dev))].kind == "pseudo"
    # garbled lines are skipped, escapes undone
    assert parse_mountinfo("garbage\n1 2 x:y / / rw - ext4 /dev/x rw\n") == {}
    line = r"36 35 0:44 / /mnt/with\040space rw - fuse.s3fs s3fs rw" + "\n"
    info = parse_mountinfo(line)[(0, 44)]
    assert (info.mountpoint, info.kind, info.source) == ("/mnt/with space", "fuse", "s3fs")
    assert unescape_mountinfo(r"a\134b\011c") == "a\\b\tc"


def test_the_table_of_a_process_is_its_mount_namespaces():
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as d:
        path = os.path.join(d, "held")
        open(path, "w").close()
        proc = subprocess.Popen([sys.executable, "-c",
                                 "import sys, time; f = open(sys.argv[1]); time.sleep(30)", path])
        try:
            time.sleep(0.5)
            table = MountTable(Roots()).of(proc.pid, time.monotonic())
            st = os.stat(path)
            info = table[(os.major(st.st_dev), os.minor(st.st_dev))]
            assert info.kind == "memory" and path.startswith(info.mountpoint)
        finally:
            proc.kill()
            proc.wait()
