"""The recording format: exact round trips, damage (torn tails, flipped bytes), bad files."""

from __future__ import annotations

import dataclasses
import json
import os
import struct

import pytest

from gpudisk_top.collect.diskstats import DiskCounters
from gpudisk_top.collect.sample import (CgroupIo, CpuTimes, DeviceInfo, GpuProcessRaw, GpuRaw,
                                        GpuSnapshot, HostRaw, ProcIoRaw, PsiTotals, Sample)
from gpudisk_top.errors import UsageError
from gpudisk_top.record import Recording, format_v1, frames
from gpudisk_top.record.header import FORMAT_VERSION
from recording_helpers import sim_samples, write_recording


@pytest.fixture(scope="module")
def demo_samples():
    return sim_samples("demo", 70)


def test_round_trip_is_exact_across_segments_and_job_restarts(tmp_path, demo_samples):
    # segments of 16 samples: keyframes, deltas, and the demo's processes that come and go
    more = sim_samples("demo", 300)[240:]  # the idle phase and the job starting again
    samples = demo_samples + more
    path = write_recording(tmp_path / "r.gdtrec", samples, segment_samples=16)
    with Recording.open(path) as rec:
        assert len(rec) == len(samples) and rec.warnings == []
        assert [s for _, s in rec.samples()] == samples
        # random access in any order gives the same samples
        for i in (99, 3, 64, 16, 15, 0, len(samples) - 1):
            assert rec.sample(i) == samples[i]


def _odd_sample(i: int) -> Sample:
    """Everything that can be None, a float, a lost GPU, a cgroup, a warning."""
    return Sample(
        mono_s=1000.5 + i * 0.25, wall_s=1.7e9 + i * 0.25 + 1e-6,
        disks={"sda": DiskCounters(8, 0, 14, 10 + i, 0, 80 + 8 * i, 3, 0, 0, 0, 0, 0, 7, 9),
               "nvme0n1": DiskCounters(259, 0, 20, *[2**64 - 5 + i] * 3, 2**32 - 1, *[i] * 13)},
        devices={"sda": DeviceInfo("sda", "sda", 8, 0, mountpoints=("/", "/boot"), rotational=None)},
        gpu=GpuSnapshot(status="ok", driver_version="550.54", gpus=[
            GpuRaw(index=0, name="A100", uuid="GPU-0", util_samples=[(10 + i, 50.5), (20 + i, 51)],
                   mem_util_samples=None, util_now_pct=None if i % 2 else 7.5,
                   power_mw=100_000 + i, energy_mj=None, throttle_reasons=0x4,
                   processes=[GpuProcessRaw(pid=4, used_gpu_mem_bytes=None, name="py", mapped=False)]),
            GpuRaw(index=1, lost=True, error="GPU is lost", processes=None)]),
        host=HostRaw(cpu=CpuTimes(user=100 + i, idle=5000 + 3 * i) if i != 2 else None, ncpu=4,
                     psi={"io": PsiTotals(10 * i, None)}, meminfo_kb={"MemTotal": 1000, "Dirty": i},
                     cgroup=CgroupIo("/x", {"8:0": {"rbytes": 4096 * i}}, PsiTotals(i, i))),
        procs={7: ProcIoRaw(7, ppid=1, root_pid=4, name="w", rchar=None if i == 1 else 100 * i,
                            read_bytes=4096 * i, cpu_ticks=i, devices=("sda",)),
               8 + (i > 2): ProcIoRaw(8 + (i > 2), devices=None)},
        warnings=["cannot read x"] if i == 1 else [])


def test_round_trip_of_none_floats_lost_gpus_and_wrapping_counters(tmp_path):
    samples = [_odd_sample(i) for i in range(6)]
    path = write_recording(tmp_path / "odd.gdtrec", samples)
    with Recording.open(path) as rec:
        assert [s for _, s in rec.samples()] == samples


def test_fields_are_read_by_the_names_in_the_header():
    """A recording whose schema differs from this code (a field added later, one dropped)
    is read by name: unknown fields are ignored, missing ones take their defaults."""
    samples = [_odd_sample(i) for i in range(3)]
    enc = format_v1.Encoder()
    payloads = [enc.encode(s) for s in samples]
    schema = format_v1.schema()
    renamed = dict(schema, proc_counters=[("rchar_old" if n == "rchar" else n)
                                          for n in schema["proc_counters"]])
    dec = format_v1.Decoder(renamed)
    out = [dec.decode(p) for p in payloads]
    assert all(p.rchar is None for s in out for p in s.procs.values())
    assert [s.procs[7].read_bytes for s in out] == [s.procs[7].read_bytes for s in samples]


def test_frame_layout_is_what_the_docs_say():
    frame = frames.pack(frames.DELTA, b"xyz", 12.5)
    sync, kind, flags, length, wall, crc = struct.unpack_from("<2sBBIdI", frame)
    assert (sync, kind, flags, length, wall) == (b"\xa5\x5a", ord("D"), 0, 3, 12.5)
    assert frame[20:] == b"xyz" and len(frames.preamble(1)) == 12


def test_truncation_at_every_byte_of_the_last_frame(tmp_path, demo_samples):
    samples = demo_samples[:12]
    data = open(write_recording(tmp_path / "full.gdtrec", samples), "rb").read()
    found, _ = frames.scan(data, frames.PREAMBLE.size)
    assert found[-1].kind == frames.END  # closed cleanly; a kill -9 leaves no end frame
    last = [f for f in found if f.kind in frames.SAMPLE_TYPES][-1]
    cut = tmp_path / "cut.gdtrec"
    for end in range(last.offset, len(data) + 1):
        cut.write_bytes(data[:end])
        with Recording.open(cut) as rec:
            assert len(rec) == (12 if end >= last.end else 11), end
            assert [s for _, s in rec.samples()] == samples[:len(rec)]
            torn = [w for w in rec.warnings if "torn" in w]
            clean = end in (last.offset, last.end, len(data))
            assert len(torn) == (0 if clean else 1), (end, rec.warnings)
            assert all("\n" not in w for w in rec.warnings)
            assert (rec.sessions[0].end is not None) == (end == len(data))


def test_a_damaged_frame_in_the_middle_costs_its_segment_only(tmp_path, demo_samples):
    samples = demo_samples[:40]
    path = write_recording(tmp_path / "d.gdtrec", samples, segment_samples=10)
    data = bytearray(open(path, "rb").read())
    found, _ = frames.scan(bytes(data), frames.PREAMBLE.size)
    sample_frames = [f for f in found if f.kind in frames.SAMPLE_TYPES]
    hit = sample_frames[13]                      # in the second segment (samples 10..19)
    data[hit.start + 5] ^= 0xFF
    bad = tmp_path / "bad.gdtrec"
    bad.write_bytes(bytes(data))
    with Recording.open(bad) as rec:
        got = [s for _, s in rec.samples()]
        assert got == samples[:13] + samples[20:]
        assert any("damaged" in w for w in rec.warnings)
        assert any("6 samples after damage" in w for w in rec.warnings)


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
            assert [list(x) for x in g.util_samples] == check["util_samples"]
            assert g.power_mw == check["power_mw"]
            p = s.procs[check["pid"]]
            assert [p.rchar, p.read_bytes, p.cpu_ticks, p.cmdline] == check["proc"]
            assert s.devices[check["disk"]].mountpoints == tuple(check["mountpoints"])
        assert rec.warnings == expected["warnings"]
