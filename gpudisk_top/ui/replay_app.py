"""The dashboard driven by a recording: play and pause, step, x1/x10/x60, jump to a time,
next and previous episode, and a position bar.  Verdicts are recomputed from the raw
counters by the current model (ReplayFeed).  The whole recording's episodes are known
from the start (`e`, the position bar's ▲, n/N), as `report` lists them: the one reader of
the recorder's summaries (session/summaries.py, which `report` reads with too) gives them
at once where the summaries serve, else from replaying the recording on a thread."""

from __future__ import annotations

import threading

from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer

from gpudisk_top.collect.source import UNKNOWN, Source
from gpudisk_top.errors import RuntimeFailure
from gpudisk_top.session import summaries
from gpudisk_top.session.replay import SPEEDS, ReplayFeed
from gpudisk_top.textsafe import printable
from gpudisk_top.timeparse import Span, TimeParseError, parse_time
from gpudisk_top.ui.app import GpuDiskApp
from gpudisk_top.ui.screens.episodes import EpisodesScreen
from gpudisk_top.ui.screens.help import HelpScreen
from gpudisk_top.ui.screens.jump import JumpScreen
from gpudisk_top.ui.widgets.position import PositionBar

FRAME_S = 0.1  # at x10 and x60 the screen repaints 10 times a second, several samples a time
# A recording without summaries this version can use is replayed on a thread to find its
# episodes (report's way, about a millisecond a sample): up to this many samples (10 hours
# at 1 Hz); beyond, the episodes show as the replay passes them, and `e` says so.
FIND_MAX_SAMPLES = 36_000


