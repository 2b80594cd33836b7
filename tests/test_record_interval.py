"""The interval each sample was taken at: the dashboard's sampler says it (+/- change it),
the recording keeps it per sample (record/v2/fields.py INTERVAL_KEY), and a replay shows
the interval of the sample on screen, not the one the session started with.  Recordings
made before samples said it read back None and replay at their header's interval.  And the
summaries add up the counter differences the model took its rates from."""

from __future__ import annotations

import pytest

from gpudisk_top.model.snapshot import Model
from gpudisk_top.record import Recorder, Recording, make_header, v2
from gpudisk_top.record.derived import Deriver
from gpudisk_top.session.live import Feed
from gpudisk_top.session.replay import ReplayFeed
from gpudisk_top.sim import Simulator, builtin
from recording_helpers import origin, sim_samples


def _record_with_keys(path, steps) -> list[float]:
    """A dashboard's recording: a Feed over the simulator writing every sample; `steps`
    is a list of (samples to take, +1/-1/0 after them).  Returns the interval each
    sample was taken at, as the feed had it."""
    sim = Simulator(builtin("demo"), seed=0)
    rec = Recorder(path, make_header(origin(), 1.0), segment_samples=8, sync_interval_s=None)
    feed = Feed(sim, 1.0, on_update=lambda u: None, on_sample=rec.append)
    taken = []
    for n, key in steps:
        for _ in range(n):
            taken.append(feed.interval_s)
            feed.step()
        if key:
            feed.step_interval(key)
    rec.close("test")
    return taken


def test_a_replay_shows_the_interval_each_sample_was_taken_at(tmp_path):
    path = tmp_path / "keys.gdtrec"
    # 1 s, then + twice (2 s, 3 s), then - three times (0.5 s): blocks of 8 and a tail of rows
    taken = _record_with_keys(path, [(5, +1), (6, +1), (4, -1), (0, -1), (0, -1), (5, 0)])
    assert taken == [1.0] * 5 + [2.0] * 6 + [3.0] * 4 + [0.5] * 5
    with Recording.open(path) as rec:
        assert rec.header["interval_s"] == 1.0          # the session's start
        assert [s.interval_s for _, s in rec.samples()] == taken
        feed = ReplayFeed(rec)
        shown = [feed.seek(0) and feed.interval_s]
        while feed.step() is not None:
            shown.append(feed.interval_s)
        assert shown == taken
        feed.seek(12)                                   # a seek shows the sample's own
        assert feed.interval_s == 3.0


def test_a_recording_whose_samples_do_not_say_replays_at_its_header_interval(tmp_path):
    """What `record` and recorders before the per-sample interval wrote: no interval key
    in any layout, samples read back None, the replay screen shows the header's."""
    samples = sim_samples("demo", 12)
    assert all(s.interval_s is None for s in samples)
    layout, _ = v2.Flattener().flatten(samples[0])
    assert v2.fields.INTERVAL_KEY not in layout
    path = tmp_path / "plain.gdtrec"
    with Recorder(path, make_header(origin(), 2.0), sync_interval_s=None) as rec:
        for s in samples:
            rec.append(s)
    with Recording.open(path) as rec:
        assert all(s.interval_s is None for _, s in rec.samples())
        feed = ReplayFeed(rec)
        feed.seek(5)
        assert feed.interval_s == 2.0


def test_summaries_add_the_counter_differences_the_model_took_its_rates_from():
    """A summary block's disk sums are the raw counters' differences (taken here straight
    from the samples), and each interval's rates are those differences over the interval."""
    samples = sim_samples("disk-starved-sata", 40)
    deriver = Deriver(block_samples=20)
    for s in samples:
        deriver.add(s)
    deriver.finish()
    blocks = deriver.take()
    assert [b.n for b in blocks] == [20, 20]
    for b in blocks:
        # the intervals ending at the block's samples (the session's first sample has none)
        pairs_of = [(samples[j - 1], samples[j]) for j in range(max(1, b.first), b.first + b.n)]
        for name, sums in b.sums.disks.items():
            pairs = [(p.disks[name], c.disks[name]) for p, c in pairs_of]
            want = [sum(c.rd_ios - p.rd_ios for p, c in pairs),
                    sum(c.wr_ios - p.wr_ios for p, c in pairs),
                    sum(c.rd_ticks - p.rd_ticks for p, c in pairs),
                    sum(c.wr_ticks - p.wr_ticks for p, c in pairs),
                    sum(c.rd_sectors - p.rd_sectors for p, c in pairs),
                    sum(c.wr_sectors - p.wr_sectors for p, c in pairs),
                    sum(c.tot_ticks - p.tot_ticks for p, c in pairs)]
            assert sums.as_list()[:7] == want, name
    assert any(sums.r_ios > 0 for b in blocks for sums in b.sums.disks.values())
    m = Model.new(samples[11], samples[10])
    d, r = m.disk_deltas["sda"], m.disks["sda"]
    assert d.rd_ios == samples[11].disks["sda"].rd_ios - samples[10].disks["sda"].rd_ios
    assert r.r_s == pytest.approx(d.rd_ios / m.interval_s, rel=1e-12) and set(m.disk_deltas) == set(m.disks)
