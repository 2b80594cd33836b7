"""Device health beside the load (issue 16), where it is shown: the disk table's health
column at 80x24 and 120x40, the device detail's health section, recordings (readings as
slow samples, read back by replay) and report's trend over the window.

The node is the simulator at a fixed seed; its disks' health readings are real drives'
`smartctl --json` (tests/fixtures/health/, README there) read by the collector's parser,
replaced every POLL_S samples as the slow poller replaces its snapshot, with the
counters a drive adds to between two readings advanced."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
from pathlib import Path

import pytest

from gpudisk_top.collect.health_smartctl import parse_smartctl
from gpudisk_top.collect.sample import DiskHealth
from gpudisk_top.commands import report as report_cmd
from gpudisk_top.model.snapshot import Model
from gpudisk_top.record import Recording
from gpudisk_top.record.v2 import canonical
from gpudisk_top.report import summary
from gpudisk_top.sim import Simulator, builtin
from gpudisk_top.ui import theme
from gpudisk_top.ui.screens.device import DeviceDetail, DeviceScreen
from gpudisk_top.ui.widgets.disks import DiskPanel
from gpudisk_top.collect.source import LIVE, Source
from apps import dashboard_app
from recording_helpers import ROOT, call, write_recording
from screen_text import lines_of, text_of
from ui_helpers import made_with_no_color

POLL_S = 60          # samples between two polls (the real poller: 10 minutes)
FIXTURES = Path(__file__).parent / "fixtures" / "health"
VIRTIO = "virtio disk: no SMART (the hypervisor does not pass it through)"


@functools.cache
def parsed(name: str) -> DiskHealth:
    text = (FIXTURES / name).read_text()
    return parse_smartctl(text, "sdx", json.loads(text)["smartctl"]["exit_status"])


def drive(name: str, dev: str, t: float, **kw) -> DiskHealth:
    """A real drive's reading (its fixture's) as `dev`'s, read at t; kw changes fields."""
    return dataclasses.replace(parsed(name), device=dev, read_wall_s=t, **kw)


def poll(k: int, t: float) -> dict[str, DiskHealth]:
    """The poller's k-th reading (from 0) of the demo node's disks: sdb (the disk the
    demo's job starves on) is a Seagate with 304 reallocated sectors that gains 4 a poll;
    nvme0n1 a Samsung 970 EVO with 7 media errors that runs hot (81 °C over its 80 °C
    WCTEMP, as the kernel's hwmon gives it) and gains media errors, error-log entries,
    wear and minutes above warning; sde the Hitachi whose self-assessment failed; sdf a
    healthy WD Red; vda a virtio disk; the other disks are not read."""
    return {
        "sdb": drive("hdd-7.3-reallocated.json", "sdb", t, reallocated_sectors=304 + 4 * k),
        "nvme0n1": drive("nvme-7.0-media-errors.json", "nvme0n1", t, temperature_c=81.0,
                         warning_temp_c=80.0, critical_temp_c=83.0, media_errors=7 + 3 * k,
                         error_log_entries=62 + 12 * k, percentage_used_pct=3.0 + k,
                         warning_temp_time_min=14 * k),
        "sde": drive("hdd-7.1-failing.json", "sde", t),
        "sdf": drive("hdd-7.3.json", "sdf", t),
        "vda": DiskHealth("vda", t, unreadable_reason=VIRTIO),
    }


def HealthSim(scenario: str = "demo", readings=poll) -> Simulator:
    """The simulator whose health poller (sim/health.py SimulatedPoller, the real
    poller's rule) reads `readings` every POLL_S samples, from the first; the samples in
    between share its snapshot."""
    return Simulator(builtin(scenario), seed=0, health_interval_s=POLL_S,
                     health_readings=readings)


def rows_of(panel) -> dict[str, str]:
    """The disk table's rows by device name, as text."""
    out = {}
    for text in lines_of(panel)[1:]:
        name = text[1:].split(" ", 1)[0]
        if name:
            out[name] = text
    return out


def head_of(panel) -> str:
    return lines_of(panel)[0]


def detail_text(app) -> str:
    return text_of(app.screen.query_one(DeviceDetail))


@contextlib.asynccontextmanager
async def running(app, size: tuple[int, int], samples: int = 100):
    """(app, pilot): `app` under Pilot at `size`, `samples` samples in and drawn."""
    async with app.run_test(size=size) as pilot:
        app.advance(samples)
        await pilot.pause()
        yield app, pilot


