"""The `root` mark's one rule: a test that needs root (a loop device, a mount, unshare,
mknod, a link owned by or a process run as another user) carries
`@pytest.mark.root(reason="...")`, so `-m "not root"` leaves it out, and where this
process is not root it skips with that reason instead of failing."""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config, items):
    if os.geteuid() == 0:
        return
    for item in items:
        mark = item.get_closest_marker("root")
        if mark is not None:
            # a skip mark, not pytest.skip() in a hook: the report names the test's own file
            item.add_marker(pytest.mark.skip(reason=mark.kwargs.get("reason", "needs root")))
