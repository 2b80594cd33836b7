"""gpudisk_top.diskstats against the installed sysstat iostat on the same snapshots.

Each sequence (tests/diskstats_gen.py) holds 32- and 64-bit counter wraps, a device
removed and re-created, devices appearing and vanishing, zero intervals, 14/18/20-field
lines and garbled lines.  iostat reads them through bind mounts (tests/sysstat_ref.py);
every device iostat prints must be in our rates with every column equal to print
rounding, and we must report no device iostat does not.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

import diskstats_gen
import sysstat_ref
from gpudisk_top.diskstats import parse, rates

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


@pytest.fixture(scope="module")
def reference():
    """Run iostat on every sequence at once (each takes one second per snapshot)."""
    seqs = {seed: diskstats_gen.sequence(seed) for seed in SEEDS}
    with ThreadPoolExecutor(max_workers=len(seqs)) as pool:
        futures = {seed: pool.submit(sysstat_ref.run_iostat, [t for _, t in s], [u for u, _ in s])
                   for seed, s in seqs.items()}
        return {seed: (seqs[seed], f.result()) for seed, f in futures.items()}


def _close(ours: float, theirs: float) -> bool:
    # iostat prints %.2f; large wrapped values also carry float noise
    return abs(round(ours, 2) - theirs) <= 0.0100001 + abs(theirs) * 1e-12


@pytest.mark.parametrize("seed", SEEDS)
def test_rates_equal_iostat(reference, seed):
    seq, reports = reference[seed]
    assert len(reports) == len(seq) - 1
    for i, report in enumerate(reports):
        (up0, text0), (up1, text1) = seq[i], seq[i + 1]
        ours = rates(parse(text0), parse(text1), (up1 - up0) / 100)
        assert set(ours) == set(report), f"seed {seed} interval {i}: devices differ"
        for dev, cols in report.items():
            for key, attr in KEYS.items():
                mine = getattr(ours[dev], attr)
                assert _close(mine, cols[key]), (
                    f"seed {seed} interval {i} {dev} {key}: ours {mine!r}, iostat {cols[key]!r}")


def test_sequences_cover_the_edge_cases():
    """The generator must really produce what the comparison claims to cover."""
    from gpudisk_top.model.disk import is_reset

    seen = {"zero_interval": False, "reset": False, "appear": False, "vanish": False,
            "tick_wrap": False, "u64_wrap": False, "long_line": False, "nfields": set()}
    for seed in SEEDS:
        seq = diskstats_gen.sequence(seed)
        seen["long_line"] |= any(len(line) >= 255 for _, t in seq for line in t.splitlines())
        for (u0, t0), (u1, t1) in zip(seq, seq[1:]):
            a, b = parse(t0), parse(t1)
            seen["zero_interval"] |= u0 == u1
            seen["appear"] |= bool(set(b) - set(a))
            seen["vanish"] |= bool(set(a) - set(b))
            for name in set(a) & set(b):
                if is_reset(b[name], a[name]):
                    seen["reset"] = True
                    continue
                seen["tick_wrap"] |= b[name].rd_ticks < a[name].rd_ticks
                seen["u64_wrap"] |= b[name].rd_sectors < a[name].rd_sectors
            seen["nfields"] |= {c.nfields for c in b.values()}
    assert all(v for k, v in seen.items() if k != "nfields"), seen
    assert {14, 18, 20} <= seen["nfields"]
