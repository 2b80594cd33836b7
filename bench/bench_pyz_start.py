"""Start time to the first --once frame: the installed tool against gpudisk-top.pyz, from
its cache copy and straight from the zip (GPUDISK_TOP_PYZ_CACHE=off), interleaved so a
busy machine weighs on each alike.  Medians of N runs (issue 39 asks the pyz within 1.5x).

Usage: python bench/bench_pyz_start.py [dist/gpudisk-top.pyz] [N]"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time


def once_s(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv + ["--once", "--json", "--demo"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    pyz = sys.argv[1] if len(sys.argv) > 1 else "dist/gpudisk-top.pyz"
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    installed = shutil.which("gpudisk-top", path=os.path.dirname(sys.executable))
    env = dict(os.environ)
    cases = {"installed": ([installed], env),
             "pyz, cache": ([sys.executable, pyz], env),
             "pyz, from the zip": ([sys.executable, pyz], {**env, "GPUDISK_TOP_PYZ_CACHE": "off"})}
    for argv, case_env in cases.values():   # warm: bytecode written, cache copy made
        once_s(argv, case_env)
    times = {name: [] for name in cases}
    for _ in range(runs):
        for name, (argv, case_env) in cases.items():
            times[name].append(once_s(argv, case_env))
    base = statistics.median(times["installed"])
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, "
          f"median of {runs}")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"{name:>18}: {med * 1000:6.0f} ms  x{med / base:.2f}")


if __name__ == "__main__":
    main()
