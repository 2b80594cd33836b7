"""What each fix would gain: a bottleneck model of a job's input pipeline, per interval.

    pipeline.py  the figures one interval gives the model (Pipeline), read from a Model
                 (pipeline_of)
    device.py    the device's read latency as the readers' queue grows (the probe's curve)
    solver.py    the stages' loads at a speed, the fastest speed under a change, and the
                 stage that binds there (every formula is in its docstring)
    limit.py     the binding limit: a key (Limit), and its sentence beside it (Cap)
    fixes.py     the fixes: one record each (name, family, title, predict) in REGISTRY
    rank.py      every fix worth having, best first (predict), with its confidence
    result.py    a prediction (WhatIf) and its one text and JSON form

The names the rest of the package uses are here; each module imports the others by their
own names, never through this one."""

from gpudisk_top.verdict.whatif.device import lat_ms
from gpudisk_top.verdict.whatif.fixes import (CHECKPOINT, CPUS, FIX, FIXES, READS, REGISTRY,
                                              Fix, names_of)
from gpudisk_top.verdict.whatif.limit import DEVICE_LIMITS, Cap, Limit
from gpudisk_top.verdict.whatif.pipeline import ACTIVE_PCT, Pipeline, pipeline_of
from gpudisk_top.verdict.whatif.rank import WORTH, predict
from gpudisk_top.verdict.whatif.result import (ESTIMATED, MEASURED, WhatIf, best_line, of_json,
                                               text_lines)

__all__ = ["ACTIVE_PCT", "CHECKPOINT", "CPUS", "Cap", "DEVICE_LIMITS", "ESTIMATED", "FIX",
           "FIXES", "Fix", "Limit", "MEASURED", "Pipeline", "READS", "REGISTRY", "WORTH",
           "WhatIf", "best_line", "lat_ms", "names_of", "of_json", "pipeline_of", "predict",
           "text_lines"]
