"""/proc/diskstats lines built from named counters, for the rate fault tests
(tests/test_fault_rates.py, tests/test_fault_rates_cli.py and the fault matrix's
tests/faults/cases_rates.py): one busy SSD's counters, a step of them, and the wrapper
that rewrites a fake diskstats between `--once`'s two reads.
"""

from __future__ import annotations

from gpudisk_top.collect.diskstats import COUNTER_FIELDS

# a busy SSD, counters since boot (20 fields)
BASE = dict(rd_ios=1218763, rd_merges=42867, rd_sectors=75327714, rd_ticks=1062836,
            wr_ios=5306180, wr_merges=5962357, wr_sectors=259683648, wr_ticks=13380024,
            ios_pgr=2, tot_ticks=4029868, rq_ticks=14457820, dc_ios=3212, dc_merges=12,
            dc_sectors=102760432, dc_ticks=3196, fl_ios=2715811, fl_ticks=213393)
# the 64-bit counters and the 32-bit tick counters (iostat's unsigned long / unsigned int)
U64 = ("rd_ios", "rd_merges", "rd_sectors", "wr_ios", "wr_merges", "wr_sectors",
       "dc_ios", "dc_merges", "dc_sectors", "fl_ios")
TICKS = ("rd_ticks", "wr_ticks", "dc_ticks", "fl_ticks", "tot_ticks", "rq_ticks")

# `python -c SWAP_AFTER_SLEEP DISKSTATS SECOND ARGS...`: gpudisk-top ARGS, with DISKSTATS
# rewritten in place from SECOND after each wait between samples (so --once's second read
# sees it): --once waits on its stop signals (StopSignals.wait, which a signal cuts short),
# a plain time.sleep elsewhere; rewriting twice writes the same text
SWAP_AFTER_SLEEP = r"""
import sys, time
from gpudisk_top import cli
from gpudisk_top.session import ticker
target, second = sys.argv[1], sys.argv[2]
def swap():
    text = open(second).read()
    with open(target, "r+") as f:
        f.write(text)
        f.truncate()
real_sleep, real_wait = time.sleep, ticker.StopSignals.wait
def sleep(seconds):
    real_sleep(seconds)
    swap()
def wait(self, timeout_s):
    real_wait(self, timeout_s)
    swap()
time.sleep = sleep
ticker.StopSignals.wait = wait
sys.exit(cli.main(sys.argv[3:]))
"""


def line(name: str = "sda", minor: int = 0, nfields: int = 20, **counters) -> str:
    """One diskstats line of `nfields` fields (14, 18 or 20); missing counters are 0."""
    values = [counters.get(f, 0) for f in COUNTER_FIELDS][: nfields - 3]
    return f"   8 {minor:7d} {name} " + " ".join(map(str, values)) + "\n"


def advanced(step: dict, base: dict | None = None, **changes) -> dict:
    """`base` (BASE by default) after one `step`, then `changes` set as given."""
    out = dict(base or BASE)
    for f, v in step.items():
        out[f] += v
    out.update(changes)
    return out
