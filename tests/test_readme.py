"""README stays true: its two quick-start commands, and CI runs the test command as written;
every option and key it must name; its `--once` examples are what the command prints."""

from __future__ import annotations

import importlib
import os
import re
import shlex
import subprocess
import sys

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
    # a venv first: Debian 12's and Ubuntu's system Python refuse a bare pip install
    # (externally-managed-environment)
    for cmd in cmds:
        assert cmd.startswith("python3 -m venv .venv && . .venv/bin/activate && pip install "), cmd
    assert cmds[0].endswith("&& gpudisk-top")
    assert "[test]" in cmds[1] and cmds[1].endswith("&& python -m pytest")


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
             "left": "←", "right": "→", "f1": "F1", "f10": "F10", "exclamation_mark": "!"}
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


def _once(command: str) -> list[str]:
    argv = shlex.split(command)
    assert argv[0] == "gpudisk-top" and "--once" in argv, command
    proc = subprocess.run([sys.executable, "-m", "gpudisk_top", *argv[1:]], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_the_once_report_shown_is_what_its_command_prints():
    """"What it shows": the command in its text prints the block below it, less the lines
    and columns it says are cut (a line's `...` stands for columns)."""
    section = readme().split("## What it shows", 1)[1].split("\n## ", 1)[0]
    command = re.search(r"`(gpudisk-top --once [^`]*)`", section).group(1)
    shown = re.search(r"```\n(.*?)\n```", section, re.S).group(1).splitlines()
    out = _once(command)
    at = 0
    for line in shown:        # in order; cut lines may lie between
        head, cut, tail = line.partition(" ...")
        while at < len(out) and not (out[at].startswith(head) and out[at].endswith(tail)
                                     if cut else out[at] == line):
            at += 1
        assert at < len(out), f"README shows a line `{command}` does not print: {line!r}"
        at += 1
    assert shown[1].startswith("verdict: disk-starved: ")    # what the example is there for


def test_the_verdict_examples_are_what_their_commands_print():
    """"Starvation verdicts": each example that names its command prints those lines."""
    section = readme().split("## Starvation verdicts", 1)[1].split("\n## ", 1)[0]
    examples = re.findall(r"`(gpudisk-top --once [^`]*)`\):\n\n```\n(.*?)\n```", section, re.S)
    assert examples
    for command, block in examples:
        out = _once(command)
        for line in block.splitlines():
            assert line in out, f"{command}: {line!r}"


def _help_keys(text: str) -> list[str]:
    """The keys in the key column of the help screen's key sections."""
    keys = []
    for section in re.split(r"\n(?=\[b\])", text):
        if section.startswith(("[b]Keys[/b]", "[b]Replay[/b]")):
            for line in section.splitlines()[1:]:
                m = re.match(r"  (\S.*?)\s{2,}", line)
                if m:
                    keys += m.group(1).split()
    return keys


def test_the_help_screen_names_every_key_bound():
    """The help screen (`?`) lists every key the dashboard binds, and the replay screen's
    help every key replay binds too."""
    from gpudisk_top.ui.app import GpuDiskApp
    from gpudisk_top.ui.replay_app import ReplayApp
    from gpudisk_top.ui.screens.help import HelpScreen

    live, replay = HelpScreen().text, HelpScreen(replay=True).text
    assert set(_key_names(GpuDiskApp.BINDINGS)) <= set(_help_keys(live))
    assert set(_key_names(GpuDiskApp.BINDINGS + ReplayApp.BINDINGS)) <= set(_help_keys(replay))
    assert "[b]Replay[/b]" not in live


def test_the_arrow_keys_mean_the_same_in_code_readme_and_help():
    """← → scroll the timeline: which way each goes is what the dashboard binds
    (action time(N): Timeline.scroll_time, a positive N goes back in time), and README's
    keys table and the help screen say the same."""
    from gpudisk_top.ui.app import GpuDiskApp
    from gpudisk_top.ui.screens.help import HelpScreen

    actions = {b.key: b.action for b in GpuDiskApp.BINDINGS}
    ways = ["back" if int(re.fullmatch(r"time\((-?\d+)\)", actions[k]).group(1)) > 0
            else "forward" for k in ("left", "right")]
    said = f"{ways[0]} / {ways[1]} in time"
    row = next(line for line in readme().splitlines() if line.startswith("| `←` `→` |"))
    line = next(line for line in HelpScreen().text.splitlines() if line.startswith("  ← →"))
    assert said in row and said in line, (said, row, line)


def test_the_short_window_rule_of_report_charts_is_the_code_s():
    from gpudisk_top.record.derived import SUMMARY_SAMPLES
    from gpudisk_top.report.summary import MIN_CHART_BLOCKS

    text = " ".join(readme().split())
    minutes = MIN_CHART_BLOCKS * SUMMARY_SAMPLES // 60
    assert f"fewer than {MIN_CHART_BLOCKS} summary blocks, {minutes} minutes at 1 Hz" in text
