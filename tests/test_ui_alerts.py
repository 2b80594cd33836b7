"""Alerts and free space in the dashboard: the banner, the bell, the FREE line, and the
metrics endpoint from the dashboard's sampler thread."""

from __future__ import annotations

import socket
import time
import urllib.request

from gpudisk_top import config
from gpudisk_top.exporter.hooks import SampleHooks
from gpudisk_top.exporter.options import ExportOptions
from gpudisk_top.ui.widgets.hostline import HostLine
from gpudisk_top.ui.widgets.verdict import VerdictBanner
from apps import dashboard_app
from screen_text import text_of

CONFIG = """
[watch]
paths = ["/"]

[[alerts]]
name = "starving"
verdict = "starved"
bell = true
banner = true
log = false
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_alert_banner_bell_free_space_and_metrics(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text(CONFIG)
    cfg = config.load(str(path))
    port = free_port()
    hooks = SampleHooks(cfg.sections, ExportOptions(listen=f"127.0.0.1:{port}"),
                        stderr=None).start()
    app = dashboard_app(hooks=hooks)
    bells = []
    app.bell = lambda: bells.append(time.monotonic())
    async with app.run_test(size=(140, 50)) as pilot:
        app.advance(40)                   # healthy: no alert yet
        await pilot.pause()
        assert "ALERT" not in text_of(app.query_one(VerdictBanner)) and not bells
        assert " FREE " in text_of(app.query_one(HostLine)) and "free of" in text_of(app.query_one(HostLine))
        app.advance(30)                   # the disk starvation at 60 s has opened
        await pilot.pause()
        banner = text_of(app.query_one(VerdictBanner))
        assert "ALERT" in banner and "starving" in banner
        assert len(bells) == 1            # once, not every sample
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        assert 'gpudisk_top_state{state="disk-starved"} 1.0' in body
        assert "gpudisk_top_gpu_utilization_ratio" in body
        assert 'gpudisk_top_alerts_fired_total{alert="starving"} 1.0' in body
    hooks.close()