class ReplayApp(GpuDiskApp):
    BINDINGS = [
        Binding("space", "pause", "Play/pause"),
        Binding("comma", "back", "Back", key_display=","),
        Binding("full_stop", "forward", "Fwd", key_display="."),
        Binding("f", "speed", "Speed"),
        Binding("1", "set_speed(1)", show=False),
        Binding("2", "set_speed(10)", show=False),
        Binding("3", "set_speed(60)", show=False),
        Binding("g", "jump", "Go to"),
        Binding("n", "episode(1)", "Next ep"),
        Binding("N", "episode(-1)", "Prev ep", key_display="N"),
        Binding("home", "jump_to('start')", show=False),
        Binding("end", "jump_to('end')", show=False),
    ]

    def __init__(self, recording, origin: Source, thresholds=None, dev_filter=None,
                 start_index: int = 0, show_self: bool = True) -> None:
        feed = ReplayFeed(recording, thresholds)
        super().__init__(None, feed.interval_s, origin, thresholds=thresholds,
                         dev_filter=dev_filter, autostart=False, show_self=show_self, feed=feed)
        self.rec = recording
        self.start_index = start_index
        self.playing = False
        self.speed = 1
        self._timer = None
        self._carry = 0.0
        self.episodes_note = ""    # what `e` says above the list (where they come from)
        self.known_lost: dict = {}  # the recording's episodes' lost GPU-seconds, by id

    def compose(self) -> ComposeResult:
        for widget in super().compose():
            if isinstance(widget, Footer):
                yield PositionBar(id="position")
            yield widget

    def on_mount(self) -> None:
        super().on_mount()
        # a session's first sample has no interval: open on the first one with rates
        self.apply(self.feed.seek(self.feed.shown_at(self.start_index)))
        self._find_episodes()

    # ------------------------------------------------------------------ episodes
    def _find_episodes(self) -> None:
        """The recording's episodes as `report` finds them: at once from its summaries,
        else by replaying it on a daemon thread (quitting never waits for it), up to
        FIND_MAX_SAMPLES samples; beyond, said."""
        n = len(self.rec)
        if summaries.reads_summaries(self.rec, self.thresholds):
            self._episodes_found(*self._episodes_of_recording())
        elif n > FIND_MAX_SAMPLES:
            self.episodes_note = (f"episodes so far: the recording has no summaries this version "
                                  f"can use and {n} samples to replay; `gpudisk-top report` lists "
                                  "them all")
        else:
            self.episodes_note = (f"episodes so far: finding the recording's (replaying its {n} "
                                  "samples: it has no summaries this version can use)")
            threading.Thread(target=self._find_in_background, name="replay-episodes",
                             daemon=True).start()

    def _episodes_of_recording(self) -> tuple[list | None, list | None, dict, str]:
        """(the episodes and the stretch of the clock of each, or None, the GPU-seconds
        each lost by its id, and why not)."""
        try:
            episodes, spans, lost = summaries.known_episodes(self.rec, self.thresholds)
        except (RuntimeFailure, OSError) as err:   # a damaged stretch: the replay goes on
            return None, None, {}, f"episodes so far: the recording's could not be read ({err})"
        return episodes, spans, lost, ""

    def _find_in_background(self) -> None:
        found = self._episodes_of_recording()
        try:
            self.call_from_thread(self._episodes_found, *found)
        except RuntimeError:      # the app has gone meanwhile
            pass

    def _episodes_found(self, episodes, spans, lost: dict, why: str) -> None:
        if episodes is None:
            self.episodes_note = why
            return
        self.feed.know(episodes, spans)
        self.known_lost = lost
        n = len(episodes)
        self.episodes_note = (f"the recording's {n} episode{'' if n == 1 else 's'}, "
                              "as `gpudisk-top report` lists them")
        if self.latest is not None:
            self._render_position()

    def listed_episodes(self) -> list:
        """What `e` lists and the position bar marks: the recording's episodes once known,
        else those the replay has passed."""
        known = self.feed.known
        return known if known is not None else self.feed.episodes

    def action_episodes(self) -> None:
        update = self.shown or self.latest
        now = update.model.wall_s if update is not None else self.rec.end_s
        # each episode's lost time by its id: the recording's as `report` counts them,
        # else the feed's ledger's for those passed
        lost = (self.known_lost if self.feed.known is not None
                else dict(self.feed.stepper.ledger.by_episode))
        # a followed job's episodes only (ui/follow.py), said above the list
        note = [self.episodes_note, self.followed_note()]
        phase_lost = (None if self.feed.known is not None
                      else dict(self.feed.stepper.ledger.by_phase))
        self.push_screen(EpisodesScreen(self.follow.episodes(self.listed_episodes()), now, note,
                                        lost=lost, phase_lost=phase_lost), self.goto_episode)

    # ------------------------------------------------------------------ display
    def render_update(self, update) -> None:
        super().render_update(update)
        self._render_position()

    def _render_position(self) -> None:
        rec = self.rec
        starts = [e.start_wall_s for e in self.listed_episodes()]
        self.query_one(PositionBar).show(self.playing, self.speed, self.feed.index, len(rec),
                                         rec.wall_s(self.feed.index), rec.start_s, rec.end_s, starts)

    def flags(self) -> list[str]:
        out = ["REPLAY", *(f for f in super().flags() if f != "PAUSED")]
        # a session whose header is damaged is not known to be live: say so, as DEMO does
        # for a simulated one (commands/replay.py gives the recording's Source as origin)
        if self.origin.kind == UNKNOWN and "SOURCE?" not in out:
            out.append("SOURCE?")
        return out

    # ------------------------------------------------------------------ playback
    def _tick(self) -> None:
        # samples due this frame at this speed; fractions carry to the next frame
        self._carry += FRAME_S * self.speed / self.feed.interval_s
        n, self._carry = int(self._carry), self._carry - int(self._carry)
        update = None
        for _ in range(n):
            step = self.feed.step()
            if step is None:
                self._set_playing(False)
                self.notify("end of the recording", timeout=3)
                break
            update = step
        if update is not None:
            self.apply(update)

    def _set_playing(self, playing: bool) -> None:
        self.playing = playing
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        if playing:
            self._carry = 0.0
            self._timer = self.set_interval(FRAME_S, self._tick)
        if self.latest is not None:
            self._render_position()

    def action_pause(self) -> None:
        self._set_playing(not self.playing)

    def action_back(self) -> None:
        self._set_playing(False)
        self.apply(self.feed.back())

    def action_forward(self) -> None:
        self._set_playing(False)
        update = self.feed.step()
        if update is not None:
            self.apply(update)

    def action_speed(self) -> None:
        self.action_set_speed(SPEEDS[(SPEEDS.index(self.speed) + 1) % len(SPEEDS)])

    def action_set_speed(self, speed: int) -> None:
        self.speed = speed
        self._render_position()
        self.notify(f"speed x{speed}", timeout=2)

    def action_jump(self) -> None:
        def done(text: str | None) -> None:
            if text:
                self.jump_to(text)
        self.push_screen(JumpScreen(), done)

    def action_jump_to(self, text: str) -> None:
        self.jump_to(text)

    def jump_to(self, text: str) -> None:
        try:
            wall_s = parse_time(text, Span(self.rec.start_s, self.rec.end_s))
        except TimeParseError as err:
            self.notify(printable(str(err)), severity="error", timeout=4, markup=False)
            return
        self.apply(self.feed.seek(self.feed.shown_at(self.rec.index_at(wall_s))))

    def action_episode(self, direction: int) -> None:
        i = self.feed.next_episode_index(direction)
        if i is None:
            self.notify("no " + ("later" if direction > 0 else "earlier") + " episode", timeout=3)
            return
        self._seek_confirmed(i)

    def goto_episode(self, episode) -> None:
        """Enter on an episode in the list: go to it, as n does."""
        if episode is not None:
            self._seek_confirmed(self.feed.onset_of(episode))

    def _seek_confirmed(self, onset: int) -> None:
        """Pause where an episode with that onset is confirmed (it opens
        `enter_intervals` after its onset)."""
        self._set_playing(False)
        self.apply(self.feed.seek(min(len(self.rec) - 1, onset + self.thresholds.enter_intervals)))

    def action_help(self) -> None:
        self.push_screen(HelpScreen(replay=True))

    def action_slower(self) -> None:
        self.notify("a recording's interval is fixed; f changes the speed", timeout=2)

    def action_faster(self) -> None:
        self.action_slower()
