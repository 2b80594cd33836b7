"""The report's account of each GPU's busy tier over the window (issue 40): the share of
its intervals whose busy figure was GPM SM activity and the share utilization.gpu, and
why a GPU with GPM fell back when it did (its busy_note, counted).  The tier is the
model's (model/gpu.py gpu_view, the one owner), counted on every interval the report
models (report/tally.py: replayed intervals; every interval of a window of fewer than
MIN_CHART_BLOCKS summary blocks, or of `report --recompute`).  Recorded summaries do not
keep the tier: a window read from whole summary blocks has its raw samples read for it
when it holds at most MAX_RAW_SAMPLES (so that summaries and a replay give the same
report), else says how many of its intervals were counted (none: decoding a day's raw
samples for the tier alone would cost the report seconds a thousand samples).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from gpudisk_top.model.busy_tier import known, name
from gpudisk_top.model.gpu import BUSY_GPM, BUSY_UTILIZATION, gpu_views
from gpudisk_top.report.throttle import ThrottleCount, add_throttle
from gpudisk_top.verdict.gaps import previous_sample

MAX_RAW_SAMPLES = 1200   # a window's raw samples read for the tier, at most (~1 s; see above)
MAX_NOTES = 5            # the most frequent reasons a GPU fell back, per GPU
MAX_NOTE_KINDS = 50      # distinct reasons kept a GPU (a recording is untrusted: bounded)
TIERS = (BUSY_GPM, BUSY_UTILIZATION)


@dataclass
class TierCount:
    """Per GPU index: intervals on each tier, and the reasons it fell back."""

    tiers: dict[int, Counter] = field(default_factory=dict)
    notes: dict[int, Counter] = field(default_factory=dict)
    intervals: int = 0            # intervals counted
    skipped: int = 0              # samples read from whole summary blocks: not counted
    # each GPU's throttling (report/throttle.py), counted on the same intervals
    throttle: ThrottleCount = field(default_factory=ThrottleCount)

    def add(self, model) -> None:
        """One modelled interval (a Model); a stretch's first sample has no interval and
        is not counted."""
        if model.interval_s:
            self.add_views(model.gpus)
            self.throttle.add(model.gpus, model.interval_s)

    def add_views(self, views) -> None:
        """One interval's GpuViews."""
        self.intervals += 1
        for view in views:
            if view.lost or view.util_pct is None:
                continue
            self.tiers.setdefault(view.index, Counter())[known(view.busy_source)] += 1
            if view.busy_note:
                notes = self.notes.setdefault(view.index, Counter())
                if view.busy_note in notes or len(notes) < MAX_NOTE_KINDS:
                    notes[view.busy_note] += 1

    def merge(self, other: "TierCount") -> None:
        self.intervals += other.intervals
        self.skipped += other.skipped
        self.throttle.merge(other.throttle)
        for mine, theirs in ((self.tiers, other.tiers), (self.notes, other.notes)):
            for index, counts in theirs.items():
                mine.setdefault(index, Counter()).update(counts)


def raw_count(rec, ranges: list[tuple[int, int]]) -> TierCount:
    """The tiers of every interval of `ranges` (index ranges of rec), from the raw
    samples, as TierCount.add counts a modelled one (a sample after a gap, or a
    recording's first, has no interval).  Raises what Recording.sample raises."""
    count = TierCount()
    for lo, hi in ranges:
        for i in range(lo, hi + 1):
            last = previous_sample(rec, i)
            if last is not None:
                # the tier is the GPU's own reading's; the throttle shares are two reads'
                sample = rec.sample(i)
                window_us = (int(last.wall_s * 1e6), int(sample.wall_s * 1e6))
                views = gpu_views(sample.gpu, last.gpu, window_us)
                count.add_views(views)
                count.throttle.add(views, sample.wall_s - last.wall_s)
    return count


def add_tiers(data: dict, count: TierCount, rec=None, ranges=()) -> None:
    """To each GPU of data["gpus"]: "busy_tier_pct" (tier -> share of its intervals
    counted, in %; None where none was), "busy_tier_intervals" (how many were counted)
    and "busy_fallbacks" (the reasons a GPU with GPM fell back to utilization.gpu, each
    with "note" and "intervals", most frequent first, at most MAX_NOTES); and
    data["busy_tiers_counted"]: {"intervals": counted, "of": those and the samples read
    from whole summary blocks}.  Where count skipped whole blocks, `rec`'s raw samples
    of `ranges` are read instead when they are at most MAX_RAW_SAMPLES.  Raises what
    Recording.sample raises."""
    total = sum(hi - lo + 1 for lo, hi in ranges)
    if count.skipped and rec is not None and total <= MAX_RAW_SAMPLES:
        count = raw_count(rec, ranges)
    add_throttle(data, count.throttle)
    data["busy_tiers_counted"] = {"intervals": count.intervals,
                                  "of": count.intervals + count.skipped}
    for g in data["gpus"]:
        counts = count.tiers.get(g["index"], Counter())
        n = sum(counts.values())
        g["busy_tier_intervals"] = n
        g["busy_tier_pct"] = {t: round(counts[t] / n * 100, 1) if n else None for t in TIERS}
        g["busy_fallbacks"] = [{"note": note, "intervals": k} for note, k in
                               count.notes.get(g["index"], Counter()).most_common(MAX_NOTES)]


def tier_lines(d: dict) -> list[str]:
    """The text report's lines: one a GPU with its shares, the reasons it fell back under
    it; one line for all when every GPU read utilization.gpu throughout (the text is the
    machine's: the caller escapes it)."""
    counted = d.get("busy_tiers_counted") or {}
    gpus = [g for g in d.get("gpus") or () if g.get("busy_tier_intervals")]
    if not gpus:
        if counted.get("of"):
            return ["GPU busy figure: not counted (the window was read from recorded summaries, "
                    "which do not keep it: report --recompute counts it)"]
        return []
    read = "every interval" if counted.get("intervals") == counted.get("of") else (
        f"{counted.get('intervals')} of {counted.get('of')} intervals counted: report "
        "--recompute counts every one")
    if all(g["busy_tier_pct"][BUSY_UTILIZATION] == 100 for g in gpus):
        return [f"GPU busy figure: {name(BUSY_UTILIZATION)} on every GPU (no GPM), {read}"]
    out = [f"GPU busy figure, per GPU ({read}): the share of intervals on each tier"]
    for g in gpus:
        shares = g["busy_tier_pct"]
        out.append(f"  GPU {g['index']:>2}: " + ", ".join(
            f"{name(t)} {shares[t]:.1f}%" for t in TIERS if shares[t]))
        for f in g["busy_fallbacks"]:
            out.append(f"          fell back {f['intervals']}x: {f['note']}")
    return out
