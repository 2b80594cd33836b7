"""The collection and model layers never import Textual (STYLE.md: one direction for data)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import gpudisk_top

HEADLESS_PACKAGES = ("gpudisk_top.collect", "gpudisk_top.model", "gpudisk_top.sim",
                     "gpudisk_top.output")


def headless_modules() -> list[str]:
    names = ["gpudisk_top.diskstats", "gpudisk_top.cli"]
    for info in pkgutil.walk_packages(gpudisk_top.__path__, "gpudisk_top."):
        if info.name.startswith(HEADLESS_PACKAGES):
            names.append(info.name)
    return names


def test_headless_layers_do_not_import_textual():
    modules = headless_modules()
    assert "gpudisk_top.collect.diskstats" in modules and "gpudisk_top.model.disk" in modules
    code = ("import importlib, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'textual'))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
