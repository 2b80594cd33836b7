"""A saturated disk that is also hot or logging media errors says so in the verdict's
evidence (model/health.py evidence_clause, verdict/detect/storage.py), and one that is
fine adds nothing.  The disk-starved node is the simulator's; its disk's health is a real
drive's smartctl reading (tests/fixtures/health), attached to each sample as the poller
attaches it."""

from __future__ import annotations

import json
from pathlib import Path

from gpudisk_top.collect.health_smartctl import parse_smartctl
from gpudisk_top.collect.sample import HealthSnapshot
from gpudisk_top.verdict.detect import Detector
from gpudisk_top.model.snapshot import Model
from gpudisk_top.sim import Simulator, builtin

FIXTURES = Path(__file__).parent / "fixtures" / "health"


def starved_verdict(snapshot: HealthSnapshot | None):
    sim = Simulator(builtin("disk-starved-sata"), seed=0)
    det = Detector()
    last = sim.sample()
    last.health = snapshot
    verdicts = []
    for _ in range(len(sim.labels())):
        s = sim.sample()
        s.health = snapshot
        verdicts.append(det.feed(Model.new(s, last)))
        last = s
    return [v for v in verdicts if v.state == "disk-starved"][-1]


def sata_reading(temp_c: int, read_wall_s: float, **attrs):
    """The Samsung 860 EVO's reading (SCT: recommended at most 70 °C), at temp_c."""
    doc = json.loads((FIXTURES / "sata-ssd-7.0-x-sct.json").read_text())
    doc["temperature"].update(current=temp_c, limit_max=80)
    return parse_smartctl(doc, "sda", 0, read_wall_s=read_wall_s)


def nvme_reading(media_errors: int, read_wall_s: float):
    doc = json.loads((FIXTURES / "nvme-7.0-media-errors.json").read_text())
    doc["nvme_smart_health_information_log"]["media_errors"] = media_errors
    return parse_smartctl(doc, "sda", 0, read_wall_s=read_wall_s)


def test_a_hot_saturated_disk_says_it_throttles():
    first, now = sata_reading(66, 0.0), sata_reading(74, 600.0)
    v = starved_verdict(HealthSnapshot(readings={"sda": now}, first={"sda": first}))
    assert v.devices == ["sda"]
    # right after the device's own numbers, before whose reads they are
    assert "; temperature 74 °C, above its 70 °C warning: thermal throttling; " in v.reason
    assert v.reason.index("sda r_await") < v.reason.index("temperature 74") < \
        v.reason.index("of its reads from")


def test_media_errors_say_how_many_since_start():
    v = starved_verdict(HealthSnapshot(readings={"sda": nvme_reading(7, 600.0)},
                                       first={"sda": nvme_reading(4, 0.0)}))
    assert "; 7 media errors (3 since start); " in v.reason


def test_a_healthy_or_unread_disk_adds_nothing():
    plain = starved_verdict(None).reason
    fine = sata_reading(40, 0.0)
    assert starved_verdict(HealthSnapshot(readings={"sda": fine}, first={"sda": fine})).reason \
        == plain
    assert "temperature" not in plain and "media errors" not in plain
