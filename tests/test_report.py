"""`gpudisk-top report`: JSON on scenarios with known episodes, the text report, bad input."""

from __future__ import annotations

import json
import statistics

import pytest

from gpudisk_top.commands import report as report_cmd
from gpudisk_top.errors import UsageError
from gpudisk_top.verdict.detect import STATES
from gpudisk_top.record import frames
from gpudisk_top.record.header import FORMAT_VERSION
from gpudisk_top.sim import Simulator, builtin
from recording_helpers import abandon, call, origin, run_command, sim_samples, write_recording


@pytest.fixture(scope="module")
def stalls(tmp_path_factory):
    """One pass of checkpoint-stalls: 4 x (50 s training, 10 s checkpoint)."""
    sim = Simulator(builtin("checkpoint-stalls"), seed=1)
    labels = sim.labels()
    samples = [sim.sample() for _ in range(len(labels) + 1)]
    path = write_recording(tmp_path_factory.mktemp("rep") / "stalls.gdtrec", samples,
                           scenario="checkpoint-stalls", seed=1)
    return path, samples, labels


def _report_json(capsys, *args) -> dict:
    assert call(report_cmd, *args, "--json") == 0
    return json.loads(capsys.readouterr().out)


def test_report_json_on_checkpoint_stalls(stalls, capsys):
    path, samples, labels = stalls
    d = _report_json(capsys, path)
    assert d["samples"] == len(samples) == 241
    assert d["start_s"] == samples[0].wall_s and d["end_s"] == samples[-1].wall_s
    assert d["start"].startswith("2026-01-01T") and d["duration_s"] == 240.0
    assert d["simulated"] is True and d["source"] == "simulated, scenario checkpoint-stalls, seed 1"
    eps = d["episodes"]
    assert [e["state"] for e in eps] == ["checkpoint-stall"] * 4       # 4 per pass
    stall_starts = [i for i, l in enumerate(labels) if l == "checkpoint-stall" and labels[i - 1] != l]
    for e, i in zip(eps, stall_starts):
        assert e["start_s"] == pytest.approx(samples[0].wall_s + i, abs=1.0)
        assert e["duration_s"] == pytest.approx(10.0, abs=1.0)
        assert e["end_s"] - e["start_s"] == pytest.approx(e["duration_s"], abs=1e-3)
        assert e["gpus"] == list(range(8)) and e["devices"] == ["nvme2n1"]
        assert 4242 in e["processes"] and "writing" in e["reason"]
        assert set(e) >= {"state", "start", "end", "duration_s", "gpus", "devices", "processes", "reason"}
    assert sorted(d["states"]) == [str(i) for i in range(8)]
    for per in d["states"].values():
        assert set(per) >= set(STATES)
        assert sum(per.values()) == pytest.approx(240.0)
        assert per["checkpoint-stall"] == pytest.approx(40.0, abs=4.0)
        assert per["healthy"] == pytest.approx(200.0, abs=4.0)
    assert d["devices"][0]["name"] == "nvme2n1"                          # the worst await
    assert d["devices"][0]["w_await_ms"] > d["devices"][-1]["await_ms"]


def test_report_window_with_relative_times(stalls, capsys):
    path, samples, _ = stalls
    d = _report_json(capsys, path, "--from", "+1m", "--to", "-1m")
    assert d["start_s"] == samples[60].wall_s and d["end_s"] == samples[180].wall_s
    assert d["samples"] == 121 and d["duration_s"] == 120.0
    assert len(d["episodes"]) == 2
    d = _report_json(capsys, path, "--from", "@%d" % samples[100].wall_s, "--to", "end")
    assert d["samples"] == 141


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """One pass of the demo (270 s): a disk-starved episode on sdb, a checkpoint stall on
    nvme2n1, a cpu-starved one, while a backup keeps the archive HDD sde busy."""
    sim = Simulator(builtin("demo"), seed=0)
    samples = [sim.sample() for _ in range(len(sim.labels()) + 1)]
    return write_recording(tmp_path_factory.mktemp("rep") / "demo.gdtrec", samples), samples


