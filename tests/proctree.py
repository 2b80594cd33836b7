"""A test's own child processes: who they forked, and killing them quietly."""

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
