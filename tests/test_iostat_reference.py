"""gpudisk_top.diskstats against the installed sysstat iostat on the same snapshots.

Each sequence (tests/diskstats_gen.py) holds 32- and 64-bit counter wraps, a device
removed and re-created, devices appearing (new, or with since-boot counters) and
vanishing, a stale line whose counters go down, zero intervals, 14/18/20-field lines and
garbled lines.  iostat reads them through bind mounts (tests/sysstat_ref.py).

- rates() is iostat 12.6.1 (Debian's package): every device iostat prints is in our
  rates with every column equal to print rounding, and we report no device iostat does not.
- checked_rates(), which the Model uses, keeps exactly those rates for every interval a
  device could have produced and drops the device where the generator made an impossible
  one (diskstats_gen.generate's truth, from what it did, not from the checks).
- With an iostat >= 12.7.3 (sysstat_ref.NEWER_ENV), what it prints is 12.6.1's numbers
  with the columns of a counter that went down set to 0, as its source says; each
  interval where it zeroes a 64-bit counter's column is one we drop, and a real 2**32 wrap
  of tot_ticks is where it prints %util 0.00 and we do not.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

import diskstats_gen
import sysstat_ref
from gpudisk_top.diskstats import checked_rates, parse, rates
from gpudisk_top.model.disk import is_reset

pytestmark = pytest.mark.sysstat

# iostat -o JSON key -> our attribute
KEYS = {
    "r/s": "r_s", "rkB/s": "rkb_s", "rrqm/s": "rrqm_s", "rrqm": "rrqm_pct",
    "r_await": "r_await_ms", "rareq-sz": "rareq_kb",
    "w/s": "w_s", "wkB/s": "wkb_s", "wrqm/s": "wrqm_s", "wrqm": "wrqm_pct",
    "w_await": "w_await_ms", "wareq-sz": "wareq_kb",
    "d/s": "d_s", "dkB/s": "dkb_s", "drqm/s": "drqm_s", "drqm": "drqm_pct",
    "d_await": "d_await_ms", "dareq-sz": "dareq_kb",
    "f/s": "f_s", "f_await": "f_await_ms", "aqu-sz": "aqu_sz", "util": "util_pct",
}
SEEDS = list(range(24))

_reason = sysstat_ref.available()
if _reason:
    pytest.skip(f"sysstat reference unavailable: {_reason}", allow_module_level=True)


def _run_all(binary: str) -> dict:
    """Run iostat on every sequence at once (each takes one second per snapshot)."""
    seqs = {seed: diskstats_gen.generate(seed) for seed in SEEDS}
    with ThreadPoolExecutor(max_workers=len(seqs)) as pool:
        futures = {seed: pool.submit(sysstat_ref.run_iostat, [t for _, t in s], [u for u, _ in s],
                                     binary)
                   for seed, (s, _) in seqs.items()}
        return {seed: (*seqs[seed], f.result()) for seed, f in futures.items()}


@pytest.fixture(scope="module")
def reference():
    return _run_all("iostat")


def _close(ours: float, theirs: float) -> bool:
    # iostat prints %.2f; large wrapped values also carry float noise
    return abs(round(ours, 2) - theirs) <= 0.0100001 + abs(theirs) * 1e-12


def _interval(seq, i):
    (up0, text0), (up1, text1) = seq[i], seq[i + 1]
    return parse(text0), parse(text1), (up1 - up0) / 100


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.root(reason="bind-mounting over /proc needs root")
def test_rates_equal_iostat(reference, seed):
    seq, truth, reports = reference[seed]
    assert len(reports) == len(seq) - 1
    for i, report in enumerate(reports):
        prev, cur, interval_s = _interval(seq, i)
        ours = rates(prev, cur, interval_s)
        assert set(ours) == set(report), f"seed {seed} interval {i}: devices differ"
        for dev, cols in report.items():
            for key, attr in KEYS.items():
                mine = getattr(ours[dev], attr)
                assert _close(mine, cols[key]), (
                    f"seed {seed} interval {i} {dev} {key}: ours {mine!r}, iostat {cols[key]!r}")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.root(reason="bind-mounting over /proc needs root")
def test_checked_rates_keep_iostat_and_drop_the_impossible(reference, seed):
    seq, truth, reports = reference[seed]
    for i, report in enumerate(reports):
        prev, cur, interval_s = _interval(seq, i)
        kept, dropped = checked_rates(prev, cur, interval_s)
        assert not set(kept) & set(dropped) and set(kept) | set(dropped) == set(report)
        everything = rates(prev, cur, interval_s)
        for dev, r in kept.items():
            # never altered, only dropped: so equal to iostat (checked above)
            assert r == everything[dev]
            for key, attr in KEYS.items():
                assert _close(getattr(r, attr), report[dev][key])
        for dev, want in truth[i].items():
            where = f"seed {seed} interval {i} {dev}: {dropped.get(dev)}"
            if want == "keep":
                assert dev in kept, where
            elif want == "drop":
                assert dev in dropped and dropped[dev], where


def test_sequences_cover_the_edge_cases():
    """The generator must really produce what the comparison claims to cover."""
    seen = {"zero_interval": False, "reset": False, "appear_new": False,
            "appear_since_boot": False, "vanish": False, "tick_wrap": False,
            "util_wrap": False, "u64_wrap": False, "went_down": False, "long_line": False,
            "nfields": set()}
    for seed in SEEDS:
        seq, truth = diskstats_gen.generate(seed)
        seen["long_line"] |= any(len(line) >= 255 for _, t in seq for line in t.splitlines())
        for i, ((u0, t0), (u1, t1)) in enumerate(zip(seq, seq[1:])):
            a, b = parse(t0), parse(t1)
            seen["zero_interval"] |= u0 == u1
            for name in set(b) - set(a):
                key = "appear_new" if truth[i].get(name) == "keep" else "appear_since_boot"
                seen[key] |= truth[i].get(name) in ("keep", "drop")
            seen["vanish"] |= bool(set(a) - set(b))
            for name in set(a) & set(b):
                if is_reset(b[name], a[name]):
                    seen["reset"] |= truth[i].get(name) == "keep"
                    continue
                down = [f for f in ("rd_ios", "rd_sectors", "wr_ios", "wr_sectors")
                        if getattr(b[name], f) < getattr(a[name], f)]
                seen["u64_wrap"] |= bool(down) and a[name].rd_sectors > 2**63
                seen["went_down"] |= bool(down) and truth[i].get(name) == "drop" \
                    and a[name].rd_sectors < 2**63
                seen["tick_wrap"] |= b[name].rd_ticks < a[name].rd_ticks \
                    and truth[i].get(name) == "keep"
                seen["util_wrap"] |= b[name].tot_ticks < a[name].tot_ticks \
                    and truth[i].get(name) == "keep"
            seen["nfields"] |= {c.nfields for c in b.values()}
    assert all(v for k, v in seen.items() if k != "nfields"), seen
    assert {14, 18, 20} <= seen["nfields"]


# ------------------------------------------------------------------ sysstat >= 12.7.3
# What iostat 12.7.3+ prints where a counter went down: 0.0 for the columns below (ioi =
# current, ioj = previous, after the re-creation test).  iostat.c write_json_ext_stat():
#     ioi->rd_ios < ioj->rd_ios ? 0.0 : S_VALUE(ioj->rd_ios, ioi->rd_ios, itv)
# (likewise w/s d/s f/s; the merges; aqu-sz on rq_ticks), write_ext_stat():
#     xios.rsectors = ioi->rd_sectors < ioj->rd_sectors ? 0.0 : S_VALUE(...)
#     xios.r_await = (ioi->rd_ios > ioj->rd_ios) ? ... : 0.0      (and rareq-sz)
# and rd_stats.c compute_ext_disk_stats():
#     xds->util = sdc->tot_ticks < sdp->tot_ticks ? 0.0 : S_VALUE(...)
# %rrqm/%wrqm/%drqm still take the wrapped difference.
ZEROED_WHEN_DOWN = {
    "rd_ios": ("r/s",), "wr_ios": ("w/s",), "dc_ios": ("d/s",), "fl_ios": ("f/s",),
    "rd_sectors": ("rkB/s",), "wr_sectors": ("wkB/s",), "dc_sectors": ("dkB/s",),
    "rd_merges": ("rrqm/s",), "wr_merges": ("wrqm/s",), "dc_merges": ("drqm/s",),
    "rq_ticks": ("aqu-sz",), "tot_ticks": ("util",),
}
ZEROED_UNLESS_UP = {"rd_ios": ("r_await", "rareq-sz"), "wr_ios": ("w_await", "wareq-sz"),
                    "dc_ios": ("d_await", "dareq-sz"), "fl_ios": ("f_await",)}
U64_COUNTERS = ("rd_ios", "wr_ios", "dc_ios", "fl_ios", "rd_sectors", "wr_sectors",
                "dc_sectors", "rd_merges", "wr_merges", "dc_merges")


def expected_12_7(prev, cur, r) -> tuple[dict[str, float], set[str]]:
    """12.6.1's columns with 12.7.3's zeros, and the counters that went down."""
    base = prev if prev is not None and not is_reset(cur, prev) else None
    cols = {key: getattr(r, attr) for key, attr in KEYS.items()}
    down = set()
    if base is not None:
        for counter, keys in ZEROED_WHEN_DOWN.items():
            if getattr(cur, counter) < getattr(base, counter):
                down.add(counter)
                cols.update(dict.fromkeys(keys, 0.0))
        for counter, keys in ZEROED_UNLESS_UP.items():
            if not getattr(cur, counter) > getattr(base, counter):
                cols.update(dict.fromkeys(keys, 0.0))
    return cols, down


def _long_lines(*texts: str) -> set[str]:
    # iostat 12.7.9 reads lines of up to 1023 characters (sysstat commit e50bfeec), 12.6.1
    # and our parse() 255-character pieces: such lines only arise near 2**64
    return {line.split()[2] for t in texts for line in t.splitlines() if len(line) >= 255}


@pytest.fixture(scope="module")
def newer():
    path, why = sysstat_ref.newer_iostat()
    if path is None:
        pytest.skip(why)
    return _run_all(path)


@pytest.mark.root(reason="bind-mounting over /proc needs root")
def test_newer_sysstat_prints_zero_where_we_drop(newer):
    zeroed_u64 = util_wrap = 0
    for seed in SEEDS:
        seq, truth, reports = newer[seed]
        for i, report in enumerate(reports):
            prev, cur, interval_s = _interval(seq, i)
            long = _long_lines(seq[i][1], seq[i + 1][1])
            ours = rates(prev, cur, interval_s)
            kept, dropped = checked_rates(prev, cur, interval_s)
            assert set(report) - long == set(ours) - long
            for dev in set(report) - long:
                want, down = expected_12_7(prev.get(dev), cur[dev], ours[dev])
                where = f"seed {seed} interval {i} {dev}"
                for key, value in want.items():
                    assert _close(value, report[dev][key]), (
                        f"{where} {key}: 12.7 printed {report[dev][key]}, expected {value}")
                if down & set(U64_COUNTERS):
                    zeroed_u64 += 1
                    assert dev in dropped, f"{where}: 12.7 zeroes {down}, we kept it"
                if "tot_ticks" in down and dev in kept:
                    # a real 2**32 wrap: 12.7 says idle, the modular difference is the truth
                    util_wrap += 1
                    assert report[dev]["util"] == 0.0 and kept[dev].util_pct > 0
    assert zeroed_u64 and util_wrap, (zeroed_u64, util_wrap)
