"""What runs after each sample, the same in `serve`, the recorder and the dashboard:

    hooks = SampleHooks.from_args(args, cfg, origin, dev_filter).start()
    # in the sampler thread, after detector.feed(model):
    fired = hooks.on_sample(model, verdict, detector.episodes)
    hooks.free_space        # the watched paths, for a panel (FreeSpace, format_free_space)
    hooks.engine.active()   # alerts still holding, for a banner
    hooks.close()           # at exit: waits for alert commands, pushes once more

The free-space watch reads [watch] paths and every free_space rule's path; the alert
engine runs [[alerts]]; the metrics endpoint (--listen) and the pusher (--push) render
the same registry.
"""

from __future__ import annotations

import sys

from gpudisk_top.alerts import AlertEngine
from gpudisk_top.errors import UsageError
from gpudisk_top.errors import warn as warn_line
from gpudisk_top.exporter.options import DEFAULT_JOB, DEFAULT_PUSH_INTERVAL_S, wants_hooks
from gpudisk_top.exporter.push import Pusher, check_push_url
from gpudisk_top.exporter.server import MetricsServer, parse_listen
from gpudisk_top.watch import FreeSpaceWatch, watched_paths

__all__ = ["SampleHooks", "wants_hooks"]


class SampleHooks:
    """Free-space watch, alert engine, metrics endpoint and pusher, fed once per sample.

    sections: config.sections (alerts, devices, watch).  listen: 'HOST:PORT' or None.
    push: a Pushgateway URL or None.  stderr: where `log = "stderr"` alert lines go
    (the dashboard passes None and shows Fired.message).  warn: one line per problem.
    """

    def __init__(self, sections: dict, listen: str | None = None, push: str | None = None,
                 push_interval_s: float = DEFAULT_PUSH_INTERVAL_S, push_job: str = DEFAULT_JOB,
                 dev_filter=None, source: str = "live", host_name: str | None = None,
                 stderr=sys.stderr, warn=None, demo_actions: bool = False) -> None:
        warn = warn if warn is not None else warn_line
        rules = sections.get("alerts") or ()
        self.watch = FreeSpaceWatch(watched_paths(sections))
        self.engine = AlertEngine(rules, stderr=stderr, warn=warn, source=source,
                                  host_name=host_name, demo_actions=demo_actions)
        self.server: MetricsServer | None = None
        self.pusher: Pusher | None = None
        if listen is not None or push is not None:
            self.server = MetricsServer(listen, labels=sections.get("devices"),
                                        dev_filter=dev_filter,
                                        alert_names=[r.name for r in rules], source=source)
        if push is not None:
            self.pusher = Pusher(push, self.server.registry, push_interval_s, push_job,
                                 instance=host_name or "", warn=warn)
        self.free_space: list = []

    @classmethod
    def from_args(cls, args, cfg, origin: dict, dev_filter=None, serve: bool = False,
                  **kwargs) -> "SampleHooks":
        """From the options commands.common.add_export_options() added.  Raises
        UsageError for a bad --listen or --push."""
        listen = getattr(args, "listen", None)
        if getattr(args, "no_listen", False):
            listen = None
        if listen is not None:
            parse_listen(listen)
        push = getattr(args, "push", None)
        interval = getattr(args, "push_interval", None)
        if push is None and interval is not None:
            raise UsageError("--push-interval needs --push URL")
        if push is not None:
            check_push_url(push)
        if serve and listen is None and push is None:
            raise UsageError("--no-listen needs --push URL: otherwise nothing leaves this node")
        return cls(cfg.sections, listen=listen, push=push,
                   push_interval_s=interval or DEFAULT_PUSH_INTERVAL_S,
                   push_job=getattr(args, "push_job", DEFAULT_JOB), dev_filter=dev_filter,
                   source=origin.get("source", "live"), host_name=origin.get("host_name"),
                   demo_actions=getattr(args, "demo_actions", False), **kwargs)

    def start(self) -> "SampleHooks":
        """Bind the endpoint and start pushing.  Raises UsageError/RuntimeFailure (one
        line) for an address that cannot be used."""
        if self.server is not None:
            self.server.start()
        if self.pusher is not None:
            self.pusher.start()
        return self

    def on_sample(self, model, verdict=None, episodes=None) -> list:
        """Read the watched paths, judge the alert rules, hand the model to the exporter.
        Returns the alerts fired now (AlertEngine.update).  Never raises for a source or
        an action that fails."""
        self.free_space = self.watch.read() if self.watch.paths else []
        fired = self.engine.update(model, verdict, self.free_space)
        if self.server is not None:
            self.server.update(model, verdict, episodes, self.free_space, fired)
        return fired

    def close(self) -> None:
        self.engine.close()
        if self.pusher is not None:
            self.pusher.close()
        if self.server is not None:
            self.server.close()
        self.watch.close()

