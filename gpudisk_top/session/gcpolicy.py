"""The cyclic garbage collector's setting for a session that samples for hours: the
dashboard, `record`, `serve` and `fleet` call steady() once, before their loop.

CPython collects its youngest generation whenever the container objects alive exceed
those at the last collection by gc.get_threshold()[0] (700 by default), walking every
one made since; every tenth such collection walks the next generation too, and every
hundredth may walk the whole heap.  A sample at a large node (bench_scale.py: 128
devices, 2,000 processes) makes several thousand (each device's counters, differences,
rates and saturation; each process's counters) while the sample before is still alive,
and drops the old ones by reference counting when the new ones replace them: nearly none
is ever a cycle the collector has to find.  At 700, collections came once or twice in
the middle of every sample, walking objects that were about to be freed anyway: 31 in
30 healthy samples there, 34 in 30 starved ones, 0.2-0.3 ms a sample, and a walk of
the whole heap (37,000 objects: 13-24 ms) every 40-odd samples.  At YOUNG_OBJECTS none
came in either 30 (bench numbers: docs/performance.md, "The cost of watching, third
stop").

What that costs: cyclic garbage waits until YOUNG_OBJECTS more objects are alive than at
the last collection before it is freed, a few MB at most (a small object is about a
hundred bytes); objects that are not garbage are not touched by the setting.  A
collector switched off before (gc.disable(), or a threshold of 0) stays off, and a
higher threshold set before is kept.
"""

from __future__ import annotations

import gc

# above the most objects a sample at the large node holds at once, in either state (none
# of 30 samples collected at 5,000), four times over for a larger node
YOUNG_OBJECTS = 20_000


def steady() -> tuple[int, int, int]:
    """Raise the youngest generation's threshold to YOUNG_OBJECTS (never lower it, never
    switch collection on), the older generations' as they were; returns the thresholds
    now in force."""
    young, middle, old = gc.get_threshold()
    if 0 < young < YOUNG_OBJECTS:     # 0: collection switched off, and left so
        gc.set_threshold(YOUNG_OBJECTS, middle, old)
    return gc.get_threshold()
