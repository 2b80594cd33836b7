"""Public API for /proc/diskstats: `from gpudisk_top.diskstats import parse, rates`.

`parse(text)` returns {device name: DiskCounters} with the raw cumulative counters;
`rates(prev, cur, interval_s)` returns {device name: DiskRates} whose attributes are what
sysstat 12.6.1's `iostat -x` prints, impossible intervals included;
`checked_rates(prev, cur, interval_s)` returns (rates, {device name: reason}) with the
devices whose interval is physically impossible left out of the rates, as the dashboard
does (see README, "Python API").
"""

from gpudisk_top.collect.diskstats import DiskCounters, parse
from gpudisk_top.model.disk import RATE_FIELDS, DiskRates, checked_rates, rates

__all__ = ["parse", "rates", "checked_rates", "DiskCounters", "DiskRates", "RATE_FIELDS"]
