"""The recorder stays light: record imports neither Textual nor the model (it stores raw
samples); report and export never import Textual."""

from __future__ import annotations

import subprocess
import sys


def _loaded(code: str) -> set[str]:
    probe = code + "\nimport sys\nprint(' '.join(sorted(sys.modules)))\n"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return set(out.stdout.split())


def test_record_command_and_recorder_load_no_textual_and_no_model():
    mods = _loaded("import gpudisk_top.commands.record, gpudisk_top.record.writer, "
                   "gpudisk_top.record.reader")
    assert not {m for m in mods if m.split(".")[0] == "textual"}
    assert not {m for m in mods if m.startswith("gpudisk_top.model")}
    assert "plotext" not in mods


def test_report_and_export_load_no_textual():
    mods = _loaded("import gpudisk_top.commands.report, gpudisk_top.commands.export, "
                   "gpudisk_top.report.summary, gpudisk_top.report.text, gpudisk_top.report.charts, "
                   "gpudisk_top.report.export, gpudisk_top.record.replay, gpudisk_top.timeparse")
    assert not {m for m in mods if m.split(".")[0] == "textual"}
