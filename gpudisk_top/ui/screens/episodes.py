"""`e`: the starvation episodes; the highlighted one's evidence is shown below the list,
and Enter goes to it (the dashboard's timeline scrolls to its start; a replay seeks).
A note above the list says where the episodes come from when that is not obvious (a
replay: the whole recording's, or those passed so far and why).  Live, the session's GPU
time lost heads the list (the stall ledger's one line, verdict/ledger.py) and each
episode says its own."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from gpudisk_top.verdict.ledger import NO_PRICE
from gpudisk_top.model.vocab import gpu_hours, phase_json, phase_line
from gpudisk_top.verdict.whatif import text_lines as whatif_lines
from gpudisk_top.textsafe import printable, printable_block
from gpudisk_top.ui.format import clock, duration


def _describe(ep, now_s: float, lost_gpu_s: float = 0.0) -> Text:
    end = "open" if ep.open else clock(ep.end_wall_s)
    # Text, not a str: a str would be read as markup, and evidence quotes command lines
    # ("python train.py --tags [a,b]") that must show as they are
    return Text(printable(f"#{ep.id} {ep.state}  {clock(ep.start_wall_s)}–{end}  "
                          f"({duration(ep.duration_s(now_s))})  "
                          f"GPU {','.join(map(str, ep.gpus)) or '-'}  {','.join(ep.devices) or ''}"
                          + (f"  lost {gpu_hours(lost_gpu_s)} GPU-h" if lost_gpu_s else "")))


def evidence(ep, now_s: float, phase_lost: dict | None = None) -> Text:
    """The episode's evidence, who read its devices over it and, where its cause changed,
    each phase (phase_lost: GPU-seconds by (episode id, phase), Ledger.by_phase)."""
    lines = ["", ep.reason or "(no evidence)"]
    summed = ep.culprit_sums()
    if summed:
        lines += ["", "who: " + "; ".join(c.as_json()["clause"] for c in summed[:3])]
    if len(ep.phases) > 1:
        lines.append("")
        for k, p in enumerate(ep.phases):
            lost = (phase_lost or {}).get((ep.id, k))
            lines.append(phase_line(k + 1, phase_json(p, lost, ep.end_wall_s)))
    if ep.advice:
        lines += ["", f"advice: {ep.advice}"]
    if ep.whatif:
        lines += ["", *whatif_lines(ep.whatif)]
    lines += ["", f"GPUs: {', '.join(map(str, ep.gpus)) or '-'}   devices: "
              f"{', '.join(ep.devices) or '-'}   processes: {', '.join(map(str, ep.processes)) or '-'}"]
    head = f"  episode #{ep.id}, {duration(ep.duration_s(now_s))}" + ("  (still open)" if ep.open else "")
    # each line escaped whole: a newline in the machine's text (a mountpoint in the
    # reason) is shown as \x0a, so no line here is one the evidence did not say
    return Text.assemble((printable(ep.state), "bold"), head, "\n", printable_block(lines))


class EpisodesScreen(ModalScreen):
    DEFAULT_CSS = """
    EpisodesScreen { align: center middle; }
    EpisodesScreen > Vertical { width: 100; max-width: 100%; height: 90%;
                                border: round $accent; background: $surface; }
    EpisodesScreen OptionList { height: 1fr; }
    EpisodesScreen #note { height: auto; padding: 0 1; color: $text-muted; }
    EpisodesScreen #evidence { height: auto; max-height: 50%; padding: 0 1; border-top: solid $accent; }
    """
    BINDINGS = [Binding("escape,e,q", "dismiss", "Close")]

    def __init__(self, episodes, now_s: float, note: str = "", ledger=None,
                 price=NO_PRICE, lost: dict[int, float] | None = None,
                 phase_lost: dict | None = None) -> None:
        """note: a line, or lines, said above the list; lost: the GPU-seconds lost to each
        episode, by its id (Ledger.by_episode); phase_lost: to each of their phases, by
        (id, phase) (Ledger.by_phase)."""
        super().__init__()
        self.episodes = list(reversed(episodes))  # newest first
        self.now_s = now_s
        self.lost = lost or {}
        self.phase_lost = phase_lost or {}
        lines = [note] if isinstance(note, str) else list(note)
        if ledger is not None and ledger.intervals:
            lines.insert(0, f"this session: {ledger.line(price)}")
        # kept as lines, each escaped whole when shown (the ledger's names devices and
        # mounts): one string escaped whole made its own line break a "\x0a"
        self.note_lines = [line for line in lines if line]
        self.note = "\n".join(self.note_lines)

    def compose(self) -> ComposeResult:
        with Vertical():
            if self.note:
                yield Static(Text(printable_block(self.note_lines)), id="note")
            if self.episodes:
                yield OptionList(*[Option(_describe(ep, self.now_s, self.lost.get(ep.id, 0.0)),
                                          id=str(ep.id))
                                   for ep in self.episodes])
                yield Static(evidence(self.episodes[0], self.now_s, self.phase_lost),
                             id="evidence")
            else:
                yield Static("No starvation episode yet: a state must hold for a few "
                             "intervals to open one.  escape closes.", id="evidence")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """Enter: close the list and go to the episode (the app's callback)."""
        self.dismiss(next(e for e in self.episodes if str(e.id) == event.option.id))

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        ep = next(e for e in self.episodes if str(e.id) == event.option.id)
        self.query_one("#evidence", Static).update(evidence(ep, self.now_s, self.phase_lost))
