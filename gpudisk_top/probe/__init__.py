"""A device's read ceiling, measured the way storage folklore does: 4 KiB random reads at
queue depth 1 and 32, and 1 MiB sequential reads; read-only, O_DIRECT, bounded in time.

    target.py   PATH|DEVICE -> the device whose ceiling it is, and what to read
    tests.py    the three tests and their results
    fio.py      the tests through fio (--readonly, JSON output)
    builtin.py  the tests through our own O_DIRECT reader, when fio is not installed
    runner.py   runs the three tests inside one time budget
    store.py    results kept per device identity; load_ceilings() for the detector

UI-free: nothing here imports Textual or the command line layer.
"""

from gpudisk_top.probe.store import Ceiling, load_ceilings

__all__ = ["Ceiling", "load_ceilings"]