def _build(path, **kwargs):
    from gpudisk_top.record import Recording
    from gpudisk_top.report import summary

    with Recording.open(path) as rec:
        return summary.build(rec, **kwargs)


def test_report_on_the_demo_finds_every_kind_of_episode(demo, capsys):
    path, _ = demo
    d = _report_json(capsys, path)
    assert [e["state"] for e in d["episodes"]] == ["disk-starved", "checkpoint-stall", "cpu-starved"]
    disk = d["episodes"][0]
    assert "sdb" in disk["devices"] and disk["duration_s"] == pytest.approx(60, abs=3)
    assert all(per["idle"] == pytest.approx(30, abs=3) for per in d["states"].values())


def test_text_report_has_charts_and_episodes(stalls, capsys):
    path, _, _ = stalls
    assert call(report_cmd, path) == 0
    out = capsys.readouterr().out
    assert "(SIMULATED: simulated, scenario checkpoint-stalls, seed 1)" in out
    assert "Episodes (4):" in out and "checkpoint-stall" in out
    assert "GPU utilization, %" in out and "nvme2n1 await, ms" in out
    assert "episodes along the top: K checkpoint-stall" in out
    assert "verdicts: recorded summaries, model v" in out
    assert "\x1b[" not in out                                   # no colour codes to paste
    # each chart's rows are lines of their own: the axis on a line, bars under it
    title = next(i for i, line in enumerate(out.splitlines()) if "GPU utilization, %" in line)
    chart = out.splitlines()[title + 1:title + 4]
    assert chart[0].lstrip().startswith("┌") and "\\x0a" not in out, chart
    assert call(report_cmd, path, "--no-charts") == 0
    assert "GPU utilization" not in capsys.readouterr().out


def test_report_runs_as_a_command(stalls):
    path, _, _ = stalls
    out = run_command("report", path, "--json", "--to", "+30s")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["samples"] == 31


@pytest.mark.parametrize("content, message", [
    (b"", "empty file, not a gpudisk-top recording"),
    (b"not a recording at all", "not a gpudisk-top recording"),
    (frames.PREAMBLE.pack(frames.MAGIC, 99, 0), "recording format version 99 is newer"),
    (frames.preamble(FORMAT_VERSION), "the recording holds no samples"),
])
def test_bad_files_are_one_line_errors(tmp_path, content, message):
    path = tmp_path / "bad.gdtrec"
    path.write_bytes(content)
    out = run_command("report", str(path))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("gpudisk-top: error: ") and message in out.stderr
    assert out.stderr.count("\n") == 1


def test_truncated_file_is_a_warning_and_the_readable_part(tmp_path, capsys):
    from gpudisk_top.record import Recorder, make_header

    samples = sim_samples("checkpoint-stalls", 30)
    path = str(tmp_path / "t.gdtrec")
    rec = Recorder(path, make_header(origin("checkpoint-stalls"), 1.0), sync_interval_s=None)
    for s in samples:
        rec.append(s)
    abandon(rec)                                # killed: its tail is rows
    data = open(path, "rb").read()
    found, _ = frames.scan(data, frames.PREAMBLE.size)
    last = [f for f in found if f.kind in frames.SAMPLE_TYPES][-1]
    open(path, "wb").write(data[:last.end - 3])
    out = run_command("report", path, "--json")
    assert out.returncode == 0
    assert json.loads(out.stdout)["samples"] == 29
    assert out.stderr.startswith("gpudisk-top: warning: ") and "torn" in out.stderr
    assert out.stderr.count("\n") == 1


@pytest.mark.parametrize("args, message", [
    (["--from", "yesterday"], "not a time: 'yesterday'"),
    (["--from", "+10m"], "no samples between"),
    (["--from", "+20s", "--to", "+10s"], "is before --from"),
])
def test_bad_windows(stalls, args, message):
    path, _, _ = stalls
    with pytest.raises(UsageError, match=message):
        call(report_cmd, path, *args)


