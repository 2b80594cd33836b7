"""README and the manual (docs/*.md) stay true: README's two quick-start commands, and CI
runs the test command as written; every subcommand in README and every option in the manual;
the keys where they are documented; every `--once` example, in README and in docs/, is what
its command prints."""

from __future__ import annotations

import importlib
import os
import re
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


DOCS = os.path.join(ROOT, "docs")


def readme() -> str:
    with open(os.path.join(ROOT, "README.md")) as f:
        return f.read()


def doc(name: str) -> str:
    """docs/NAME, a page of the manual."""
    with open(os.path.join(DOCS, name)) as f:
        return f.read()


def pages() -> list[str]:
    """README and every page of the manual, as paths relative to the checkout."""
    return ["README.md"] + sorted(os.path.join("docs", n) for n in os.listdir(DOCS)
                                  if n.endswith(".md"))


def manual() -> str:
    """README and docs/*.md together: what a reader can find."""
    out = []
    for path in pages():
        with open(os.path.join(ROOT, path)) as f:
            out.append(f.read())
    return "\n".join(out)


def section(text: str, heading: str) -> str:
    """The section under `heading` (a whole heading line, such as `## Keys`), up to the
    next heading of the same level or above."""
    level = len(heading) - len(heading.lstrip("#"))
    body = ("\n" + text).split("\n" + heading + "\n", 1)[1]
    end = re.search(r"^#{1,%d} " % level, body, re.M)
    return body[:end.start()] if end else body


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


def test_every_subcommand_is_in_readme_and_every_option_in_the_manual():
    from gpudisk_top.commands import COMMANDS

    from gpudisk_top.commands import default

    front, text = readme(), manual()
    parsers = [("", default.build_parser())]
    for name, (module, *_rest) in COMMANDS.items():
        assert f"`gpudisk-top {name}" in front, name
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


def test_every_key_of_the_dashboard_is_in_readme_and_of_replay_in_its_page():
    from gpudisk_top.ui.app import GpuDiskApp
    from gpudisk_top.ui.replay_app import ReplayApp

    dashboard = section(readme(), "## Keys")
    replay = section(doc("recording.md"), "## replay")
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


# an example: a paragraph that names its `gpudisk-top --once ...` command and ends in ":",
# then the block of what it prints
ONCE_EXAMPLE = re.compile(r"`(gpudisk-top --once [^`]*)`((?:(?!\n\n)[^`])*):\n\n```\n(.*?)\n```",
                          re.S)


def once_examples(path: str) -> list[tuple[str, list[str]]]:
    with open(os.path.join(ROOT, path)) as f:
        return [(m.group(1), m.group(3).splitlines()) for m in ONCE_EXAMPLE.finditer(f.read())]


def test_the_manual_has_its_once_examples():
    """README, What it shows and the verdicts each show what a `--once` prints; the test
    below checks every one it finds, so these must be found."""
    assert once_examples("README.md")
    ((_command, shown),) = once_examples("docs/dashboard.md")
    assert shown[1].startswith("verdict: disk-starved: ")    # what the example is there for
    assert once_examples("docs/verdicts.md")


@pytest.mark.parametrize("path", [p for p in pages() if once_examples(p)])
def test_every_once_example_is_what_its_command_prints(path):
    """Each `--once` example in README and docs/: the command in its text prints the block
    below it, in order, less the lines and columns it says are cut (cut lines may lie
    between; a line's `...` stands for columns)."""
    for command, shown in once_examples(path):
        out = _once(command)
        at = 0
        for line in shown:
            head, cut, tail = line.partition(" ...")
            while at < len(out) and not (out[at].startswith(head) and out[at].endswith(tail)
                                         if cut else out[at] == line):
                at += 1
            assert at < len(out), f"{path} shows a line `{command}` does not print: {line!r}"
            at += 1


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
    from gpudisk_top.report.tally import MIN_CHART_BLOCKS

    text = " ".join(doc("recording.md").split())
    minutes = MIN_CHART_BLOCKS * SUMMARY_SAMPLES // 60
    assert f"fewer than {MIN_CHART_BLOCKS} summary blocks, {minutes} minutes at 1 Hz" in text
