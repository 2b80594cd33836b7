"""Issue 38 (6): `--ascii`, and ASCII where the locale or terminal cannot draw UTF-8
(LANG=C, LC_ALL=C, TERM=linux); TERM=dumb refuses a screen in one line.  The screens
through Textual's pilot (the dashboard, its views, replay, the fleet screen), the console
script's start-up and text through real processes, and the whole path in a real
pseudo-terminal: every byte the dashboard draws there is ASCII."""

from __future__ import annotations

import ast
import os
import pathlib
import re
import subprocess
import sys
import time

import pytest
from rich.cells import cell_len

import gpudisk_top
from gpudisk_top.ui import glyphs
from apps import dashboard_app, replay_screen_app, ORIGIN
from ptyterm import PtyTerminal
from screen_text import screen_lines
from slack import slack
from test_ui_terminal import colours

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEMO_REC = ROOT / "examples" / "demo-simulated.gdtrec"


@pytest.fixture
def ascii_run():
    """This run draws in ASCII (as cli.py chooses at start), and back after the test."""
    glyphs.use_ascii(True)
    yield
    glyphs.use_ascii(False)


def above_7e(lines) -> set[str]:
    return {c for line in lines for c in line if ord(c) > 0x7E}


def env_with(**changes) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("LC_ALL", "LC_CTYPE", "LANG", "NO_COLOR", "PYTHONUTF8", "PYTHONIOENCODING")}
    env.update(PYTHONPATH=str(ROOT), TERM="xterm-256color", LANG="C.UTF-8")
    env.update(changes)
    return {k: v for k, v in env.items() if v is not None}


def run_cli(args, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpudisk_top", *args], env=env_with(**env),
                          capture_output=True, timeout=120 * slack())


