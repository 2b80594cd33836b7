"""A stored probe the device contradicts is not believed (issue 35 item 4): the rule
(verdict/ceiling.py) on its own, then through the saturation judgement, the verdict's
evidence and the what-if, on crafted intervals (every number set).  The same through the
real command line on a real job: test_probe_real.py; the results file's bounds:
test_probe_units.py and test_probe_hostile.py."""

from __future__ import annotations

import math

import pytest

from gpudisk_top.collect.sample import DeviceInfo
from gpudisk_top.verdict.ceiling import FLOOR_IOPS, FLOOR_MIB_S, MARGIN, doubt, vet
from gpudisk_top.verdict.detect.saturation import SaturationTracker
from gpudisk_top.verdict.detect.thresholds import Thresholds
from gpudisk_top.verdict.whatif import Limit, Pipeline
from gpudisk_top.verdict.whatif.fixes import device_gap
from model_factory import rates
from test_loader_time import job_model, verdict, worker

HONEST = dict(ceiling_iops=100_000.0, ceiling_mib_s=2000.0, probed_read_ms=0.06)


# ---------------------------------------------------------------------------- the rule
def test_an_honest_probe_is_believed_and_a_device_that_does_twice_its_ceiling_is_not():
    assert vet("vda", **HONEST, read_r_s=30_000.0, read_kb_s=120_000.0) == (
        100_000.0, 2000.0, 0.06, None)
    # the margin is stated: twice the stored figure is still believed, more is not
    assert doubt("vda", **HONEST, read_r_s=MARGIN * 100_000.0, read_kb_s=0.0) is None
    assert doubt("vda", **HONEST, read_r_s=200_001.0, read_kb_s=0.0) == (
        "probe of vda ignored: 200.0k r/s read, above twice its stored QD32 ceiling of "
        "100.0k r/s")
    assert doubt("vda", **HONEST, read_r_s=0.0, read_kb_s=2 * 2000 * 1024 + 1024) == (
        "probe of vda ignored: 4001 MiB/s read, above twice its stored sequential ceiling "
        "of 2000 MiB/s")
    v = vet("vda", 1.0, 2000.0, 0.06, read_r_s=10_200.0, read_kb_s=40_800.0)
    assert v == (None, None, None, "probe of vda ignored: 10.2k r/s read, above twice its "
                                   "stored QD32 ceiling of 1 r/s")
    assert vet("vda", None, None, None, 1e6, 1e6) == (None, None, None, None)  # never probed


@pytest.mark.parametrize("figures,why", [
    # no device's, even where the device reads nothing that could contradict it
    (dict(HONEST, ceiling_mib_s=0.001),
     "its stored sequential ceiling of 0.001 MiB/s is below any disk's (1 MiB/s)"),
    (dict(HONEST, ceiling_iops=0.0), "its stored QD32 ceiling of 0 r/s is below any disk's"),
    (dict(HONEST, ceiling_iops=1e12), "its stored QD32 ceiling of 1e+12 r/s is above any device's"),
    (dict(HONEST, ceiling_iops=math.nan), "its stored QD32 ceiling (nan) is not a rate"),
    (dict(HONEST, probed_read_ms=-1.0), "its stored QD1 rate (nan) is not a rate"),
    (dict(HONEST, probed_read_ms=1000.0 / (FLOOR_IOPS / 2)), "its stored QD1 rate of 5 r/s"),
    # figures that contradict each other: a deeper queue never halves a device's rate
    (dict(HONEST, probed_read_ms=1000.0 / 250_000.0),
     "its stored QD1 rate of 250.0k r/s is above twice its QD32 ceiling of 100.0k r/s"),
])
def test_a_figure_no_device_has_is_doubted_with_the_device_idle(figures, why):
    said = doubt("nvme0n1", **figures, read_r_s=0.0, read_kb_s=0.0)
    assert said.startswith("probe of nvme0n1 ignored: " + why), said
    assert vet("nvme0n1", **figures, read_r_s=0.0, read_kb_s=0.0)[:3] == (None, None, None)
    assert FLOOR_MIB_S == 1.0 and FLOOR_IOPS == 10.0    # what docs/probe.md states


# ---------------------------------------------------------------------------- saturation
BUSY = rates(r_s=500.0, rkb_s=2000.0, rareq_kb=4.0, r_await_ms=2.0, aqu_sz=2.0, util_pct=90.0)


