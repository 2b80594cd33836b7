"""Turning the kernel's per-task delay accounting on for the duration of a run (--delayacct).

Since Linux 5.14 the time each task spends blocked on block I/O (/proc/PID/stat field 42,
what iotop shows as IO>) is accounted only while the sysctl kernel.task_delayacct is 1,
and it is 0 by default: the accounting costs a little on every context switch.  Without
it the loaders' blocked time is estimated (model/loaders.py).  Root may ask gpudisk-top to
switch it on while it runs; it is switched off again at exit if it was off before.
"""

from __future__ import annotations

SYSCTL = "/proc/sys/kernel/task_delayacct"
OFF_WARNING = ("kernel.task_delayacct is off: the time the job's loaders are blocked on reads "
               "is estimated from reads x r_await; `sysctl kernel.task_delayacct=1` (or "
               "--delayacct, as root) measures it")


class DelayAccounting:
    """enable() switches kernel.task_delayacct on and says what it did (one line, or None
    when it was on already); restore() puts back what was there.  Neither raises."""

    def __init__(self, path: str = SYSCTL) -> None:
        self.path = path
        self._was: str | None = None

    def enable(self) -> str | None:
        try:
            with open(self.path, encoding="ascii") as f:
                was = f.read().strip()
        except FileNotFoundError:
            return ("--delayacct: this kernel has no kernel.task_delayacct (before 5.14, "
                    "delay accounting is on unless booted with nodelayacct)")
        except OSError as err:
            return f"--delayacct: cannot read {self.path}: {err.strerror or err}"
        if was == "1":
            return None
        try:
            with open(self.path, "w", encoding="ascii") as f:
                f.write("1\n")
        except OSError as err:
            return (f"--delayacct: cannot switch delay accounting on ({err.strerror or err}; "
                    "it needs root and a writable /proc/sys); blocked time is estimated")
        self._was = was
        return "--delayacct: kernel.task_delayacct switched on; it is switched off at exit"

    def restore(self) -> None:
        if self._was is None:
            return
        try:
            with open(self.path, "w", encoding="ascii") as f:
                f.write(self._was + "\n")
        except OSError:
            pass
        self._was = None
