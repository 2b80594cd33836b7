"""The suite's one scheduling rule, for pytest-xdist: the tests that judge real load run
last, one after another, on a machine no other test of the suite is loading.

Most of the suite is CPU work that parallel workers finish in a fraction of the time (a
recording replayed, a screen drawn, a subprocess's output parsed). The real-load tests are
different: they start a real job beside fio or busy loops and judge what the machine does
(tests/test_real_jobs.py, the what-if harness). Beside a worker running the rest of the
suite they would judge the suite, not their scenario. So:

1. every test outside REAL_LOAD is spread over all the workers (xdist's `load` rule);
2. when none is left to send, the first worker to run dry keeps the REAL_LOAD tests and
   the others finish and exit;
3. once it is alone, that worker runs the REAL_LOAD tests in their collected order.

A module is in REAL_LOAD when any of its tests carries the `integration`, `counterfactual`
or `sysstat` mark; tests/conftest.py checks that on every collection, so a new real-load
test cannot slip into the parallel part. Without xdist (`-p no:xdist`, `-n 0`) the suite
runs in one process in collected order, as before."""

from __future__ import annotations

from xdist.scheduler import LoadScheduling

# the marks of a test that loads the machine's real disk or CPUs and judges the result
REAL_LOAD_MARKS = ("integration", "counterfactual", "sysstat")


def is_alone(nodeid: str, modules: frozenset[str]) -> bool:
    """Whether the test with this node id ("tests/test_x.py::test_y[id]") runs alone."""
    return nodeid.split("::", 1)[0].rsplit("/", 1)[-1] in modules


class AloneLastScheduling(LoadScheduling):
    """xdist's load scheduling for the parallel part, then the REAL_LOAD tests on one
    worker that has the machine to itself (the module docstring)."""

    def __init__(self, config, log=None, *, modules: frozenset[str]):
        super().__init__(config, log)
        self.modules = modules
        self.held: list[int] = []          # the REAL_LOAD tests, not yet sent
        self.alone_node = None             # the worker that will run them

    @property
    def tests_finished(self) -> bool:
        return not self.held and super().tests_finished

    @property
    def has_pending(self) -> bool:
        return bool(self.held) or super().has_pending

    def schedule(self) -> None:
        assert self.collection_is_completed
        if self.collection is None:
            if not self._check_nodes_have_same_collection():
                self.log("**Different tests collected, aborting run**")
                return
            self.collection = next(iter(self.node2collection.values()))
            alone = [is_alone(nodeid, self.modules) for nodeid in self.collection]
            self.held = [i for i, a in enumerate(alone) if a]
            self.pending[:] = [i for i, a in enumerate(alone) if not a]
            if self.maxschedchunk is None:
                self.maxschedchunk = len(self.collection)
        for node in self.nodes:
            self.check_schedule(node)

    def check_schedule(self, node, duration: float = 0) -> None:
        if self.pending or not self.held:
            # the parallel part (or, once released, the held tests on the one worker left):
            # xdist's rule, which ends a worker when nothing is left to send
            super().check_schedule(node, duration)
            return
        if node.shutting_down:
            return
        if self.alone_node is None or self.alone_node not in self.node2pending:
            self.alone_node = node
        if node is not self.alone_node:
            node.shutdown()
        elif len(self.node2pending) == 1:
            self.pending[:], self.held = self.held, []
            super().check_schedule(node, duration)

    def remove_node(self, node):
        crashitem = super().remove_node(node)
        if node is self.alone_node:
            self.alone_node = None
        for other in self.nodes:
            self.check_schedule(other)
        return crashitem
