"""A test's own child processes: who they forked, whether one is gone, and killing them
quietly."""

from __future__ import annotations

import os


def children(pid: int) -> list[int]:
    """The PIDs pid forked that still live ([] when pid is gone)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def kill(pid: int) -> None:
    """SIGKILL to a process this test started; gone already is fine."""
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass


def state(pid: int) -> str | None:
    """The state letter of a live process ("S", "R", "Z"...), None when there is none."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def gone(pid: int) -> bool:
    """pid runs nothing any more: no such process, or a zombie (it runs nothing)."""
    return state(pid) in (None, "Z", "X")