def test_a_replayed_report_is_one_pass_of_the_detector(stalls):
    """--recompute replays the window in one pass, in one process: its episodes are the
    ones Replay finds over the same samples, each whole, numbered in order."""
    from gpudisk_top.model.vocab import episode_json
    from gpudisk_top.record import Recording
    from gpudisk_top.report import summary
    from gpudisk_top.session.replay import Replay

    path, _, _ = stalls
    with Recording.open(path) as rec:
        d = summary.build(rec, recompute=True).data
        replay = Replay(rec)
        for _ in replay.models():
            pass
        want = [episode_json(e) for e in replay.episodes]
    key = lambda e: (e["state"], e["start_s"], e["end_s"])  # noqa: E731
    assert [key(e) for e in d["episodes"]] == [key(e) for e in want] and len(want) == 4
    assert [e["id"] for e in d["episodes"]] == [1, 2, 3, 4]


# ------------------------------------------------------------------------------ summaries
def _without_how(d: dict) -> dict:
    """The report JSON less what says how it was counted (recorded summaries or a replay)."""
    out = {k: v for k, v in d.items() if k not in ("derived", "replayed_samples")}
    if isinstance(out.get("ledger"), dict):
        out["ledger"] = {k: v for k, v in out["ledger"].items() if k != "counted_from"}
    return out


@pytest.fixture(params=["blocks", "samples"])
def charted_from(request, monkeypatch):
    """Both ways the summaries are read: whole blocks added up (a long window), or every
    interval replayed for the charts (a window of few blocks: MIN_CHART_BLOCKS)."""
    from gpudisk_top.report import tally

    if request.param == "blocks":
        monkeypatch.setattr(tally, "MIN_CHART_BLOCKS", 0)
    return request.param


@pytest.fixture
def from_blocks(monkeypatch):
    """Whole summary blocks added up, as for a long window, however short this one."""
    from gpudisk_top.report import tally

    monkeypatch.setattr(tally, "MIN_CHART_BLOCKS", 0)


@pytest.mark.parametrize("window", [(None, None), (37.5, -20.2), (100.0, None), (None, 61.0),
                                    (59.0, 61.0)])
def test_recorded_summaries_give_the_report_a_replay_gives(stalls, window, charted_from):
    """The recorder's summaries (whole minutes added up, the window's cut intervals
    replayed one by one) give the same JSON as replaying every sample."""
    from gpudisk_top.record import Recording
    from gpudisk_top.report import summary

    path, _, _ = stalls
    with Recording.open(path) as rec:
        a, b = window
        start = None if a is None else rec.start_s + a
        end = None if b is None else (rec.end_s + b if b < 0 else rec.start_s + b)
        fast = summary.build(rec, start, end).data
        slow = summary.build(rec, start, end, recompute=True).data
    assert fast["derived"].startswith("recorded summaries, model v")
    assert slow["derived"] == "recomputed"
    assert _without_how(fast) == _without_how(slow)
    if window == (None, None):
        assert fast["replayed_samples"] == (0 if charted_from == "blocks" else 241)


@pytest.mark.parametrize("args", [{"all_devices": True}, {"devices": "nvme2*,sd?"},
                                  {"devices": "nvme0n1p1"}])
def test_device_filters_read_the_summaries_as_a_replay(stalls, args, charted_from):
    from gpudisk_top.model.select import DeviceFilter
    from gpudisk_top.record import Recording
    from gpudisk_top.report import summary

    path, _, _ = stalls
    f = DeviceFilter.from_option(args.get("all_devices", False), args.get("devices"))
    with Recording.open(path) as rec:
        fast = summary.build(rec, rec.start_s + 30, None, dev_filter=f).data
        slow = summary.build(rec, rec.start_s + 30, None, dev_filter=f, recompute=True).data
    assert fast["derived"] != slow["derived"]
    assert _without_how(fast) == _without_how(slow)
    assert fast["devices"]