async def detail_after(samples: int, device: str) -> str:
    """The text of `device`'s detail screen, opened after `samples` samples of the demo
    and drawn by the sample after."""
    async with running(dashboard_app(HealthSim()), (120, 60), samples) as (app, pilot):
        app.push_screen(DeviceScreen(device))
        await pilot.pause()
        app.advance(1)
        await pilot.pause()
        return detail_text(app)


# ---------------------------------------------------------------------------- the disk table
async def test_the_disk_tables_health_column_at_80x24_keeps_its_glyph_and_the_mountpoint():
    # at 80 columns the health word goes before the mountpoint is cut (issue 23): the
    # glyph says the status, ✓ ! ✗ ?, and the whole mountpoint follows it
    async with running(dashboard_app(HealthSim()), (80, 24)) as (app, pilot):
        panel = app.query_one(DiskPanel)
        assert "mount" in head_of(panel)
        rows = rows_of(panel)
        model = app.shown.model
        glyphs = {"sdb": "!", "sde": "✗", "vda": "?", "sdf": "✓", "nvme0n1": "!"}
        for name, glyph in glyphs.items():
            mounts = ",".join(model.devices[name].mountpoints) or "-"
            assert rows[name].rstrip().endswith(f" {glyph}  {mounts}"), rows[name]
        # no room for the words or the reasons at 80 columns; each row still fits
        assert "warn" not in rows["sdb"] and "°C" not in rows["nvme0n1"]
        assert all(len(r) <= 80 for r in rows.values())


async def test_the_disk_tables_health_column_at_120x40_shows_the_first_reason():
    async with running(dashboard_app(HealthSim()), (120, 40)) as (app, pilot):
        panel = app.query_one(DiskPanel)
        rows = rows_of(panel)
        assert "! warn reallocated sectors" in rows["sdb"]
        assert "✗ FAIL SMART self-assessme…" in rows["sde"]         # cut to the room there is
        assert "? n/a  virtio disk: no SM" in rows["vda"]
        assert "! warn 81 °C above warning" in rows["nvme0n1"]
        # a disk the poller has no reading of
        assert rows["sda"].split()[-2] == "—"
        assert "/datasets" in rows["sdb"] and " SSD " in rows["sdb"]   # mount and class stay
        assert all(len(r) <= 120 for r in rows.values())
        # the glyph says it without colour; the colour marks it too
        cell = next(style for text, style in panel._lines[2] if "FAIL" in text)
        assert cell == theme.BAD


async def test_a_partition_shows_its_disks_health():
    async with running(dashboard_app(HealthSim()), (120, 40)) as (app, pilot):
        await pilot.press("a")                     # every device, partitions too
        await pilot.pause()
        panel = app.query_one(DiskPanel)
        panel.scroll_lines(0)
        rows = rows_of(panel)
        assert "! warn reallocated sec" in rows["sdb1"]


async def test_no_health_poller_no_column():
    """A node (or a recording) without health readings draws the table as before."""
    bare = dashboard_app(Simulator(builtin("demo"), seed=0, health_interval_s=0))
    async with running(bare, (120, 40)) as (app, pilot):
        assert "health" not in head_of(app.query_one(DiskPanel))


async def test_no_color_health_is_told_by_glyph_and_attributes():
    async with running(made_with_no_color(lambda: dashboard_app(HealthSim())), (120, 40)) as (app, pilot):
        panel = app.query_one(DiskPanel)
        for line in panel._lines[1:]:
            for text, style in line:
                if "FAIL" in text:
                    assert text.lstrip().startswith("✗") and style.color is None
                    assert style.bold and style.reverse
                if "warn" in text:
                    assert text.lstrip().startswith("!") and style.color is None and style.bold