# ---------------------------------------------------------------------------- the glyph set
def _string_constants(path: pathlib.Path):
    """The string constants of a module that are not docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node


def test_every_glyph_the_package_prints_has_an_ascii_form_as_wide():
    """One owner: a glyph any layer writes (a widget's mark, a state's banner, a fix's ×,
    the report's chart) has its ASCII form in glyphs.py, not a '?' found at run time."""
    package = pathlib.Path(gpudisk_top.__file__).parent
    missing = {}
    for path in package.rglob("*.py"):
        if path.name == "glyphs.py":
            continue
        for node in _string_constants(path):
            for char in node.value:
                if ord(char) > 0x7E and ord(char) not in glyphs.TABLE:
                    missing.setdefault(char, f"{path.relative_to(package)}:{node.lineno}")
    assert not missing, f"glyphs with no ASCII form in ui/glyphs.py: {missing}"
    for code, form in glyphs.TABLE.items():
        assert form.isascii() and cell_len(form) == cell_len(chr(code)), (chr(code), form)


def test_to_ascii_keeps_every_cell():
    text = "▲ sdb ×2.3 → ~13% ▁▂▃█ ╭─╮│┤ 51 °C 中文 é ⣿ " + "".join(glyphs.ASCII_FORM)
    out = glyphs.to_ascii(text)
    assert out.isascii() and cell_len(out) == cell_len(text)
    assert out.startswith("^ sdb x2.3 > ~13% .:=# +-+|+ 51  C ???? e . ")
    assert glyphs.to_ascii("plain ascii") == "plain ascii"


@pytest.mark.parametrize("env,reason", [
    ({"LANG": "C"}, "the locale (LANG=C) is not UTF-8"),
    ({"LANG": None, "LC_ALL": "C"}, "the locale (LC_ALL=C) is not UTF-8"),
    ({"LANG": "POSIX"}, "the locale (LANG=POSIX) is not UTF-8"),
    ({"TERM": "linux"}, "TERM=linux has no full set of block and box glyphs"),
    ({"TERM": "vt100"}, "TERM=vt100 has no full set of block and box glyphs"),
    ({"PYTHONIOENCODING": "latin-1"}, "standard output encodes iso8859-1"),
    ({}, "None"),
    ({"LANG": None}, "None"),                  # no locale named: UTF-8, as Python takes it
    ({"TERM": "xterm-256color", "LANG": "en_US.UTF-8"}, "None"),
])
def test_which_locales_and_terminals_get_ascii(env, reason):
    """Asked of a fresh interpreter: Python turns LANG=C into C.UTF-8 as it starts, and
    the choice must still see the C."""
    proc = subprocess.run([sys.executable, "-c", "from gpudisk_top.ui import glyphs; "
                           "print(glyphs.ascii_reason())"], env=env_with(**env),
                          capture_output=True, text=True, timeout=60 * slack())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == reason


# ---------------------------------------------------------------------------- the screens
async def _screens(app, keys_views) -> list[list[str]]:
    shots = []
    async with app.run_test(size=(120, 40)) as pilot:
        app.advance(100)
        await pilot.pause()
        shots.append(screen_lines(app))
        for keys in keys_views:
            for key in keys:
                await pilot.press(key)
            await pilot.pause()
            shots.append(screen_lines(app))
    return shots


def _unblocked(line: str, utf8: str) -> str:
    """`line` less the cells where `utf8` draws a block element: a scroll bar's thumb is
    drawn in whole cells in ASCII, its ends in eighths in UTF-8."""
    return "".join("_" if i < len(utf8) and 0x2580 <= ord(utf8[i]) <= 0x259F else c
                   for i, c in enumerate(line))


# the dashboard, its help, its episodes, I/O by process, a device's detail, the palette
VIEWS = [("h",), ("escape", "e"), ("escape", "i"), ("i", "tab", "tab", "enter"),
         ("escape", "ctrl+p")]


async def test_the_ascii_dashboard_is_the_utf8_one_cell_for_cell(ascii_run):
    """Every view's screen holds no character above 0x7E, and is the UTF-8 screen with
    each glyph in its ASCII form, borders and footer too: nothing moves."""
    ascii_shots = await _screens(dashboard_app(), VIEWS)
    glyphs.use_ascii(False)
    utf8_shots = await _screens(dashboard_app(), VIEWS)
    assert above_7e(utf8_shots[0]) >= {"▲", "█"}     # the test can fail: glyphs were drawn
    for ascii_lines, utf8_lines in zip(ascii_shots, utf8_shots, strict=True):
        assert not above_7e(ascii_lines), "\n".join(ascii_lines)
        assert [_unblocked(a, u) for a, u in zip(ascii_lines, utf8_lines, strict=True)] == \
            [_unblocked(glyphs.to_ascii(u), u) for u in utf8_lines]
    text = "\n".join(ascii_shots[0])
    assert "^ DISK-STARVED" in text and "^sdb" in text


async def test_ascii_replay_and_80x24(ascii_run):
    app = replay_screen_app(DEMO_REC, ORIGIN, start_index=90)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        lines = screen_lines(app)
        assert not above_7e(lines), "\n".join(lines)
        await pilot.press("n")
        await pilot.pause()
        assert not above_7e(screen_lines(app))
        assert any(line.startswith("> ") or line.startswith("||") for line in screen_lines(app))


async def test_ascii_fleet_screen_with_prometheus_down(ascii_run):
    from gpudisk_top.commands.fleet import build_parser, make_source
    from gpudisk_top.ui.fleet_app import FleetApp

    args = build_parser("gpudisk-top fleet").parse_args(["--prometheus", "http://127.0.0.1:9",
                                                         "--timeout", "2"])
    app = FleetApp(make_source(args), 5.0)
    async with app.run_test(size=(120, 40)) as pilot:
        deadline = time.monotonic() + 20 * slack()
        while "ERROR" not in "\n".join(screen_lines(app)) and time.monotonic() < deadline:
            await pilot.pause(0.2)
        lines = screen_lines(app)
        assert any("X ERROR" in line for line in lines), "\n".join(lines)
        assert not above_7e(lines), "\n".join(lines)


# ---------------------------------------------------------------------------- start-up and text
@pytest.mark.parametrize("env", [{"LANG": "C"}, {"LANG": None, "LC_ALL": "C"}, {"TERM": "linux"}])
@pytest.mark.parametrize("args", [["--demo", "--once", "--demo-start", "90"],
                                  ["report", str(DEMO_REC)]], ids=["once", "report"])
def test_text_is_ascii_where_the_locale_or_terminal_cannot_draw(env, args):
    utf8 = run_cli(args)
    plain = run_cli(args, **env)
    assert utf8.returncode == 0 and plain.returncode == 0, plain.stderr
    if args[0] == "report":      # the test can fail: its chart's axes are box glyphs
        assert re.search(rb"[^\x00-\x7e]", utf8.stdout)
    assert not re.search(rb"[^\x00-\x7e]", plain.stdout + plain.stderr)
    assert plain.stdout.decode() == glyphs.to_ascii(utf8.stdout.decode())
    assert plain.stderr == utf8.stderr     # text just comes in ASCII, unannounced


def test_ascii_option_and_report_text():
    utf8 = run_cli(["report", str(DEMO_REC)])
    plain = run_cli(["report", str(DEMO_REC), "--ascii"])
    assert utf8.returncode == 0 and plain.returncode == 0, plain.stderr
    assert re.search(rb"[^\x00-\x7e]", utf8.stdout)
    assert not re.search(rb"[^\x00-\x7e]", plain.stdout)
    assert plain.stdout.decode() == glyphs.to_ascii(utf8.stdout.decode())
    # the JSON is ASCII already (\u escapes), and the same with --ascii
    assert run_cli(["--demo", "--once", "--json", "--ascii"]).stdout.isascii()


@pytest.mark.parametrize("args,instead", [
    (["--demo"], "`gpudisk-top --once`"),
    (["replay", str(DEMO_REC)], "`gpudisk-top report FILE`"),
    (["fleet", "--prometheus", "http://127.0.0.1:9"], "`gpudisk-top fleet --once`"),
])
def test_term_dumb_refuses_a_screen_in_one_line(args, instead):
    proc = run_cli(args, TERM="dumb")
    err = proc.stderr.decode()
    assert proc.returncode == 2 and proc.stdout == b""
    assert err.count("\n") == 1 and err.startswith("gpudisk-top: error: TERM=dumb"), err
    assert instead in err


def test_term_dumb_once_is_plain_text():
    proc = run_cli(["--demo", "--once"], TERM="dumb")
    assert proc.returncode == 0 and b"\x1b" not in proc.stdout and b"verdict:" in proc.stdout


# ---------------------------------------------------------------------------- a real terminal
@pytest.mark.parametrize("env", [{"LANG": "C", "TERM": "linux"}, {"LANG": "C", "NO_COLOR": "1"}])
def test_the_dashboard_draws_only_ascii_on_a_real_terminal(tmp_path, env):
    """The console script on a pseudo-terminal, as from the Linux console or a C locale:
    one line says why it draws in ASCII, and every byte drawn is ASCII (NO_COLOR: no
    colour either)."""
    err_path = tmp_path / "stderr"
    term = PtyTerminal([sys.executable, "-m", "gpudisk_top", "--demo", "--demo-start", "90"],
                       err_path, env=env_with(**env), rows=40, cols=120)
    try:
        deadline = time.monotonic() + 30 * slack()
        while b"DISK-STARVED" not in term.screen and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.5)                     # a tick or two more of drawing
        os.write(term.master, b"q")
        term.proc.wait(30 * slack())
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
            term.proc.wait()
        term.hang_up()
    drawn = bytes(term.screen)
    err = term.stderr()
    assert b"DISK-STARVED" in drawn and term.proc.returncode == 0, err
    assert not re.search(rb"[^\x00-\x7e]", drawn), re.findall(rb"[^\x00-\x7e]+", drawn)[:5]
    assert err.count("\n") == 1 and err.startswith("gpudisk-top: drawing in ASCII: "), err
    if "NO_COLOR" in env:
        hues, _greys = colours(drawn.decode("ascii"))
        assert not hues, sorted(hues, key=str)[:5]
