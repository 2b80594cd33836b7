"""The exporter's defaults, and whether a command's options and config ask for it.

Light on purpose: `record` and `--once` must not load prometheus_client to decide;
gpudisk_top.exporter.hooks does the work.  The options themselves are the command line's
(commands/common.py add_export_options).
"""

from __future__ import annotations

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9425
DEFAULT_LISTEN = f"{DEFAULT_HOST}:{DEFAULT_PORT}"
DEFAULT_JOB = "gpudisk-top"
DEFAULT_PUSH_INTERVAL_S = 15.0


def wants_hooks(args, cfg) -> bool:
    """Whether anything after sampling is asked for: an endpoint, a push, alert rules or
    watched paths.  The recorder builds Models only then."""
    sections = getattr(cfg, "sections", {}) or {}
    watch = sections.get("watch")
    return bool(getattr(args, "listen", None) or getattr(args, "push", None)
                or sections.get("alerts") or (watch is not None and watch.paths))
