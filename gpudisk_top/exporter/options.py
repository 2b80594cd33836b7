"""The exporter's defaults, what a command asks of it (ExportOptions), and whether a
command's options and config ask for anything after sampling.

Light on purpose: `record` and `--once` must not load prometheus_client to decide;
gpudisk_top.exporter.hooks does the work.  The command line is the commands' own:
commands/common.py adds --listen, --push, --push-interval and --push-job
(add_export_options) and turns them into an ExportOptions (export_options), checked, with
errors that name the options; nothing here reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9425
DEFAULT_LISTEN = f"{DEFAULT_HOST}:{DEFAULT_PORT}"
DEFAULT_JOB = "gpudisk-top"
DEFAULT_PUSH_INTERVAL_S = 15.0
# how long an ended job's series stay (exporter/jobseries.py): long enough for a scrape
# every minute to read its counters' last increments, short enough that a sweep of short
# runs does not pile up series
DEFAULT_JOB_RETENTION_S = 300.0


@dataclass(frozen=True)
class ExportOptions:
    """Where the metrics go.  listen: 'HOST:PORT' of the /metrics endpoint, or None for
    none; push_url: a Pushgateway to push to every push_interval_s (and at exit), or None;
    push_job: the gateway's job label; job_retention_s: how long an ended job's series
    stay (`serve --job-retention`)."""

    listen: str | None = None
    push_url: str | None = None
    push_interval_s: float = DEFAULT_PUSH_INTERVAL_S
    push_job: str = DEFAULT_JOB
    job_retention_s: float = DEFAULT_JOB_RETENTION_S

    @property
    def wanted(self) -> bool:
        """Whether the metrics leave this process at all (an endpoint or a push)."""
        return self.listen is not None or self.push_url is not None


def wants_hooks(export: ExportOptions, sections: dict) -> bool:
    """Whether anything after sampling is asked for: an endpoint, a push, alert rules or
    watched paths (sections: config.sections).  The recorder builds Models only then."""
    watch = sections.get("watch")
    return bool(export.wanted or sections.get("alerts") or (watch is not None and watch.paths))
