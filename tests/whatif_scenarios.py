"""The counterfactual harness's scenarios (tests/whatif_harness.py runs them): each a real
job (tests/jobs/loader_job.py, or the torch DataLoader's), the load beside it, what
gpudisk-top knows of the device (a stored probe, or only what it saw the device do), and
the fixes its cause implies, which are measured whatever is predicted."""

from __future__ import annotations

import dataclasses
import importlib.util
import os

from whatif_load import FIO

TESTS = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(TESTS, "jobs", "loader_job.py")
TORCH_JOB = os.path.join(TESTS, "jobs", "torch_loader_job.py")
WINDOW_S = 1.2                  # one measuring segment


@dataclasses.dataclass
class Scenario:
    name: str
    title: str
    mode: str
    workers: int
    fixes: list[tuple[str, int | None]]      # what its cause implies: (fix, to)
    reads_factor: float | None = None        # disk/files: reads a sample, starving x this
    hogs: int = 0                            # busy loops beside the job (another user's)
    hogs_nice: int = 0                       # ... at this nice value
    neighbour_qd: int = 0                    # fio's 4 KiB reads of the job's data at this QD
    neighbour_job: int = 0                   # ... or another job (this many workers) on GPU 1
    wrapped: bool = False                    # under a launcher (`timeout`)
    cold_cache: bool = False                 # the data file kept out of the page cache
    job_args: tuple[str, ...] = ()
    window_s: float = WINDOW_S
    script: str = JOB                        # loader_job.py, or the torch DataLoader's
    probed: bool = True                      # gpudisk-top reads the harness's stored probe
    # before the prediction, the device seen near its ceiling: fio's 4 KiB reads at this
    # QD for seen_s seconds of a `record` (a dashboard that has run a while has seen its
    # device busy; issue 38's incident: fio at QD32, then the job alone); 0: a --once
    seen_qd: int = 0
    seen_s: float = 4.0


CKPT = ("--ckpt-every", "3.0", "--ckpt-mib", "2048")

SCENARIOS = [
    Scenario("latency-2", "latency-bound, 2 workers of 4 KiB O_DIRECT reads", "disk", 2,
             [("workers", 4), ("workers", 8)], reads_factor=3.0),
    Scenario("latency-4", "latency-bound, 4 workers", "disk", 4,
             [("workers", 8), ("workers", 16)], reads_factor=3.0),
    Scenario("latency-busy", "latency-bound, 4 workers beside 2 busy loops", "disk", 4,
             [("others", None), ("workers", 8)], reads_factor=3.0, hogs=2),
    Scenario("cpu-free", "own-CPU-bound, 1 decoding worker, a CPU free", "cpu", 1,
             [("workers", 2), ("workers", 4)]),
    Scenario("cpu-full", "own-CPU-bound, 4 decoding workers on every CPU", "cpu", 4,
             [("fewer-workers", 2), ("workers", 8)]),
    Scenario("wrapped", "own-CPU-bound under a launcher (timeout), 2 workers", "cpu", 2,
             [("fewer-workers", 1), ("workers", 4)], wrapped=True),
    Scenario("trainer", "trainer-bound: the loop's own Python, workers idle", "trainer", 2,
             [("workers", 4), ("workers", 8)]),
    Scenario("cache", "dataset that fits the page cache once warm, read cold", "files", 2,
             [("cache", None), ("workers", 4)], reads_factor=4.0, cold_cache=True),
    Scenario("checkpoint", "synchronous checkpoint (2 GiB + fsync, 3 s apart)",
             "checkpoint", 2, [("checkpoint", None), ("workers", 4)], job_args=CKPT,
             window_s=12.0),       # about three saves: a window's phase moves it little
    # issue 38: the CPUs another user's processes take at the moment (busy loops in
    # sessions of their own; at nice 19 too, which yields nothing to a job in another
    # session: the scheduler shares the CPUs among sessions before nice counts)
    Scenario("cpu-free-busy", "own-CPU-bound, 1 decoding worker beside another user's "
             "busy loop", "cpu", 1, [("workers", 2), ("workers", 4), ("others", None)],
             hogs=1),
    Scenario("cpu-free-niced", "own-CPU-bound, 1 decoding worker beside 2 busy loops at "
             "nice 19", "cpu", 1, [("workers", 2), ("workers", 4)], hogs=2, hogs_nice=19),
    # issue 38: no stored probe: the device capped at what it was seen doing
    Scenario("unprobed-once", "latency-bound, 2 workers, no probe, the device seen only "
             "at the job's own queue (a --once)", "disk", 2,
             [("workers", 4), ("workers", 8)], reads_factor=3.0, probed=False),
    Scenario("unprobed-cache", "cold dataset that fits the page cache, no probe", "files", 2,
             [("cache", None), ("workers", 4)], reads_factor=4.0, cold_cache=True,
             probed=False),
]
if FIO is not None:
    SCENARIOS.append(Scenario("neighbour", "latency-bound, 4 workers beside fio's 4 KiB reads "
                              "at QD8", "disk", 4, [("neighbour", None), ("workers", 8)],
                              reads_factor=3.0, neighbour_qd=8))
    SCENARIOS.append(Scenario("neighbour-job", "latency-bound, 3 workers beside another job "
                              "of 12 reading the same disk", "disk", 3,
                              [("neighbour", None), ("workers", 6)], reads_factor=3.0,
                              neighbour_job=12))
    SCENARIOS.append(Scenario("unprobed-seen", "latency-bound, 2 workers, no probe, the "
                              "device seen under fio's reads at QD32 before (issue 38's "
                              "incident)", "disk", 2, [("workers", 4), ("workers", 8)],
                              reads_factor=3.0, probed=False, seen_qd=32))
if importlib.util.find_spec("torch") is not None:
    # the same as latency-2 through a real torch.utils.data.DataLoader
    SCENARIOS.append(Scenario("torch-latency-2", "latency-bound, torch DataLoader, 2 workers",
                              "disk", 2, [("workers", 4), ("workers", 8)], reads_factor=3.0,
                              script=TORCH_JOB))

# the scenarios the suite's counterfactual test runs (tests/test_whatif_counterfactual.py);
# the others by hand (`--only`): the neighbour beside fio (the neighbour beside another job
# stands for it), and issue 38's (CI's whole run must stay under 30 minutes)
BY_HAND = {"neighbour", "cpu-free-busy", "cpu-free-niced", "unprobed-once",
           "unprobed-cache", "unprobed-seen"}
