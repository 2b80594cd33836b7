"""Replay: seeking by time, and Models and Verdicts recomputed by the current model."""

from __future__ import annotations

import dataclasses
import pytest

from gpudisk_top.verdict.step import Stepper
from gpudisk_top.record import Recording
from gpudisk_top.session.replay import Replay
from gpudisk_top.model.vocab import episode_json
from recording_helpers import canonical, sim_samples, verdict_fingerprint, write_recording


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    samples = sim_samples("checkpoint-stalls", 250)
    path = write_recording(tmp_path_factory.mktemp("r") / "c.gdtrec", samples,
                           scenario="checkpoint-stalls", segment_samples=50)
    return path, samples


def test_seek_and_index_at(recorded):
    path, samples = recorded
    with Recording.open(path) as rec:
        t0 = samples[0].wall_s
        assert rec.start_s == t0 and rec.end_s == samples[-1].wall_s
        assert rec.duration_s == 249.0
        assert rec.seek(t0 + 99.5) == 100 and rec.index_at(t0 + 99.5) == 99
        assert rec.seek(t0 + 100) == 100 and rec.index_at(t0 + 100) == 100
        assert rec.seek(t0 - 5) == 0 and rec.seek(t0 + 1e6) == len(rec)
        assert rec.sample(rec.seek(t0 + 173)) == canonical(samples)[173]
        assert [i for i, _ in rec.between(t0 + 10, t0 + 12)] == [10, 11, 12]


def test_models_are_the_live_models_and_verdicts(recorded):
    """From the start, replay steps the samples exactly as live mode does (one Stepper:
    Model.new, the detector, the ledger): the same models (processes' I/O split within each tree aside), the same
    verdicts, the same episodes."""
    path, samples = recorded
    stepper = Stepper()              # live mode's one step: Model.new, the detector, the ledger
    live = [stepper.step(s)[:2] for s in samples]
    stepper.detector.close(samples[-1].wall_s)
    with Recording.open(path) as rec:
        replay = Replay(rec)
        got = list(replay.models())
        assert len(got) == len(live)
        for (m1, v1), (m2, v2) in zip(got, live):
            assert m1.disks == m2.disks and m1.gpus == m2.gpus and m1.host == m2.host
            assert m1.procs.keys() == m2.procs.keys() and m1.interval_s == m2.interval_s
            assert [p.cpu_pct for p in m1.procs.values()] == [p.cpu_pct for p in m2.procs.values()]
            floats1, others1 = flat_io(m1.gpu_proc_io)
            floats2, others2 = flat_io(m2.gpu_proc_io)
            assert others1 == others2 and same_io(floats1, floats2)
            assert verdict_fingerprint(v1) == verdict_fingerprint(v2)
        assert [episode_json(e) for e in replay.episodes] == [episode_json(e) for e in stepper.episodes]
        assert all(replay.stepper.ledger.lost_of(e.id) > 0 for e in replay.episodes)
        assert [e.state for e in replay.episodes] == ["checkpoint-stall"] * 4


def flat_io(gpu_proc_io: dict) -> tuple[dict, dict]:
    """gpu_proc_io as {(pid, field): value}, the loaders' LoaderTime spread into its
    fields, split into the float values and the others. Compared to 1e-9, not exactly: a recording keeps each process's I/O as its
    share of the tree's, so per-worker rates (and sums over them) can differ in the last
    bit from the live ones."""
    flat = {}
    for pid, io in gpu_proc_io.items():
        for key, value in io.items():
            if key == "loaders" and value is not None:
                fields = dataclasses.asdict(value)
                each = fields.pop("each")
                flat.update({(pid, "loaders", k): v for k, v in fields.items()})
                flat.update({(pid, "loaders", "each", i, k): v
                             for i, share in enumerate(each) for k, v in share.items()})
            else:
                flat[(pid, key)] = value
    floats = {k: v for k, v in flat.items() if isinstance(v, float)}
    return floats, {k: v for k, v in flat.items() if k not in floats}


def same_io(a: dict, b: dict) -> bool:
    """flat_io's floats: the tree's figures to 1e-9; one loader's own share (`each`) to
    what the recording keeps of it: its part of the tree's I/O in 1/255ths
    (record/v2/fields.py SHARE_SCALE), so its estimated blocked time may differ by as
    much, while the tree's mean is exact."""
    if a.keys() != b.keys():
        return False
    return all(a[k] == pytest.approx(b[k], rel=1e-9) if "each" not in k
               else a[k] == pytest.approx(b[k], rel=2 / 255, abs=0.05) for k in a)


def test_a_window_yields_its_samples_with_full_intervals(recorded):
    path, samples = recorded
    with Recording.open(path) as rec:
        t0 = rec.start_s
        got = list(Replay(rec).models(t0 + 100, t0 + 130))
        assert [m.wall_s for m, _ in got] == [samples[i].wall_s for i in range(100, 131)]
        assert all(m.interval_s == 1.0 for m, _ in got)        # the first one too
        # the detector warmed up before the window: the stall at 110-120 s is one episode
        replay = Replay(rec)
        list(replay.models(t0 + 112, t0 + 130))
        assert [(e.state, e.start_wall_s - t0) for e in replay.episodes] == [("checkpoint-stall", 109.0)]


def test_sessions_start_without_an_interval(tmp_path):
    samples = sim_samples("healthy-cached", 30)
    path = tmp_path / "s.gdtrec"
    write_recording(path, samples[:10])
    write_recording(path, samples[15:30])     # restarted 5 s later
    with Recording.open(path) as rec:
        intervals = [m.interval_s for m, _ in Replay(rec).models()]
        assert intervals[0] == 0.0 and intervals[10] == 0.0
        assert set(intervals[1:10] + intervals[11:]) == {1.0}


def test_replay_of_an_empty_recording_yields_nothing(tmp_path):
    from gpudisk_top.record import frames
    from gpudisk_top.record.header import FORMAT_VERSION

    path = tmp_path / "e.gdtrec"
    path.write_bytes(frames.preamble(FORMAT_VERSION))
    with Recording.open(path) as rec:
        assert list(Replay(rec).models()) == []
