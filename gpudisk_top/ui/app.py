"""The dashboard: panels fed by the sampling thread (gpudisk_top.session.live.Feed).

The app only reads Updates; sampling never happens on the UI thread, so a hung NVML call
shows as STALE in the header, not as a frozen screen.
"""

from __future__ import annotations

import asyncio
import os
import time
from textual.app import ComposeResult, ScreenStackError
from textual.css.query import NoMatches
from textual.binding import Binding
from textual.message import Message

from gpudisk_top.collect.gpu_deadline import hung
from gpudisk_top.collect.source import SIMULATED, Source
from gpudisk_top.collect.visibility import NOT_ROOT, PID_NAMESPACE
from gpudisk_top.session.live import Feed, Update
from gpudisk_top.verdict.detect import STARVED_STATES
from gpudisk_top.verdict.ledger import NO_PRICE, Price
from gpudisk_top.model.select import DeviceFilter
from gpudisk_top.ui.screens.device import DeviceScreen
from gpudisk_top.ui.screens.episodes import EpisodesScreen
from gpudisk_top.ui.screens.filter import FilterScreen
from gpudisk_top.ui.screens.help import HelpScreen
from gpudisk_top.ui.screens.hidden import HiddenScreen
from gpudisk_top.ui.widgets.base import LinesPanel
from gpudisk_top.ui.widgets.disks import SORT_LABEL, SORTS, DiskPanel
from gpudisk_top.ui.widgets.gpus import GpuPanel
from gpudisk_top.ui.widgets.header import BLIND_SPOT_FLAGS, HeaderBar
from gpudisk_top.ui.appkit import ToolApp, app_css
from gpudisk_top.ui.follow import Follow, job_label, job_name, shows_jobs
from gpudisk_top.ui.widgets.hostline import HostLine
from gpudisk_top.ui.widgets.ioprocs import IoProcPanel
from gpudisk_top.ui.widgets.timeline import Timeline, TimelineKeys
from gpudisk_top.ui.widgets.verdict import VerdictBanner

STALE_AFTER = 2.5  # intervals without a sample before the header says STALE
ROOMY_HEIGHT = 56    # from this height the I/O by process shows under the timeline


class SampleReady(Message):
    def __init__(self, update: Update) -> None:
        super().__init__()
        self.update = update


