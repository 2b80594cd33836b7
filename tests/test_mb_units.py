"""One unit for MB: iostat's (MiB, rMB/s = rkB/s / 1024) on every surface, processes'
rates included, so a process never reads more than the disk it reads from.

Before, the disk table's rMB/s was iostat's while the process views scaled bytes by 10^6:
fio at 76,184 kB/s read "78.0MB" beside its disk's 74.4, and the demo's 8 GPU processes
read 566 "MB" off a disk showing 540.0.  Both the demo recording and a real process
reading a loop device with O_DIRECT at a known rate are checked here, figure against
figure as the panels print them.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time

import pytest

import realdisk

from gpudisk_top.model.ioprocs import io_rows
from gpudisk_top.model.vocab import mb_s
from gpudisk_top.record import Recording
from gpudisk_top.session.replay import Replay
from gpudisk_top.ui.format import rate
from gpudisk_top.ui.widgets.disks import COLUMNS, column_widths, value_cells
from gpudisk_top.collect.source import LIVE, Source
from model_factory import rates
from screen_text import screen_text

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(ROOT, "examples", "demo-simulated.gdtrec")
_RMB_AT = [m.label for m, _ in COLUMNS].index("rMB/s")


def DISK_RMB(r) -> str:
    """The disk table's rMB/s cell of DiskRates r, as the panel prints it."""
    return value_cells(r, column_widths(8, len(COLUMNS))).split()[_RMB_AT]


SCALE_MIB = {"B": 1 / 2**20, "kB": 1 / 1024, "MB": 1.0, "GB": 1024.0}


def shown_mib(text: str) -> tuple[float, float]:
    """A figure as a panel prints it ('74.4MB', '540MB', '900kB', '512B', or the disk
    table's '74.40'), in MiB, with half its last digit (what printing may have rounded)."""
    m = re.fullmatch(r"(\d+(?:\.(\d+))?)(B|kB|MB|GB)?", text)
    assert m, text
    scale = SCALE_MIB[m.group(3) or "MB"]
    half = 0.5 * 10 ** -len(m.group(2) or "") * scale
    return float(m.group(1)) * scale, half


def test_a_process_rate_is_in_the_disk_tables_unit():
    # pidstat's 76184 kB/s of the issue: the disk table's figure and the process's agree
    assert DISK_RMB(rates(rkb_s=76184.0)) == "74.40"
    assert rate(76184.0) == "74.4MB" and mb_s(76184.0) == pytest.approx(74.398, abs=1e-3)
    assert rate(552960.0) == "540MB" and rate(900.0) == "900kB" and rate(0.5) == "512B"
    assert rate(3 * 2**20) == "3.0GB" and rate(None) == "n/a"


def test_in_the_demo_no_process_reads_more_than_its_device():
    """The demo recording, as the panels print it: the I/O view's read/s of the processes
    put on a device add up to no more than that device's rMB/s, and the GPU list's (`p`)
    read/s of the GPU processes to no more than the devices they read from, the rounding
    of the printed figures aside.  The kernel counts a process's read_bytes when it
    submits a read and the disk's sectors when the read completes (the simulator, whole
    requests only), so in one interval the processes may be ahead of their disk by a
    request in flight (its rareq-sz); over the recording, never."""
    checked = 0
    totals: dict[str, list[float]] = {}      # device -> [processes, disk, slack]
    with Recording.open(DEMO) as rec:
        for model, _verdict in Replay(rec).models():
            per_device: dict[str, list[tuple[float, float]]] = {}
            for row in io_rows(model):
                if row.device in model.disks and row.view.read_kb_s:
                    per_device.setdefault(row.device, []).append(shown_mib(rate(row.view.read_kb_s)))
            for name, shown in per_device.items():
                r = model.disks[name]
                disk, disk_half = shown_mib(DISK_RMB(r))
                total, slack = sum(v for v, _ in shown), sum(h for _, h in shown) + disk_half
                assert total <= disk + slack + mb_s(r.rareq_kb), (model.wall_s, name, total, disk)
                t = totals.setdefault(name, [0.0, 0.0, 0.0])
                t[0], t[1], t[2] = t[0] + total, t[1] + disk, t[2] + slack
                checked += total > 100
            trees = [io for io in model.gpu_proc_io.values() if io.get("read_kb_s")]
            if trees:
                names = {d for io in trees for d in io.get("devices") or () if d in model.disks}
                shown = [shown_mib(rate(io["read_kb_s"])) for io in trees]
                disks = [shown_mib(DISK_RMB(model.disks[d])) for d in names]
                in_flight = sum(mb_s(model.disks[d].rareq_kb) for d in names)
                total = sum(v for v, _ in shown)
                assert total <= sum(v for v, _ in disks) + sum(h for _, h in shown + disks) + in_flight, \
                    (model.wall_s, total, names)
    assert checked >= 50      # the disk-starved minute: the loaders read ~540 MB/s of sdb
    for name, (procs, disk, slack) in totals.items():
        assert procs <= disk + slack + 1, (name, procs, disk)     # 1 MiB: the last request


