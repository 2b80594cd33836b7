"""One owner per formula and per spelling (issue 36 item 4): iostat's await is
model/disk.await_ms wherever an await is made (a device's r_await, an interval's reads and
writes together); a size, a percentage and a process ("pid 912 (rsync)") are spelled by
model/present.py, and the surfaces that print them read as it does."""

from __future__ import annotations

import pytest

from gpudisk_top.collect import diskstats
from gpudisk_top.model.disk import _deltas, await_ms, device_rates
from gpudisk_top.model.metric import GIB, KIB, MIB
from gpudisk_top.model.present import pct, pid_name, pids_name, size
from gpudisk_top.record.derived import disk_ints, interval_await_ms
from gpudisk_top.verdict.detect.evidence import Culprit, culprits_clause, storage_advice
from gpudisk_top.verdict.detect.job import Job

from diskstats_lines import BASE, advanced, line


def _counters(values: dict):
    """The counters /proc/diskstats's parser reads from a 20-field line of these values."""
    return diskstats.parse(line("sda", **values))["sda"]


def test_await_is_iostats_formula_and_zero_without_requests():
    assert await_ms(300, 4) == 75.0
    assert await_ms(0, 0) == 0.0
    assert await_ms(12, 0) == 0.0        # ticks without a completed request: iostat's 0.00


def test_every_await_of_an_interval_is_await_ms_of_its_counters():
    # a busy SSD's counters since boot, then one second of reads, writes, discards, flushes
    prev = _counters(BASE)
    cur = _counters(advanced(dict(rd_ios=250, rd_ticks=1900, wr_ios=40, wr_ticks=410,
                                  dc_ios=3, dc_ticks=7, fl_ios=9, fl_ticks=2)))
    r = device_rates(cur, prev, 1.0)
    assert r.r_await_ms == await_ms(1900, 250) == 7.6
    assert r.w_await_ms == await_ms(410, 40) == 10.25
    assert r.d_await_ms == await_ms(7, 3)
    assert r.f_await_ms == await_ms(2, 9)
    # the recorder's interval await: reads and writes together, the same formula
    ints = disk_ints(_deltas(cur, prev))
    assert interval_await_ms(ints) == await_ms(1900 + 410, 250 + 40)
    assert interval_await_ms(ints) == pytest.approx(7.9655, abs=1e-4)


def test_size_is_binary_in_the_unit_it_reaches():
    assert size(12.34 * GIB / KIB, ("GiB",), 2) == "12.34 GiB"
    assert size(1.5 * MIB / KIB) == "1.5 MiB"
    assert size(3 * 2**40 / KIB) == "3.0 TiB"
    assert size(512) == "512.0 KiB"
    assert size(512, ("GiB", "MiB"), 0, short=True) == "0M"       # never below the last unit
    assert size(30 * GIB / KIB, ("GiB",), 0, short=True) == "30G"
    assert size(None) == "n/a" and size(None, na="") == ""
    # a GiB is 2^30 bytes, never 10^9: a 10^9-byte file is 0.93 GiB
    assert size(1e9 / KIB, ("GiB",), 2) == "0.93 GiB"
    with pytest.raises(KeyError):
        size(1, ("GB",))


def test_percent_and_process_spellings():
    assert pct(43.2) == "43%" and pct(43.25, 1) == "43.2%" and pct(None) == "n/a"
    assert pct(None, na="") == ""
    assert pid_name(912, "rsync") == "pid 912 (rsync)"
    assert pid_name(912, None) == pid_name(912, "") == "pid 912 (?)"
    assert pids_name([912, 913], "fio") == "pids 912, 913 (fio)"
    assert pids_name([912], "fio") == pid_name(912, "fio")


def test_the_verdicts_name_a_process_as_present_does():
    rsync = Culprit(912, "rsync", "sda", 88.04, 70000.0)
    tar = Culprit(40, None, "sda", 3.0, 2000.0)
    assert rsync.clause() == f"{pid_name(912, 'rsync')}, {pct(88.04)} of its reads"
    assert culprits_clause([rsync, tar]) == ("pid 912 (rsync), 88% of its reads, "
                                             "pid 40 (?), 3% of its reads")
    job = Job(gpu_pids=[4121], names={4121: "python train.py"})
    assert job.describe() == pid_name(4121, "python train.py")
    assert Job(gpu_pids=[7]).describe() == "pid 7 (?)"
    # the advice's neighbours: one name for several processes reads as pids_name's
    fio = [Culprit(p, "fio", "sda", 40.0, 1.0) for p in (912, 913)]
    advice = storage_advice(None, fio, "sda", None, None)
    assert advice.startswith(f"{pids_name([912, 913], 'fio')} take {pct(80.0)} of sda's reads")
