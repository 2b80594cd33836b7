"""The header line: host, kernel, interval, clock, the tool's own CPU and RSS, and flags
(DEMO, REPLAY, PAUSED, STALE) that say when the screen is not the live node now."""

from __future__ import annotations

from gpudisk_top.collect.visibility import NO_PSI, NO_SYSFS, NOT_ROOT, PID_NAMESPACE
from gpudisk_top.ui import theme
from gpudisk_top.ui.format import clock
from gpudisk_top.ui.widgets.base import LinesPanel


# collect/visibility.py's blind spots as header flags; --once and the JSON warnings say
# each in full, with its fix
BLIND_SPOT_FLAGS = {NO_SYSFS: "NO /sys", PID_NAMESPACE: "CONTAINER PIDS", NOT_ROOT: "NOT ROOT",
                    NO_PSI: "NO PSI"}


class HeaderBar(LinesPanel):
    DEFAULT_CSS = "HeaderBar { height: 1; background: $panel; }"

    def show(self, origin: dict, interval_s: float, wall_s: float | None, self_cpu_pct,
             self_rss_mb, flags: list[str], show_self: bool = True) -> None:
        left = [("gpudisk-top ", theme.BOLD), (f"{origin['host_name']} ", theme.PLAIN),
                (f"Linux {origin['kernel']} ", theme.DIM), (f"every {interval_s:g}s ", theme.PLAIN)]
        if wall_s is not None:
            left.append((clock(wall_s) + " ", theme.BOLD))
        right = []
        for flag in flags:
            right.append((f" {flag} ", theme.BAD if flag.startswith("STALE") else theme.HEAD))
            right.append((" ", theme.PLAIN))
        if show_self:
            cpu = "n/a" if self_cpu_pct is None else f"{self_cpu_pct:.1f}%"
            rss = "n/a" if self_rss_mb is None else f"{self_rss_mb:.0f} MB"
            right.append((f"self {cpu} {rss}", theme.DIM))
        width = self.size.width or 80
        used = sum(len(t) for t, _ in left) + sum(len(t) for t, _ in right)
        pad = [(" " * max(1, width - used), theme.PLAIN)]
        self.set_lines([left + pad + right])