# ------------------------------------------------------------------------------ real load
RATE_MIB_S = 16       # the reader's pace: 16 reads of 1 MiB a second
RECORD_S = 10

READER = r"""
import mmap, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
size = os.lseek(fd, 0, os.SEEK_END)
buf = mmap.mmap(-1, 1 << 20)
rate, end = float(sys.argv[2]), time.monotonic() + float(sys.argv[3])
t0, n, off = time.monotonic(), 0, 0
while time.monotonic() < end:
    os.preadv(fd, [buf], off)
    n += 1
    off = (off + (1 << 20)) % size
    pause = t0 + n / rate - time.monotonic()
    if pause > 0:
        time.sleep(pause)
"""


def _cell_under(lines: list[str], title: str, row_starts: str) -> str:
    """The cell of a right-aligned table column, in the row that starts with row_starts
    (after the row's mark)."""
    head = next(line for line in lines if f" {title}" in line and "r/s" in line)
    end = head.index(f" {title}") + 1 + len(title)
    row = next(line for line in lines if row_starts in line.split()[:2])
    return row[:end].split()[-1]


def _closest_interval(rec, device: str, pid: int) -> int:
    """The index of the recorded interval where the reader's read kB/s and its device's
    are closest (both in kB/s, as recorded: no unit of the screens involved)."""
    gaps = []
    for i, model, _verdict, _loss in Replay(rec).run(rec.ranges()):
        view, disk = model.procs.get(pid), model.disks.get(device)
        if view is not None and view.read_kb_s and disk is not None and disk.rkb_s:
            gaps.append((abs(view.read_kb_s - disk.rkb_s) / disk.rkb_s, i))
    assert gaps, "no interval saw the reader and its device"
    return min(gaps)[1]


@pytest.mark.integration
@pytest.mark.root(reason="a loop device needs root")
def test_a_real_reader_reads_what_its_disk_reads(tmp_path):
    """A process reads a loop device (direct I/O onto this machine's disk, nothing else on
    it) with O_DIRECT at 16 MiB/s.  The replay screen of its recording, disk table against
    I/O by process: the same figure, in the same unit (before: 16.0 beside "16.8MB")."""
    from gpudisk_top.model.select import DeviceFilter
    from gpudisk_top.ui.replay_app import ReplayApp

    out = str(tmp_path / "reader.gdtrec")
    with realdisk.loop_device(64, "units") as (dev, _path):
        name = os.path.basename(dev)
        reader = subprocess.Popen([sys.executable, "-c", READER, dev, str(RATE_MIB_S),
                                   str(RECORD_S + 10)])
        try:
            time.sleep(1.0)
            record = subprocess.run([sys.executable, "-m", "gpudisk_top", "record", "-o", out,
                                     "-i", "1", "--duration", str(RECORD_S)],
                                    capture_output=True, text=True, timeout=RECORD_S + 60,
                                    cwd=ROOT)
            assert record.returncode == 0, record.stderr
        finally:
            reader.kill()
            reader.wait()
    rec = Recording.open(out)
    # The recorder reads /proc/PID/io and /proc/diskstats a few milliseconds apart, and a
    # busy machine stretches that: an interval may give the process a read its disk counts
    # in the next (16.0 beside 16.5 on a loaded CI run).  The screen is looked at on the
    # interval where the recorded bytes agree best, so what is left is the screens' units.
    shown_at = _closest_interval(rec, name, reader.pid)

    async def shoot() -> tuple[str, str]:
        app = ReplayApp(rec, Source(LIVE, "h", "replay", kernel="k"),
                        dev_filter=DeviceFilter.from_option(False, name),
                        start_index=shown_at, show_self=False)
        async with app.run_test(size=(160, 50)) as pilot:
            await pilot.pause()
            disks = screen_text(app)
            await pilot.press("i")
            await pilot.pause()
            return disks, screen_text(app)

    disks, procs = asyncio.run(shoot())
    disk, disk_half = shown_mib(_cell_under(disks.splitlines(), "rMB/s", name))
    row = next((line.split() for line in procs.splitlines() if str(reader.pid) in line.split()), None)
    assert row is not None, procs
    proc, proc_half = shown_mib(row[row.index(str(reader.pid)) + 1])
    # the load was there, at most at its pace (a busy machine may slow the reader)
    assert RATE_MIB_S * 0.3 <= disk <= RATE_MIB_S * 1.1, disks
    # one interval of one process alone on its device: the same bytes, the same unit
    assert abs(proc - disk) <= disk_half + proc_half + 0.01 * disk, (proc, disk, procs)
    print(f"{name}: disk table rMB/s {disk:.1f}, I/O by process read/s {proc:.1f} MB")
