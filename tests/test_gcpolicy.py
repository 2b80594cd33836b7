"""The collector's setting of a long session (session/gcpolicy.py): what steady() sets and
leaves, that cyclic garbage is still freed within its bound, and that `record` and `serve`
run their loops under it.  Each case runs in a Python of its own: the setting is the
process's."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from gpudisk_top.session.gcpolicy import YOUNG_OBJECTS


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_steady_raises_the_youngest_threshold_and_nothing_else():
    out = _python("""
        import gc
        from gpudisk_top.session.gcpolicy import steady
        gc.set_threshold(700, 7, 9)
        print(steady())
        gc.set_threshold(10 ** 6, 7, 9)         # a higher one set before is kept
        print(steady())
        gc.set_threshold(0, 7, 9)               # collection switched off stays off
        print(steady())
        gc.set_threshold(700, 10, 10)
        gc.disable()
        steady()
        print(gc.isenabled())
    """)
    assert out.splitlines() == [str((YOUNG_OBJECTS, 7, 9)), str((10 ** 6, 7, 9)),
                                str((0, 7, 9)), "False"]


def test_cyclic_garbage_is_still_freed_within_the_bound():
    """Five bounds' worth of cycles, made and dropped one by one: the collector runs, the
    cycles waiting for it reach the bound (the setting is in force) and never pass it, and
    every one is freed."""
    out = _python(f"""
        import gc
        from gpudisk_top.session.gcpolicy import steady
        steady()
        gc.collect()
        made, dead, runs = [0], [0], [0]
        class Node:
            __slots__ = ("other",)             # one container each: no __dict__
            def __del__(self):
                dead[0] += 1
        def count(phase, info):
            runs[0] += phase == "stop"
        gc.callbacks.append(count)
        most = 0
        for i in range(5 * {YOUNG_OBJECTS}):
            a, b = Node(), Node()
            a.other, b.other = b, a            # a cycle: reference counting never frees it
            made[0] += 1
            del a, b
            most = max(most, made[0] - dead[0] // 2)
        gc.collect()
        print(runs[0], most, made[0] - dead[0] // 2)
    """)
    runs, most, waiting = map(int, out.split())
    assert runs >= 5
    # two containers a cycle: at most half the bound's cycles wait, and at the default
    # threshold (700) no more than 350 would
    assert YOUNG_OBJECTS // 4 < most <= YOUNG_OBJECTS // 2 + 1
    assert waiting == 0


def _thresholds_after(argv: list[str]) -> str:
    """`gpudisk-top ARGV`'s exit status and the collector's thresholds after its loop."""
    return _python(f"""
        import gc
        from gpudisk_top.cli import main
        gc.set_threshold(700, 10, 10)
        status = main({argv!r})
        print(status, gc.get_threshold())
    """)


def test_record_and_serve_sample_under_the_setting(tmp_path):
    steady = f"0 {(YOUNG_OBJECTS, 10, 10)}"
    out = tmp_path / "demo.gdtrec"
    assert _thresholds_after(["record", "--demo", "-o", str(out), "-i", "0.2",
                              "--duration", "1", "-q"]) == steady
    assert out.stat().st_size > 0
    assert _thresholds_after(["serve", "--demo", "--listen", "127.0.0.1:0", "-i", "0.2",
                              "--count", "3"]) == steady
