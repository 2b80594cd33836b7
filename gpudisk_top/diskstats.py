"""Public API for /proc/diskstats: `from gpudisk_top.diskstats import parse, rates`.

`parse(text)` returns {device name: DiskCounters} with the raw cumulative counters;
`rates(prev, cur, interval_s)` returns {device name: DiskRates} whose attributes have
sysstat 12.x `iostat -x` semantics (see README, "Python API").
"""

from gpudisk_top.collect.diskstats import DiskCounters, parse
from gpudisk_top.model.disk import RATE_FIELDS, DiskRates, rates

__all__ = ["parse", "rates", "DiskCounters", "DiskRates", "RATE_FIELDS"]
