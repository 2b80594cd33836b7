"""Live mode: the sampling loop, source -> Stepper (Model, Verdict) -> History and
hooks, on its own thread, ticking on session.ticker's grid.

The dashboard runs one Feed; a slow NVML call or a hung disk read blocks this thread, never
the screen (which shows the feed as stale).  Hooks let a recorder or an exporter see every
raw sample from the same thread, so a slow screen never drops one.  UI-free.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from gpudisk_top.collect.roots import FileCache
from gpudisk_top.verdict.detect import Episode, Thresholds, Verdict
from gpudisk_top.model.history import History
from gpudisk_top.model.snapshot import Model
from gpudisk_top.verdict.step import Stepper, StepperViews
from gpudisk_top.session.detail import after_step, slow_detail
from gpudisk_top.session.ticker import Ticker, stepped_interval

INTERVALS_S = (0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0)


@dataclass
class Update:
    """What the screen needs after one sample."""

    seq: int
    model: Model
    verdict: Verdict               # the first sample's is judged on its GPUs only (model.step)
    episodes: list[Episode] = field(default_factory=list)
    sample_ms: float = 0.0         # how long reading the sources took
    self_cpu_pct: float | None = None
    self_rss_mb: float | None = None
    pending_intervals: int = 0     # how long the raw starved state has held so far
    fired: list = field(default_factory=list)       # alerts fired by this sample
    active_alerts: list = field(default_factory=list)  # alerts still holding
    free_space: list = field(default_factory=list)  # watched paths (gpudisk_top.watch)


class SelfStats:
    """This process's own CPU % (of one core) and RSS, from /proc/self.  The two files stay
    open and are re-read with pread (this runs every sample, beside costly jobs)."""

    def __init__(self) -> None:
        self._ticks = os.sysconf("SC_CLK_TCK")
        self._page_mb = os.sysconf("SC_PAGE_SIZE") / 2**20
        self._last: tuple[float, float] | None = None
        self._files = FileCache(max_files=2)

    def read(self) -> tuple[float | None, float | None]:
        now = time.monotonic()
        stat = self._files.read("/proc/self/stat")
        statm = self._files.read("/proc/self/statm")
        try:
            fields = stat.rsplit(")", 1)[1].split()
            cpu_s = (int(fields[11]) + int(fields[12])) / self._ticks
            rss_mb = int(statm.split()[1]) * self._page_mb
        except (AttributeError, ValueError, IndexError):
            return None, None
        pct = None
        if self._last is not None and now > self._last[0]:
            pct = (cpu_s - self._last[1]) / (now - self._last[0]) * 100
        self._last = (now, cpu_s)
        return pct, rss_mb

    def close(self) -> None:
        self._files.close()


class Feed(StepperViews):
    """Samples `source` every interval_s on a thread and calls on_update(Update) there.

    source: a SampleSource (collect/sample_source.py: the live Sampler, the simulator),
    closed by stop(); its notes stay in it for the command that opened it to say.
    on_sample: called with each raw Sample first (the recorder); what it returns (None, or
    why the sample could not be kept) or raises is shown as sink_error.
    hooks: gpudisk_top.exporter.hooks.SampleHooks (metrics, alerts, free space), fed each
    Model and Verdict on this thread.
    """

    def __init__(self, source, interval_s: float, on_update: Callable[[Update], None],
                 thresholds: Thresholds | None = None, on_sample=None,
                 history_capacity: int = 3600, hooks=None) -> None:
        self.source = source
        self.interval_s = interval_s
        self.on_update = on_update
        self.on_sample = on_sample
        self.hooks = hooks
        self.stepper = Stepper(thresholds)
        slow_detail(source, thresholds)   # the processes every 5 s while all is healthy
        self.history = History(history_capacity)
        self.last_update_mono: float | None = None
        self.last_error: str | None = None   # the latest sampling failure, for the screen
        self.sink_error: str | None = None   # why on_sample (the recorder) lost the last sample
        self.errors = 0
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._seq = 0
        self._self = SelfStats()

    # ------------------------------------------------------------------ control
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="gpudisk-top-sampler", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        for closing in (self.source, self.hooks, self._self):
            try:
                if closing is not None:
                    closing.close()
            except Exception:  # noqa: BLE001 - closing must not mask the reason we stop
                pass

    def set_interval(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.source.interval_s = interval_s  # NVML's deadline; the simulator's own clock
        self._wake.set()

    def step_interval(self, direction: int) -> float:
        """The next shorter (-1) or longer (+1) interval from INTERVALS_S."""
        interval_s = stepped_interval(self.interval_s, direction, INTERVALS_S)
        if interval_s != self.interval_s:
            self.set_interval(interval_s)
        return self.interval_s

    # ------------------------------------------------------------------ loop
    def step(self) -> Update:
        """Take one sample and derive everything from it (also usable without the thread)."""
        t0 = time.monotonic()
        sample = self.source.sample()
        sample_ms = (time.monotonic() - t0) * 1000
        # what it was taken at, for the recorder (a replay shows it: the +/- keys change it)
        sample.interval_s = self.interval_s
        if self.on_sample is not None:
            try:                  # a recorder that fails must not stop the screen
                self.sink_error = self.on_sample(sample)
            except Exception as err:  # noqa: BLE001
                self.sink_error = f"{type(err).__name__}: {err}"
        model, verdict, loss = self.stepper.step(sample)
        after_step(self.source, verdict)   # a job starved: every process read (issue 41)
        self.history.append(model, verdict)
        self._seq += 1
        cpu, rss = self._self.read()
        update = Update(seq=self._seq, model=model, verdict=verdict,
                        episodes=self.episodes, sample_ms=sample_ms,
                        self_cpu_pct=cpu, self_rss_mb=rss,
                        pending_intervals=self.stepper.pending_intervals)
        if self.hooks is not None:
            update.fired = self.hooks.on_sample(model, verdict, self.stepper.episodes, loss)
            update.active_alerts = self.hooks.engine.active()
            update.free_space = list(self.hooks.free_space)
        self.last_update_mono = time.monotonic()
        return update

    def _run(self) -> None:
        ticker = Ticker(self.interval_s)
        while not self._stop.is_set():
            try:
                self.on_update(self.step())
                self.last_error = None
            except Exception as err:  # noqa: BLE001 - the loop must outlive any one bad sample
                self.last_error = f"{type(err).__name__}: {err}"
                self.errors += 1
            ticker.advance()
            self._wake.clear()
            while not self._stop.is_set() and (remaining := ticker.due_s - time.monotonic()) > 0:
                if self._wake.wait(remaining):  # the interval changed, or stop
                    self._wake.clear()
                    if self.interval_s != ticker.interval_s:
                        ticker.retime(self.interval_s)
