"""parse() and rates() on diskstats from real kernels and on hand-made edge cases."""

from __future__ import annotations

import math
import os
import random

import pytest

from gpudisk_top.collect.diskstats import COUNTER_FIELDS, parse_checked
from gpudisk_top.diskstats import RATE_FIELDS, parse, rates

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "diskstats")

SPEC_ATTRIBUTES = (
    "r_s, rkb_s, rrqm_s, rrqm_pct, r_await_ms, rareq_kb, w_s, wkb_s, wrqm_s, wrqm_pct, "
    "w_await_ms, wareq_kb, d_s, dkb_s, drqm_s, drqm_pct, d_await_ms, dareq_kb, f_s, "
    "f_await_ms, aqu_sz, util_pct").split(", ")


def fixture(name: str) -> str:
    with open(os.path.join(FIX, name)) as f:
        return f.read()


def test_rate_object_has_exactly_the_documented_attributes():
    assert list(RATE_FIELDS) == SPEC_ATTRIBUTES
    r = rates(parse(fixture("kernel-4.15-14field.txt")), parse(fixture("kernel-4.15-14field.txt")), 1)
    assert set(r["sda"].as_dict()) == set(SPEC_ATTRIBUTES)


def test_14_field_lines_have_no_discard_or_flush():
    d = parse(fixture("kernel-4.15-14field.txt"))
    assert set(d) == {"loop0", "sda", "sda1", "sdb", "dm-0"}
    sda = d["sda"]
    assert (sda.major, sda.minor, sda.nfields) == (8, 0, 14)
    assert (sda.rd_ios, sda.rd_merges, sda.rd_sectors, sda.rd_ticks) == (1218763, 42867, 75327714, 1062836)
    assert (sda.wr_ios, sda.wr_merges, sda.wr_sectors, sda.wr_ticks) == (5306180, 5962357, 259683648, 13380024)
    assert (sda.ios_pgr, sda.tot_ticks, sda.rq_ticks) == (0, 4029868, 14457820)
    assert (sda.dc_ios, sda.dc_sectors, sda.fl_ios, sda.fl_ticks) == (0, 0, 0, 0)


def test_18_field_lines_read_discards():
    d = parse(fixture("kernel-5.4-18field.txt"))
    sda = d["sda"]
    assert sda.nfields == 18
    assert (sda.dc_ios, sda.dc_merges, sda.dc_sectors, sda.dc_ticks) == (3212, 0, 102760432, 3196)
    assert sda.fl_ios == 0
    assert d["md0"].dc_sectors == 8888


def test_20_field_lines_read_flushes():
    d = parse(fixture("kernel-5.15-20field.txt"))
    nvme = d["nvme0n1"]
    assert nvme.nfields == 20
    assert (nvme.fl_ios, nvme.fl_ticks) == (2715811, 213393)
    assert "nvme1c1n1" in d  # hidden multipath path devices are parsed like any other


def test_this_machines_diskstats_parses_every_line():
    with open("/proc/diskstats") as f:
        text = f.read()
    parsed, warnings = parse_checked(text)
    assert warnings == []
    assert set(parsed) == {line.split()[2] for line in text.splitlines() if line.strip()}


def test_malformed_lines_are_skipped_and_the_rest_parsed():
    text = (" 8 0 sda 10 0 80 5 0 0 0 0 0 4 5\n"
            "garbage line\n"
            " 8 16 sdb 1 2 3\n"                                   # truncated before field 14
            " 8 32 sdc 1 2 x 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n"  # garbled at field 6
            "\n"
            " 8 48 sdd 20 0 160 10 0 0 0 0 0 8 10\n")
    parsed, warnings = parse_checked(text)
    assert set(parsed) == {"sda", "sdd"}
    assert len(warnings) == 3 and all("skipped" in w for w in warnings)


def test_a_line_garbled_after_field_14_is_read_like_iostat():
    # sscanf stops at the first non-number and iostat accepts >= 14 fields read
    parsed, warnings = parse_checked(" 8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12 zz 14 15 16 17\n")
    assert parsed["sda"].nfields == 15 and parsed["sda"].dc_ios == 0
    assert len(warnings) == 1 and "garbled" in warnings[0]


def test_hand_computed_rates():
    prev = parse(" 8 0 sda 1000 100 8000 500 200 50 4000 1000 3 400 2000 10 0 80 20 5 50\n")
    cur = parse(" 8 0 sda 1400 200 11200 1300 300 50 6000 2500 1 1150 5500 14 2 112 28 9 62\n")
    r = rates(prev, cur, 2.0)["sda"]
    assert r.r_s == 200 and r.rkb_s == 800 and r.rrqm_s == 50
    assert r.rrqm_pct == pytest.approx(100 / 500 * 100)
    assert r.r_await_ms == 2.0 and r.rareq_kb == 4.0
    assert r.w_s == 50 and r.wkb_s == 500 and r.wrqm_pct == 0 and r.w_await_ms == 15.0
    assert r.wareq_kb == 10.0
    assert r.d_s == 2 and r.dkb_s == 8 and r.drqm_pct == pytest.approx(2 / 6 * 100)
    assert r.d_await_ms == 2.0 and r.dareq_kb == 4.0
    assert r.f_s == 2 and r.f_await_ms == 3.0
    assert r.aqu_sz == pytest.approx(1.75) and r.util_pct == pytest.approx(37.5)