class GpuDiskApp(TimelineKeys, ToolApp):
    TITLE = "gpudisk-top"
    CSS = app_css("""
    Screen.short DiskPanel { max-height: 7; }
    Screen.short GpuPanel { max-height: 5; }
    Screen.short.gpu-procs GpuPanel { max-height: 8; }
    Screen.short.gpu-procs DiskPanel { max-height: 5; }
    IoProcPanel { display: none; }
    Screen.roomy IoProcPanel { display: block; height: auto; max-height: 30%; }
    Screen.io-view IoProcPanel { display: block; height: 1fr; max-height: 100%; }
    Screen.io-view Timeline { display: none; }
    Screen.no-gpu GpuPanel { max-height: 2; }
    Screen.no-gpu DiskPanel { max-height: 70%; }
    Screen.tall DiskPanel { max-height: 50%; }
    Screen.io-view.short DiskPanel { max-height: 5; }
    Screen.too-small.io-view IoProcPanel, Screen.too-small.roomy IoProcPanel { display: none; }
    """)
    BINDINGS = [
        # F10 quits and h, F1 open help, as in htop, glances and nvitop
        Binding("q,f10", "quit", "Quit", key_display="q"),
        Binding("space", "pause", "Pause"),
        Binding("question_mark,h,f1", "help", "Help", key_display="?"),
        Binding("exclamation_mark", "hidden", "Fix", key_display="!", show=False),
        Binding("tab", "focus_next", "Panel", show=False),
        Binding("s", "sort", "Sort"),
        Binding("a", "all_devices", "All"),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("m", "metric", "Metric"),
        Binding("e", "episodes", "Episodes"),
        Binding("p", "processes", "Procs", show=False),
        Binding("i", "io_view", "I/O"),
        # a shared node's jobs (ui/follow.py): the GPU panel's title says j
        Binding("j", "follow(1)", "Job", show=False),
        Binding("J", "follow(-1)", show=False, key_display="J"),
        Binding("escape", "unfollow", show=False),
        Binding("plus,equals_sign", "slower", "Slower", key_display="+", show=False),
        Binding("minus", "faster", "Faster", key_display="-", show=False),
        Binding("up", "scroll(-1)", show=False),
        Binding("down", "scroll(1)", show=False),
        Binding("left", "time(5)", show=False),
        Binding("right", "time(-5)", show=False),
        Binding("home", "time_home", show=False),
        Binding("end", "time_now", show=False),
        Binding("enter", "detail", show=False),
    ]

    def __init__(self, source, interval_s: float, origin: Source, thresholds=None,
                 dev_filter: DeviceFilter | None = None, on_sample=None,
                 autostart: bool = True, show_self: bool = True, prefill: int = 0,
                 feed=None, hooks=None, record_path: str | None = None,
                 price: Price = NO_PRICE, stop_signals=None) -> None:
        """stop_signals: the command's session.ticker.StopSignals, whose signals (SIGHUP
        when the terminal hangs up, SIGTERM...) end the app as q does; None: Textual's
        defaults (tests)."""
        super().__init__()
        self.origin = origin
        self.price = price          # [ledger]: the cost of the GPU time lost
        # a live Feed over `source` (a SampleSource), or a ready-made feed (replay): then
        # `live` is None, as no source is read and nothing recorded
        self.live: Feed | None = None if feed else Feed(
            source, interval_s, self._from_feed, thresholds=thresholds, on_sample=on_sample,
            hooks=hooks)
        self.feed = feed or self.live
        self.thresholds = self.feed.detector.t
        self.autostart = autostart
        self.show_self = show_self
        self.paused = False
        self.latest: Update | None = None
        self.shown: Update | None = None
        self._initial_filter = dev_filter or DeviceFilter()
        self._first_frame_at: float | None = None
        self._last_flags: list[str] = []
        self.prefill = prefill  # samples to take at once before going live (--demo-start)
        self.record_path = record_path  # --record FILE: the header says REC
        self.stop_signals = stop_signals
        self._feed_closed = False
        self.follow = Follow()      # the job `j` follows, if any

    # ------------------------------------------------------------------ layout
    def panels(self) -> ComposeResult:
        yield HeaderBar(id="header")
        yield VerdictBanner(id="verdict")
        yield GpuPanel(id="gpus")
        yield DiskPanel(id="disks")
        yield HostLine(id="host")
        yield Timeline(id="timeline")
        yield IoProcPanel(id="ioprocs")

    def on_mount(self) -> None:
        if self.stop_signals is not None:
            # the loop sleeps in its selector: the signal wakes it (one that came while
            # starting is answered at once)
            self.stop_signals.call_in(asyncio.get_running_loop(), self._stop_by_signal)
        self.query_one(DiskPanel).filter = self._initial_filter
        # a live node (not the demo, not a replay) with no GPU readable says how to see
        # the tool at work: --demo
        self.query_one(GpuPanel).demo_hint = (self.live is not None
                                              and self.origin.kind != SIMULATED)
        self._render_header()
        if self.prefill:
            for _ in range(self.prefill - 1):
                self.feed.step()
            self.apply(self.feed.step())
        if self.autostart:
            self.feed.start()
            self.set_interval(1.0, self._check_stale)  # the STALE flag needs a clock

    def on_resize(self, event) -> None:
        height = event.size.height
        self.fit_too_small(self.screen, event.size)
        self.screen.set_class(height >= 50, "tall")
        # room for the timeline and the I/O by process under it (200x60, 250x70)
        self.screen.set_class(height >= ROOMY_HEIGHT, "roomy")
        self._tell_sampler()
        self.screen.set_class(height < 32, "short")
        self.query_one(GpuPanel).max_rows = 2 if height < 32 else (4 if height < 50 else 8)
        self.query_one(VerdictBanner).max_lines = 3 if height < 32 else (4 if height < 50 else 6)
        self._rerender()

    def on_unmount(self) -> None:
        if self.stop_signals is not None:
            self.stop_signals.call_in(None, None)
        self.close_feed()

    def close_feed(self) -> None:
        """Stop sampling and close the source, once (the sampler's close puts back what
        --delayacct switched on); also where the app failed before it mounted."""
        if self._feed_closed:
            return
        self._feed_closed = True
        self.feed.stop()

    def _stop_by_signal(self, reason: str) -> None:
        self.exit()

    # ------------------------------------------------------------------ updates
    def _from_feed(self, update: Update) -> None:
        """Called on the sampling thread: hand the update to the UI thread."""
        self.post_message(SampleReady(update))

    def on_sample_ready(self, message: SampleReady) -> None:
        self.apply(message.update)

    def apply(self, update: Update) -> None:
        self.latest = update
        for alert in update.fired:
            if alert.bell:
                self.bell()
        if not self.paused:
            self.render_update(update)

    def advance(self, n: int = 1) -> None:
        """Take n samples now, on this thread (tests, screenshots, replay stepping)."""
        for _ in range(n):
            self.apply(self.feed.step())

    def render_update(self, update: Update) -> None:
        if self.shown is None and os.environ.get("GPUDISK_TOP_FIRST_FRAME_FILE"):
            self.call_after_refresh(self._note_first_frame)
        self.shown = update
        if self.follow.job_id is not None and self.follow.current(update) is None:
            self.follow.stop()      # the job ended (or a replay went back before it)
            self.notify("the job followed is not on the node now: the whole node again",
                        timeout=3)
        self._render_header()
        device = self.screen if isinstance(self.screen, DeviceScreen) else None
        if device is not None:
            # a device's detail covers the dashboard: its panels do no work until it is
            # dismissed (_device_closed draws them again)
            device.show(update, self.feed.history)
            return
        if self.screen.has_class("too-small"):
            return      # only the note shows; on_resize draws the panels when they fit
        banners = [a.message for a in update.active_alerts if a.banner]
        # what the banner, the disks' marks, I/O by process and the timeline judge by:
        # the followed job's verdict, else the node's
        view = self.follow.view(update, self.feed.history)
        self.query_one(VerdictBanner).show(view, self.thresholds.enter_intervals,
                                           alert=" · ".join(banners) or None,
                                           who=self._who(update))
        self.screen.set_class(not update.model.gpus, "no-gpu")
        self.query_one(GpuPanel).show(update, self.follow.job_id)
        disks = self.query_one(DiskPanel)
        disks.show(view)
        self.query_one(HostLine).show(update, self._job_in_view(update))
        if self.io_view or self.screen.has_class("roomy"):
            self.query_one(IoProcPanel).show(view, self._io_note())
        if not self.io_view:
            self._render_timeline()

    def _render_timeline(self) -> None:
        update = self.shown
        if update is None:
            return
        model = update.model
        view = self.follow.view(update, self.feed.history)
        # the disk rows in the table's order (its one owner), the mounts under them as
        # in the table (issue 38: the timeline ranked its own, in another order)
        disk_rows = [(n, model.devices[n].display_name)
                     for n in self.query_one(DiskPanel).order(view)]
        disk_rows += [(mp, mp) for mp in model.mounts]     # network and FUSE mounts
        named = view.verdict.devices if view.verdict is not None else ()
        gpus, job = [g.index for g in model.gpus], None
        current = self.follow.current(update)
        if current is not None:       # the job's GPUs and its states
            number, info = current
            gpus, job = [i for i in gpus if i in info.gpus], (info.id, f"job {number}")
        self.query_one(Timeline).show(self.feed.history, gpus, disk_rows,
                                      self.follow.episodes(self.feed.episodes), named, job,
                                      ordered=True)

    def _job_in_view(self, update: Update):
        """(number, JobInfo) of the job whose own figures the host line adds: the one
        followed, else the node's one job where it was told (shows_jobs), else None."""
        current = self.follow.current(update)
        jobs = update.model.jobs
        if current is None and len(jobs) == 1 and shows_jobs(jobs):
            current = (1, jobs[0])
        return current

    def _who(self, update: Update) -> str | None:
        """What the banner's verdict is of, on a node whose jobs are listed: the job
        followed, else the node's worst job where it is starved, else how many jobs."""
        jobs = update.model.jobs
        v = update.verdict
        if v is None or not shows_jobs(jobs):
            return None
        width = self.query_one(VerdictBanner).size.width or 80
        name_w = max(12, (width - 16) // 3)     # the reason keeps most of the first line
        current = self.follow.current(update)
        if current is None and v.job is not None and v.state in STARVED_STATES:
            current = next(((n, j) for n, j in enumerate(jobs, 1) if j.id == v.job.id), None)
        if current is None:
            return f"{len(jobs)} jobs" if len(jobs) > 1 else job_label(1, jobs[0].name, name_w)
        number, info = current
        return job_label(f"{number}/{len(jobs)}", info.name, name_w)

    def _note_first_frame(self) -> None:
        """For bench/: the wall-clock time of the first painted frame with data (the
        bench subtracts its own launch time; a process's start time in /proc is only
        known to the second)."""
        with open(os.environ["GPUDISK_TOP_FIRST_FRAME_FILE"], "w") as f:
            f.write(f"{time.time():.3f}\n")

    def _dev_filter(self):
        """The disk table's filter, or None before the table is mounted (flags() is
        also asked of an app that has not started: the replay's tests, a header)."""
        try:
            return self.query_one("#disks", DiskPanel).filter
        except (NoMatches, ScreenStackError):
            return None

    def flags(self) -> list[str]:
        out = []
        if self.origin.kind == SIMULATED:
            out.append("DEMO")
        if self.paused:
            out.append("PAUSED")
        shown = self.shown or self.latest
        current = self.follow.current(shown)
        if current is not None:      # the screen is one job's, not the node's
            number, info = current
            out.append(f"JOB: {number}/{len(shown.model.jobs)} {job_name(info.name)}")
        if shown is not None and shown.model.detail_s is not None:
            # every job healthy: the processes' rows are read at the slow cadence (issue 41)
            out.append(f"procs every {shown.model.detail_s:g}s")
        sink_error = self.live.sink_error if self.live is not None else None  # the recorder's
        if self.record_path is not None and sink_error is None:
            out.append("REC")
        # what the disk table leaves out, which it has no room to say at 80 columns
        dev_filter = self._dev_filter()
        if dev_filter is not None and dev_filter.patterns:
            out.append(f"FILTER: {','.join(dev_filter.patterns)}")
        if dev_filter is not None and dev_filter.all_devices:
            out.append("ALL DEVICES")
        out += [BLIND_SPOT_FLAGS.get(k, k) for k in self._blind_spots()]
        if self.feed.last_error is not None:
            out.append(f"STALE sampling failed: {self.feed.last_error[:60]}")
        if self.latest is not None and hung(self.latest.model.gpu_status):
            out.append("NVML HUNG")
        if sink_error is not None:
            out.append(f"NOT RECORDING: {sink_error[:60]}")
        last = self.feed.last_update_mono
        if self.autostart and last is not None:
            late = time.monotonic() - last
            if late > STALE_AFTER * self.feed.interval_s:
                out.append(f"STALE {late:.0f}s")
        return out

    def _check_stale(self) -> None:
        if self.leave_if_terminal_gone():
            return
        flags = self.flags()
        if flags != self._last_flags:
            self._render_header()

    def _render_header(self) -> None:
        u = self.shown or self.latest
        self._last_flags = self.flags()
        # the header on screen: a device detail's over the dashboard (the same flags), or
        # the dashboard's
        if isinstance(self.screen, DeviceScreen):
            bar = self.screen.query_one("#header", HeaderBar)
        else:
            bar = self.query_one("#header", HeaderBar)
        bar.show(self.origin, self.feed.interval_s, u.model.wall_s if u else None,
                 u.self_cpu_pct if u else None, u.self_rss_mb if u else None,
                 self._last_flags, show_self=self.show_self, fix=bool(self._blind_spots()))

    def _blind_spots(self) -> list[str]:
        """What the header flags as hidden from here: the sampler's blind spots, another
        PID namespace only where there are GPUs (as the sampler's warnings, which `!`
        shows, say it: only GPU processes suffer from it)."""
        gpus = self.latest is not None and bool(self.latest.model.gpus)
        return [k for k in self.origin.blind_spots if k != PID_NAMESPACE or gpus]

    # ------------------------------------------------------------------ actions
    def action_pause(self) -> None:
        self.paused = not self.paused
        # the timeline draws from the live history: frozen at the sample on screen, as
        # the other panels are (issue 38: it went on, two times on one screen)
        timeline = self.query_one(Timeline)
        if self.paused:
            shown = self.shown or self.latest
            timeline.freeze(self.feed.history, shown.model.wall_s if shown else None)
        else:
            timeline.thaw()
        if not self.paused and self.latest is not None:
            self.render_update(self.latest)
        else:
            self._render_header()

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_hidden(self) -> None:
        """`!`: what cannot be seen from here and its fix, as --once says it."""
        update = self.shown or self.latest
        self.push_screen(HiddenScreen(update.model.all_warnings if update else []))

    def action_sort(self) -> None:
        panel = self.query_one(DiskPanel)
        panel.sort = SORTS[(SORTS.index(panel.sort) + 1) % len(SORTS)]
        self._rerender()
        self.notify(f"disks sorted by {SORT_LABEL[panel.sort]}", timeout=2)

    def action_all_devices(self) -> None:
        panel = self.query_one(DiskPanel)
        panel.filter = DeviceFilter(all_devices=not panel.filter.all_devices,
                                    patterns=panel.filter.patterns)
        self._rerender()
        self._render_header()

    def action_filter(self) -> None:
        panel = self.query_one(DiskPanel)

        def done(pattern: str | None) -> None:
            if pattern is None:
                return
            panel.filter = DeviceFilter.from_option(panel.filter.all_devices, pattern)
            self._rerender()
            self._render_header()

        self.push_screen(FilterScreen(",".join(panel.filter.patterns)), done)

    def action_episodes(self) -> None:
        update = self.shown or self.latest
        now = update.model.wall_s if update else time.time()
        # the session's GPU time lost: live only (a replay's Stepper counts from its seek);
        # a followed job's own
        ledger = None
        if self.live is not None:
            stepper = self.live.stepper
            ledger = (stepper.job_ledger(self.follow.job_id) if self.follow.job_id
                      else stepper.ledger)
            ledger = ledger.copy() if ledger is not None else None
        # each episode's lost time: its feed's ledger's, by episode id (a replay's since its seek)
        self.push_screen(EpisodesScreen(self.follow.episodes(self.feed.episodes), now,
                                        self.followed_note(), ledger=ledger, price=self.price,
                                        lost=dict(self.feed.stepper.ledger.by_episode),
                                        phase_lost=dict(self.feed.stepper.ledger.by_phase)),
                         self.goto_episode)

    def followed_note(self) -> str:
        """The episode list's word on the job followed ("" for the node)."""
        current = self.follow.current(self.shown or self.latest)
        if current is None:
            return ""
        number, info = current
        return f"{job_label(number, info.name, 60)} [{info.id}]: its episodes only (esc on " \
               "the dashboard: the whole node)"

    def goto_episode(self, episode) -> None:
        """Enter on an episode in the list: the timeline scrolls to its start."""
        if episode is None:
            return
        if self.io_view:
            self.action_io_view()
        self.query_one(Timeline).show_wall(episode.start_wall_s)

    def action_detail(self) -> None:
        """Enter on a disk: its detail screen, kept live."""
        panel = self.query_one(DiskPanel)
        if self.focused is not panel or panel.cursor is None or self.shown is None:
            return
        screen = DeviceScreen(panel.cursor)
        self.push_screen(screen, self._device_closed)
        self.call_after_refresh(screen.show, self.shown, self.feed.history)
        self.call_after_refresh(self._render_header)

    def _device_closed(self, _result) -> None:
        """Back from a device's detail: the dashboard's panels, which did no work under
        it, catch up with the newest sample."""
        self._rerender()

    def action_follow(self, step: int) -> None:
        """`j`, `J`: follow the next or previous job of the node (the node comes between
        the last and the first)."""
        update = self.shown or self.latest
        jobs = update.model.jobs if update is not None else []
        if not shows_jobs(jobs):
            self.notify("no jobs told apart on this node: its verdict is the job's", timeout=3)
            return
        self.follow.cycle(jobs, step)
        self._followed()

    def action_unfollow(self) -> None:
        """`esc`: the whole node again."""
        if self.follow.job_id is not None:
            self.follow.stop()
            self._followed()

    def _followed(self) -> None:
        current = self.follow.current(self.shown or self.latest)
        said = ("the whole node" if current is None
                else f"following {job_label(current[0], current[1].name)} (esc: the node)")
        self.notify(said, timeout=2, markup=False)
        self._render_header()
        self._rerender()

    def action_processes(self) -> None:
        panel = self.query_one(GpuPanel)
        panel.show_processes = not panel.show_processes
        # on a short screen the process rows take room from the disk table (CSS)
        self.screen.set_class(panel.show_processes, "gpu-procs")
        self._rerender()

    @property
    def io_view(self) -> bool:
        return self.screen.has_class("io-view")

    def action_io_view(self) -> None:
        """`i`: the I/O process view in the timeline's place, and back."""
        self.screen.set_class(not self.io_view, "io-view")
        self._tell_sampler()
        self._rerender()

    def _tell_sampler(self) -> None:
        """While the I/O by process shows, the sampler scans the node more often."""
        if self.live is not None:
            self.live.source.io_view = self.io_view or self.screen.has_class("roomy")

    def _io_note(self) -> str:
        every_s = self.live.source.scan_open_s if self.live is not None else None
        if every_s is None:
            return ""          # a replay or the demo: what was recorded or simulated
        note = f" · the node is scanned every {every_s:g} s"
        if NOT_ROOT in self.origin.blind_spots:
            note += " · not root: only your own processes"
        return note

    def action_slower(self) -> None:
        self.notify(f"interval {self.feed.step_interval(+1):g} s", timeout=2)
        self._render_header()

    def action_faster(self) -> None:
        self.notify(f"interval {self.feed.step_interval(-1):g} s", timeout=2)
        self._render_header()

    def action_scroll(self, delta: int) -> None:
        focused = self.focused
        if isinstance(focused, LinesPanel):
            focused.scroll_lines(delta)

    def _rerender(self) -> None:
        if self.shown is not None:
            self.render_update(self.shown)

    def commands(self) -> tuple:
        return (
            ("Pause or resume", "Freeze the screen; sampling goes on", self.action_pause),
            ("Sort disks", "Cycle the disk sort: %util, r_await, IOPS, throughput, name", self.action_sort),
            ("All or active devices", "Show every block device, or the active disks", self.action_all_devices),
            ("Filter devices", "Show devices matching globs", self.action_filter),
            ("Timeline disk metric", "Cycle %util, r_await, IOPS, MB/s, aqu-sz", self.action_metric),
            ("Episode list", "Starvation episodes and their evidence", self.action_episodes),
            ("GPU processes", "Show or hide the GPU process list", self.action_processes),
            ("I/O by process", "Who is loading the disks, in the timeline's place", self.action_io_view),
            ("Follow the next job", "A shared node: one job's verdict, timeline, episodes and what-if",
             lambda: self.action_follow(1)),
            ("The whole node", "Stop following a job", self.action_unfollow),
            ("Timeline: now", "Scroll the timeline back to the newest interval", self.action_time_now),
            ("Timeline: oldest", "Scroll the timeline to the oldest interval kept", self.action_time_home),
            ("Longer interval", "Sample less often", self.action_slower),
            ("Shorter interval", "Sample more often", self.action_faster),
            ("Keys and glyphs", "The help screen", self.action_help),
            ("What cannot be seen", "The header's flags (NOT ROOT, ...) and their fix", self.action_hidden),
            ("Quit", "Quit gpudisk-top", self.action_quit),
        )
