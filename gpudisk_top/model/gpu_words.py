"""How every surface says what held a GPU's clocks down and a GPU process's NVML sample,
so that a figure reads the same on `--once`, the dashboard and the report: each
throttle reason's share of the interval where NVML counts its duration
("clocks held down sw_power_cap 42.0% of the interval"; short: "pwr 42%"), the reasons
holding at the instant of the read where it counts none, said to be the bit mask and
never given a share ("pwr cap (mask)"), and a per-process sample with its age ("71@2s").

The shares and the mask are the model's (model/gpu.py _throttle); this module only words
them.  An idle GPU's clocks drop for want of work, not held down: gpu_idle is never said.
"""

from __future__ import annotations

from gpudisk_top.model.gpu import THROTTLE_DURATIONS, THROTTLE_MASK
from gpudisk_top.model.vocab import GPU

# the reasons NVML counts durations of (collect/gpu_fields.py THROTTLE_FIELDS), short, as a
# narrow panel says them
SHORT = {"sw_power_cap": "pwr", "hw_power_brake": "brake", "sw_thermal": "therm",
         "hw_thermal": "hw therm", "sync_boost": "sync"}
# the bit mask's reasons (model/gpu.py THROTTLE_REASONS), short; one this table lacks is
# said by its own name
MASK_SHORT = {"sw_power_cap": "pwr cap", "hw_power_brake": "pwr brake", "sw_thermal": "therm",
              "hw_thermal": "hw therm", "sync_boost": "sync", "hw_slowdown": "hw slowdown",
              "applications_clocks": "app clocks", "display_clocks": "display",
              "board_limit": "board limit", "reliability": "reliability"}
MASK_WORD = "(mask)"
NOT_SAID = "gpu_idle"


def held_pct(view) -> dict[str, float]:
    """A GpuView's reasons that held its clocks down this interval, with their share of
    it in % (clock-event durations; {} where the source is the mask or nothing held).
    Raises nothing."""
    if view.throttle_source != THROTTLE_DURATIONS:
        return {}
    return {reason: pct for reason, pct in view.throttle_pct.items() if pct}


def mask_reasons(view) -> list[str]:
    """A GpuView's reasons holding at the instant of the read, where the GPU counts no
    duration (the bit mask), gpu_idle left out.  Raises nothing."""
    if view.throttle_source != THROTTLE_MASK:
        return []
    return [r for r in view.throttle_reasons if r != NOT_SAID]


def whole_pct(pct: float) -> str:
    """A share as a narrow panel says it: whole percent, "<1%" for a share that would
    round to none."""
    return "<1%" if 0 < pct < 0.5 else f"{pct:.0f}%"


def throttle_short(view) -> list[str]:
    """A GpuView's throttling in a panel's words: ["pwr 42%", "therm 10%"] (each reason's
    share of the interval), ["pwr cap (mask)"] (the bit mask: no share), [] where nothing
    held.  Raises nothing."""
    held = held_pct(view)
    if held:
        return [f"{SHORT[r]} {whole_pct(pct)}" for r, pct in held.items()]
    reasons = mask_reasons(view)
    if reasons:
        return [f"{', '.join(MASK_SHORT.get(r, r) for r in reasons)} {MASK_WORD}"]
    return []


def share_text(reason: str, pct: float | None) -> str:
    """A reason's share of the time in --once's and the report's words:
    "sw_power_cap 42.0%".  Raises KeyError for a reason NVML counts no duration of."""
    return f"{reason} {GPU[f'throttle_{reason}_pct'].text(pct)}%"


def throttle_line(view) -> str | None:
    """What held a GPU's clocks down, in --once's words: each reason's share of the
    interval (clock-event durations), or the reasons holding at the read (the bit mask,
    where the GPU counts no duration); None when nothing did.  Raises nothing."""
    if view.throttle_source == THROTTLE_DURATIONS:
        held = [share_text(reason, pct) for reason, pct in held_pct(view).items()]
        text = f"clocks held down {', '.join(held)} of the interval" if held else None
        if view.throttle_note:
            text = f"{text}; {view.throttle_note}" if text else f"throttle: {view.throttle_note}"
        return text
    reasons = [r for r in view.throttle_reasons if r != NOT_SAID]
    if reasons:
        return f"clock event reasons at the read: {', '.join(reasons)} (no durations on this GPU)"
    return None


def sampled(text: str, age_s: float | None) -> str:
    """A per-process NVML figure with its age: "45@2s"; the figure alone when the age is
    not known (the first sample), "n/a" as it is.  Raises nothing."""
    if text == "n/a" or age_s is None:
        return text
    return f"{text}@{age_s:.0f}s"
