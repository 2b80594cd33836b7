"""One figure, one text: a node whose disk starves its GPUs, through every surface that
prints its numbers (the dashboard's disk table and verdict banner, `--once`, the verdict
in `--once --json`, `report`'s devices table, `fleet --once` reading the node's exporter
back), and each figure that more than one of them shows reads the same on all of them:
iostat -x's two decimals (vocab.Metric.text).  Before one owner, r_await 52.4 ms read
"52.4" on the panel, "52" in the verdict and the fleet, "52.40" in --once and report.

The only fake is the GPU reading (model_factory's crafted Model); the verdict is the
detector's own, the report's figures come from its summary of the interval
(record/derived.py add_interval, report/summary.py), and the fleet's from the exporter's
families (exporter/families.py Renderer) as Prometheus would return them.  Prometheus
itself carries these figures as numbers in base units, in no text (its one free text,
gpus_unavailable_info's reason, holds no disk figure): the fleet reading them back is
where they become text again.
"""

from __future__ import annotations

import dataclasses
import json
import re
import types

import pytest

from gpudisk_top.collect.source import LIVE, Source
from gpudisk_top.exporter.families import Frame, Renderer
from gpudisk_top.fleet.table import build_view
from gpudisk_top.fleet.promapi import QueryResult, Series
from gpudisk_top.fleet.text import render_text as fleet_text
from gpudisk_top.verdict.detect import one_interval
from gpudisk_top.model.disk import DiskDeltas
from gpudisk_top.model.select import DeviceFilter
from gpudisk_top.model.vocab import DISK
from gpudisk_top.output import once
from gpudisk_top.record.derived import Stretch, add_interval
from gpudisk_top.report.summary import _devices_json
from gpudisk_top.report.text import _devices as report_devices
from gpudisk_top.ui.widgets.disks import DiskPanel
from gpudisk_top.ui.widgets.verdict import VerdictBanner
from model_factory import gpu, model, rates

# sda over one second: numbers a recording's integer counters hold exactly (250 reads,
# 13100 ms of waiting, 999 ms busy), so the report's summary of the interval has the
# model's own figures; r_await and %util are where the surfaces used to disagree
FIGURES = {"r_await_ms": 52.4, "aqu_sz": 12.4567, "util_pct": 99.9, "r_s": 250.0,
           "rkb_s": 30000.5}
ORIGIN = Source(LIVE, "node-1", LIVE, kernel="6.8.0")


def _node():
    """The crafted node: sda a busy rotating disk the job reads (so the verdict's evidence
    names its %util too), GPUs at 20 %; and the detector's verdict of the interval."""
    m = model(1, {"sda": FIGURES["util_pct"]},
              gpus=[gpu(0, 20.0, pids=(100,)), gpu(1, 20.0, pids=(101,))])
    m.devices["sda"] = dataclasses.replace(m.devices["sda"], dev_class="HDD", rotational=True)
    m.sample.devices["sda"] = m.devices["sda"]
    m.disks["sda"] = rates(rareq_kb=120.0, **FIGURES)
    # the counters those rates are made of, which the report's summary adds up
    m.disk_deltas["sda"] = DiskDeltas(
        rd_ios=250, wr_ios=0, dc_ios=0, fl_ios=0, rd_merges=0, wr_merges=0, dc_merges=0,
        rd_sectors=60001, wr_sectors=0, dc_sectors=0, rd_ticks=13100, wr_ticks=0,
        dc_ticks=0, fl_ticks=0, tot_ticks=999, rq_ticks=12457)
    v = one_interval(m)
    assert (v.state, v.kind, v.devices) == ("disk-starved", "saturated", ["sda"]), v.reason
    return m, v


def _columns(header: str, row: str) -> dict[str, str]:
    """A text table's row by its header's words (the labels have no spaces)."""
    return dict(zip(header.split(), row.split()))


_LABEL = {DISK[f].label: f for f in FIGURES}


def _by_label(cells: dict[str, str]) -> dict[str, str]:
    return {_LABEL[k]: v for k, v in cells.items() if k in _LABEL}


