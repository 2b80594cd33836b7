"""Every reader of Model.disks sees a dropped device (in model.devices, not in
model.disks) as n/a: the disk table, the timeline, the detector, alert rules, --once
JSON and the Prometheus exposition.  Never 0, never a crash."""

from __future__ import annotations

import json

from prometheus_client.parser import text_string_to_metric_families

from gpudisk_top.alerts import AlertEngine, AlertRule
from gpudisk_top.alerts.catalog import observe
from gpudisk_top.collect.diskstats import parse_checked
from gpudisk_top.collect.sample import DeviceInfo, GpuSnapshot, Sample
from gpudisk_top.exporter import MetricsServer
from gpudisk_top.verdict.detect import Detector
from gpudisk_top.model.history import History
from gpudisk_top.model.select import DeviceFilter
from gpudisk_top.model.snapshot import Model
from gpudisk_top.output.once import render_json, render_text
from gpudisk_top.ui.widgets.disks import DiskPanel
from gpudisk_top.collect.source import LIVE, Source
from apps import dashboard_app
from screen_text import text_of
from test_fault_rates import BASE, STEP, advanced, line

DEVICES = {
    "nvme0n1": DeviceInfo("nvme0n1", "nvme0n1", 259, 0, "disk", dev_class="NVMe",
                          rotational=False, mountpoints=("/checkpoints",)),
    "sda": DeviceInfo("sda", "sda", 8, 0, "disk", dev_class="SSD", rotational=False,
                      mountpoints=("/datasets",)),
}
BUSY = dict(tot_ticks=950)    # 95 % busy each second


def node_samples() -> list[Sample]:
    """Four seconds of a node; in the third, sda's rd_ios went down (a torn read)."""
    nvme, sda = dict(BASE), dict(BASE)
    texts = []
    for i in range(4):
        if i:
            nvme = advanced(nvme)
            sda = advanced(sda, tot_ticks=sda["tot_ticks"] + BUSY["tot_ticks"])
        # at i == 2 its rd_ios is an older one (a seam of a rewrite): it goes down
        shown = sda if i != 2 else dict(sda, rd_ios=BASE["rd_ios"])
        texts.append(line("nvme0n1", 0, **nvme).replace("   8 ", " 259 ", 1)
                     + line("sda", 0, **shown))
    out = []
    for i, text in enumerate(texts):
        disks, warnings = parse_checked(text, whole_lines=True)
        out.append(Sample(mono_s=100.0 + i, wall_s=1.7e9 + i, disks=disks, devices=dict(DEVICES),
                          gpu=GpuSnapshot(status="ok"), warnings=warnings))
    return out


def models() -> list[Model]:
    samples = node_samples()
    return [Model.new(s, last) for last, s in zip([None] + samples, samples)]


def test_the_model_drops_sda_in_the_torn_interval_only():
    ms = models()
    assert set(ms[1].disks) == {"nvme0n1", "sda"} and ms[1].disk_dropped == {}
    assert set(ms[2].disks) == {"nvme0n1"} and set(ms[2].disk_dropped) == {"sda"}
    assert "sda" in ms[2].devices
    assert ms[1].disks["sda"].r_s == STEP["rd_ios"] and ms[1].disks["sda"].util_pct == 95.0


def test_prometheus_has_no_sda_series_in_that_scrape():
    ms = models()
    server = MetricsServer(None)

    def disk_series() -> dict:
        out = {}
        for fam in text_string_to_metric_families(server.render_text()):
            for s in fam.samples:
                if s.name.startswith("gpudisk_top_disk_"):
                    out.setdefault(s.labels["device"], set()).add(s.name)
        return out

    server.update(ms[1])
    before = disk_series()
    assert "gpudisk_top_disk_utilization_ratio" in before["sda"]
    server.update(ms[2])
    during = disk_series()
    assert "sda" not in during and during["nvme0n1"] == before["nvme0n1"]


def test_detector_history_and_alerts_treat_it_as_n_a():
    ms = models()
    det, history = Detector(), History()
    rule = AlertRule(name="busy", kind="metric", metric="disk_util_pct", op=">", value=90.0,
                     devices=("sd*",), for_samples=2, log=None)
    engine = AlertEngine([rule], stderr=None, warn=lambda line: None, host_name="n")
    fired = []
    for m in ms[1:]:
        v = det.feed(m)
        history.append(m, v)
        fired += engine.update(m, v)
        if m is ms[2]:
            assert "sda" not in v.saturation
            assert observe(m, "disk_util_pct", devices=("sd*",)) == []
    # the impossible interval (r/s 1.8e19 unchecked) taught the detector nothing
    peak_iops = det.tracker.history["sda"].peak_iops
    assert peak_iops == max(m.disks["sda"].r_s + m.disks["sda"].w_s for m in (ms[1], ms[3]))
    util = [c.metric("sda", "util_pct") for c in history.columns]
    assert util[0] == 95.0 and util[1] is None
    # 95 % in intervals 1 and 3, n/a between: the n/a breaks the hold of 2 samples
    assert fired == []


def test_once_json_and_text_keep_the_device_as_n_a():
    ms = models()
    doc = json.loads(render_json(ms[2], DeviceFilter()))
    sda = next(d for d in doc["disks"] if d["name"] == "sda")
    assert sda["r_s"] is None and sda["util_pct"] is None and "rd_ios went down" in sda["dropped"]
    assert sda["mountpoints"] == ["/datasets"]
    nvme = next(d for d in doc["disks"] if d["name"] == "nvme0n1")
    assert nvme["dropped"] is None and nvme["r_s"] == STEP["rd_ios"]
    assert any(w.startswith("sda: no disk rates this interval: rd_ios went down")
               for w in doc["warnings"])
    text = render_text(ms[2], DeviceFilter())
    assert "(dropped: rd_ios went down" in text


class Script:
    """A source that replays crafted samples, then the last one a second later each time."""

    def __init__(self, samples):
        self.samples = list(samples)

    def sample(self) -> Sample:
        return self.samples.pop(0)

    def close(self) -> None:
        pass


async def test_the_disk_table_shows_n_a_and_the_reason():
    app = dashboard_app(Script(node_samples()), origin=Source(LIVE, "t", LIVE, kernel="t"))
    async with app.run_test(size=(140, 40)) as pilot:
        app.advance(2)
        await pilot.pause()
        table = text_of(app.query_one(DiskPanel))
        assert "no rates" not in table and "n/a" not in table
        app.advance(1)                      # the torn interval
        await pilot.pause()
        rows = text_of(app.query_one(DiskPanel)).splitlines()
        sda = next(r for r in rows if r.lstrip("?>▲! ").startswith("sda"))
        # every value column the header shows (how many fit 140 columns) reads n/a
        header = rows[0].split("mount")[0]
        columns = len(header.split()) - 2          # less "Device" and "class"
        assert columns >= 8 and sda.startswith("?") and sda.count("n/a") == columns
        assert "no rates: rd_ios went down" in sda
        assert any(r.lstrip("?>▲! ").startswith("nvme0n1") and "n/a" not in r for r in rows)
        await pilot.press("q")
