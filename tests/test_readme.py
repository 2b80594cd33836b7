"""README stays true: its two quick-start commands, and CI runs the test command as written."""

from __future__ import annotations

import os
import re
import subprocess

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
    extract = re.search(r"test_cmd=\$\((.*)\)\n", script).group(1)
    out = subprocess.run(["bash", "-c", extract], cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.strip() == quick_start_commands()[1]
    assert 'eval "$test_cmd"' in script