# ---------------------------------------------------------------------------- the detail
async def test_the_device_detail_shows_every_field_and_the_trend_since_start():
    text = await detail_after(130, "nvme0n1")      # three polls: 0, 60 and 120
    assert "health ! warn: 81 °C above warning 80 °C; media errors 13" in text
    for words in ("SMART             passed", "critical warning  0x00",
                  "temperature       81 °C  (warning 80 °C, critical 83 °C)",
                  "above warning     28 min in its life, above critical 0 min",
                  "endurance used    5 %",
                  "available spare   99 %  (threshold 10 %)", "media errors      13",
                  "error log         86 entries", "unsafe shutdowns  10",
                  "power-on          12798 h", "smartctl, read ", " ago · ",
                  "NVMe Samsung SSD 970 EVO 500GB serial S466NX0M776250H firmware 2B2QEXE7"):
        assert words in text, words
    # what an NVMe drive (or this smartctl) does not keep is left out
    assert "sectors" not in text and "thermal throttle" not in text
    assert ("since start       over 2m00s: media errors +6, error log +24, unsafe "
            "shutdowns +0, wear +2 %, above warning +28 min") in text


async def test_the_device_detail_of_an_unreadable_disk_says_why():
    text = await detail_after(10, "vda")
    assert "? n/a  no source" in text and f"why               {VIRTIO}" in text
    assert "SMART   " not in text


async def test_the_device_detail_of_a_partition_names_its_disk():
    text = await detail_after(10, "sdb1")
    assert "sdb: ! warn" in text and "sectors           reallocated 304, pending 0" in text
    assert "ATA attributes    none" in text


# ---------------------------------------------------------------------------- recordings
@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """130 samples of the demo with three polls, in blocks of 50 (so readings cross
    blocks and the tail stays rows until closed)."""
    src = HealthSim()
    samples = [src.sample() for _ in range(130)]
    path = write_recording(tmp_path_factory.mktemp("health") / "h.gdtrec", samples,
                           segment_samples=50)
    return path, samples


def test_a_recording_gives_back_each_samples_health(recorded):
    path, samples = recorded
    with Recording.open(path) as rec:
        assert not rec.warnings and len(rec) == len(samples)
        assert rec.header["schema"]["health"][:3] == ["device", "read_wall_s", "source"]
        got = [s for _, s in rec.samples()]
    for live, back in zip(samples, got):
        assert back.health == live.health                 # every DiskHealth field, exactly
    # one snapshot object while the poller's is the same (model.health keeps its views by
    # identity), a new one at each poll
    assert got[1].health is got[2].health
    assert got[59].health is not got[60].health and got[60].health.polls == 2
    # the run's first reading is the latest one until the next poll: no trend to itself
    m = Model.new(got[10], got[9])
    assert m.health["nvme0n1"].since_start is None
    m = Model.new(got[100], got[99])
    live = Model.new(samples[100], samples[99])
    assert m.health["nvme0n1"] == live.health["nvme0n1"]
    assert m.health["nvme0n1"].since_start.media_errors_gained == 3


def test_rows_and_blocks_carry_a_reading_once(recorded):
    """A reading is written when the poller makes it, not with every sample: the rows of
    a run carry it once, a block keeps it as one run of its column."""
    from gpudisk_top.record.v2 import Flattener, RowCoder

    _, samples = recorded
    fl, coder = Flattener(), RowCoder()
    sizes = []
    for i, s in enumerate(samples[:70]):
        layout, vals = fl.flatten(s)
        payload, token = coder.encode(i, layout, vals)
        coder.accepted(token)
        fl.accept(s)
        sizes.append(payload.count(b"S466NX0M776250H"))
    assert sizes[0] == 2                           # the reading and the first, once each
    assert sizes[1:60] == [0] * 59                 # nothing of it again until the next poll
    assert sizes[60] == 1                          # the new reading (the first stays)
    assert canonical(samples[:3])[2].health == samples[2].health


def test_an_old_recording_opens_without_health():
    with Recording.open(os.path.join(ROOT, "tests/fixtures/recordings/v2-demo-simulated.gdtrec")) as rec:
        assert all(s.health is None for _, s in rec.samples(0, 50))
        d = summary.build(rec).data
    assert d["health"] == [] and all(e["health"] == [] for e in d["episodes"])


