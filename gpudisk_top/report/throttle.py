"""The report's account of each GPU's throttling over the window (issue 40): the share of
the time each reason held its clocks down, from the recorded clock-event durations (the
model's shares, model/gpu.py _throttle, weighted by each interval's length), and where a
GPU counts no duration, how many of its intervals each reason held at the read (the
bit mask: no share of the time is known).  Counted on the intervals report/tiers.py
counts (the same ones, the same way: TierCount carries a ThrottleCount), so a window
read from whole summary blocks is counted from its raw samples up to MAX_RAW_SAMPLES, else
says so.  A recording made before the durations were recorded reads as the mask; one
with neither says nothing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from gpudisk_top.collect.gpu_fields import THROTTLE_REASONS
from gpudisk_top.model.gpu import THROTTLE_MASK
from gpudisk_top.model.gpu_words import mask_reasons, share_text


@dataclass
class ThrottleCount:
    """Per GPU index: per reason [seconds held, seconds counted] (durations), and the
    intervals read from the bit mask with the reasons held at each read."""

    durations: dict[int, dict[str, list[float]]] = field(default_factory=dict)
    mask_intervals: Counter = field(default_factory=Counter)
    mask: dict[int, Counter] = field(default_factory=dict)

    def add(self, views, interval_s: float | None) -> None:
        """One interval's GpuViews, `interval_s` long (None or 0: not counted)."""
        if not interval_s or interval_s <= 0:
            return
        for view in views:
            if view.lost:
                continue
            shares = view.throttle_pct
            if any(pct is not None for pct in shares.values()):
                per = self.durations.setdefault(view.index, {})
                for reason, pct in shares.items():
                    if pct is not None:
                        cell = per.setdefault(reason, [0.0, 0.0])
                        cell[0] += pct / 100 * interval_s
                        cell[1] += interval_s
            elif view.throttle_source == THROTTLE_MASK:
                self.mask_intervals[view.index] += 1
                self.mask.setdefault(view.index, Counter()).update(mask_reasons(view))

    def merge(self, other: "ThrottleCount") -> None:
        for index, per in other.durations.items():
            mine = self.durations.setdefault(index, {})
            for reason, (held, counted) in per.items():
                cell = mine.setdefault(reason, [0.0, 0.0])
                cell[0] += held
                cell[1] += counted
        self.mask_intervals.update(other.mask_intervals)
        for index, counts in other.mask.items():
            self.mask.setdefault(index, Counter()).update(counts)


def add_throttle(data: dict, count: ThrottleCount) -> None:
    """To each GPU of data["gpus"]: "throttle_pct" (reason -> the share of the time
    counted it held the clocks down, in %; None where the recording has no duration of
    it), "throttle_counted_s" (the seconds counted), "throttle_mask_intervals" (the
    intervals read from the bit mask) and "throttle_mask" (reason -> how many of those
    it held at the read).  Raises nothing."""
    for g in data["gpus"]:
        per = count.durations.get(g["index"], {})
        g["throttle_pct"] = {r: round(per[r][0] / per[r][1] * 100, 1)
                             if r in per and per[r][1] > 0 else None for r in THROTTLE_REASONS}
        g["throttle_counted_s"] = round(max((c for _, c in per.values()), default=0.0), 3)
        g["throttle_mask_intervals"] = count.mask_intervals.get(g["index"], 0)
        g["throttle_mask"] = dict(count.mask.get(g["index"], Counter()).most_common())


def throttle_lines(d: dict) -> list[str]:
    """The text report's lines: one a GPU whose clocks something held down, with each
    reason's share of the time (or, from the mask, in how many intervals it held at the
    read); one line where the durations were counted and nothing held; none where the
    recording has neither."""
    gpus = d.get("gpus") or ()
    counted = [g for g in gpus if g.get("throttle_counted_s")]
    masked = [g for g in gpus if g.get("throttle_mask")]
    if not counted and not masked:
        return []
    out = []
    held = [g for g in counted if any(g["throttle_pct"].values())]
    if held:
        out.append("GPU throttling, per GPU: the share of the time each reason held the clocks "
                   "down (NVML clock-event durations)")
        for g in held:
            out.append(f"  GPU {g['index']:>2}: " + ", ".join(
                share_text(r, pct) for r, pct in g["throttle_pct"].items() if pct))
    elif counted:
        out.append("GPU throttling: no reason held any GPU's clocks down (NVML clock-event "
                   "durations)")
    if masked:
        out.append("GPU throttling at the read, per GPU (the bit mask: these GPUs count no "
                   "duration, so no share of the time is known)")
        for g in masked:
            out.append(f"  GPU {g['index']:>2}: " + ", ".join(
                f"{r} in {k} of {g['throttle_mask_intervals']} intervals"
                for r, k in g["throttle_mask"].items()))
    return out
