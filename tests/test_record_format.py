"""The recording format: round trips, damage (torn tails, flipped bytes), bad files."""

from __future__ import annotations

import dataclasses
import json
import os
import struct

import pytest

from gpudisk_top.collect.diskstats import DiskCounters
from gpudisk_top.collect.sample import (CgroupIo, CpuTimes, DeviceInfo, GpuProcessRaw, GpuRaw,
                                        GpuSnapshot, HostRaw, MountRaw, ProcIoRaw, PsiTotals, Sample,
                                        UtilWindow)
from gpudisk_top.errors import UsageError
from gpudisk_top.record import Recorder, Recording, frames, make_header, v2
from gpudisk_top.record.header import FORMAT_VERSION
from recording_helpers import (abandon, assert_same_for_the_model, canonical, origin,
                               sim_samples, write_recording)


@pytest.fixture(scope="module")
def demo_samples():
    return sim_samples("demo", 70)


def test_round_trip_across_blocks_and_job_restarts(tmp_path, demo_samples):
    # blocks of 16 samples, and the demo's processes that come and go
    more = sim_samples("demo", 300)[240:]  # the idle phase and the job starting again
    samples = demo_samples + more
    path = write_recording(tmp_path / "r.gdtrec", samples, segment_samples=16)
    with Recording.open(path) as rec:
        assert len(rec) == len(samples) and rec.warnings == []
        got = [s for _, s in rec.samples()]
        assert got == canonical(samples)
        # random access in any order gives the same samples
        for i in (99, 3, 64, 16, 15, 0, len(samples) - 1):
            assert rec.sample(i) == got[i]
    # what differs from the samples taken changes nothing the model or the detector uses
    assert_same_for_the_model(samples, got)


