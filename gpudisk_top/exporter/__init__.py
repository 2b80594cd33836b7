"""Prometheus exposition and Pushgateway pushes of the latest Model.

    from gpudisk_top.exporter import MetricsServer
    server = MetricsServer("127.0.0.1:9425", labels=config.sections["devices"]).start()
    server.update(model, verdict, detector.episodes, free_space, fired)   # sampler thread

SampleHooks bundles what the dashboard, the recorder and `serve` run after each sample:
the free-space watch, the alert engine, the metrics endpoint and the pusher.

Names are imported on first use, so the config file's [devices] parser
(gpudisk_top.exporter.labels) loads without prometheus_client: `--once` never pays for it.
"""

from importlib import import_module

_WHERE = {
    "Frame": "families", "Renderer": "families", "episode_counts": "families",
    "SampleHooks": "hooks", "ExportOptions": "options", "wants_hooks": "options",
    "DeviceLabels": "labels", "parse_devices": "labels",
    "Pusher": "push",
    "DEFAULT_LISTEN": "options", "MetricsServer": "server", "parse_listen": "server",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(import_module(f"gpudisk_top.exporter.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'gpudisk_top.exporter' has no attribute {name!r}")
