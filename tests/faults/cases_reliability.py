"""Category 12: the reliability round of issue 35, one module a finding.

- `cases_r35_pages`: /proc files longer than a page (diskstats of 100 loop devices,
  mountinfo and mountstats behind hundreds of mounts);
- `cases_r35_delayacct`: `--delayacct` ended by SIGHUP and other signals, stale and linked
  markers, a setting someone else made;
- `cases_r35_fleet`: rogue, doubled and contradictory exporters behind the fleet view;
- `cases_r35_probes`: stored ceilings the device contradicts, probes files nested, huge,
  truncated, empty, of a future version;
- `cases_r35_recordings`: absurd gaps, a frozen sampler, non-finite and negative
  utilizations through report, `--recompute` and export;
- `cases_r35_smaller`: the smaller findings (alert rules by the thousand, a newline in a
  mount path, impossible meminfo and SMART values, an alert command's children).

Each module has `cases() -> list[Case]` built with `Cases(CAT)`; ids are
"12/<module's part>/...".
"""

from __future__ import annotations

import importlib

CAT = 12
PARTS = ("cases_r35_pages", "cases_r35_delayacct", "cases_r35_fleet", "cases_r35_probes",
         "cases_r35_recordings", "cases_r35_smaller")


def cases() -> list:
    out = []
    for name in PARTS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name == name:
                continue
            raise
        out += module.cases()
    return out
