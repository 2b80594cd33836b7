#!/usr/bin/env python3
"""Make the README's fleet screenshots from Prometheus's captured answers.

The fleet screen (FleetApp) runs through Textual's test harness on a CannedSource: the
FleetSource's face over tests/fixtures/fleet/, the answers a real Prometheus gave to the
fleet's own queries over a simulated fleet (tests/fixtures/fleet/capture.py), turned into
FleetViews and a NodeTimeline by the fleet's build_view and build_timeline, at the
capture's time.  So the shots are deterministic and the data is real.

As screenshots/make.py does for the dashboard: each shot saved as SVG and text; a text
matrix (screenshots/matrix/fleet-*.txt) at 80x24 and 120x40; tests/test_ui_fleet.py
regenerates them and compares.

usage: python screenshots/fleet_shots.py            # rewrite every shot
       python screenshots/fleet_shots.py --check    # exit 1 if any differs
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import make  # noqa: E402  (its time zone, SVG normalization and Textual version)

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "fleet")
URL = "http://prometheus:9090"
REGENERATE = "run `python screenshots/fleet_shots.py` and review the diff if the change is intended"

# name -> (width, height, view, caption); view: what the screen shows (see _drive)
SHOTS = {
    "fleet": (120, 40, "table", "gpudisk-top fleet: 7 nodes through one Prometheus, starved "
                                "first, a killed node stale, a target down"),
    "fleet-node": (120, 40, "node", "enter on the disk-starved node: its timeline from one "
                                    "range query, on the dashboard's time axis"),
    "fleet-job": (120, 40, "job", "J: job llama's nodes side by side, the straggler named"),
}
MATRIX = ("table", "error")
MATRIX_SIZES = ((80, 24), (120, 40))


def _answer(name: str):
    from gpudisk_top.fleet.promapi import parse_answer
    with open(os.path.join(FIXTURES, name)) as f:
        return parse_answer(json.load(f), f"Prometheus at {URL}")


class CannedSource:
    """refresh() and node_timeline() as FleetSource's, from the captured answers."""

    group_by = "instance"
    job_label = "training_job"
    url = URL

    def __init__(self) -> None:
        with open(os.path.join(FIXTURES, "meta.json")) as f:
            self.meta = json.load(f)
        self.filters: dict[str, str] = {}
        self.now_s = float(self.meta["table_at_s"])

    def instance(self, name: str) -> str:
        return self.meta["nodes"][name]

    def refresh(self, now_s=None, spark=None):
        from gpudisk_top.fleet.table import build_view
        return build_view(_answer("table.json"), _answer("spark.json"), self.now_s,
                          self.group_by, self.job_label, url=URL, ledger=_answer("ledger.json"))

    def failed(self, error: str, after_s: float):
        """The view of a refresh that failed after_s after the table's."""
        from gpudisk_top.fleet.table import build_view
        from gpudisk_top.fleet.promapi import QueryResult
        view = build_view(QueryResult.failed(f"Prometheus at {URL}: {error}"), None,
                          self.now_s + after_s, url=URL)
        return view

    def node_timeline(self, node: str, window_s: float, width: int, now_s=None):
        from gpudisk_top.fleet.timeline import build_timeline
        tl = self.meta["timeline"]
        return build_timeline(_answer("timeline-disk.json"), node, tl["start"], tl["end"],
                              tl["step"])


async def _drive(app, pilot, source, view: str) -> None:
    app.apply(source.refresh())
    await pilot.pause()
    if view == "error":
        app.apply(source.failed("connection refused", 42.0))
    elif view in ("node", "job"):
        table = app.query_one("FleetTable")
        while table.cursor != source.instance("disk"):
            await pilot.press("down")
        await pilot.press("J" if view == "job" else "enter")
        if view == "job":
            picker = app.screen
            options = picker.query_one("OptionList")
            options.highlighted = [g.job for g in picker.jobs].index("llama")
            await pilot.press("enter")
        await app.workers.wait_for_complete()
    await pilot.pause()


async def _shoot(width: int, height: int, view: str) -> tuple[str, str]:
    from gpudisk_top.ui.fleet_app import FleetApp

    source = CannedSource()
    app = FleetApp(source, interval_s=5.0, autostart=False)
    async with app.run_test(size=(width, height)) as pilot:
        await _drive(app, pilot, source, view)
        svg = app.export_screenshot(title=f"gpudisk-top fleet --prometheus {URL}  ({width}x{height})")
        strips = app.screen._compositor.render_strips()
        text = "\n".join("".join(seg.text for seg in s).rstrip() for s in strips) + "\n"
    return svg, text


def render(name: str) -> tuple[str, str]:
    """(svg, text) of one shot."""
    make._fixed_zone()
    width, height, view, _ = SHOTS[name]
    return asyncio.run(_shoot(width, height, view))


def render_matrix(width: int, height: int, view: str = "table") -> str:
    make._fixed_zone()
    return asyncio.run(_shoot(width, height, view))[1]


def matrix_path(width: int, height: int, view: str = "table") -> str:
    return os.path.join(make.MATRIX_DIR, f"fleet-{view}-{width}x{height}.txt")


def main() -> int:
    check = "--check" in sys.argv[1:]
    differ = []
    outputs = []
    for view in MATRIX:
        for width, height in MATRIX_SIZES:
            outputs.append((matrix_path(width, height, view), render_matrix(width, height, view)))
    for name in SHOTS:
        svg, text = render(name)
        outputs += [(os.path.join(HERE, f"{name}.svg"), svg),
                    (os.path.join(HERE, f"{name}.txt"), text)]
    for path, content in outputs:
        old = open(path).read() if os.path.exists(path) else None
        same = old is not None and (make.normalize(old) == make.normalize(content)
                                    if path.endswith(".svg") else old == content)
        if not same:
            differ.append(path)
            if not check:
                with open(path, "w") as f:
                    f.write(content)
    for path in differ:
        print(("differs: " if check else "wrote: ") + os.path.relpath(path))
    return 1 if check and differ else 0


if __name__ == "__main__":
    sys.exit(main())
