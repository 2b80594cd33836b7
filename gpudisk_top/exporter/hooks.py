"""What runs after each sample, the same in `serve`, the recorder and the dashboard:

    hooks = SampleHooks(cfg.sections, export, origin, dev_filter, alerts).start()
    # in the sampler thread, after the step (model, verdict, loss = stepper.step(sample)):
    fired = hooks.on_sample(model, verdict, stepper.episodes, loss)
    hooks.free_space        # the watched paths, for a panel (FreeSpace, format_free_space)
    hooks.engine.active()   # alerts still holding, for a banner
    hooks.close()           # at exit: waits for alert commands, pushes once more

The free-space watch reads [watch] paths and every free_space rule's path; the alert
engine runs [[alerts]]; the metrics endpoint (--listen) and the pusher (--push) render
the same registry.  What the command line asks (export: ExportOptions, alerts:
AlertOptions) comes typed and checked from commands/common.py; nothing here reads it.
"""

from __future__ import annotations

import sys

from gpudisk_top.alerts import AlertEngine, AlertOptions
from gpudisk_top.collect.source import LIVE, Source
from gpudisk_top.errors import warn as warn_line
from gpudisk_top.exporter.options import ExportOptions, wants_hooks
from gpudisk_top.exporter.push import Pusher
from gpudisk_top.exporter.server import MetricsServer
from gpudisk_top.watch import FreeSpaceWatch, watched_paths

__all__ = ["SampleHooks", "wants_hooks"]


class SampleHooks:
    """Free-space watch, alert engine, metrics endpoint and pusher, fed once per sample.

    sections: config.sections (alerts, devices, watch).  export: the endpoint and the
    push (none by default).  origin: where the samples come from (its label and host go
    to the metrics, the pushes and the alert commands; default: live, this host).
    alerts: what the alert engine may do.  stderr: where `log = "stderr"` alert lines go
    (the dashboard passes None and shows Fired.message).  warn: one line per problem.
    """

    def __init__(self, sections: dict, export: ExportOptions = ExportOptions(),
                 origin: Source | None = None, dev_filter=None,
                 alerts: AlertOptions = AlertOptions(), stderr=sys.stderr, warn=None) -> None:
        warn = warn if warn is not None else warn_line
        origin = origin or Source(LIVE, None, LIVE)
        rules = sections.get("alerts") or ()
        self.watch = FreeSpaceWatch(watched_paths(sections))
        self.engine = AlertEngine(rules, stderr=stderr, warn=warn, source=origin.label,
                                  host_name=origin.host_name, demo_actions=alerts.demo_actions)
        self.server: MetricsServer | None = None
        self.pusher: Pusher | None = None
        if export.wanted:
            self.server = MetricsServer(export.listen, labels=sections.get("devices"),
                                        dev_filter=dev_filter,
                                        alert_names=[r.name for r in rules], source=origin.label,
                                        job_retention_s=export.job_retention_s)
        if export.push_url is not None:
            self.pusher = Pusher(export.push_url, self.server.registry, export.push_interval_s,
                                 export.push_job, instance=origin.host_name or "", warn=warn)
        self.free_space: list = []
        self._warn = warn

    def start(self) -> "SampleHooks":
        """Bind the endpoint and start pushing.  Raises UsageError/RuntimeFailure (one
        line) for an address that cannot be used."""
        if self.server is not None:
            self.server.start()
        if self.pusher is not None:
            self.pusher.start()
        return self

    def on_sample(self, model, verdict=None, episodes=None, loss=None) -> list:
        """Read the watched paths, judge the alert rules, hand the model to the exporter.
        loss: the step's IntervalLoss of the interval (verdict/step.py Step.loss), for the
        ledger's counters and the gap said.  Returns the alerts fired now
        (AlertEngine.update).  Never raises for a source or an action that fails."""
        gap_s = getattr(loss, "gap_s", None)
        if gap_s is not None:     # verdict/gaps.py: said once, at the sample after it
            self._warn(f"no sample for {gap_s:.1f} s (the process was stopped or the host "
                       "suspended): a gap in sampling, not counted as GPU time")
        self.free_space = self.watch.read() if self.watch.paths else []
        fired = self.engine.update(model, verdict, self.free_space)
        if self.server is not None:
            self.server.update(model, verdict, episodes, self.free_space, fired, loss)
        return fired

    def close(self) -> None:
        self.engine.close()
        if self.pusher is not None:
            self.pusher.close()
        if self.server is not None:
            self.server.close()
        self.watch.close()