def test_recorded_summaries_over_sessions_and_a_killed_recorder(tmp_path, from_blocks):
    """Three runs of a recorder, the last killed before its last block: the samples
    without summaries are replayed, the rest is read from the summaries."""
    from gpudisk_top.record import Recorder, Recording, make_header
    from gpudisk_top.report import summary

    sim = Simulator(builtin("demo"), seed=2)
    samples = [sim.sample() for _ in range(690)]
    path = tmp_path / "k.gdtrec"
    for part in (samples[:250], samples[250:520]):
        with Recorder(path, make_header(origin(), 1.0), segment_samples=120,
                      sync_interval_s=None) as rec:
            for s in part:
                rec.append(s)
    rec = Recorder(path, make_header(origin(), 1.0), segment_samples=120, sync_interval_s=None)
    for s in samples[520:]:
        rec.append(s)
    abandon(rec)
    with Recording.open(path) as r:
        assert len(r) == 690 and len(r.sessions) == 3
        fast = summary.build(r).data
        slow = summary.build(r, recompute=True).data
    # the last run's rows after its last summary block (of SUMMARY_SAMPLES samples)
    assert fast["replayed_samples"] == 690 - 520 - 120 == 50
    assert fast["samples"] == slow["samples"] == 690
    assert fast["states"] == slow["states"] and fast["devices"] == slow["devices"]
    assert fast["duration_s"] == slow["duration_s"]
    # the detector starts afresh with each recorder run, a replay does not: episodes agree
    # where that does not matter (here: all but what straddles a restart)
    key = [(e["state"], e["start_s"]) for e in fast["episodes"]]
    assert len(key) >= 5 and set(key) & {(e["state"], e["start_s"]) for e in slow["episodes"]}


@pytest.mark.parametrize("args", [["--recompute"], ["--enter", "4"], ["--gpu-low-pct", "60"]])
def test_summaries_are_used_only_when_they_fit(stalls, capsys, args):
    """--recompute, or thresholds other than the recorder's, replay the samples."""
    path, _, _ = stalls
    d = _report_json(capsys, path, *args)
    assert d["derived"] == "recomputed" and "replayed_samples" not in d


def test_summaries_of_another_model_are_not_used(stalls, capsys, monkeypatch):
    from gpudisk_top.record import derived

    path, _, _ = stalls
    monkeypatch.setattr(derived, "MODEL_VERSION", "a later one")
    d = _report_json(capsys, path)
    assert d["derived"] == "recomputed"


def test_a_recording_without_summaries_is_recomputed(tmp_path, capsys):
    samples = sim_samples("checkpoint-stalls", 40)
    path = write_recording(tmp_path / "n.gdtrec", samples, scenario="checkpoint-stalls",
                           summaries=False)
    d = _report_json(capsys, path)
    assert d["derived"] == "recomputed" and d["samples"] == 40


def test_summaries_that_cannot_be_read_are_replayed(tmp_path, capsys, from_blocks):
    """Summaries are derived: a block whose summaries cannot be read is replayed, with a
    warning, and the report is the same."""
    import struct

    from gpudisk_top.record import v2

    samples = sim_samples("checkpoint-stalls", 130)
    path = write_recording(tmp_path / "s.gdtrec", samples, scenario="checkpoint-stalls",
                           segment_samples=60)
    data = open(path, "rb").read()
    found, _ = frames.scan(data, frames.PREAMBLE.size)
    b = [f for f in found if f.kind == frames.BLOCK][1]
    payload = data[b.start:b.end]
    first, n, wl, rl, sl = v2.BLOCK_HEAD.unpack_from(payload)
    junk = b"x\x9c" + b"not a summary" * 3
    payload = (v2.BLOCK_HEAD.pack(first, n, wl, rl, len(junk))
               + payload[v2.BLOCK_HEAD.size:v2.BLOCK_HEAD.size + wl + rl] + junk)
    frame = frames.pack(frames.BLOCK, payload, struct.unpack_from("<d", data, b.offset + 8)[0])
    open(path, "wb").write(data[:b.offset] + frame + data[b.end:])
    fast = _report_json(capsys, path)
    slow = _report_json(capsys, path, "--recompute")
    assert fast["replayed_samples"] == 60
    assert any("summaries of a block" in w for w in fast["warnings"])
    assert _without_how(fast)["episodes"] == _without_how(slow)["episodes"]
    assert fast["states"] == slow["states"] and fast["devices"] == slow["devices"]


