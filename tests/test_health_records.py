"""Device health in recordings, where readings are damaged or drives change: a health
record that cannot be read costs that sample its health, never its load data; a drive
replaced in its slot is never compared with the one before it; and one serialisation
and one "is this reading new" rule serve the records, the summaries and the replay."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from gpudisk_top.collect.health_smartctl import parse_smartctl
from gpudisk_top.collect.sample import DiskHealth, HealthSnapshot
from gpudisk_top.commands import report as report_cmd
from gpudisk_top.record import Recording, derived
from gpudisk_top.record.v2 import canonical
from gpudisk_top.record.v2 import flatten as flatten_mod
from gpudisk_top.record.v2 import summary as summary_codec
from gpudisk_top.record.v2.fields import HEALTH_FIELDS, FormatError, health_record
from gpudisk_top.report import summary
from recording_helpers import call, sim_samples, write_recording

FIXTURES = Path(__file__).parent / "fixtures" / "health"
EVERY = 20            # samples between two polls


def reading(name: str, dev: str, t: float, **kw) -> DiskHealth:
    text = (FIXTURES / name).read_text()
    h = parse_smartctl(text, dev, json.loads(text)["smartctl"]["exit_status"], read_wall_s=t)
    return dataclasses.replace(h, **kw)


def with_health(samples, readings):
    """The samples with a poller's snapshots beside them: readings(k, t) at every EVERY-th
    sample, its first readable reading of each drive kept as the poller keeps it."""
    snap = None
    first: dict[str, DiskHealth] = {}
    for n, s in enumerate(samples):
        if n % EVERY == 0:
            now = readings(n // EVERY, s.wall_s)
            for dev, h in now.items():
                if h.readable and (dev not in first or first[dev].serial != h.serial):
                    first[dev] = h
            snap = HealthSnapshot(now, dict(first), s.wall_s, n // EVERY + 1)
        s.health = snap
    return samples


def polls(k: int, t: float) -> dict[str, DiskHealth]:
    return {"sdb": reading("hdd-7.3-reallocated.json", "sdb", t, reallocated_sectors=304 + 4 * k),
            "nvme0n1": reading("nvme-7.0-media-errors.json", "nvme0n1", t, media_errors=7 + k)}


# ---------------------------------------------------------------------------- damaged records
def test_a_health_record_that_cannot_be_read_costs_only_health(tmp_path, monkeypatch):
    """sdb's reading is written as something no reader takes (an integer where its
    record goes; a string where a temperature goes, in another recording): those
    samples come back with their disks, GPUs and processes, health None, and the
    recording says so once."""
    samples = with_health(sim_samples(n=60), polls)
    for bad in (lambda rec: 5, lambda rec: [*rec[:11], "hot", *rec[12:]]):
        real = flatten_mod.health_record
        monkeypatch.setattr(flatten_mod, "health_record",
                            lambda h, bad=bad: bad(real(h)) if h.device == "sdb" else real(h))
        path = write_recording(tmp_path / f"bad{id(bad)}.gdtrec", samples, segment_samples=25)
        monkeypatch.setattr(flatten_mod, "health_record", real)
        with Recording.open(path) as rec:
            got = [s for _, s in rec.samples()]
            said = [w for w in rec.warnings if "health" in w]
        assert len(got) == len(samples)
        assert len(said) == 1 and "read without device health" in said[0], rec.warnings
        for live, back in zip(samples, got):
            assert back.health is None
            assert back.disks == live.disks and back.wall_s == live.wall_s
            assert [g.index for g in back.gpu.gpus] == [g.index for g in live.gpu.gpus]
        # the report has the load, and the readings the summaries kept
        with Recording.open(path) as rec:
            d = summary.build(rec, recompute=True).data
        assert d["samples"] == len(samples) and d["devices"]


def test_the_reader_takes_a_reading_only_of_its_types():
    from gpudisk_top.record.v2.fields import health_reading

    h = reading("nvme-7.0-media-errors.json", "nvme0n1", 1.0)

    assert health_reading(zip(HEALTH_FIELDS, health_record(h))) == h
    for name, wrong in (("temperature_c", "hot"), ("media_errors", 1.5), ("readable", 1),
                        ("failing_attributes", [1]), ("device", None), ("read_wall_s", True),
                        ("temperature_c", float("nan"))):
        rec = dict(zip(HEALTH_FIELDS, health_record(h)), **{name: wrong})
        with pytest.raises(FormatError):
            health_reading(rec.items())


# ---------------------------------------------------------------------------- one serialisation
def test_summaries_and_records_keep_a_reading_by_one_serialisation():
    """A summary block's reading is the record's fields that are set, read back by the
    one reader: a damaged one is refused there as in a record (the block is then
    replayed, nothing is lost)."""
    samples = with_health(sim_samples(n=5), polls)
    d = derived.Deriver(block_samples=5)
    for s in samples:
        d.add(s)
    (block,) = d.take()
    (back,) = summary_codec.decode_blocks(summary_codec.encode_blocks([block]))
    assert back.health == block.health and {h.device for _, h in back.health} == {"sdb", "nvme0n1"}
    raw = block.to_json()
    (j, rec), _ = raw["health"]
    assert rec == {k: v for k, v in zip(HEALTH_FIELDS, health_record(block.health[0][1]))
                   if v not in (None, [])}
    rec["temperature_c"] = "hot"
    with pytest.raises(ValueError):
        summary_codec.SummaryBlock.from_json(raw)


def test_a_new_snapshot_is_recorded_even_with_the_same_poll_count():
    """Two pollers (two runs) both at their first poll: the second's readings are its
    own, not the first's.  One rule (collect.sample.is_new) says what is new to the
    records and to the summaries."""
    samples = sim_samples(n=4)
    a = HealthSnapshot(polls(0, samples[0].wall_s), {}, samples[0].wall_s, 1)
    b = HealthSnapshot({"sdb": reading("hdd-7.3.json", "sdb", samples[2].wall_s)}, {},
                       samples[2].wall_s, 1)
    for s, snap in zip(samples, (a, a, b, b)):
        s.health = snap
    back = canonical(samples)
    assert [s.health for s in back] == [a, a, b, b]
    # a copy of a snapshot is not new: no reading twice
    new = derived.NewReadings()
    assert len(new.new_in(a)) == 2 and new.new_in(dataclasses.replace(a)) == []
    assert [h.device for h in new.new_in(b)] == ["sdb"]


# ---------------------------------------------------------------------------- drive replaced
def replaced(k: int, t: float) -> dict[str, DiskHealth]:
    """sdb: a Seagate with 304 reallocated sectors for two polls, then a new WD Red."""
    if k < 2:
        return {"sdb": reading("hdd-7.3-reallocated.json", "sdb", t, serial="5VM0XXXX",
                               reallocated_sectors=304 + 4 * k)}
    return {"sdb": reading("hdd-7.3.json", "sdb", t, serial="WD-WCC4EXXXXXXX",
                           reallocated_sectors=0, power_on_hours=1 + k)}


@pytest.mark.parametrize("recompute", [False, True])
def test_the_report_splits_a_disk_whose_drive_was_replaced(tmp_path, recompute):
    samples = with_health(sim_samples(n=80), replaced)
    path = write_recording(tmp_path / "r.gdtrec", samples, segment_samples=25)
    with Recording.open(path) as rec:
        d = summary.build(rec, recompute=recompute).data
    (sdb,) = [h for h in d["health"] if h["device"] == "sdb"]
    # the new drive's: two readings, its own trend
    assert sdb["serial"] == samples[40].health.readings["sdb"].serial
    assert sdb["readings"] == 2 and sdb["first"]["read_wall_s"] == samples[40].wall_s
    assert sdb["trend"]["reallocated_gained"] == 0 and sdb["trend"]["span_s"] == \
        samples[60].wall_s - samples[40].wall_s
    (old,) = sdb["replaced"]
    assert old["serial"] == samples[0].health.readings["sdb"].serial
    assert old["readings"] == 2 and old["trend"]["reallocated_gained"] == 4
    assert old["replaced_at_s"] == samples[40].wall_s
    assert call(report_cmd, str(path), "--no-charts") == 0


def test_the_text_report_says_when_a_drive_was_replaced(tmp_path, capsys):
    samples = with_health(sim_samples(n=80), replaced)
    path = write_recording(tmp_path / "r.gdtrec", samples)
    assert call(report_cmd, str(path), "--no-charts") == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "drive replaced" in x)
    assert line.startswith("     sdb: drive replaced at 20")
    assert "ST3500418AS serial 5VM0XXXX, 2 readings, last warning" in " ".join(
        out.split("drive replaced", 1)[1].split())
