"""The manual holds together: README is a front door that links every page of docs/; every
relative link and anchor in README, docs/ and examples/README.md leads somewhere; and each page's examples are
real: the command lines parse, the config files load, the Python imports what exists, the
verdict tables name the detector's states. (`--once` examples, whose output is checked
line by line, are test_readme.py's.)"""

from __future__ import annotations

import importlib
import os
import re
import shlex
import unicodedata

import pytest

from test_readme import DOCS, ROOT, pages, readme, section

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^()\s]+)\)")


def text_of(path: str) -> str:
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def blocks(path: str, lang: str) -> list[str]:
    return [body for tag, body in FENCE.findall(text_of(path)) if tag == lang]


def prose(text: str) -> str:
    """The text less its fenced blocks and inline code, where a `[x](y)` is no link."""
    text = FENCE.sub("", text)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text (a link's words, no backticks) lower case,
    everything but letters, digits, spaces, `-` and `_` dropped, spaces made `-`."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(path: str) -> set[str]:
    """Every heading's anchor in a page; a repeated one gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    out = set()
    for m in re.finditer(r"^#{1,6} (.+)$", FENCE.sub("", text_of(path)), re.M):
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path: str) -> list[str]:
    return [m.group(2) for m in LINK.finditer(prose(text_of(path)))]


def test_slug_is_githubs():
    assert slug("Report JSON (`report --json`)") == "report-json-report---json"
    assert slug("The fleet's rules") == "the-fleets-rules"
    assert slug("Device ceilings: `load_ceilings`") == "device-ceilings-load_ceilings"
    assert slug("Saturation is never %util alone") == "saturation-is-never-util-alone"


@pytest.mark.parametrize("path", pages() + ["examples/README.md"])
def test_every_relative_link_and_anchor_resolves(path):
    """A link to a file in the checkout names one that exists; a `#anchor` (on this page
    or another) names one of that page's headings."""
    here = os.path.dirname(os.path.join(ROOT, path))
    broken = []
    for target in links(path):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):     # https:, mailto:: not ours to check
            continue
        file, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(here, file)) if file else os.path.join(ROOT, path)
        if not full.startswith(ROOT + os.sep) or not os.path.exists(full):
            broken.append(f"{target}: no such file")
        elif anchor and anchor not in anchors(os.path.relpath(full, ROOT)):
            broken.append(f"{target}: no such heading")
    assert not broken, f"{path}: {broken}"


def test_the_link_check_sees_links_and_catches_a_broken_one(tmp_path):
    """Not a check that passes on nothing: README's links are found, in prose only."""
    found = links("README.md")
    assert "docs/verdicts.md" in found and "screenshots/overview.svg" in found
    assert "docs/whatif.md#proven-against-the-fixes-done-for-real" in found
    assert "proven-against-the-fixes-done-for-real" in anchors("docs/whatif.md")
    assert "no-such-heading" not in anchors("docs/whatif.md")
    assert links("docs/fleet.md").count("#the-fleet-screen") == 1


def test_readme_is_a_front_door_to_every_page():
    """At most ~400 lines, and every page of the manual one link away."""
    text = readme()
    assert len(text.splitlines()) <= 400, len(text.splitlines())
    linked = {os.path.normpath(t.partition("#")[0]) for t in links("README.md")}
    for name in sorted(os.listdir(DOCS)):
        if name.endswith(".md"):
            assert f"docs/{name}" in linked, name


def test_readmes_development_section_keeps_the_habits():
    dev = " ".join(section(readme(), "## Development").split())
    assert "`python -m pytest -m fast` before every commit" in dev
    assert "`python -m pytest` before you stop" in dev


def _states(text: str) -> set[str]:
    return set(re.findall(r"^\| `([a-z-]+)` \|", text, re.M))


def test_the_verdict_tables_name_every_state_of_the_detector():
    """README's short table and the verdicts page's full one: the detector's states, each
    once, no other."""
    from gpudisk_top.verdict.detect import STATES

    assert _states(section(readme(), "## Verdicts")) == set(STATES)
    assert _states(section(text_of("docs/verdicts.md"), "# Starvation verdicts")) == set(STATES)


def command_lines(path: str) -> list[list[str]]:
    """The `gpudisk-top ...` lines of a page's ```sh blocks, as argv (a trailing `&` or
    comment dropped)."""
    out = []
    for body in blocks(path, "sh"):
        for line in body.splitlines():
            if line.startswith("gpudisk-top"):
                argv = shlex.split(line, comments=True)
                out.append(argv[:-1] if argv[-1] == "&" else argv)
    return out


@pytest.mark.parametrize("path", [p for p in pages() if command_lines(p)])
def test_every_example_command_is_one_gpudisk_top_accepts(path):
    """Each example command in a ```sh block parses as the CLI parses it (cli._main): a
    subcommand's parser, else the dashboard's."""
    from gpudisk_top.commands import COMMANDS, default
    from gpudisk_top.errors import UsageError

    for argv in command_lines(path):
        if len(argv) > 1 and argv[1] in COMMANDS:
            parser = importlib.import_module(COMMANDS[argv[1]][0]).build_parser(
                f"gpudisk-top {argv[1]}")
            rest = argv[2:]
        else:
            parser, rest = default.build_parser(), argv[1:]
        try:
            parser.parse_args(rest)
        except (SystemExit, UsageError) as err:
            pytest.fail(f"{path}: {shlex.join(argv)}: {err}")


def test_readme_gives_an_example_of_every_command():
    from gpudisk_top.commands import COMMANDS

    used = {argv[1] if len(argv) > 1 and argv[1] in COMMANDS else "" for argv in
            command_lines("README.md")}
    assert used == set(COMMANDS) | {""}, used


@pytest.mark.parametrize("path", [p for p in pages() if blocks(p, "toml")])
def test_every_config_example_loads(path, tmp_path):
    """Each ```toml block is a config file gpudisk-top reads without an error."""
    from gpudisk_top import config

    for i, body in enumerate(blocks(path, "toml")):
        file = tmp_path / f"example{i}.toml"
        file.write_text(body)
        config.load(str(file), required=True)


@pytest.mark.parametrize("path", [p for p in pages() if blocks(p, "python")])
def test_every_python_example_compiles_and_imports_what_exists(path):
    """Each ```python block is Python, and what it imports from gpudisk_top is there."""
    for body in blocks(path, "python"):
        compile(body, path, "exec")
        for module, names in re.findall(r"^from (gpudisk_top[\w.]*) import (.+)$", body, re.M):
            mod = importlib.import_module(module)
            for name in re.sub(r"#.*", "", names).split(","):
                assert hasattr(mod, name.strip()), f"{path}: {module}.{name.strip()}"