def test_tick_counters_wrap_at_32_bits():
    prev = parse(f" 8 0 sda 100 0 800 {2**32 - 100} 0 0 0 0 0 {2**32 - 10} {2**32 - 1}\n")
    cur = parse(" 8 0 sda 200 0 1600 100 0 0 0 0 0 490 999\n")
    r = rates(prev, cur, 1.0)["sda"]
    assert r.r_await_ms == 2.0          # 200 ms over 100 reads, across the wrap
    assert r.util_pct == pytest.approx(50.0)
    assert r.aqu_sz == pytest.approx(1.0)


def test_reset_device_is_compared_against_zero():
    prev = parse(" 8 0 sda 100000 0 800000 5000 500 0 4000 100 0 9000 9000\n")
    cur = parse(" 8 0 sda 30 0 240 6 0 0 0 0 0 5 6\n")  # removed and created again
    r = rates(prev, cur, 1.0)["sda"]
    assert r.r_s == 30 and r.rkb_s == 120 and r.r_await_ms == 0.2


def test_appearing_and_vanishing_devices():
    prev = parse(" 8 0 sda 10 0 80 5 0 0 0 0 0 4 5\n")
    cur = parse(" 8 16 sdb 20 0 160 10 0 0 0 0 0 8 10\n")
    r = rates(prev, cur, 1.0)
    assert set(r) == {"sdb"}            # sda vanished; sdb appeared, compared against zero
    assert r["sdb"].r_s == 20


@pytest.mark.parametrize("interval_s", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_intervals_give_finite_numbers(interval_s):
    prev = parse(" 8 0 sda 10 0 80 5 0 0 0 0 0 4 5\n")
    cur = parse(" 8 0 sda 20 0 160 10 0 0 0 0 0 8 10\n")
    r = rates(prev, cur, interval_s)["sda"]
    values = r.as_dict().values()
    assert all(math.isfinite(v) and v >= 0 for v in values)
    if interval_s == 0.0:
        assert r.r_s == 1000.0           # sysstat counts a zero interval as 1/100 s


def test_random_counters_never_give_negative_or_infinite_rates():
    rng = random.Random(7)
    for _ in range(500):
        def line():
            vals = [rng.choice((0, rng.randrange(2**32), rng.randrange(2**64))) for _ in COUNTER_FIELDS]
            return " 8 0 sda " + " ".join(map(str, vals)) + "\n"
        r = rates(parse(line()), parse(line()), rng.choice((0.0, 0.5, 1.0, 10.0)))
        for dev in r.values():
            assert all(math.isfinite(v) and v >= 0 for v in dev.as_dict().values())


def _random_line(rng: random.Random, name: str, nfields: int) -> str:
    """A diskstats line of nfields fields whose numbers are small, past 2**32 (a u32
    field the kernel would have wrapped) or past 2**64, now and then one garbled."""
    values = []
    for _ in range(nfields - 3):
        pick = rng.random()
        values.append(str(rng.randrange(1 << 20) if pick < 0.8 else rng.randrange(1 << 40)
                          if pick < 0.95 else (1 << 64) + rng.randrange(1 << 10)))
    if rng.random() < 0.05:
        values[rng.randrange(len(values))] = rng.choice(["12x", "x", "\u0663", "-1"])
    major = str(rng.randrange(300)) if rng.random() < 0.98 else "\u0668"
    return f"{major:>4} {rng.randrange(1 << 20):7d} {name} " + " ".join(values)


def test_a_whole_file_reads_as_each_of_its_lines_read_alone():
    """parse_checked() takes a file's lines together where each is a kernel's (one pass
    over every number: collect/diskstats.py _parse_lines); whatever the lines, every
    device reads as its line read alone (the per-line path, the one iostat's reading is
    held to above): the same counters, wraps and masks, lines skipped alike."""
    rng = random.Random(41)
    for _ in range(400):
        count = rng.randrange(2, 12)
        same = rng.random() < 0.7          # a kernel's file: one field count throughout
        first = rng.choice((14, 18, 20))
        lines = [_random_line(rng, f"d{k}", first if same else rng.choice((13, 14, 18, 20, 21)))
                 for k in range(count)]
        whole, _ = parse_checked("".join(line + "\n" for line in lines))
        alone = {}
        for line in lines:
            alone.update(parse_checked(line + "\n")[0])
        assert whole == alone, lines
        for name, c in whole.items():
            assert c == alone[name] and type(c) is type(alone[name])
