"""What cannot be seen from where we run (collect/visibility.py), from real trees: this
machine's /proc and /sys, and a procfs and sysfs that lack what a container may lack."""

from __future__ import annotations

import os

from gpudisk_top.collect.roots import Roots
from gpudisk_top.collect.visibility import NO_PSI, NO_SYSFS, NOT_ROOT, PID_NAMESPACE, blind_spots


def test_a_container_without_sys_psi_host_pids_or_root_is_told_each_with_its_fix(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "sys").mkdir()                  # /sys hidden under an empty tmpfs
    roots = Roots(procfs=str(tmp_path / "proc"), sysfs=str(tmp_path / "sys"))
    spots = blind_spots(roots, host_namespace=False, namespace_reason=None, euid=1000)
    assert [b.key for b in spots] == [NO_SYSFS, PID_NAMESPACE, NOT_ROOT, NO_PSI]
    lines = [b.line() for b in spots]
    assert "--sysfs" in lines[0] and "-v /sys:/sys:ro" in lines[0]
    assert "--pid=host" in lines[1] and "--procfs /host/proc" in lines[1]
    assert "not root" in lines[2] and "fix: run as root" in lines[2]
    assert "pressure/io: absent" in lines[3] and "psi=1" in lines[3]


def test_this_machine_as_root_in_the_host_namespace_misses_only_what_it_lacks():
    spots = {b.key for b in blind_spots(Roots(), host_namespace=True, namespace_reason=None, euid=0)}
    assert PID_NAMESPACE not in spots and NOT_ROOT not in spots
    assert (NO_SYSFS in spots) == (not os.listdir("/sys/block"))
    assert (NO_PSI in spots) == (not os.path.exists("/proc/pressure/io"))


def test_a_fifo_at_pressure_io_is_refused_at_once_not_waited_on(tmp_path):
    # issue 25 (12): the PSI check opened its file with a plain open(), which blocks for
    # ever on a FIFO nobody writes; it is run in a child so that a regression fails the
    # test instead of hanging the suite
    import subprocess
    import sys

    (tmp_path / "proc" / "pressure").mkdir(parents=True)
    os.mkfifo(tmp_path / "proc" / "pressure" / "io")
    code = ("import sys\n"
            "from gpudisk_top.collect.roots import Roots\n"
            "from gpudisk_top.collect.visibility import blind_spots\n"
            "spots = blind_spots(Roots(procfs=sys.argv[1], sysfs='/sys'), True, None, 0)\n"
            "print('\\n'.join(b.key + ' ' + b.line() for b in spots))\n")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "proc")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    psi = [line for line in proc.stdout.splitlines() if line.startswith(NO_PSI + " ")]
    assert len(psi) == 1 and "a FIFO" in psi[0], proc.stdout
