"""The recorder stays light: record imports no Textual, and the model only to write the
summaries beside the raw samples (never with --no-summaries, never to read); report and
export never import Textual."""

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


def test_a_recorder_without_summaries_and_a_reader_load_no_model(tmp_path):
    path = tmp_path / "x.gdtrec"
    mods = _loaded(
        "from gpudisk_top.collect.sample import Sample\n"
        "from gpudisk_top.record import Recorder, Recording\n"
        f"rec = Recorder({str(path)!r}, summaries=False, sync_interval_s=None)\n"
        "rec.append(Sample(1.0, 2.0)); rec.append(Sample(2.0, 3.0)); rec.close()\n"
        f"r = Recording.open({str(path)!r}); assert len(r) == 2; r.sample(1); r.close()")
    assert not {m for m in mods if m.startswith("gpudisk_top.model")}
    assert not {m for m in mods if m.split(".")[0] == "textual"}


def test_report_and_export_load_no_textual():
    mods = _loaded("import gpudisk_top.commands.report, gpudisk_top.commands.export, "
                   "gpudisk_top.report.summary, gpudisk_top.report.text, gpudisk_top.report.charts, "
                   "gpudisk_top.report.export, gpudisk_top.session.replay, gpudisk_top.timeparse")
    assert not {m for m in mods if m.split(".")[0] == "textual"}