def _odd_sample(i: int) -> Sample:
    """Everything that can be None, a float, a lost GPU, a cgroup, a warning."""
    return Sample(
        mono_s=1000.5 + i * 0.25, wall_s=1.7e9 + i * 0.25 + 1e-6,
        disks={"sda": DiskCounters(8, 0, 14, 10 + i, 0, 80 + 8 * i, 3, 0, 0, 0, 0, 0, 7, 9),
               "nvme0n1": DiskCounters(259, 0, 20, *[2**64 - 5 + i] * 3, 2**32 - 1, *[i] * 13)},
        devices={"sda": DeviceInfo("sda", "sda", 8, 0, mountpoints=("/", "/boot"), rotational=None)},
        gpu=GpuSnapshot(status="ok", driver_version="550.54", gpus=[
            GpuRaw(index=0, name="A100", uuid="GPU-0",
                   util_samples=[(int((1.7e9 + i * 0.25) * 1e6) - 100, 50.5), (20 + i, 51)],
                   mem_util_samples=None, util_now_pct=None if i % 2 else 7.5,
                   power_mw=100_000 + i, energy_mj=None, throttle_reasons=0x4,
                   processes=[GpuProcessRaw(pid=4, used_gpu_mem_bytes=None, name="py", mapped=False)]),
            GpuRaw(index=1, lost=True, error="GPU is lost", util_samples=[], processes=None)]),
        host=HostRaw(cpu=CpuTimes(user=100 + i, idle=5000 + 3 * i) if i != 2 else None, ncpu=4,
                     psi={"io": PsiTotals(10 * i, None)}, meminfo_kb={"MemTotal": 1000, "Dirty": i},
                     cgroup=CgroupIo("/x", {"8:0": {"rbytes": 4096 * i}}, PsiTotals(i, i),
                                     pid=4 if i % 2 else None, cpu_max="400000 100000" if i < 3 else "max 100000",
                                     cpu_stat={"usage_usec": 10 * i, "nr_periods": i, "nr_throttled": i // 2},
                                     cpu_pressure=PsiTotals(2 * i, None if i == 1 else i) if i != 3 else None,
                                     memory_stat={"file": 2**30 + i, "file_dirty": i})),
        procs={7: ProcIoRaw(7, ppid=1, root_pid=4, name="w", rchar=None if i == 1 else 100 * i,
                            read_bytes=4096 * i if i != 4 else 3, cpu_ticks=i, devices=("sda",),
                            state="D" if i % 2 else "S", run_delay_ns=10**12 * i + 7,
                            blkio_ticks=None if i == 3 else 5 * i, syscr=2**40 + i,
                            mounts=("/data", "/mnt/s3") if i < 4 else ("/data",),
                            blocked_on=("/mnt/s3", None, "/data")[i % 3] if i < 4 else None),
               5: ProcIoRaw(5, ppid=1, root_pid=4, name="v", rchar=7 * i, read_bytes=4096 * i,
                            write_bytes=0, cpu_ticks=None),
               8 + (i > 2): ProcIoRaw(8 + (i > 2), devices=None)},
        mounts={"/data": MountRaw("/data", "nfs4", "10.0.0.5:/ds", "nfs", None,
                                  {"read_ops": 100 * i, "read_rtt_ms": 7 * i, "xprt_bklog_u": 2**40}),
                **({"/mnt/s3": MountRaw("/mnt/s3", "fuse.s3fs", "s3fs", "fuse", 912 if i else None,
                                        {"waiting": i % 3})} if i < 4 else {})},
        warnings=["cannot read x"] if i == 1 else [])


def test_round_trip_of_none_floats_lost_gpus_and_wrapping_counters(tmp_path):
    samples = [_odd_sample(i) for i in range(6)]
    path = write_recording(tmp_path / "odd.gdtrec", samples)
    with Recording.open(path) as rec:
        got = [s for _, s in rec.samples()]
    assert got == canonical(samples)
    assert_same_for_the_model(samples, got)
    # NVML samples: the sum and number of those the model averages for each interval
    assert got[0].gpu.gpus[0].util_samples == UtilWindow(101.5, 2)      # no window yet: all
    assert got[3].gpu.gpus[0].util_samples == UtilWindow(50.5, 1)       # the one inside
    assert got[3].gpu.gpus[1].util_samples == [] and got[3].gpu.gpus[0].mem_util_samples is None
    # where the time went: exactly, None as None (a sample without delay accounting)
    for s, g in zip(samples, got):
        mine, back = s.procs[7], g.procs[7]
        assert (back.state, back.run_delay_ns, back.blkio_ticks, back.syscr) == \
            (mine.state, mine.run_delay_ns, mine.blkio_ticks, mine.syscr)
        assert g.procs[5].state is None and g.procs[5].run_delay_ns is None
    # counters: None stays None; a counter that went down (a reused PID) goes down
    assert got[1].procs[7].rchar is None and got[2].procs[7].rchar is not None
    assert got[4].procs[7].read_bytes < got[3].procs[7].read_bytes
    # network and FUSE mounts, and which of them a process was reading, as they were
    for s, g in zip(samples, got):
        assert g.mounts == s.mounts
        assert (g.procs[7].mounts, g.procs[7].blocked_on) == (s.procs[7].mounts, s.procs[7].blocked_on)


def test_a_util_window_gives_window_means_exactly():
    """What v2 keeps of an interval's NVML samples gives model.gpu.window_mean() the same
    float, whatever window the reader passes."""
    from gpudisk_top.model.gpu import window_mean

    samples = [(10, 30.0), (15, 40.0), (25, 55.5), (26, 0.1)]
    for window in ((10, 20), (14, 26), (100, 200), (0, 5), None):
        kept = v2.util_window(samples, window)
        assert isinstance(kept, UtilWindow)
        assert window_mean(kept, None) == window_mean(kept, (0, 1)) == window_mean(samples, window)
    assert v2.util_window([], (0, 1)) == [] and v2.util_window(None, None) is None


def test_processes_io_is_kept_per_tree_exactly():
    """Each tree's increase is exact; a member's is within about 1/255 of its tree's, zero
    exactly when the real one was, and never negative."""
    samples = sim_samples("demo", 40)
    got = canonical(samples)
    checked = 0
    for prev_a, a, prev_b, b in zip(samples, samples[1:], got, got[1:]):
        trees: dict = {}
        for pid, p in a.procs.items():
            q, qb, pb = prev_a.procs.get(pid), prev_b.procs.get(pid), b.procs[pid]
            if q is None or q.root_pid != p.root_pid:
                continue
            for f in v2.IO_FIELDS:
                d, db = getattr(p, f) - getattr(q, f), getattr(pb, f) - getattr(qb, f)
                assert db >= 0 and (db == 0) == (d == 0)
                trees.setdefault((p.root_pid, f), []).append((d, db))
        for key, members in trees.items():
            total = sum(d for d, _ in members)
            assert total == sum(db for _, db in members), key
            for d, db in members:
                assert abs(db - d) <= total / 255 + len(members), (key, d, db)
                checked += 1
    assert checked > 1000


def test_fields_are_read_by_the_names_in_the_layout():
    """A layout with a field this code does not know (added later) is read without it; a
    field the recording lacks takes its default."""
    samples = [_odd_sample(i) for i in range(3)]
    fl = v2.Flattener()
    layout, vals = fl.flatten(samples[0])
    extra = [k for k in layout if k.startswith("d/sda/")]
    new_layout = tuple(k for k in layout if k != "d/sda/rq_ticks") + ("d/sda/future_field", "x/new")
    new_vals = [v for k, v in zip(layout, vals) if k != "d/sda/rq_ticks"] + [123, {"a": 1}]
    s = v2.Unflattener().sample(new_layout, json.loads(json.dumps(new_vals)))
    assert extra and s.disks["sda"].rq_ticks == 0
    assert s.disks["sda"].rd_ios == samples[0].disks["sda"].rd_ios


def test_frame_layout_is_what_the_docs_say():
    frame = frames.pack(frames.DELTA, b"xyz", 12.5)
    sync, kind, flags, length, wall, crc = struct.unpack_from("<2sBBIdI", frame)
    assert (sync, kind, flags, length, wall) == (b"\xa5\x5a", ord("D"), 0, 3, 12.5)
    assert frame[20:] == b"xyz" and len(frames.preamble(1)) == 12


def test_truncation_anywhere_in_the_last_row(tmp_path, demo_samples):
    """A recorder killed while writing: its tail is rows, one sample each, and a row cut
    anywhere costs only itself."""
    samples = demo_samples[:12]
    path = tmp_path / "full.gdtrec"
    rec = Recorder(path, make_header(origin(), 1.0), sync_interval_s=None)
    for s in samples:
        rec.append(s)
    abandon(rec)
    data = path.read_bytes()
    found, _ = frames.scan(data, frames.PREAMBLE.size)
    assert [f.kind for f in found] == [frames.SESSION] + [frames.ROW] * 12
    last = found[-1]
    expected = canonical(samples)
    cut = tmp_path / "cut.gdtrec"
    # every byte of the header (each field cut apart: sync, type, flags, length, wall_s,
    # crc), the payload's first and last bytes, and a stride through the rest: a cut in
    # the middle of the payload is the same torn frame wherever it falls (every byte took
    # 81 s; this proves the same in a few)
    head = range(last.offset, last.offset + frames.HEADER_SIZE + 4)
    tail = range(last.end - 4, last.end + 1)
    middle = range(last.offset + frames.HEADER_SIZE + 4, last.end - 4, 61)
    assert last.end == len(data)
    for end in sorted({*head, *middle, *tail}):
        cut.write_bytes(data[:end])
        with Recording.open(cut) as rec:
            assert len(rec) == (12 if end >= last.end else 11), end
            assert [s for _, s in rec.samples()] == expected[:len(rec)]
            torn = [w for w in rec.warnings if "torn" in w]
            clean = end in (last.offset, last.end)
            assert len(torn) == (0 if clean else 1), (end, rec.warnings)
            assert all("\n" not in w for w in rec.warnings)
            assert rec.sessions[0].end is None


def test_a_file_cut_inside_a_block_loses_that_block(tmp_path, demo_samples):
    samples = demo_samples[:30]
    data = open(write_recording(tmp_path / "b.gdtrec", samples, segment_samples=10), "rb").read()
    found, _ = frames.scan(data, frames.PREAMBLE.size)
    assert [f.kind for f in found] == [frames.SESSION] + [frames.BLOCK] * 3 + [frames.END]
    cut = tmp_path / "cut.gdtrec"
    cut.write_bytes(data[:found[3].offset + 100])
    with Recording.open(cut) as rec:
        assert [s for _, s in rec.samples()] == canonical(samples)[:20]
        assert len([w for w in rec.warnings if "torn" in w]) == 1


def test_a_damaged_block_in_the_middle_costs_itself_only(tmp_path, demo_samples):
    samples = demo_samples[:40]
    path = write_recording(tmp_path / "d.gdtrec", samples, segment_samples=10)
    data = bytearray(open(path, "rb").read())
    found, _ = frames.scan(bytes(data), frames.PREAMBLE.size)
    hit = [f for f in found if f.kind == frames.BLOCK][1]      # samples 10..19
    data[hit.start + 50] ^= 0xFF
    bad = tmp_path / "bad.gdtrec"
    bad.write_bytes(bytes(data))
    expected = canonical(samples)
    with Recording.open(bad) as rec:
        got = [s for _, s in rec.samples()]
        assert got == expected[:10] + expected[20:]     # the next block has its own start
        assert [w for w in rec.warnings if "damaged" in w]


def test_a_damaged_row_costs_the_rows_after_it_up_to_the_next_block(tmp_path, demo_samples):
    samples = demo_samples[:25]
    path = tmp_path / "r.gdtrec"
    rec = Recorder(path, make_header(origin(), 1.0), segment_samples=10, sync_interval_s=None)
    for s in samples:
        rec.append(s)
    abandon(rec)
    data = bytearray(path.read_bytes())
    found, _ = frames.scan(bytes(data), frames.PREAMBLE.size)
    rows = [f for f in found if f.kind == frames.ROW]
    assert len(rows) == 5                                # 20..24: their block never came
    data[rows[2].start + 6] ^= 0xFF                      # sample 22
    path.write_bytes(bytes(data))
    with Recording.open(path) as rec:
        assert [s for _, s in rec.samples()] == canonical(samples)[:22]
        assert any("2 samples after damage" in w for w in rec.warnings)


def test_appended_garbage_and_unknown_frames(tmp_path, demo_samples):
    path = write_recording(tmp_path / "g.gdtrec", demo_samples[:5])
    with open(path, "ab") as f:
        f.write(frames.pack(ord("x"), b"an ancillary frame a newer writer added"))
        f.write(frames.pack(ord("Q"), b"a critical frame this reader does not know"))
        f.write(b"\x00garbage" * 10)
    with Recording.open(path) as rec:
        assert len(rec) == 5
        assert any("unknown type 0x51" in w for w in rec.warnings)
        assert any("torn" in w for w in rec.warnings)


@pytest.mark.parametrize("content, message", [
    (b"", "empty file, not a gpudisk-top recording"),
    (b"time,util\n1,2\n", "not a gpudisk-top recording"),
    (frames.MAGIC[:5], "truncated gpudisk-top recording"),
    (frames.PREAMBLE.pack(frames.MAGIC, FORMAT_VERSION + 1, 0),
     f"recording format version {FORMAT_VERSION + 1} is newer than this gpudisk-top reads"),
    (frames.PREAMBLE.pack(frames.MAGIC, 0, 0), "unknown recording format version 0"),
])
def test_bad_files_are_one_line_errors(tmp_path, content, message):
    path = tmp_path / "f.gdtrec"
    path.write_bytes(content)
    with pytest.raises(UsageError) as err:
        Recording.open(path)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        Recording.open(tmp_path / "nope.gdtrec")
    with pytest.raises(UsageError, match="directory"):
        Recording.open(tmp_path)


def test_a_recording_without_samples_opens_empty(tmp_path):
    path = tmp_path / "e.gdtrec"
    path.write_bytes(frames.preamble(FORMAT_VERSION))
    with Recording.open(path) as rec:
        assert len(rec) == 0 and rec.start_s is None and rec.describe() == "no samples"


# ------------------------------------------------------------------------------ fixtures
FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "recordings")