def _evidence(text: str) -> dict[str, str]:
    """The figures a verdict's or the fleet's evidence gives of sda."""
    out = {}
    for field, pattern in (("r_await_ms", r"sda r_await (\S+) ms"), ("aqu_sz", r"aqu-sz ([\d.]+)"),
                           ("util_pct", r"%util ([\d.]+)")):
        found = re.search(pattern, text)
        if found:
            out[field] = found.group(1)
    return out


def _panel_lines(panel) -> list[str]:
    return ["".join(text for text, _style in line) for line in panel._lines]


def surfaces() -> dict[str, dict[str, str]]:
    """{surface: {figure: its text there}} for each surface that shows a figure of sda."""
    m, v = _node()
    update = types.SimpleNamespace(model=m, verdict=v, pending_intervals=1)
    out = {}

    panel = DiskPanel()
    panel.show(update)
    head, *rows = _panel_lines(panel)
    row = next(r for r in rows if r[1:].split()[0] == "sda")
    out["dashboard disk table"] = _by_label(_columns(head.replace("▼", ""), row[1:]))

    banner = VerdictBanner()
    banner.show(update, 3)
    out["dashboard verdict"] = _evidence(" ".join(l.strip() for l in _panel_lines(banner)))

    text = once.render_text(m, DeviceFilter(), ORIGIN, v).splitlines()
    head = next(i for i, l in enumerate(text) if l.startswith("Device ") and "r_await" in l)
    row = next(l for l in text[head:] if l.startswith("sda "))
    out["--once disk table"] = _by_label(_columns(text[head], row))
    out["--once verdict"] = _evidence(next(l for l in text if l.startswith("verdict: ")))
    doc = json.loads(once.render_json(m, DeviceFilter(), ORIGIN, v))
    out["--once --json verdict"] = _evidence(doc["verdict"]["reason"])

    stretch = Stretch()
    add_interval(stretch, m, v.state, v.gpus)
    lines = report_devices({"devices": _devices_json(stretch.disks, m.devices, [])})
    row = next(l for l in lines if l.startswith("sda "))
    out["report devices"] = _by_label(_columns(lines[1], row))

    labels = {"instance": "node-1:9425", "job": "gpudisk-top"}
    series = [Series(labels={"__name__": s.name, **labels, **s.labels}, value=s.value)
              for fam in Renderer().render(Frame(m, v)) for s in fam.samples]
    view = build_view(QueryResult(ok=True, series=series, result_type="vector"), None, m.wall_s)
    row = next(l for l in fleet_text(view).splitlines() if l.startswith("node-1:9425"))
    out["fleet --once"] = _evidence(row)
    return out


def test_each_figure_reads_the_same_on_every_surface():
    shown = surfaces()
    # every surface shows what it is there to show, so no agreement is empty
    assert set(shown["dashboard verdict"]) == set(shown["fleet --once"]) == {
        "r_await_ms", "aqu_sz", "util_pct"}
    assert set(shown["--once disk table"]) == set(FIGURES)
    assert {"r_await_ms", "aqu_sz", "util_pct", "r_s"} <= set(shown["dashboard disk table"])
    assert {"r_await_ms", "util_pct", "r_s", "rkb_s"} <= set(shown["report devices"])
    for field, value in FIGURES.items():
        texts = {where: figs[field] for where, figs in shown.items() if field in figs}
        assert len(texts) >= 2, field
        # iostat -x's rule, the disk table's: two decimals
        assert set(texts.values()) == {f"{value:.2f}"}, (field, texts)


@pytest.mark.parametrize("value, width, text", [
    (52.4, None, "52.40"), (None, None, "n/a"), (12345.678, 7, "12345.7"),
    (123456.78, 7, "123457"), (12345678.9, 6, "12.3M"), (99.9, 4, "99.9")])
def test_a_narrow_column_drops_decimals_then_thousands_never_cuts(value, width, text):
    """The panel's and the timeline's narrow cells: the same figure, rounded, never cut
    ('39073.4' was '39073' by cutting, and a cut 99.96 read 99)."""
    assert DISK["r_await_ms"].text(value, width=width) == text