@pytest.fixture(scope="module")
def gapped(tmp_path_factory):
    """A recording whose blocks 1 and 3 have no summaries, windows that cut episodes, and
    each window's report by replay (which reads no summaries, so both ways of reading
    them are held to the same replay, made once)."""
    import random
    import struct

    from gpudisk_top.record import Recording, v2
    from gpudisk_top.report import summary

    sim = Simulator(builtin("demo"), seed=3)
    path = write_recording(tmp_path_factory.mktemp("gapped") / "g.gdtrec",
                           [sim.sample() for _ in range(600)], segment_samples=120)
    data = open(path, "rb").read()
    found, _ = frames.scan(data, frames.PREAMBLE.size)
    for b in [f for f in found if f.kind == frames.BLOCK][3:0:-2]:     # blocks 3 and 1
        payload = data[b.start:b.end]
        first, n, wl, rl, _ = v2.BLOCK_HEAD.unpack_from(payload)
        payload = v2.BLOCK_HEAD.pack(first, n, wl, rl, 0) + \
            payload[v2.BLOCK_HEAD.size:v2.BLOCK_HEAD.size + wl + rl]
        frame = frames.pack(frames.BLOCK, payload, struct.unpack_from("<d", data, b.offset + 8)[0])
        data = data[:b.offset] + frame + data[b.end:]
    open(path, "wb").write(data)
    rng = random.Random(4)
    replayed = []
    with Recording.open(path) as rec:
        t0 = rec.start_s
        for a, b in [(None, None)] + [sorted(rng.uniform(0, 600) for _ in range(2)) for _ in range(6)]:
            start = None if a is None else t0 + a
            end = None if b is None else t0 + b
            replayed.append((start, end, summary.build(rec, start, end, recompute=True).data))
    return path, replayed


def test_summaries_with_gaps_and_any_window(gapped, charted_from):
    """Blocks without summaries between blocks with them, and windows that cut episodes:
    the figures and the episodes' spans and interval counts are those of a replay (an
    episode cut by the window's end shows evidence from up to a minute later)."""
    from gpudisk_top.record import Recording
    from gpudisk_top.report import summary

    path, replayed = gapped
    spans = lambda d: [(e["state"], e["start_s"], e["end_s"], e["intervals"]) for e in d["episodes"]]  # noqa: E731
    with Recording.open(path) as rec:
        for start, end, slow in replayed:
            fast = summary.build(rec, start, end).data
            assert fast["replayed_samples"] >= 1 and slow["derived"] == "recomputed"
            for k in ("samples", "start_s", "end_s", "duration_s", "states", "devices", "gpus"):
                assert fast[k] == slow[k], (start, end, k)
            assert spans(fast) == spans(slow), (start, end)


# ------------------------------------------------------------------------------ charts
def _disk_charts(result) -> list:
    from gpudisk_top.report.text import chart_plan

    return [c for c in chart_plan(result) if c.device is not None]


def _inside(chart, marks, state) -> tuple[list[float], list[float]]:
    """A chart's values inside the episodes of `state` (their marks' x spans), and outside."""
    spans = [(x0, x1) for x0, x1, st in marks if st == state]
    inside = [y for x, y in zip(chart.xs, chart.ys) if any(a <= x <= b + 1 for a, b in spans)]
    outside = [y for x, y in zip(chart.xs, chart.ys) if not any(a - 1 <= x <= b + 2 for a, b in spans)]
    return inside, outside