def _fixture_cases():
    for name in sorted(os.listdir(FIXTURES)):
        if name.endswith(".gdtrec"):
            yield name


@pytest.mark.parametrize("name", list(_fixture_cases()))
def test_fixture_recordings_of_every_version_stay_readable(name):
    """tests/fixtures/recordings/vN-*.gdtrec were written by the code of format version N
    and are never regenerated: every reader must read them as they were."""
    path = os.path.join(FIXTURES, name)
    expected = json.load(open(path.removesuffix(".gdtrec") + ".expected.json"))
    with Recording.open(path) as rec:
        assert rec.version == expected["format_version"]
        assert len(rec) == expected["samples"]
        assert [s.header.get("source") for s in rec.sessions] == expected["sources"]
        assert [rec.wall_s(i) for i in range(len(rec))] == expected["walls"]
        for check in expected["checks"]:
            s = rec.sample(check["index"])
            assert s.mono_s == check["mono_s"]
            assert list(s.disks[check["disk"]]) == check["disk_counters"]
            assert dataclasses.asdict(s.host.cpu) == check["cpu"]
            g = s.gpu.gpus[check["gpu"]]
            if "util_window" in check:          # version 2 keeps each interval's sum
                assert [g.util_samples.sum_pct, g.util_samples.count] == check["util_window"]
            else:
                assert [list(x) for x in g.util_samples] == check["util_samples"]
            assert g.power_mw == check["power_mw"]
            p = s.procs[check["pid"]]
            assert [p.rchar, p.read_bytes, p.cpu_ticks, p.cmdline] == check["proc"]
            assert s.devices[check["disk"]].mountpoints == tuple(check["mountpoints"])
        assert rec.warnings == expected["warnings"]
        if "summary_blocks" in expected:        # version 2: its summaries stay readable
            assert [[g, b.n] for g, b, _ in rec.summaries()] == expected["summary_blocks"]
        if "report" in expected:
            from gpudisk_top.report import summary

            data = summary.build(rec).data
            assert {k: data[k] for k in expected["report"]} == expected["report"]
