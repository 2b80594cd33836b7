"""Starvation detection: states with evidence, episodes with hysteresis.

    det = Detector(Thresholds())
    for model in models:            # one Model per interval, live or replayed
        verdict = det.feed(model)   # verdict.state, .reason, .episode
"""

from gpudisk_top.verdict.detect.states import (OWN_CAUSE_STATES, STARVED_STATES, STATE_BADGE,
                                               STATE_GLYPH, STATE_WORD, STATES, UNAVAILABLE)
from gpudisk_top.verdict.detect.detector import Detector, Episode, Verdict, one_interval
from gpudisk_top.verdict.detect.thresholds import DEVICE_CLASSES, Thresholds

__all__ = ["Detector", "Episode", "Verdict", "Thresholds", "STATES", "STARVED_STATES",
           "OWN_CAUSE_STATES", "STATE_GLYPH", "STATE_BADGE", "STATE_WORD", "UNAVAILABLE", "DEVICE_CLASSES", "one_interval"]
