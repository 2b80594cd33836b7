"""README stays true: its two quick-start commands, and CI runs the test command as written."""

from __future__ import annotations

import importlib
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def readme() -> str:
    with open(os.path.join(ROOT, "README.md")) as f:
        return f.read()


def quick_start_commands() -> list[str]:
    section = readme().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)\n```", section, re.S)


def test_quick_start_has_exactly_two_commands():
    cmds = quick_start_commands()
    assert len(cmds) == 2 and all("\n" not in c for c in cmds), cmds
    assert cmds[0].startswith("pip install ") and "gpudisk-top" in cmds[0]
    assert "[test]" in cmds[1] and "pytest" in cmds[1]


def test_ci_runs_readmes_test_command_verbatim():
    script = open(os.path.join(ROOT, ".ci", "run")).read()
    command = quick_start_commands()[1]
    assert command in [line.strip() for line in script.splitlines()]   # run as a line
    assert f"grep -qxF '{command}' README.md" in script                # and checked


def test_every_subcommand_and_its_options_are_in_readme():
    from gpudisk_top.commands import COMMANDS

    from gpudisk_top.commands import default

    text = readme()
    parsers = [("", default.build_parser())]
    for name, (module, *_rest) in COMMANDS.items():
        assert f"`gpudisk-top {name}" in text, name
        parsers.append((name, importlib.import_module(module).build_parser(f"gpudisk-top {name}")))
    for name, parser in parsers:
        for action in parser._actions:
            opts = action.option_strings
            if opts and "--help" not in opts:
                # named as an option (in a synopsis or in backticks), long or short form
                assert any(re.search(r"[\s\[`]" + re.escape(o) + r"[\s\]`=]", text)
                           for o in opts), f"{name} {opts}"


def _key_names(bindings) -> list[str]:
    shown = {"question_mark": "?", "slash": "/", "comma": ",", "full_stop": ".",
             "plus": "+", "minus": "-", "equals_sign": "+", "up": "↑", "down": "↓",
             "left": "←", "right": "→"}
    out = []
    for b in bindings:
        for key in b.key.split(","):
            out.append(shown.get(key, key))
    return out


def test_every_key_of_the_dashboard_and_replay_is_in_readme():
    from gpudisk_top.ui.app import GpuDiskApp
    from gpudisk_top.ui.replay_app import ReplayApp

    text = readme()
    dashboard = text.split("## The dashboard", 1)[1].split("\n## ", 1)[0]
    replay = text.split("**replay**", 1)[1].split("**report**", 1)[0]
    for key in _key_names(GpuDiskApp.BINDINGS):
        assert f"`{key}`" in dashboard, key
    for key in _key_names(ReplayApp.BINDINGS):
        assert f"`{key}`" in replay, key


def test_the_short_window_rule_of_report_charts_is_the_code_s():
    from gpudisk_top.record.derived import SUMMARY_SAMPLES
    from gpudisk_top.report.summary import MIN_CHART_BLOCKS

    text = " ".join(readme().split())
    minutes = MIN_CHART_BLOCKS * SUMMARY_SAMPLES // 60
    assert f"fewer than {MIN_CHART_BLOCKS} summary blocks, {minutes} minutes at 1 Hz" in text