def test_disk_charts_show_the_devices_the_episodes_name(demo, capsys):
    """Not the worst average await (the busy archive HDD): the devices behind the
    episodes, most episode time first, each saying why."""
    path, _ = demo
    result = _build(path)
    d = result.data
    # the worst await is the unrelated backup HDD's: the devices table puts it after the
    # blamed ones (test_report_devices.py), as the charts leave it out
    assert max(d["devices"], key=lambda x: x["await_ms"] or 0)["name"] == "sde"
    charts = _disk_charts(result)
    assert [c.device for c in charts] == ["sdb", "nvme2n1"]
    sdb, nvme = charts
    assert sdb.title == "sdb await, ms (named by episode 1: disk-starved, 1m)"
    assert nvme.title == "nvme2n1 await, ms (named by episode 2: checkpoint-stall, 15s)"
    # the charted latency is the episode's: sdb's await rises inside the disk-starved span
    inside, outside = _inside(sdb, result.series.marks, "disk-starved")
    assert len(inside) >= 50 and outside
    assert statistics.median(inside) > 5 * statistics.median(outside)
    assert call(report_cmd, path) == 0
    out = capsys.readouterr().out
    assert sdb.title in out and nvme.title in out and "sde await" not in out


def test_episode_time_orders_the_disk_charts(tmp_path):
    """The demo with a 90 s checkpoint: more episode time names nvme2n1 than sdb (60 s),
    so nvme2n1 is charted first."""
    scenario = builtin("demo")
    next(p for p in scenario.phases if p.name == "checkpoint").duration_s = 90
    sim = Simulator(scenario, seed=0)
    samples = [sim.sample() for _ in range(len(sim.labels()) + 1)]
    path = write_recording(tmp_path / "long-stall.gdtrec", samples)
    result = _build(path)
    seconds = {}
    for e in result.data["episodes"]:
        for name in e["devices"]:
            seconds[name] = seconds.get(name, 0.0) + e["duration_s"]
    assert seconds["nvme2n1"] > seconds["sdb"] > 0
    charts = _disk_charts(result)
    assert [c.device for c in charts] == ["nvme2n1", "sdb"]
    assert charts[0].title.startswith("nvme2n1 await, ms (named by episode 2: checkpoint-stall, 1m 30s")


def test_a_device_the_filter_leaves_out_is_not_charted(demo):
    from gpudisk_top.model.select import DeviceFilter

    path, _ = demo
    result = _build(path, dev_filter=DeviceFilter.from_option(False, "sd[ef],nvme2n1"))
    assert "sdb" in result.data["episodes"][0]["devices"]
    assert [c.device for c in _disk_charts(result)] == ["nvme2n1"]


def test_without_episodes_the_busiest_disk_is_charted(tmp_path):
    samples = sim_samples("busy-unrelated-disk-load", 121)
    path = write_recording(tmp_path / "busy.gdtrec", samples, scenario="busy-unrelated-disk-load")
    result = _build(path)
    d = result.data
    assert d["episodes"] == []
    busiest = max(d["devices"], key=lambda x: x["util_pct"])
    charts = _disk_charts(result)
    assert [c.device for c in charts] == [busiest["name"]] == ["sda"]
    # %util as every surface reads it (vocab.DISK's Metric.text)
    assert charts[0].title == (f"sda await, ms (the busiest disk, {busiest['util_pct']:.2f} %util; "
                               "no episode names a device)")


def test_a_short_recording_is_charted_from_its_samples(tmp_path, monkeypatch):
    """61 samples (2 summary blocks) across the start of the demo's disk-starved phase:
    one chart point per interval, so the episode shows, and the same figures as adding
    the blocks up."""
    from gpudisk_top.report import tally
    from gpudisk_top.report.text import chart_plan

    sim = Simulator(builtin("demo"), seed=0)
    samples = [sim.sample() for _ in range(101)][40:]
    path = write_recording(tmp_path / "short.gdtrec", samples)
    result = _build(path)
    d = result.data
    assert d["derived"].startswith("recorded summaries") and d["samples"] == 61
    assert [e["state"] for e in d["episodes"]] == ["disk-starved"]
    gpu = next(c for c in chart_plan(result) if c.device is None)
    assert len(gpu.xs) == 60                         # every interval (the first has no rates)
    inside, outside = _inside(gpu, result.series.marks, "disk-starved")
    assert len(inside) >= 35 and statistics.median(inside) < 60
    assert len(outside) >= 15 and statistics.median(outside) > 85
    assert [c.device for c in _disk_charts(result)] == ["sdb"]
    # from the blocks' means, the same window charts two values and hides the episode
    monkeypatch.setattr(tally, "MIN_CHART_BLOCKS", 0)
    coarse = _build(path)
    assert len({round(y, 6) for y in chart_plan(coarse)[0].ys}) <= 2
    assert {k: v for k, v in coarse.data.items() if k != "replayed_samples"} == \
        {k: v for k, v in d.items() if k != "replayed_samples"}


