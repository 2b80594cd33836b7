"""Prometheus exposition and Pushgateway pushes of the latest Model.

    from gpudisk_top.exporter import MetricsServer
    server = MetricsServer("127.0.0.1:9425", labels=config.sections["devices"]).start()
    server.update(model, verdict, detector.episodes, free_space, fired)   # sampler thread

SampleHooks bundles what the dashboard, the recorder and `serve` run after each sample:
the free-space watch, the alert engine, the metrics endpoint and the pusher.
"""

from gpudisk_top.exporter.families import Frame, Renderer, episode_counts
from gpudisk_top.exporter.hooks import SampleHooks, add_export_options
from gpudisk_top.exporter.labels import DeviceLabels, parse_devices
from gpudisk_top.exporter.push import Pusher
from gpudisk_top.exporter.server import DEFAULT_LISTEN, MetricsServer, parse_listen

__all__ = ["DEFAULT_LISTEN", "DeviceLabels", "Frame", "MetricsServer", "Pusher", "Renderer",
           "SampleHooks", "add_export_options", "episode_counts", "parse_devices",
           "parse_listen"]
