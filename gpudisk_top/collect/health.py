"""Device health, read slowly: every physical disk's reading (read_device: smartctl's,
collect/health_smartctl.py, run bounded by collect/health_children.py; the kernel's hwmon,
collect/health_sysfs.py, filling what it lacks or standing in for it), polled on threads
of its own (HealthPoller).

What is read is each whole disk found under /sys/block that is not virtual
(health_sysfs.physical_disks), up to PARALLEL_READS disks at a time.  A disk asleep
(smartctl -n standby) is not asked again through the kernel either, and its last reading
stands.  Nothing here writes to a device node, and nothing runs on the sampling thread:
HealthPoller reads on threads of its own and hands each poll's readings over as one
immutable HealthSnapshot (next_snapshot: the one rule for every poller, the simulator's
too), which the Sampler attaches to every Sample by reference.  One disk that cannot be
read (a bug) is that disk's reading, not the poll's; a poll that fails as a whole is
HealthPoller.error, which the Sampler says once.

Cost (bench/bench_health.py): smartctl is a process per disk per poll, a few ms of CPU
each (the figures are in the README's Performance table); at the default interval of
600 s that is a hundred-thousandth of a core per disk.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from gpudisk_top.collect.health_children import SMARTCTL_TIMEOUT_S, Children, run_smartctl
from gpudisk_top.collect.health_smartctl import (ASLEEP, DEV_DIR, NOT_INSTALLED, find_smartctl,
                                                 parse_smartctl, smartctl_argv)
from gpudisk_top.collect.health_sysfs import merge_sysfs, physical_disks, read_sysfs
from gpudisk_top.collect.roots import Roots
from gpudisk_top.collect.sample import HEALTH_SMARTCTL, DiskHealth, HealthSnapshot, same_drive

DEFAULT_INTERVAL_S = 600.0


def read_device(roots: Roots, device: str, smartctl: str | None, dev_dir: str = DEV_DIR,
                why_not: str | None = None, timeout_s: float = SMARTCTL_TIMEOUT_S,
                children: Children | None = None) -> DiskHealth:
    """One disk's health now: smartctl's reading (smartctl None: not installed), the
    kernel's filling what it lacks or standing in for it.  why_not: the disk is known to
    have no SMART (virtio): nothing is run.  A disk asleep (-n standby) is not asked
    again through the kernel either: drivetemp reads a SATA disk's temperature with SCT
    and SMART commands, which may reset its spin-down timer.  read_cpu_s is the CPU it
    cost (smartctl's own, from its rusage, and this thread's).  Never raises for what a
    disk or smartctl answers."""
    wall = time.time()
    cpu0 = time.thread_time()
    child_cpu_s = None
    if why_not is not None:
        h = DiskHealth(device=device, read_wall_s=wall, unreadable_reason=why_not)
    elif smartctl is None:
        h = DiskHealth(device=device, read_wall_s=wall, unreadable_reason=NOT_INSTALLED)
    else:
        argv = smartctl_argv(smartctl, device, dev_dir)
        rc, out, err, child_cpu_s = run_smartctl(argv, timeout_s, children)
        if err is not None:
            h = DiskHealth(device=device, read_wall_s=wall, source=HEALTH_SMARTCTL,
                           unreadable_reason=err)
        else:
            h = parse_smartctl(out, device, rc, wall, path=argv[-1])
    if why_not is None and h.unreadable_reason != ASLEEP:
        h = merge_sysfs(h, read_sysfs(roots, device, wall))
    h.read_cpu_s = time.thread_time() - cpu0 + (child_cpu_s or 0.0)
    return h


# ---------------------------------------------------------------------------- the poller
# smartctl processes at once: a node's disks answer in parallel (each is its own device;
# an awake HDD takes about a second for -x), so a pass over 16 takes a quarter of the
# time, while a few processes at a time keep a node's HBA and CPUs out of it
PARALLEL_READS = 4
NOT_READ_YET = "not read yet: smartctl had not answered when this was taken"


def next_snapshot(last: HealthSnapshot | None, readings: dict[str, DiskHealth],
                  polled_wall_s: float) -> HealthSnapshot:
    """The snapshot a poll hands over: its readings, with `first` (each disk's first
    readable reading of the run) carried on from `last` and the polls counted.  The one
    rule for every poller (this module's, the simulator's).  Never raises."""
    first = dict(last.first) if last is not None else {}
    for device, h in readings.items():
        old = first.get(device)
        if h.readable and (old is None or not same_drive(old, h)):
            first[device] = h      # a drive replaced in the slot starts its trend again
    return HealthSnapshot(readings=readings, first=first, polled_wall_s=polled_wall_s,
                          polls=(last.polls if last is not None else 0) + 1)


class HealthPoller:
    """Reads every physical disk's health every interval_s on a daemon thread of its own.

        poller = HealthPoller(roots, interval_s=600)
        poller.start()
        poller.latest          # the latest HealthSnapshot (None before the first poll)
        poller.wait_first(10)  # block until the first poll is in (--once)
        poller.publish_partial()   # what the first poll has read so far (--once)
        poller.close()         # stop: kill a running smartctl, join the thread

    The snapshot is replaced whole at each poll (never mutated), so a reader on another
    thread takes it with one attribute read and no lock.  The first readable reading of
    each drive is kept as `first` (the trend since start; a drive replaced in the slot
    starts again).  smartctl: its path, None to find it on PATH, or False for none (the
    kernel's view only); up to `parallel` disks are read at once.  dev_dir: where the
    disks' device nodes are (--devfs).  `error`: why the latest poll failed (a bug), said
    once in the samples' warnings by the Sampler."""

    def __init__(self, roots: Roots | None = None, interval_s: float = DEFAULT_INTERVAL_S,
                 smartctl: str | None | bool = None, dev_dir: str = DEV_DIR,
                 timeout_s: float = SMARTCTL_TIMEOUT_S,
                 on_poll: Callable[[HealthSnapshot], None] | None = None,
                 parallel: int = PARALLEL_READS) -> None:
        self.roots = roots or Roots()
        self.interval_s = interval_s
        self.smartctl = (find_smartctl() if smartctl is None else smartctl) or None
        self.dev_dir = dev_dir
        self.timeout_s = timeout_s
        self.on_poll = on_poll
        self.parallel = max(1, parallel)
        self.latest: HealthSnapshot | None = None
        self.error: str | None = None             # why the latest poll failed (a bug)
        self.poll_thread_id: int | None = None    # the thread polls run on (tests)
        self._stop = threading.Event()
        self._polled = threading.Event()
        self._thread: threading.Thread | None = None
        self._children = Children()
        self._lock = threading.Lock()
        self._progress: tuple[dict, dict] = ({}, {})   # this poll's disks, those read

    def _read_one(self, device: str, why_not: str | None) -> DiskHealth:
        try:
            return read_device(self.roots, device, self.smartctl, self.dev_dir, why_not,
                               self.timeout_s, self._children)
        except Exception as err:  # noqa: BLE001 - one disk's failure (a bug) is its reading, not the poll's
            return DiskHealth(device=device, read_wall_s=time.time(),
                              unreadable_reason=f"health read failed: {type(err).__name__}: {err}")

    def _read_all(self, disks: dict[str, str | None]) -> dict[str, DiskHealth]:
        """Every disk's reading, up to `parallel` at a time, on daemon threads (a wedged
        smartctl never holds the process at exit)."""
        done: dict[str, DiskHealth] = {}
        with self._lock:
            self._progress = (disks, done)
        todo = list(disks.items())

        def work() -> None:
            while not self._stop.is_set():
                with self._lock:
                    if not todo:
                        return
                    device, why_not = todo.pop(0)
                h = self._read_one(device, why_not)
                with self._lock:
                    done[device] = h

        threads = [threading.Thread(target=work, name=f"gpudisk-top-health-{i}", daemon=True)
                   for i in range(min(self.parallel, len(todo)))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return {d: done[d] for d in disks if d in done}

    def poll(self) -> HealthSnapshot | None:
        """Read every disk once, now, on the calling thread; publish and return it
        (None when close() stopped it half way: nothing is published then)."""
        self.poll_thread_id = threading.get_ident()
        before = self.latest.readings if self.latest is not None else {}
        readings = self._read_all(physical_disks(self.roots))
        if self._stop.is_set():
            return None
        for device, h in readings.items():
            old = before.get(device)
            if h.unreadable_reason == ASLEEP and old is not None and old.readable:
                readings[device] = old   # a disk asleep is not read: its last reading stands
        with self._lock:    # publish_partial() publishes only while latest is None
            snap = next_snapshot(self.latest, readings, time.time())
            self.latest = snap
        self._polled.set()
        if self.on_poll is not None:
            self.on_poll(snap)
        return snap

    def publish_partial(self) -> HealthSnapshot | None:
        """Before the first poll is in: publish what it has read so far, each disk not
        yet read as unreadable NOT_READ_YET (`--once` makes its report with that rather
        than wait for the slowest disk).  Returns the latest snapshot."""
        with self._lock:
            if self.latest is not None:
                return self.latest
            disks, done = self._progress
            wall = time.time()
            readings = {d: done.get(d) or DiskHealth(device=d, read_wall_s=wall,
                                                     unreadable_reason=NOT_READ_YET)
                        for d in disks}
            self.latest = HealthSnapshot(
                readings=readings, first={d: h for d, h in readings.items() if h.readable},
                polled_wall_s=None, polls=0)
            return self.latest

    def start(self) -> "HealthPoller":
        if self._thread is None and self.interval_s > 0 and not self._stop.is_set():
            self._thread = threading.Thread(target=self._run, name="gpudisk-top-health",
                                            daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
                self.error = None
            except Exception as err:  # noqa: BLE001 - a bug must not end the thread: say it, keep the last
                self.error = f"device health poll failed: {type(err).__name__}: {err}"
                self._polled.set()
            self._stop.wait(self.interval_s)

    def wait_first(self, timeout_s: float) -> bool:
        """Wait until the first poll is in; False when it is not after timeout_s."""
        return self._polled.wait(timeout_s)

    def close(self, join_timeout_s: float = 2.0) -> None:
        """Stop polling: kill the smartctl processes still running (our own children)
        and wait up to join_timeout_s for the poll thread to end."""
        self._stop.set()
        self._children.kill_all()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(join_timeout_s)
