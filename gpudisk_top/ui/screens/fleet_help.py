"""`?` on the fleet screen: its keys, and what the table's glyphs mean."""

from __future__ import annotations

from gpudisk_top.ui.screens.help import HelpScreen

FLEET_HELP = """\
[b]gpudisk-top fleet[/b]  every node's verdict from Prometheus, starved nodes first

[b]Keys[/b] (the table)
  q ctrl+c      quit (ctrl+c from any screen)
  ?             this help
  ↑ ↓  j k      move the row cursor; pageup pagedown a page, home end: first / last
  enter         the node under the cursor: its timeline (range queries, while open)
  J             job view: the nodes of one training job side by side, the straggler named
  /             filter by label: job=a cluster=b (several; empty or escape clears)
  escape        clear the filter
  g             group the rows by another label (cycles the labels the nodes carry)
  s             sort: starved first (the default), node name, GPU util (lowest first),
                since (longest in its state first)
  r             refresh now
  space         pause / resume (no query while paused)
  + -           refresh interval longer / shorter
  ctrl+p        command palette (every action by name)

[b]Node screen[/b] (enter)
  ← →           scroll the timeline back / forward in time; home end: oldest / now
  ↑ ↓           scroll the rows; m: the disk rows' metric (%util, r_await, IOPS, MB/s, aqu-sz)
  escape        back to the table

[b]Job view[/b] (J)
  ↑ ↓ enter     a node of the job, and its timeline;  J: another job;  escape: back
  ▲ STRAGGLER ◀  the node that holds the job back;  ◇ WAITING: a node waiting on it

[b]The table[/b]
  ▲ DISK-STARVED  starved by its own cause (also CPU-STARVED, CHECKPOINT)
  ◇ WAITING   its GPUs wait on peers (its detector's straggler);  ◇ UNDIAGNOSED: a stall
  ● HEALTHY  ○ IDLE   a node whose GPUs are busy / have no job
  × STALE 3m  the node stopped reporting 3 minutes ago (its row dimmed, last values kept)
  ⊘ NO GPUS   the node reads no GPU (no driver, NVML error or hang, all lost): device says why
  GPUs 3/8    GPUs starved of the node's GPUs;  util: their mean utilization now
  since       how long the node has been in its state, and from when (clock)
  ▁▂▃▄▅▆▇█   the last hour's GPU utilization, a bar a minute; · no sample that minute
  device      the device the verdict blames and its evidence (r_await, aqu-sz, %util, MB/s)

[b]Header[/b] the Prometheus URL, the grouping label, the counts, what the last refresh
cost (queries, series, milliseconds); a ✕ ERROR line when Prometheus failed or timed out:
the table below is then the last good one, dimmed, and the line says how old.

escape or ? closes this screen.
"""


class FleetHelpScreen(HelpScreen):
    def __init__(self) -> None:
        super().__init__()
        self.text = FLEET_HELP
