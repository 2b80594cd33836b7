"""Fault injection: impossible disk rates never leave the model (issue 9, item 7).

rates() keeps iostat 12.6.1's numbers for any input; checked_rates() and Model.new drop a
device's interval that no device could have produced, with a one-line reason, and keep
every other one exactly.  Each reproduction from the issue is here: a device appearing
with large counters, counters going down, a diskstats rewritten non-atomically, and
duplicate device names.  (tests/test_fault_rates_cli.py runs them through `--once`.)
"""

from __future__ import annotations

import functools
import math
import random

import pytest

import diskstats_gen
import diskstats_lines
from diskstats_lines import BASE, TICKS, U64, line
from gpudisk_top.collect import diskstats
from gpudisk_top.collect.diskstats import COUNTER_FIELDS, MASK32, MASK64, parse_checked
from gpudisk_top.collect.roots import FileCache, Roots
from gpudisk_top.collect.sample import DeviceInfo, Sample
from gpudisk_top.diskstats import checked_rates, parse, rates
from gpudisk_top.model.disk import (BUSY_SLACK_FACTOR, BUSY_SLACK_MS, MAX_DATA_BYTES_S,
                                    MAX_OPS_S, is_reset)
from gpudisk_top.model.snapshot import Model

# one plausible second of the busy SSD (diskstats_lines.BASE)
STEP = dict(rd_ios=2000, rd_merges=100, rd_sectors=16000, rd_ticks=900, wr_ios=500,
            wr_merges=20, wr_sectors=8000, wr_ticks=700, tot_ticks=600, rq_ticks=1600,
            dc_ios=3, dc_merges=1, dc_sectors=2048, dc_ticks=2, fl_ios=10, fl_ticks=15)
advanced = functools.partial(diskstats_lines.advanced, STEP)


def sample(text: str, mono_s: float) -> Sample:
    disks, warnings = parse_checked(text, whole_lines=True)
    devices = {n: DeviceInfo(n, n, c.major, c.minor, "disk") for n, c in disks.items()}
    return Sample(mono_s=mono_s, wall_s=1.7e9 + mono_s, disks=disks, devices=devices,
                  warnings=warnings)


def model(text0: str, text1: str, interval_s: float = 1.0) -> Model:
    return Model.new(sample(text1, 100.0 + interval_s), sample(text0, 100.0))


def within_bounds(r, interval_s: float) -> bool:
    """The documented bounds (docs/python-api.md), restated."""
    interval_ms = max(interval_s, 0.01) * 1000
    busy_pct = (interval_ms * BUSY_SLACK_FACTOR + BUSY_SLACK_MS) / interval_ms * 100
    values = r.as_dict().values()
    return (all(math.isfinite(v) and v >= 0 for v in values)
            and r.util_pct <= busy_pct + 1e-9
            and max(r.r_s, r.w_s, r.d_s, r.f_s, r.rrqm_s, r.wrqm_s, r.drqm_s) <= MAX_OPS_S
            and max(r.rkb_s, r.wkb_s) * 1024 <= MAX_DATA_BYTES_S * (1 + 1e-12))


def assert_dropped(m: Model, name: str, *words: str) -> str:
    """name is shown as n/a: in devices, not in disks, with a reason and a warning."""
    assert name in m.devices and name not in m.disks, (m.disks.keys(), m.disk_dropped)
    why = m.disk_dropped[name]
    assert "\n" not in why and all(w in why for w in words), why
    assert any(w.startswith(f"{name}: ") and why in w for w in m.warnings), m.warnings
    return why


# ------------------------------------------------------------------ one rule at a time
@pytest.mark.parametrize("field", U64)
def test_a_64_bit_counter_that_goes_down_drops_the_device(field):
    prev = parse(line(**BASE))
    cur = parse(line(**advanced(**{field: BASE[field] - 1})))
    assert not is_reset(cur["sda"], prev["sda"])
    # iostat 12.6.1 (and rates()) take the difference modulo 2**64
    assert max(rates(prev, cur, 1.0)["sda"].as_dict().values()) > 1e15
    kept, dropped = checked_rates(prev, cur, 1.0)
    assert kept == {}
    assert f"{field} went down from {BASE[field]} to {BASE[field] - 1}" in dropped["sda"]


