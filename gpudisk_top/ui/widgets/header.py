"""The header line: host, kernel, interval, clock, the tool's own CPU and RSS, and flags
(DEMO, REPLAY, PAUSED, STALE, REC, a device filter...) that say when the screen is not
the live node now, or not all of it.

At 80 columns the flags stay whole: what is cut first is the tool's own CPU and RSS, the
kernel, the name, then the flags' longer words (base.CUT_FIRST["header"]).  Where the
node hides something (collect/visibility.py's blind spots: a container, not root) a `!`
follows the flags: the `!` key opens what cannot be seen and its fix."""

from __future__ import annotations

from gpudisk_top.collect.source import Source
from gpudisk_top.collect.visibility import NO_PSI, NO_SYSFS, NOT_ROOT, PID_NAMESPACE
from gpudisk_top.model.present import pct
from gpudisk_top.ui import theme
from gpudisk_top.ui.format import clock
from gpudisk_top.ui.widgets.base import LinesPanel, cut, fit


# collect/visibility.py's blind spots as header flags; `!`, --once and the JSON warnings
# say each in full, with its fix
BLIND_SPOT_FLAGS = {NO_SYSFS: "NO /sys", PID_NAMESPACE: "CONTAINER PIDS", NOT_ROOT: "NOT ROOT",
                    NO_PSI: "NO PSI"}
# a flag's shorter word, where the line is narrow (README: Header)
SHORT_WORD = {"CONTAINER PIDS": "PID NS", "ALL DEVICES": "ALL", "NOT RECORDING": "NOT REC"}
FIX_HINT = ("! fix", "!")   # after the flags of blind spots: the key that shows the fix


def _split(flag: str) -> tuple[str, str]:
    """A flag's word and its detail ("STALE sampling failed: why": the why)."""
    word, sep, detail = flag.partition(": ")
    return (word, detail) if sep else (flag, "")


def flag_forms(flags: list[str]) -> list[list[str]]:
    """The flags' texts from the longest to the shortest: every word whole, then the
    shorter words, then the details cut (down to none)."""
    split = [_split(f) for f in flags]
    longest = max([len(d) for _, d in split], default=0)
    forms = [list(flags)]
    for d in range(longest, -1, -1):
        forms.append([SHORT_WORD.get(w, w) + (f": {cut(detail, d)}" if detail and d else "")
                      for w, detail in split])
    return forms


class HeaderBar(LinesPanel):
    DEFAULT_CSS = "HeaderBar { height: 1; background: $panel; }"

    def show(self, origin: Source, interval_s: float, wall_s: float | None, self_cpu_pct,
             self_rss_mb, flags: list[str], show_self: bool = True, fix: bool = False) -> None:
        """fix: a blind spot is flagged, and `!` shows it with its fix."""
        if self.unchanged(origin, interval_s, wall_s, self_cpu_pct, self_rss_mb, tuple(flags),
                          show_self, fix):
            return
        host = origin.host_name or "?"
        parts = {"app": ["gpudisk-top ", ""],
                 "host": [f"{host} "] + [cut(host, n) + " " for n in range(len(host) - 1, 7, -1)],
                 "kernel": [f"Linux {origin.kernel} ", ""],
                 "every": [f"every {interval_s:g}s ", f"{interval_s:g}s "],
                 "clock": [clock(wall_s) + " " if wall_s is not None else ""]}
        forms = flag_forms(flags)
        parts["flags"] = [sum(len(f) + 3 for f in form) for form in forms]
        if fix:
            parts["fix-hint"] = [f" {h} " for h in FIX_HINT]
        if show_self:
            cpu = pct(self_cpu_pct, 1)
            rss = "n/a" if self_rss_mb is None else f"{self_rss_mb:.0f} MB"
            parts["self"] = [f"self {cpu} {rss}", ""]
        width = self.size.width or 80
        widths = {k: (v if k == "flags" else [len(t) for t in v]) for k, v in parts.items()}
        pick = fit("header", widths, width - 1)
        text = {k: v[pick[k]] for k, v in parts.items() if k != "flags"}
        left = [(text["app"], theme.BOLD), (text["host"], theme.PLAIN),
                (text["kernel"], theme.DIM), (text["every"], theme.PLAIN),
                (text["clock"], theme.BOLD)]
        right = []
        for flag in forms[pick["flags"]]:
            right.append((f" {flag} ", theme.BAD if flag.startswith("STALE") else theme.HEAD))
            right.append((" ", theme.PLAIN))
        if fix:
            right.append((text["fix-hint"], theme.BAD))
        if text.get("self"):
            right.append((text["self"], theme.DIM))
        used = sum(len(t) for t, _ in left) + sum(len(t) for t, _ in right)
        pad = [(" " * max(1, width - used), theme.PLAIN)]
        self.set_lines([left + pad + right])
