"""Snapshot tests: regenerate every README screenshot (screenshots/make.py) and compare.

The screen's text is compared always; the SVG too when the installed Textual made the
committed one (an SVG's markup changes between Textual releases, its text does not)."""

from __future__ import annotations

import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "screenshots"))

import make  # noqa: E402

REGENERATE = "run `python screenshots/make.py` and review the diff if the change is intended"


@pytest.mark.parametrize("name", list(make.SHOTS))
def test_screenshot_matches(name):
    svg, text = make.render(name)
    with open(os.path.join(ROOT, "screenshots", f"{name}.txt")) as f:
        assert text == f.read(), f"{name}: the screen changed; {REGENERATE}"
    with open(os.path.join(ROOT, "screenshots", "meta.json")) as f:
        meta = json.load(f)
    if meta["textual"] == make.textual_version():
        with open(os.path.join(ROOT, "screenshots", f"{name}.svg")) as f:
            assert make.normalize(svg) == make.normalize(f.read()), f"{name}.svg differs; {REGENERATE}"


@pytest.mark.parametrize("view,width,height",
                         [(v, w, h) for v in make.MATRIX for w, h in make.MATRIX_SIZES])
def test_matrix_snapshot_matches(view, width, height):
    """Every view at every size from 80x24 to 250x70 (screenshots/matrix/)."""
    text = make.render_matrix(view, width, height)
    with open(make.matrix_path(view, width, height)) as f:
        assert text == f.read(), f"{view} at {width}x{height}: the screen changed; {REGENERATE}"
    lines = text.splitlines()
    assert len(lines) == height
    assert all(len(line) <= width for line in lines)
    # nothing clipped without a word: the dashboard shows its footer's keys at every
    # size, a device's detail (a screen of its own) says what is below and, in its
    # footer, how to go back
    last = lines[-1].lstrip()
    if view == "device":
        assert last.startswith("esc Back") and lines[-2].lstrip().startswith("↓"), lines[-2:]
    else:
        assert last.startswith("q Quit"), last


def test_sizes_cover_80x24_and_160x48():
    sizes = {(w, h) for w, h, *_ in make.SHOTS.values()}
    assert {(80, 24), (160, 48)} <= sizes


def test_the_manual_shows_every_screenshot():
    """README shows the overview; the dashboard's page (docs/dashboard.md) every shot
    make.py makes, but replay's, which is on its page (docs/recording.md)."""
    from test_readme import doc, readme

    assert "](screenshots/overview.svg)" in readme()
    pages = doc("dashboard.md") + doc("recording.md")
    for name in make.SHOTS:
        assert f"](../screenshots/{name}.svg)" in pages, name