@pytest.mark.parametrize("field", TICKS)
def test_a_tick_counter_that_goes_down_drops_the_device(field):
    rng = random.Random(field)
    for _ in range(50):
        down = rng.randrange(1, 2**31 - 1)   # any decrease below half the range
        start = rng.randrange(down, 2**32)
        prev = parse(line(**{**BASE, field: start}))
        cur = parse(line(**advanced(**{field: start - down})))
        kept, dropped = checked_rates(prev, cur, 1.0)
        assert kept == {} and dropped["sda"].startswith(f"{field} went down"), dropped


@pytest.mark.parametrize("field", TICKS)
def test_a_real_32_bit_wrap_is_kept_with_the_modular_difference(field):
    step = STEP[field]
    prev = parse(line(**{**BASE, field: 2**32 - step // 2}))
    cur = parse(line(**advanced(**{field: step - step // 2})))
    kept, dropped = checked_rates(prev, cur, 1.0)
    assert dropped == {} and kept == rates(prev, cur, 1.0)
    r = kept["sda"]
    expect = {"rd_ticks": ("r_await_ms", step / STEP["rd_ios"]),
              "wr_ticks": ("w_await_ms", step / STEP["wr_ios"]),
              "dc_ticks": ("d_await_ms", step / STEP["dc_ios"]),
              "fl_ticks": ("f_await_ms", step / STEP["fl_ios"]),
              "tot_ticks": ("util_pct", step / 10), "rq_ticks": ("aqu_sz", step / 1000)}[field]
    assert getattr(r, expect[0]) == pytest.approx(expect[1])


# docs/python-api.md: "more than 1.1 times the interval plus 20 ms"
@pytest.mark.parametrize("interval_s, allowed_ms", [(1.0, 1120), (0.25, 295), (2.0, 2220),
                                                    (0.0, 31)])
def test_busy_time_may_exceed_the_interval_by_the_slack_only(interval_s, allowed_ms):
    prev = parse(line(**BASE))
    at = parse(line(**advanced(tot_ticks=BASE["tot_ticks"] + allowed_ms)))
    over = parse(line(**advanced(tot_ticks=BASE["tot_ticks"] + allowed_ms + 1)))
    assert checked_rates(prev, at, interval_s)[1] == {}
    assert rates(prev, at, interval_s)["sda"].util_pct > 100
    why = checked_rates(prev, over, interval_s)[1]["sda"]
    # a zero interval counts as 1/100 s, as sysstat does
    interval_ms = max(interval_s, 0.01) * 1000
    assert why.startswith("%util ") and f"{allowed_ms + 1} ms busy in a {interval_ms:.0f} ms" in why


# docs/python-api.md: "above 1e8 per second, or rkB/s or wkB/s above 1e12 bytes per second"
@pytest.mark.parametrize("column, field, per_s", [
    ("r/s", "rd_ios", 1e8), ("w/s", "wr_ios", 1e8), ("f/s", "fl_ios", 1e8), ("d/s", "dc_ios", 1e8),
    ("rrqm/s", "rd_merges", 1e8), ("wrqm/s", "wr_merges", 1e8), ("drqm/s", "dc_merges", 1e8),
    ("rkB/s", "rd_sectors", 1e12 / 512), ("wkB/s", "wr_sectors", 1e12 / 512),
])
def test_more_than_a_device_can_do_is_dropped(column, field, per_s):
    prev = parse(line(**BASE))
    # over 2 s (every other counter one plausible second on, so only the ceiling speaks)
    at = parse(line(**advanced(**{field: BASE[field] + int(per_s * 2)})))
    over = parse(line(**advanced(**{field: BASE[field] + int(per_s * 2) + 4})))
    assert checked_rates(prev, at, 2.0)[1] == {}
    why = checked_rates(prev, over, 2.0)[1]["sda"]
    assert why.startswith(f"{column} ") and "more than any device can do" in why


def test_discards_have_no_byte_ceiling():
    # a whole 30 TB device trimmed within one second moves no data
    prev = parse(line(**BASE))
    cur = parse(line(**advanced(dc_ios=BASE["dc_ios"] + 8000,
                                dc_sectors=BASE["dc_sectors"] + 30 * 10**12 // 512)))
    kept, dropped = checked_rates(prev, cur, 1.0)
    assert dropped == {} and kept["sda"].dkb_s * 1024 > 10 * MAX_DATA_BYTES_S


def test_a_line_with_another_number_of_fields_is_dropped():
    prev = parse(line(nfields=20, **BASE))
    cur = parse(line(nfields=18, **advanced()))
    assert "18 fields, 20 the sample before" in checked_rates(prev, cur, 1.0)[1]["sda"]


def test_a_device_that_appears_is_compared_against_zeros_and_bounded():
    prev = parse(line(**BASE))
    new = dict(STEP)                     # created during the interval
    fresh = parse(line(**BASE) + line("sdb", 16, **new))
    kept, dropped = checked_rates(prev, fresh, 1.0)
    assert dropped == {} and kept["sdb"] == rates(prev, fresh, 1.0)["sdb"]
    assert kept["sdb"].r_s == STEP["rd_ios"]
    since_boot = parse(line(**BASE) + line("sdb", 16, **BASE))
    why = checked_rates(prev, since_boot, 1.0)[1]["sdb"]
    assert why.startswith("%util ") and "compared against zeros" in why


def test_a_recreated_device_is_compared_against_zeros():
    prev = parse(line(**BASE))
    again = parse(line(**STEP))          # removed and created again: sysstat's reset test
    assert is_reset(again["sda"], prev["sda"])
    kept, dropped = checked_rates(prev, again, 1.0)
    assert dropped == {} and kept["sda"].r_s == STEP["rd_ios"]


def test_random_counters_never_give_a_rate_out_of_bounds():
    rng = random.Random(11)
    kept_any = dropped_any = 0
    for _ in range(3000):
        start = [rng.choice((0, rng.randrange(2**12), rng.randrange(2**32), rng.randrange(2**64)))
                 for _ in COUNTER_FIELDS]
        if rng.random() < 0.5:    # every counter a little on (busy time within 10 ms)
            moved = [v + rng.randrange(10 if f == "tot_ticks" else 300)
                     for v, f in zip(start, COUNTER_FIELDS)]
        else:                     # each still, a little on, far on, a little back, or anywhere
            moved = [v + rng.choice((0, rng.randrange(300), rng.randrange(2**40),
                                     -rng.randrange(300), rng.randrange(2**64) - v))
                     for v in start]
        width = [MASK32 if f in TICKS + ("ios_pgr",) else MASK64 for f in COUNTER_FIELDS]
        prev, cur = (parse(" 8 0 sda " + " ".join(str(v & w) for v, w in zip(vals, width)) + "\n")
                     for vals in (start, moved))
        interval_s = rng.choice((0.0, 0.25, 1.0, 10.0))
        kept, dropped = checked_rates(prev, cur, interval_s)
        assert set(kept) | set(dropped) == {"sda"}
        for r in kept.values():
            assert within_bounds(r, interval_s) and r == rates(prev, cur, interval_s)["sda"]
        kept_any += bool(kept)
        dropped_any += bool(dropped)
    assert kept_any > 100 and dropped_any > 100, (kept_any, dropped_any)


# ------------------------------------------------------------------ the reproductions
def test_repro_device_appearing_with_large_counters():
    big = dict(BASE, tot_ticks=495_410_670)  # the issue's %util 49,541,067 over one second
    text0, text1 = line(**BASE), line(**advanced()) + line("sdb", 16, **big)
    assert rates(parse(text0), parse(text1), 1.0)["sdb"].util_pct == pytest.approx(49_541_067)
    m = model(text0, text1)
    assert_dropped(m, "sdb", "%util 4.95411e+07", "compared against zeros")
    assert set(m.disks) == {"sda"} and m.disks["sda"].r_s == STEP["rd_ios"]


def test_repro_counters_going_down():
    text0 = line(**BASE)
    text1 = line(**advanced(rd_ios=BASE["rd_ios"] - 1))
    # the r_s 9.16e18: one read fewer, over about 2 s
    assert rates(parse(text0), parse(text1), 2.0138)["sda"].r_s == pytest.approx(9.16e18, rel=1e-3)
    assert_dropped(model(text0, text1, 2.0138), "sda", "rd_ios went down")
    # the r_await_ms 4.3e8: rd_ticks 100 ms lower with 10 reads
    text2 = line(**advanced(rd_ios=BASE["rd_ios"] + 10, rd_ticks=BASE["rd_ticks"] - 100))
    r_await_ms = rates(parse(text0), parse(text2), 1.0)["sda"].r_await_ms
    assert r_await_ms == pytest.approx(4.3e8, rel=0.01)
    assert_dropped(model(text0, text2), "sda", "rd_ticks went down")


def test_repro_duplicate_device_names_warn_and_keep_the_last_line():
    text0 = line(**BASE) + line("sdb", 16, **BASE)
    first, last = advanced(), advanced(advanced())
    text1 = line(**BASE) + line("sdb", 16, **first) + line("sdb", 16, **last)
    disks, warnings = parse_checked(text1)
    assert disks["sdb"] == parse(line("sdb", 16, **last))["sdb"]   # iostat keeps the last
    assert warnings == ["diskstats lines 2 and 3 both name sdb; the last one is used, "
                        "as iostat does"]
    m = model(text0, text1, 2.0)
    assert m.sample.warnings == warnings
    assert m.disks["sdb"].r_s == STEP["rd_ios"]     # two steps over 2 s: the last line's


def test_a_cut_last_line_is_not_used_by_the_sampler(tmp_path):
    text = line(**BASE) + line("sdb", 16, **BASE)
    cut = text[:-4]                                  # the last number lost its digits
    assert parse(cut)["sdb"].fl_ticks == BASE["fl_ticks"] // 1000   # iostat reads it so
    (tmp_path / "diskstats").write_text(cut)
    disks, warnings = diskstats.read(Roots(procfs=str(tmp_path)))
    assert set(disks) == {"sda"}
    assert warnings == ["diskstats line 2 (sdb) has no newline: the file was cut mid-line "
                        "(a partial read or a rewrite in place); the line was not used"]


def test_repro_torn_rewrites(tmp_path):
    """A diskstats rewritten in place while it is read, thousands of times, read through
    the sampler's own code (FileCache + read()): no rate beyond the bounds, every kept
    rate what iostat's formulas give for what was read, nothing dropped between two
    clean reads, and the faults are real (unguarded rates go beyond the bounds)."""
    n = 4000
    rng = random.Random(9)
    texts = diskstats_gen.node_texts(9, n + 1)
    path = tmp_path / "diskstats"
    path.write_text("")
    roots, files = Roots(procfs=str(tmp_path)), FileCache()
    samples, kinds = [], []
    for k in range(n + 1):
        kind = "clean" if k == 0 or rng.random() < 0.8 else rng.choice(diskstats_gen.TORN_KINDS)
        text = texts[k] if kind == "clean" else \
            diskstats_gen.torn(rng, texts[k], texts[k - 1], kind)
        with open(path, "r+") as f:   # in place: the sampler keeps the file open
            f.write(text)
            f.truncate()
        disks, warnings = diskstats.read(roots, files)
        samples.append(Sample(mono_s=1000.0 + k, wall_s=1.7e9 + k, disks=disks, warnings=warnings))
        kinds.append(kind)
    files.close()
    unguarded = 0
    drops_after = {kind: 0 for kind in diskstats_gen.TORN_KINDS}
    for k in range(1, n + 1):
        prev, cur = samples[k - 1], samples[k]
        m = Model.new(cur, prev)
        everything = rates(prev.disks, cur.disks, 1.0)
        unguarded += not all(within_bounds(r, 1.0) for r in everything.values())
        assert set(m.disks) | set(m.disk_dropped) == set(cur.disks)
        for name, r in m.disks.items():
            assert within_bounds(r, 1.0), (k, kinds[k - 1:k + 1], name, r)
            assert r == everything[name]
        if kinds[k - 1] == "clean" and kinds[k] == "clean":
            assert not m.disk_dropped, (k, m.disk_dropped)
            truth = rates(parse(texts[k - 1]), parse(texts[k]), 1.0)
            assert m.disks == truth
        for kind in set(kinds[k - 1:k + 1]) - {"clean"}:
            drops_after[kind] += len(m.disk_dropped)
    assert unguarded > n // 20, unguarded       # the faults go beyond the bounds unchecked
    assert all(drops_after.values()), drops_after