async def test_replay_shows_the_same_health_at_the_same_moment(recorded):
    from gpudisk_top.ui.replay_app import ReplayApp

    path, samples = recorded
    async with running(dashboard_app(HealthSim()), (120, 40)) as (live, pilot):
        want = rows_of(live.query_one(DiskPanel))
    rec = Recording.open(path)
    app = ReplayApp(rec, Source(LIVE, "demo-node", "replay", kernel="simulated"),
                    start_index=99, show_self=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        got = rows_of(app.query_one(DiskPanel))
    for dev in ("sdb", "sde", "vda", "nvme0n1", "sdf", "sda"):
        assert got[dev].split("  /")[0].split()[-3:] == want[dev].split("  /")[0].split()[-3:], dev


# ---------------------------------------------------------------------------- the report
def _health(d: dict) -> dict:
    return {h["device"]: h for h in d["health"]}


@pytest.mark.parametrize("recompute", [False, True])
def test_report_gives_each_disks_trend_over_the_window(recorded, recompute):
    path, samples = recorded
    with Recording.open(path) as rec:
        d = summary.build(rec, recompute=recompute).data
    assert d["derived"] == (summary.RECOMPUTED if recompute else summary.RECORDED)
    h = _health(d)
    assert list(h)[:2] == ["sde", "nvme0n1"] or list(h)[0] == "sde"    # failing first
    nv = h["nvme0n1"]
    assert nv["readings"] == 3 and nv["status"] == "warning"
    assert nv["first"]["media_errors"] == 7 and nv["last"]["media_errors"] == 13
    assert nv["first"]["read_wall_s"] == samples[0].wall_s
    assert nv["last"]["read_wall_s"] == samples[120].wall_s
    t = nv["trend"]
    assert t["media_errors_gained"] == 6 and t["error_log_gained"] == 24
    assert t["wear_gained_pct"] == 2.0 and t["minutes_above_warning"] == 28.0
    assert t["span_s"] == samples[120].wall_s - samples[0].wall_s
    assert h["sde"]["status"] == "failing" and h["sde"]["trend"]["media_errors_gained"] is None
    assert h["vda"]["status"] == "unknown" and h["vda"]["trend"] is None
    assert h["sdb"]["trend"]["reallocated_gained"] == 8
    assert "sda" not in h                          # never read
    # the demo's episode starves on sdb, whose disk was warning then
    ep = next(e for e in d["episodes"] if "sdb" in e["devices"])
    assert ep["health"] == [{"device": "sdb", "disk": "sdb", "status": "warning",
                             "reasons": ["reallocated sectors 304"]}]


def test_report_of_a_window_starts_at_the_reading_in_effect(recorded):
    path, samples = recorded
    with Recording.open(path) as rec:
        d = summary.build(rec, samples[70].wall_s, samples[129].wall_s).data
    nv = _health(d)["nvme0n1"]
    # the reading made at sample 60 was in effect at the window's start
    assert nv["readings"] == 2 and nv["first"]["read_wall_s"] == samples[60].wall_s
    assert nv["trend"]["media_errors_gained"] == 3


def test_minutes_above_warning_without_the_drives_counter(tmp_path):
    """An ATA drive keeps no such counter: the time between readings that found it at or
    above its warning temperature counts."""
    def hot(k, t):        # a SATA SSD whose SCT limits say 70 °C
        return {"sdb": drive("sata-ssd-7.0-x-sct.json", "sdb", t,
                             temperature_c=72.0 if k == 1 else 36.0)}
    src = HealthSim(readings=hot)
    samples = [src.sample() for _ in range(181)]
    path = write_recording(tmp_path / "ata.gdtrec", samples)
    with Recording.open(path) as rec:
        d = summary.build(rec).data
    t = _health(d)["sdb"]["trend"]
    assert t["minutes_above_warning"] == pytest.approx(1.0)   # sample 60 to sample 120


def test_the_text_report_has_a_device_health_section(recorded, capsys):
    path, _ = recorded
    assert call(report_cmd, str(path), "--no-charts") == 0
    out = capsys.readouterr().out
    assert "Device health (readings in the window; gained from the first to the last):" in out
    lines = out.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("nvme0n1 "))
    assert lines[at].split() == ["nvme0n1", "!", "warn", "3", "+6", "+24", "n/a", "+2%", "28m",
                                 "Samsung", "SSD", "970", "EVO", "500GB"]
    assert lines[at + 1] == "     why: 81 °C above warning 80 °C; media errors 13"
    sdb = next(x for x in lines[at:] if x.startswith("sdb "))
    assert sdb.split()[3:9] == ["3", "n/a", "0", "+8", "n/a", "n/a"]
    assert "  health: sdb ! warn: reallocated sectors 304" in out
    assert call(report_cmd, str(path), "--json") == 0
    assert json.loads(capsys.readouterr().out)["health"][0]["device"] == "sde"
