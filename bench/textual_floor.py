"""The framework's floor for bench/bench_dashboard.sh: a minimal Textual app that updates
one line a second, as the dashboard's 1 Hz clock does.  What it costs in a 120x40 pane is
Textual's own (its input thread, its compositor, one line written a second): the part of
the dashboard's cost no change of ours can take away.

usage: python bench/textual_floor.py
"""
import time

from textual.app import App, ComposeResult
from textual.widgets import Static


class Floor(App):
    def compose(self) -> ComposeResult:
        yield Static(id="line")

    def on_mount(self) -> None:
        self.tick()
        self.set_interval(1.0, self.tick)

    def tick(self) -> None:
        self.query_one("#line", Static).update(time.strftime("%H:%M:%S"))


if __name__ == "__main__":
    Floor().run()