def test_a_window_of_many_blocks_is_charted_from_the_summaries(stalls, monkeypatch):
    from gpudisk_top.report import tally

    path, samples, _ = stalls                            # 241 samples: 5 blocks
    monkeypatch.setattr(tally, "MIN_CHART_BLOCKS", 3)
    assert _build(path).data["replayed_samples"] == 0
    # a window in 2 blocks is fewer than 3: every sample replayed for the charts
    t0 = samples[0].wall_s
    assert _build(path, start_s=t0 + 61, end_s=t0 + 119).data["replayed_samples"] == 59


# ------------------------------------------------------------------------------ evidence
def _dirty_quoted(reason: str) -> tuple[str, float, str] | None:
    import re

    m = re.search(r"(Dirty\+Writeback|Dirty) (\d+(?:\.\d+)?) (MB|GB)", reason)
    return None if m is None else (m.group(1), float(m.group(2)), m.group(3))


def _dirty_kb_in(samples, e) -> list[int]:
    return [s.host.meminfo_kb["Dirty"] + s.host.meminfo_kb["Writeback"] for s in samples
            if e["start_s"] <= s.wall_s <= e["end_s"]]


def test_checkpoint_evidence_quotes_dirty_in_mb_below_a_gb(demo, capsys):
    """The demo's checkpoint disk keeps up: tens of MB stay dirty, quoted as MB (it was
    "0.0 GB"), the amount of an interval of the episode."""
    path, samples = demo
    e = next(e for e in _report_json(capsys, path)["episodes"] if e["state"] == "checkpoint-stall")
    what, amount, unit = _dirty_quoted(e["reason"])
    assert (what, unit) == ("Dirty+Writeback", "MB") and "0.0 GB" not in e["reason"]
    kbs = _dirty_kb_in(samples, e)
    assert max(kbs) < 1048576
    assert any(abs(amount * 1024 - kb) <= 512 for kb in kbs), (amount, kbs)
    assert amount > 0


def test_checkpoint_evidence_quotes_gb_above_a_gb(stalls, capsys):
    path, samples, _ = stalls
    for e in _report_json(capsys, path)["episodes"]:
        what, amount, unit = _dirty_quoted(e["reason"])
        assert (what, unit) == ("Dirty+Writeback", "GB") and amount >= 1.0
        assert any(abs(amount * 1048576 - kb) <= 0.05 * 1048576 for kb in _dirty_kb_in(samples, e))


@pytest.mark.parametrize("missing, quoted", [(("Dirty", "Writeback"), None),
                                             (("Writeback",), "Dirty")])
def test_checkpoint_evidence_quotes_only_what_was_measured(tmp_path, capsys, missing, quoted):
    """A /proc/meminfo without Dirty (or without Writeback) is not quoted as 0."""
    samples = sim_samples("checkpoint-stalls", 121)
    for s in samples:
        for key in missing:
            del s.host.meminfo_kb[key]
    path = write_recording(tmp_path / "m.gdtrec", samples, scenario="checkpoint-stalls")
    eps = _report_json(capsys, path)["episodes"]
    assert [e["state"] for e in eps] == ["checkpoint-stall"] * 2
    for e in eps:
        got = _dirty_quoted(e["reason"])
        assert (got and got[0]) == quoted, e["reason"]
        if quoted is None:
            assert "Dirty" not in e["reason"] and "Writeback" not in e["reason"]