def test_a_ceiling_the_device_outruns_makes_no_device_look_at_its_peak():
    """A stored 1 r/s: every busy device was 'at its peak' from the first interval on."""
    tracker = SaturationTracker(Thresholds())
    s = tracker.assess("vda", BUSY, "virtual", False, None, 1.0, 2000.0, 0.06)
    assert "peak" not in s.signals
    assert s.ceiling_iops is None and s.probed_read_ms is None and s.ceiling_mib_s is None
    assert s.probe_doubt == ("probe of vda ignored: 500 r/s read, above twice its stored "
                             "QD32 ceiling of 1 r/s")
    # the device showed what it does: a quiet interval later the probe is still doubted
    quiet = rates(r_s=0.5, rkb_s=2.0, rareq_kb=4.0, r_await_ms=0.1, aqu_sz=0.0)
    assert tracker.assess("vda", quiet, "virtual", False, None, 1.0, 2000.0,
                          0.06).probe_doubt == s.probe_doubt
    # an honest probe still counts from the first interval (the documented peak rule)
    at = rates(r_s=95_000.0, rkb_s=380_000.0, rareq_kb=4.0, r_await_ms=0.2, aqu_sz=19.0)
    honest = SaturationTracker(Thresholds()).assess("vda", at, "NVMe", False, None, **HONEST)
    assert "peak" in honest.signals and honest.ceiling_iops == 100_000.0
    assert honest.probe_doubt is None


# ---------------------------------------------------------------------------- the verdict
HEADROOM = rates(r_s=30_752.0, rkb_s=123_008.0, rareq_kb=4.0, r_await_ms=0.07, aqu_sz=2.2,
                 util_pct=73.0)


def _probed(**ceiling):
    m = job_model([worker(p, 26.0, 3.0, 64.0, read_kb_s=30_752.0) for p in (1, 2, 3, 4)],
                  disk=HEADROOM)
    if ceiling:
        m.devices["nvme0n1"] = DeviceInfo("nvme0n1", "nvme0n1", 259, 0, "disk",
                                          dev_class="NVMe", **ceiling)
    return verdict(m)


def test_the_evidence_and_the_whatif_say_a_contradicted_probe_was_ignored():
    v = _probed(ceiling_iops=1.0, ceiling_mib_s=2000.0, probed_read_ms=0.06)
    why = "probe of nvme0n1 ignored: 30.8k r/s read, above twice its stored QD32 ceiling of 1 r/s"
    assert (v.state, v.kind) == ("disk-starved", "latency-bound")
    assert f"nvme0n1 at 30752.00 r/s ({why}), r_await 0.07 ms" in v.reason
    assert "(probe)" not in v.reason and "% of its ceiling" not in v.reason
    # one interval: the unprobed device is capped at the rate it reads now (issue 38), so
    # more workers gain nothing to predict; what the what-if says of the device is its gap
    p = Pipeline(0.2, loaders=4, b=0.64, reads_s=30_752.0, device="nvme0n1",
                 device_r_s=30_752.0, device_aqu=2.2, probe_doubt=why)
    assert device_gap(p) == (f"{why}: capped at the 30,752 r/s it was seen doing; "
                             "`gpudisk-top probe /dev/nvme0n1` measures it")
    for w in v.whatif:
        assert w.limit is not Limit.DEVICE_QD32 and "from the probe" not in w.basis
        assert w.fix != "storage"                       # it needs a probe to believe
    for w in v.whatif:
        assert why in w.basis and w.confidence == "estimated"
    # the same interval with no probe at all gives the same predictions
    unprobed = _probed()
    assert [(w.fix, w.to, round(w.speedup, 3)) for w in v.whatif] == [
        (w.fix, w.to, round(w.speedup, 3)) for w in unprobed.whatif]
    p.probe_doubt = None
    assert device_gap(p).startswith("no probe of nvme0n1: capped at the 30,752 r/s")


def test_a_bandwidth_of_a_thousandth_of_a_mib_makes_no_prediction_vanish():
    """seq_read_mib_s 0.001 bound every speed below now: every fix fell under 2 %."""
    v = _probed(ceiling_iops=100_000.0, ceiling_mib_s=0.001, probed_read_ms=0.06)
    unprobed = _probed()
    assert [w.fix for w in v.whatif] == [w.fix for w in unprobed.whatif]
    assert ("probe of nvme0n1 ignored: 120 MiB/s read, above twice its stored sequential "
            "ceiling of 0.001 MiB/s") in v.reason
    assert not any(w.limit is Limit.DEVICE_BANDWIDTH for w in v.whatif)


def test_an_honest_probe_is_still_the_evidence_and_the_whatifs_curve():
    v = _probed(**HONEST)
    assert "of its 100000 at queue depth 32 (probe): 31% of its ceiling" in v.reason
    assert "ignored" not in v.reason
    assert any("device latency from the probe (QD1 16667, QD32 100000 r/s)" in w.basis
               for w in v.whatif)
