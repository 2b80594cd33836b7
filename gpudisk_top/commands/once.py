"""`gpudisk-top --once [--json]`: two samples --interval apart, one report, exit.

No terminal needed and no Textual; the verdict is the detector's on that one interval
(model.detect.one_interval: no hysteresis to wait for).
"""

from __future__ import annotations

import sys
import time

from gpudisk_top.commands.common import device_filter, open_source, thresholds_from
from gpudisk_top.errors import RuntimeFailure, warn


def run(args) -> int:
    from gpudisk_top.model.detect import one_interval
    from gpudisk_top.model.snapshot import Model
    from gpudisk_top.output import once

    dev_filter = device_filter(args)
    thresholds = thresholds_from(args)
    from gpudisk_top.collect.gpu_deadline import INIT_TIMEOUT_S

    # one report: worth waiting for a driver that loads slowly (no persistence mode)
    source, virtual, origin = open_source(args, gpu_init_wait_s=INIT_TIMEOUT_S)
    try:
        first = source.sample()
        if not virtual:
            time.sleep(args.interval)
        second = source.sample()
    finally:
        source.close()
    if not second.disks and second.host.cpu is None:
        raise RuntimeFailure(f"nothing could be read under {args.procfs}: "
                             + "; ".join(second.warnings or ["no diskstats, no stat"]))
    model = Model.new(second, first)
    verdict = one_interval(model, thresholds)
    for warning in [*second.warnings, *model.warnings]:
        warn(warning)
    if args.json:
        sys.stdout.write(once.render_json(model, dev_filter, origin, verdict) + "\n")
    else:
        sys.stdout.write(once.render_text(model, dev_filter, origin, verdict))
    return 0
