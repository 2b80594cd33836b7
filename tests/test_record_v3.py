"""Format version 3 (issue 41): blocks code columns against others (record/v2/predict.py)
and summaries are LZMA-compressed.  A recorded day's samples read back as they were
written, version 2 files stay readable and are appended to as version 2."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from gpudisk_top.record import Recording, frames, v2
from gpudisk_top.record.header import FORMAT_VERSION
from gpudisk_top.record.v2 import predict
from gpudisk_top.record.v2.fields import constant
from gpudisk_top.sim import Simulator, load_toml
from recording_helpers import canonical, sim_samples, write_recording

ROOT = Path(__file__).resolve().parent.parent
BUSY_DAY = ROOT / "bench" / "scenarios" / "busy-day.toml"
V2_FIXTURE = ROOT / "tests" / "fixtures" / "recordings" / "v2-demo-simulated.gdtrec"


@pytest.fixture(scope="module")
def busy():
    """400 samples of the busy day: every disk moves every second, the job's phases
    (healthy, disk-starved, checkpoint, cpu-starved, idle) change the processes."""
    sim = Simulator(load_toml(str(BUSY_DAY)), seed=3)
    return [sim.sample() for _ in range(400)]


def _blocks(path) -> list:
    data = Path(path).read_bytes()
    found, _ = frames.scan(data, frames.PREAMBLE.size)
    return [memoryview(data)[f.start:f.end] for f in found if f.kind == frames.BLOCK]


def test_a_busy_recording_reads_back_what_was_written(tmp_path, busy):
    path = write_recording(tmp_path / "busy.gdtrec", busy, segment_samples=100)
    assert Path(path).read_bytes()[8:10] == FORMAT_VERSION.to_bytes(2, "little") == b"\x03\x00"
    with Recording.open(path) as rec:
        assert rec.version == 3 and rec.header["format_version"] == 3
        back = [s for _, s in rec.samples()]
    assert back == canonical(busy)
    blocks = _blocks(path)
    assert len(blocks) == 4
    # the predictions were used: the disks' queue time and sectors, the GPUs' energy
    kinds = set().union(*map(_predicted, blocks))
    assert {("rq_ticks", "sum"), ("rd_sectors", "lin"), ("energy_mj", "cum")} <= kinds


def _predicted(block) -> set:
    """(field, kind) of each column a block holds as the rest of a prediction."""
    import json
    import lzma

    _, _, wl, rl, _ = v2.BLOCK_HEAD.unpack_from(block)
    off = v2.BLOCK_HEAD.size + wl
    body = lzma.decompress(bytes(block[off:off + rl]), format=lzma.FORMAT_RAW,
                           filters=[{"id": lzma.FILTER_LZMA2, "dict_size": 1 << 20}])
    head = json.loads(body[8:8 + int.from_bytes(body[:4], "little")])
    return {(head["keys"][t].rsplit("/", 1)[1], kind) for t, kind, _, _ in head.get("pred", ())}


def test_predictions_are_exact_and_smaller(busy):
    """Each block decodes to the very rows it was made of, with and without predictions,
    and the predicted block is smaller."""
    rows, layouts = _rows(busy[:200])
    sizes = []
    for on in (False, True):
        payload = v2.encode_block(0, rows, layouts, {}, predict_cols=on)
        _same(v2.decode_block(payload), rows, layouts)
        sizes.append(len(payload))
    assert sizes[1] < sizes[0] * 0.93, sizes


def _rows(samples) -> tuple[list, list]:
    fl = v2.Flattener()
    rows, layouts, ids = [], [], {}
    for s in samples:
        layout, vals = fl.flatten(s)
        fl.accept(s)
        lid = ids.setdefault(layout, len(layouts))
        if lid == len(layouts):
            layouts.append(layout)
        rows.append((lid, vals))
    return rows, layouts


def test_a_small_block_is_never_larger_for_its_predictions():
    """Under a small --max-size budget a part's blocks hold a few samples, where the
    predictions' header can cost more than they save (the demo's 1 MB budget kept 652
    samples with format 3, 719 with format 2): such a block is written the smaller way,
    and reads back the same either way."""
    from gpudisk_top.record.v2 import blocks
    from gpudisk_top.sim import builtin

    sim = Simulator(builtin("demo"), seed=0)
    samples = [sim.sample() for _ in range(200)]
    worse = 0
    for n in (3, 6, 10, 16, 40):
        for start in range(0, 200 - n, 37):
            rows, layouts = _rows(samples[start:start + n])
            plain, _ = blocks._encode(0, rows, layouts, {}, 6, b"", False)
            predicted, _ = blocks._encode(0, rows, layouts, {}, 6, b"", True)
            chosen = v2.encode_block(0, rows, layouts, {}, predict_cols=True)
            assert len(chosen) == min(len(plain), len(predicted)), (n, start)
            _same(v2.decode_block(chosen), rows, layouts)
            worse += len(predicted) > len(plain)
    assert worse, "no small block where the predictions cost more: the case this is for"


def _same(blk, rows, layouts) -> None:
    """Rows equal as a block gives them back (records come back as lists, as JSON does)."""
    import json

    for j, (lid, vals) in enumerate(rows):
        layout, got = blk.values(j)
        assert layout == layouts[lid]
        assert json.loads(json.dumps(got)) == json.loads(json.dumps(vals)), j


@pytest.mark.parametrize("kind, target, refs", [
    ("sum", [10, 25, 31, 60], [[3, 9, 12, 30], [6, 14, 17, 28]]),
    ("lin", [800, 1600, 1608, 2400], [[100, 200, 201, 300]]),
    ("cum", [0, 5000, 9900, 15100], [[4800, 5000, 4900, 5200]]),
])
def test_a_prediction_undone_gives_the_column_back(kind, target, refs):
    keys = {"sum": ["d/sda/rq_ticks", "d/sda/rd_ticks", "d/sda/wr_ticks"],
            "lin": ["d/sda/rd_sectors", "d/sda/rd_ios"],
            "cum": ["g/0/energy_mj", "g/0/power_mw"]}[kind]
    if kind == "sum":   # the four tick counters: discards and flushes none
        keys += ["d/sda/dc_ticks", "d/sda/fl_ticks"]
        refs = refs + [[0] * 4, [0] * 4]
    cols = [list(target)] + [list(r) for r in refs]
    pred = predict.apply(keys, cols, [None] * len(keys))
    assert [p[1] for p in pred] == [kind]
    assert cols[0] != target                         # it holds the rest now
    predict.undo(pred, cols, object())
    assert cols[0] == target


def test_a_hostile_prediction_is_a_format_error():
    from gpudisk_top.record.v2.fields import FormatError

    cols = [[1, 2], [3, 4]]
    for bad in ([[0, "exp", 1, [1]]], [[0, "lin", 1.5, [1]]], [[0, "sum", 1, [0]]],
                [[0, "sum", 1, [7]]]):
        with pytest.raises((ValueError, TypeError, IndexError)):
            predict.undo(bad, [list(c) for c in cols], object())
    assert issubclass(FormatError, ValueError)


def test_a_version_2_recording_is_read_and_appended_to_as_version_2(tmp_path):
    path = tmp_path / "old.gdtrec"
    shutil.copyfile(V2_FIXTURE, path)
    with Recording.open(str(path)) as rec:
        assert rec.version == 2
        before = [s for _, s in rec.samples()]
    assert before
    more = sim_samples("demo", 12, seed=7)             # the fixture's source
    write_recording(path, more, seed=7, segment_samples=5)
    assert path.read_bytes()[8:10] == b"\x02\x00"
    with Recording.open(str(path)) as rec:
        assert rec.version == 2
        assert rec.sessions[-1].header["format_version"] == 2
        after = [s for _, s in rec.samples()]
    assert after[:len(before)] == before and after[len(before):] == canonical(more)
    # no block of the appended session has a prediction: an older reader reads it whole
    assert not set().union(*map(_predicted, _blocks(path)))
    assert os.path.getsize(path) > V2_FIXTURE.stat().st_size


def test_a_constant_column_is_judged_as_counting_it_would():
    """fields.constant() settles most columns on their last value: what it says must be
    what counting the first value's equals says, NaN (equal only to itself) included."""
    nan = float("nan")
    rng = random.Random(41)
    cases = [[nan] * 5, [nan, float("nan")], [1, 2, 1], [1, 1, 1], [0], [None, None],
             ["a", "a", "b", "a"], [1, 1.0, True], [nan, 1, nan], [[1], [1]], [(1,), [1]]]
    cases += [[rng.choice((0, 1)) for _ in range(rng.randint(1, 6))] for _ in range(400)]
    for values in cases:
        assert constant(values) == (values.count(values[0]) == len(values)), values
