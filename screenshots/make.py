#!/usr/bin/env python3
"""Make the README's screenshots from the simulator at a fixed seed.

Each shot drives the real dashboard (GpuDiskApp) through Textual's test harness: the demo
scenario, N samples, some keys, then the screen is saved as SVG and as plain text.  The
snapshot tests (tests/test_ui_snapshots.py) regenerate every shot and compare: the text
always, the SVG when the installed Textual is the one that made it (screenshots/meta.json).

Beside the README's shots, a matrix of text-only snapshots (screenshots/matrix/): each
view of MATRIX at each of MATRIX_SIZES, from 80x24 to 250x70.

usage: python screenshots/make.py            # rewrite every shot
       python screenshots/make.py --check    # exit 1 if any differs
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from gpudisk_top.collect.source import simulated_source  # noqa: E402

# name -> (width, height, scenario, samples, keys, caption)
SHOTS = {
    "overview": (120, 40, "demo", 100, [],
                 "The simulated 8-GPU node 40 s into a disk-starvation episode"),
    "episode": (120, 40, "demo", 130, ["e"],
                "The episode list (e) with the selected episode's evidence"),
    "small-80x24": (80, 24, "demo", 100, [], "The same moment at 80x24"),
    "help": (120, 40, "demo", 30, ["question_mark"], "The help screen (?)"),
    "large-160x48": (160, 48, "demo", 230, ["p"],
                     "160x48 with the GPU process list (p) in a cpu-starved episode"),
    "io-view": (120, 40, "busy-unrelated-disk-load", 60, ["i"],
                "I/O by process (i): an unrelated tar loading the backup disk, the job's "
                "workers on the NVMe"),
    "device": (120, 40, "demo", 100, ["tab", "enter"],
               "Enter on a disk: sdb's detail in a disk-starved episode"),
    # a replay: "scenario" is the recording, "samples" where it starts, keys as typed
    "replay": (120, 40, "replay:examples/demo-simulated.gdtrec", 0, ["n", "n", "full_stop"],
               "gpudisk-top replay examples/demo-simulated.gdtrec, n twice: the second "
               "episode, one step in"),
}
ORIGIN = simulated_source("demo", 0)

# view -> (scenario, samples, keys): each at every size below, text only
MATRIX = {
    "episode": ("demo", 100, []),                                  # mid disk-starved episode
    "scrolled": ("demo", 230, ["tab", "tab"] + ["left"] * 12),     # the timeline 60 s back
    "io": ("busy-unrelated-disk-load", 60, ["i"]),                 # I/O by process: tar first
    "device": ("demo", 100, ["tab", "enter"]),                     # sdb's detail
    "nogpu": ("nogpu:idle-other-disk-load", 30, []),               # no NVIDIA driver
    "nocolor": ("nocolor:demo", 100, []),                          # NO_COLOR
}
MATRIX_SIZES = ((80, 24), (120, 40), (200, 60), (250, 70))
MATRIX_DIR = os.path.join(HERE, "matrix")


def _fixed_zone() -> None:
    os.environ["TZ"] = "UTC"  # the clock labels must not depend on where this runs
    time.tzset()


def _app(scenario: str, samples: int):
    """The dashboard on the simulator, or (scenario "replay:FILE") replay of a recording as
    `gpudisk-top replay FILE` opens it."""
    if scenario.startswith("replay:"):
        from gpudisk_top.commands.replay import replay_origin
        from gpudisk_top.record import Recording
        from gpudisk_top.ui.replay_app import ReplayApp

        name = scenario.split(":", 1)[1]
        rec = Recording.open(os.path.join(os.path.dirname(HERE), name))
        return (ReplayApp(rec, replay_origin(rec, name), start_index=samples, show_self=False),
                f"replay {name}")
    from gpudisk_top.sim import Simulator, builtin
    from gpudisk_top.ui.app import GpuDiskApp

    kind, _, name = scenario.rpartition(":")
    if kind == "nocolor":
        os.environ["NO_COLOR"] = "1"     # Textual reads it as the app is made
    sim = Simulator(builtin(name), seed=0)
    if kind == "nogpu":
        # a node without the NVIDIA driver: the real collector on a library that is not there
        from gpudisk_top.collect.gpu import GpuCollector
        from gpudisk_top.sim.fake_nvml import FakeNvml
        sim.gpu_collector = GpuCollector(nvml=FakeNvml.missing_library())
    app = GpuDiskApp(sim, 1.0, ORIGIN, autostart=False, show_self=False)
    os.environ.pop("NO_COLOR", None)     # read; the shots after this one are in colour
    return app, "--demo"


async def _shoot(width: int, height: int, scenario: str, samples: int, keys: list[str]):
    app, title = _app(scenario, samples)
    async with app.run_test(size=(width, height)) as pilot:
        if not scenario.startswith("replay:"):
            app.advance(samples)    # a replay opened at `samples` already
        await pilot.pause()
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        svg = app.export_screenshot(title=f"gpudisk-top {title}  ({width}x{height})")
        strips = app.screen._compositor.render_strips()
        text = "\n".join("".join(seg.text for seg in s).rstrip() for s in strips) + "\n"
    return svg, text


def render(name: str) -> tuple[str, str]:
    """(svg, text) of one shot."""
    _fixed_zone()
    width, height, scenario, samples, keys, _ = SHOTS[name]
    return asyncio.run(_shoot(width, height, scenario, samples, keys))


def normalize(svg: str) -> str:
    """Rich names an SVG's CSS classes after a hash of its segments' reprs, which carry
    per-run ids; the picture is the same."""
    import re
    return re.sub(r"terminal-\d+", "terminal-ID", svg)


def textual_version() -> str:
    from importlib.metadata import version
    return version("textual")


def render_matrix(view: str, width: int, height: int) -> str:
    """The text of one matrix snapshot."""
    _fixed_zone()
    scenario, samples, keys = MATRIX[view]
    return asyncio.run(_shoot(width, height, scenario, samples, keys))[1]


def matrix_path(view: str, width: int, height: int) -> str:
    return os.path.join(MATRIX_DIR, f"{view}-{width}x{height}.txt")


def main() -> int:
    check = "--check" in sys.argv[1:]
    differ = []
    os.makedirs(MATRIX_DIR, exist_ok=True)
    for view in MATRIX:
        for width, height in MATRIX_SIZES:
            text = render_matrix(view, width, height)
            path = matrix_path(view, width, height)
            if not os.path.exists(path) or open(path).read() != text:
                differ.append(path)
                if not check:
                    with open(path, "w") as f:
                        f.write(text)
    for name in SHOTS:
        svg, text = render(name)
        for ext, content in (("svg", svg), ("txt", text)):
            path = os.path.join(HERE, f"{name}.{ext}")
            old = open(path).read() if os.path.exists(path) else None
            same = old is not None and (normalize(old) == normalize(content) if ext == "svg"
                                        else old == content)
            if not same:
                differ.append(path)
                if not check:
                    with open(path, "w") as f:
                        f.write(content)
    if not check:
        with open(os.path.join(HERE, "meta.json"), "w") as f:
            json.dump({"textual": textual_version(), "shots": {n: s[5] for n, s in SHOTS.items()}},
                      f, indent=2)
            f.write("\n")
    for path in differ:
        print(("differs: " if check else "wrote: ") + os.path.relpath(path))
    return 1 if check and differ else 0


if __name__ == "__main__":
    sys.exit(main())
