"""`?`: every key, and what the glyphs mean."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

HELP = """\
[b]gpudisk-top[/b]  GPUs and the disks that feed them, on one timeline

[b]Keys[/b]
  q F10 ctrl+c  quit
  space         pause / resume the screen, timeline too (sampling, recording go on)
  ? h F1        this help
  !             what cannot be seen from here (NOT ROOT, CONTAINER PIDS...) and the fix
  tab           next panel (GPUs, disks, timeline); shift+tab: previous
  ↑ ↓           scroll the focused panel (on the disks: move the row cursor)
  enter         on a disk: its detail; in the episode list: go to the episode
  ← →           scroll the timeline back / forward in time
  home end      the timeline's oldest interval / now
  p             show / hide the GPU process list (pid, GPU memory, read rate; on a
                short screen the GPUs' mean and lowest above it)
  i             I/O by process: who is loading the disks (in the timeline's place)
  s             sort disks: %util (busiest first), r_await, IOPS, throughput, name
  a             all devices (partitions, loop, idle) or active ones
  /             filter devices by name (globs, comma-separated; empty clears)
  m             timeline disk metric: %util, r_await, IOPS, MB/s, aqu-sz
  e             episode list; highlight one to see its evidence, enter to go there
  j J           follow the next / previous job of a shared node: its verdict,
                what-if, timeline and episodes (e); after the last, the node again
  escape        stop following a job: the whole node
  + -           sampling interval longer / shorter
  ctrl+p        command palette (every action by name)

{replay}[b]States[/b] (timeline letters; lower case while building up, before an episode opens)
  D  disk-starved       GPUs low while a device the job reads from is saturated
  C  cpu-starved        GPUs low while the job's loaders or the host CPUs are saturated
  K  checkpoint-stall   GPUs dip together while the job writes a burst
  S  straggler          one GPU starved while its peers spin in NCCL
  ?  undiagnosed-stall  GPUs low with a job, nothing it waits on saturated
  ×  unavailable        no GPU can be read: no driver, an NVML error or hang, all lost
  ·  healthy            blank: idle (no job on the GPUs)

[b]Jobs[/b] on a shared node (several jobs, or one the node can name), in the GPU panel:
  a row a job: its number, its state (▲ DISK-STARVED; ▲D where narrow, the timeline's
  letter), its name and id, its GPUs (a glyph of each one's use) and their mean, its
  GPUs' cells under it where there is room; ▶ the job followed; – the GPUs of no job.
  With no job followed, the banner says the node's worst: job 3/8 NAME.

[b]Disk marks[/b]
  ▲  the device named by the current verdict     !  saturated (not the job's cause)
  △  on the named device: its partition, the dm device on it, the disk under it
  The timeline's disk rows: in the table's order (an episode's on screen first).
  ▼  the column the disks are sorted by
  health  ✓ OK  ! warn  ✗ FAIL  ? n/a unreadable  — no reading; enter: every field
          (a narrow screen keeps the glyph alone, and the mountpoint whole)
  In I/O by process: ▲ a process outside the job loading the device the verdict names,
  J a process of the GPU job; %rd %wr its share of the device's reads and writes.
  Disk numbers are iostat -x's; saturation is never %util alone.
  Units are iostat's everywhere, processes' rates included: kB is 1024 bytes, MB 1024 kB
  (MiB: rMB/s = rkB/s / 1024), so a process never reads more than its disk.

[b]Flags[/b] in the header: DEMO (simulated node), REPLAY, PAUSED, STALE (sampling is
waiting on a slow NVML call or disk read; the screen shows the last good sample), REC
(--record), FILTER (/ or -d), ALL DEVICES (a, -a; ALL where narrow), JOB (one job
followed: j; escape for the node); what cannot be
seen from here: NO /sys, CONTAINER PIDS (PID NS where narrow), NOT ROOT, NO PSI, then
a ! : press ! for what each hides and its fix.

escape or ? closes this screen.
"""

# the replay screen's own keys (ui/replay_app.py ReplayApp.BINDINGS), shown in its help
REPLAY_KEYS = """\
[b]Replay[/b] (the other keys work as live, but + -: a recording's interval is fixed)
  space         play / pause
  , .           one sample back / forward
  f             speed: x1, x10, x60
  1 2 3         speed x1, x10, x60
  g             go to a time: 03:12, +5m, -5m (before the end), 10m ago, start, end
  n N           next / previous starvation episode
  home end      the first interval / the last sample

"""


class HelpScreen(ModalScreen):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90; max-width: 100%; height: auto; max-height: 100%;
                                  border: round $accent; background: $surface; padding: 0 1; }
    """
    BINDINGS = [Binding("escape,question_mark,q,h,f1", "dismiss", "Close")]
    MARKUP = True      # our own text; a screen of the machine's text sets False

    def __init__(self, replay: bool = False) -> None:
        super().__init__()
        self.text = HELP.format(replay=REPLAY_KEYS if replay else "")

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(self.text, markup=self.MARKUP)
