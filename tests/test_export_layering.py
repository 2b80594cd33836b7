"""The exporter, the alert engine and the free-space watch are headless, and only the
exporter loads prometheus_client: --once and the alert engine never pay for it."""

from __future__ import annotations

import subprocess
import sys


def loaded(modules: list[str], prefix: str) -> list[str]:
    code = ("import importlib, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            f"print(sorted(m for m in sys.modules if m.split('.')[0] == {prefix!r}))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return eval(proc.stdout)


def test_new_modules_do_not_import_textual():
    modules = ["gpudisk_top.exporter", "gpudisk_top.exporter.hooks", "gpudisk_top.alerts",
               "gpudisk_top.watch", "gpudisk_top.commands.serve"]
    assert loaded(modules, "textual") == []


def test_prometheus_client_is_loaded_only_by_the_exporter():
    assert loaded(["gpudisk_top.cli", "gpudisk_top.alerts", "gpudisk_top.watch"],
                  "prometheus_client") == []
    assert loaded(["gpudisk_top.exporter.server"], "prometheus_client") != []



def test_the_config_sections_load_without_prometheus_client():
    """config.py registers parse_alerts, parse_devices and parse_watch: loading the config
    (as --once does) must not load prometheus_client or textual."""
    modules = ["gpudisk_top.config", "gpudisk_top.alerts.rules", "gpudisk_top.exporter.labels",
               "gpudisk_top.watch.config"]
    assert loaded(modules, "prometheus_client") == []
    assert loaded(modules, "textual") == []


def test_the_options_load_without_prometheus_client():
    """record and the dashboard add --listen/--push to their parsers; building one must
    not load prometheus_client."""
    assert loaded(["gpudisk_top.exporter.options", "gpudisk_top.commands.serve"],
                  "prometheus_client") == []
