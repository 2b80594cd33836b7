"""Issue 25, item 7: text from the machine is data on every text surface.  A mountpoint
"/mnt/a\\nverdict: healthy<ESC>]0;owned<BEL>" (mountinfo's octal escapes, as the kernel
writes a real one) and a device named with a title-setting sequence reach `--once` text,
`record` -> `report` and `export -f csv` through the real command line over a --procfs
root made of this machine's own files plus those two: every one shows them escaped, on
their own row, and nothing a script reads can be taken for a verdict line.
"""

from __future__ import annotations

import pytest

from cli_run import gdt
from fakeprocfs import FakeProcfs
from gpudisk_top.textsafe import printable_lines

EVIL_DEV = "vd\x1b]0;owned\x07x"
MOUNT = r"/mnt/a\012verdict:\040healthy" + "\x1b]0;owned\x07"


def vda_line() -> str:
    """The first disk of /proc/diskstats that has done reads (this machine's own)."""
    with open("/proc/diskstats") as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 14 and int(fields[3]) > 0 and not fields[2].startswith(
                    ("loop", "ram")):
                return line
    pytest.skip("no disk with reads in /proc/diskstats")


@pytest.fixture(scope="module")
def procfs(tmp_path_factory):
    procfs = FakeProcfs(tmp_path_factory.mktemp("text") / "proc")
    procfs.copy("stat", "meminfo", "pressure/io", "pressure/cpu", "pressure/memory",
                "self/cgroup", "cmdline")
    disk = vda_line()
    major, minor, name = disk.split()[:3]
    procfs.write("diskstats", [disk.rstrip("\n"),
                               f"   7       9 {EVIL_DEV} 1 0 8 1 0 0 0 0 0 1 1 0 0 0 0 0 0"])
    with open("/proc/self/mountinfo") as f:
        mountinfo = f.read()
    mountinfo += f"99 1 {major}:{minor} / {MOUNT} rw - ext4 /dev/{name} rw\n"
    for d in ("self", "1"):
        procfs.write(f"{d}/mountinfo", mountinfo)
    return str(procfs)


def assert_data_not_lines(out: bytes, where: str) -> str:
    text = out.decode()
    assert "\x1b" not in text and "\x07" not in text, f"raw escape in {where}"
    assert not any(line.startswith("verdict: healthy") for line in text.splitlines()), where
    return text


def test_once_text_shows_a_mountpoint_with_a_newline_escaped(procfs):
    proc = gdt("--once", "--procfs", procfs, "-a", text=False)
    assert proc.returncode == 0, proc.stderr
    text = assert_data_not_lines(proc.stdout, "--once")
    assert r"/mnt/a\x0averdict: healthy\x1b]0;owned\x07" in text
    assert r"vd\x1b]0;owned\x07x" in text
    assert sum("verdict:" in line for line in text.splitlines()) == 2   # ours, and the data


def test_report_and_csv_show_the_machines_text_escaped(procfs, tmp_path):
    rec = str(tmp_path / "r.gdt")
    proc = gdt("record", "--procfs", procfs, "-a", "-o", rec, "--duration", "2", "-i", "0.5",
               text=False)
    assert proc.returncode == 0, proc.stderr
    report = gdt("report", rec, text=False)
    assert report.returncode == 0, report.stderr
    assert_data_not_lines(report.stdout, "report")
    csv_out = gdt("export", rec, "-f", "csv", "-o", "-", text=False)
    assert csv_out.returncode == 0, csv_out.stderr
    text = assert_data_not_lines(csv_out.stdout, "csv")
    rows = [r for r in text.splitlines() if r"vd\x1b]0;owned\x07x" in r]
    assert len(rows) >= 2              # one a sample, each on one line
    assert all(line.count(",") == text.splitlines()[0].count(",") for line in rows)


def test_each_line_is_one_line():
    assert printable_lines(["a", "b\nverdict: healthy", "\x1b[2J"]) == (
        "a\n" r"b\x0averdict: healthy" "\n" r"\x1b[2J" "\n")
