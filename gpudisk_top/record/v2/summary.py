"""Summary blocks (format v2): the derived stream's payload, as it is on disk, and back.

A summary block is SUMMARY_SAMPLES (or fewer) consecutive samples of one session, summed
by record/derived.py (which says what each figure means and how the recorder and `report`
fill them): per interval the detector's state codes, and the block's sums (a Stretch: the
GPUs' seconds in each state, utilization, per device a DiskSums of integer counter
differences), the episodes open during it and the health readings new in it.  A block is
stored as compact JSON; a frame's blocks are deflated together (encode_blocks).  This is
the codec only: it imports the collection layer's types and nothing of the model, so the
index reads summaries without the model (an episode stays the dict it was recorded as).

A block also carries its intervals' stall ledger (verdict/ledger.py IntervalLoss, the
LEDGER_FIELDS of each, one row per interval), so that `report` counts the GPU time lost
from summaries over any window, cut to the interval as it cuts a block; an interval's
lost time is its episode's, the block's `episode` code of that interval (no column here:
the layout is the same).  Blocks written before it (no "ledger") decode with ledger None:
the report then replays the window for it.

A block also carries each job's own rows (JobRows, issue 37: a shared node's jobs are
judged apart): per interval the job's state, raw state and episode codes and its own
ledger row, -1 in the state code where the job was not there; its identity as the
collector tagged it.  A block of more jobs than MAX_BLOCK_JOBS keeps none of them and
says how many (jobs_over): `report` replays such a window.  Blocks written before them
(no "jobs") decode with jobs None.
"""

from __future__ import annotations

import json
import lzma
import operator
import zlib
from dataclasses import dataclass, field, fields

from gpudisk_top.collect.jobid import tag_from_record
from gpudisk_top.collect.sample import DeviceInfo, DiskHealth
from gpudisk_top.record.v2.fields import expand, health_named, health_reading, runs


# The stall ledger's figures a summary block keeps per interval: the fields of
# verdict/ledger.py IntervalLoss (by those names) that Ledger.add and the report read, in
# this order; the one table of them (the recorder's Deriver writes them, `report` reads)
LEDGER_FIELDS = ("interval_s", "cause", "blamed", "job_gpus", "unused_gpu_s", "lost_gpu_s",
                 "healthy_gpu_s", "idle_gpu_s", "job_gpu_s", "reference_pct", "gap_s")
# columns a block written before them does not have (read as None: gap_s came later)
LEDGER_LATER = frozenset({"gap_s"})


# the jobs a block keeps rows of: a node has a few (eight single-GPU jobs, a sweep of
# short runs in one minute); a block with more keeps none and is replayed
MAX_BLOCK_JOBS = 64
MAX_JOB_PIDS = 64         # a job's GPU processes kept in a block (a job's identity)
MAX_CGROUP_CHARS = 4096
ABSENT = -1               # a job's state code in an interval it was not there


def _ledger_json(rows: list) -> dict:
    """Per-interval rows (a tuple in LEDGER_FIELDS' order, or None for an interval not
    counted) as columns of runs: most columns repeat for minutes on end."""
    cols = {}
    for k, name in enumerate(LEDGER_FIELDS):
        cols[name] = runs([None if r is None else r[k] for r in rows])
    return cols


def _ledger_rows(cols: dict, n: int) -> list:
    values = [[None] * n if name in LEDGER_LATER and name not in cols else expand(cols[name])
              for name in LEDGER_FIELDS]
    if any(len(v) != n for v in values):
        raise ValueError("a summary block's ledger does not cover its intervals")
    return [None if all(v is None for v in row) else tuple(row) for row in zip(*values)]


@dataclass
class JobRows:
    """One job over a summary block: its identity (the latest the block saw; gpus and
    pids: every one it had in the block, in order) and per interval its state code
    (ABSENT where it was not there), raw state code, episode code (0: none), the bit mask
    of the GPUs its verdict names and its ledger row (LEDGER_FIELDS; None where it was
    not there)."""

    id: str
    source: str
    name: str
    cgroup: str | None
    gpus: list[int]
    pids: list[int]
    state: list[int]
    raw: list[int]
    episode: list[int]
    named: list[int]
    ledger: list

    def to_json(self) -> dict:
        return {"id": self.id, "source": self.source, "name": self.name,
                "cgroup": self.cgroup, "gpus": self.gpus, "pids": self.pids,
                "codes": [runs(self.state), runs(self.raw), runs(self.episode),
                          runs(self.named)],
                "ledger": _ledger_json(self.ledger)}

    @classmethod
    def from_json(cls, d: dict, n: int) -> "JobRows":
        """Raises ValueError (or KeyError, TypeError) where a recording's job rows are not
        what a recorder writes: the block is then unreadable, and replayed."""
        tag = tag_from_record([d["id"], d["source"], d["name"]])
        cgroup = d.get("cgroup")
        if tag is None or tag.id != d["id"]:
            raise ValueError("a summary block's job has no valid id")
        if cgroup is not None and (not isinstance(cgroup, str) or len(cgroup) > MAX_CGROUP_CHARS):
            raise ValueError("a summary block's job has a bad cgroup")
        gpus, pids = d["gpus"], d["pids"]
        if not (_ints(gpus, 0, 1 << 16) and _ints(pids, 0, 1 << 31)
                and len(pids) <= MAX_JOB_PIDS and len(gpus) <= 1 << 10):
            raise ValueError("a summary block's job has bad GPUs or processes")
        codes = d["codes"]
        # checked as runs (a handful), before they are expanded
        if not (isinstance(codes, list) and len(codes) == 4 and all(
                isinstance(c, list) and all(isinstance(run, list) and len(run) == 2
                                            for run in c) for c in codes)
                and all(_ints([v for v, _k in c], ABSENT, 1 << 1024)
                        and _ints([k for _v, k in c], 1, n + 1) for c in codes)):
            raise ValueError("a summary block's job codes are not runs of codes")
        state, raw, episode, named = (expand(c) for c in codes)
        if not all(len(c) == n for c in (state, raw, episode, named)):
            raise ValueError("a summary block's job codes do not cover its intervals")
        return cls(tag.id, tag.source, tag.name, cgroup, list(gpus), list(pids), state, raw,
                   episode, named, _ledger_rows(d["ledger"], n))


def _ints(values, lo: int, hi: int) -> bool:
    return isinstance(values, list) and all(
        isinstance(v, int) and not isinstance(v, bool) and lo <= v < hi for v in values)


@dataclass
class DiskSums:
    """One device over a stretch of intervals.  Requests, waits, sectors and busy time
    are sums of integers (scaled only for an interval a window cuts)."""

    r_ios: float = 0
    w_ios: float = 0
    r_wait_ms: float = 0
    w_wait_ms: float = 0
    r_sectors: float = 0
    w_sectors: float = 0
    busy_ms: float = 0
    seconds: float = 0.0
    intervals: int = 0
    worst_ms: float = 0.0
    worst_at: float | None = None   # wall time, or (in a summary block) the interval offset
    # intervals in which the device had done I/O since boot (the default device filter)
    io_seconds: float = 0.0
    io_intervals: int = 0

    def add(self, ints, scale: float = 1.0) -> None:
        if scale == 1.0:
            self.r_ios += ints[0]
            self.w_ios += ints[1]
            self.r_wait_ms += ints[2]
            self.w_wait_ms += ints[3]
            self.r_sectors += ints[4]
            self.w_sectors += ints[5]
            self.busy_ms += ints[6]
        else:
            self.r_ios += ints[0] * scale
            self.w_ios += ints[1] * scale
            self.r_wait_ms += ints[2] * scale
            self.w_wait_ms += ints[3] * scale
            self.r_sectors += ints[4] * scale
            self.w_sectors += ints[5] * scale
            self.busy_ms += ints[6] * scale

    def merge(self, other: "DiskSums", io_only: bool) -> None:
        """Add a summary block's sums; io_only: count only the intervals in which the
        device had done I/O (what the default device filter selects)."""
        for f in ("r_ios", "w_ios", "r_wait_ms", "w_wait_ms", "r_sectors", "w_sectors", "busy_ms"):
            setattr(self, f, getattr(self, f) + getattr(other, f))
        self.seconds += other.io_seconds if io_only else other.seconds
        self.intervals += other.io_intervals if io_only else other.intervals
        if other.worst_ms > self.worst_ms:
            self.worst_ms, self.worst_at = other.worst_ms, other.worst_at

    def as_list(self) -> list:
        return [self.r_ios, self.w_ios, self.r_wait_ms, self.w_wait_ms, self.r_sectors,
                self.w_sectors, self.busy_ms, self.seconds, self.intervals, self.worst_ms,
                self.worst_at, self.io_seconds, self.io_intervals]

    @classmethod
    def from_list(cls, v: list) -> "DiskSums":
        return cls(*v)


@dataclass
class Stretch:
    """Intervals added up: a summary block in the recorder, a piece of a report window."""

    samples: int = 0
    first_s: float | None = None
    last_s: float | None = None
    covered_s: float = 0.0
    gpu_info: dict = field(default_factory=dict)      # index -> {"index", "name", "uuid"}
    states: dict = field(default_factory=dict)        # index -> {state: seconds}
    util_sum: float = 0.0
    util_n: int = 0
    util_min: float | None = None
    # seconds in state unavailable with no GPU to read at all (NVML down or hung): each
    # GPU the report knows spent them "unavailable" (lost GPUs are tallied "lost")
    no_gpu_s: float = 0.0
    disks: dict = field(default_factory=dict)         # name -> DiskSums
    devices: dict = field(default_factory=dict)       # name -> DeviceInfo, as last seen


@dataclass
class SummaryBlock:
    """SUMMARY_SAMPLES (or fewer) consecutive samples of one session, summed."""

    first: int                     # session-relative number of its first sample
    n: int
    state: list[int]               # per interval: STATES index of the reported state
    raw: list[int]                 # and of the raw state
    episode: list[int]             # id of the open episode, 0 for none
    gpus: list[int]                # bit mask of the GPUs the verdict names
    sums: Stretch
    episodes: list[dict]           # every episode open during the block, as of its end
    # (place in the block, reading) of each health reading new at one of its samples
    health: list[tuple[int, DiskHealth]] = field(default_factory=list)
    # per interval: its stall ledger's LEDGER_FIELDS (a tuple), None where not counted;
    # the list None for a block written before summaries carried the ledger
    ledger: list | None = None
    # each job's rows (JobRows); None for a block written before summaries carried them,
    # or one of more than MAX_BLOCK_JOBS jobs (jobs_over: how many it had)
    jobs: list[JobRows] | None = None
    jobs_over: int = 0

    def to_json(self) -> dict:
        s = self.sums
        out = {
            "first": self.first, "n": self.n,
            "codes": [runs(self.state), runs(self.raw), runs(self.episode), runs(self.gpus)],
            "samples": s.samples, "covered": s.covered_s,
            "gpu_info": [[i["index"], i["name"], i["uuid"]] for i in s.gpu_info.values()],
            "states": [[idx, per] for idx, per in s.states.items()],
            "util": [s.util_sum, s.util_n, s.util_min],
            "disks": [[name, d.as_list()] for name, d in s.disks.items()],
            "devices": [[name, _device_list(info)] for name, info in s.devices.items()],
            "episodes": self.episodes,
        }
        if s.no_gpu_s:
            out["no_gpu"] = s.no_gpu_s
        if self.health:             # summaries without health stay as they were
            out["health"] = [[j, health_named(h)] for j, h in self.health]
        if self.ledger is not None:
            out["ledger"] = _ledger_json(self.ledger)
        if self.jobs is not None:
            out["jobs"] = [j.to_json() for j in self.jobs]
        if self.jobs_over:
            out["jobs_over"] = self.jobs_over
        return out

    @classmethod
    def from_json(cls, d: dict) -> "SummaryBlock":
        s = Stretch(samples=d["samples"], covered_s=d["covered"])
        s.gpu_info = {i: {"index": i, "name": n, "uuid": u} for i, n, u in d["gpu_info"]}
        s.states = {idx: dict(per) for idx, per in d["states"]}
        s.util_sum, s.util_n, s.util_min = d["util"]
        s.no_gpu_s = d.get("no_gpu", 0.0)
        s.disks = {name: DiskSums.from_list(v) for name, v in d["disks"]}
        known = {f.name for f in fields(DeviceInfo)}
        s.devices = {name: DeviceInfo(**{k: tuple(v) if isinstance(v, list) else v
                                         for k, v in rec.items() if k in known})
                     for name, rec in d["devices"]}
        state, raw, episode, gpus = (expand(c) for c in d["codes"])
        health = [(j, health_reading(h.items())) for j, h in d.get("health", ())]
        ledger = _ledger_rows(d["ledger"], d["n"]) if "ledger" in d else None
        jobs = d.get("jobs")
        if jobs is not None:
            if not isinstance(jobs, list) or len(jobs) > MAX_BLOCK_JOBS:
                raise ValueError("a summary block's jobs are not a list of at most "
                                 f"{MAX_BLOCK_JOBS}")
            jobs = [JobRows.from_json(j, d["n"]) for j in jobs]
        over = d.get("jobs_over", 0)
        if not isinstance(over, int) or over < 0:
            raise ValueError("a summary block's jobs_over is not a count")
        return cls(d["first"], d["n"], state, raw, episode, gpus, s, d["episodes"], health,
                   ledger, jobs, over)


_DEVICE_FIELDS = tuple(f.name for f in fields(DeviceInfo))
_device_values = operator.attrgetter(*_DEVICE_FIELDS)


def _device_list(info: DeviceInfo) -> dict:
    """A device's identity as JSON holds it: its fields, tuples as lists (what asdict()
    gives for a DeviceInfo, whose fields are flat, without its deep copies: 128 devices
    in every summary block at scale)."""
    return {k: list(v) if isinstance(v, tuple) else v
            for k, v in zip(_DEVICE_FIELDS, _device_values(info))}


# a frame's summaries are ~150 kB of JSON: a 256 KiB dictionary holds them.  Preset 6 as
# it is (a binary-tree match finder): 18.6 bytes a sample of the busy day against 20.6
# for a four-byte hash chain stopped early (nice_len 16, depth 8, until issue 41's third
# stop), at 17 against 6 ms of CPU a 600-sample frame (deflate 9: a quarter larger)
_XZ_FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 6, "dict_size": 1 << 18}]


def encode_blocks(blocks: list[SummaryBlock], packed: bool = False) -> bytes:
    """The blocks as JSON, deflated (format version 2, and the tail's s frames), or with
    packed (a version 3 block's) as an .xz stream: its dictionary spans the frame's
    blocks, which repeat their devices and GPUs (a quarter smaller on a busy node)."""
    data = json.dumps([b.to_json() for b in blocks], separators=(",", ":"),
                      allow_nan=False).encode()
    if packed:
        return lzma.compress(data, check=lzma.CHECK_NONE, filters=_XZ_FILTERS)
    return zlib.compress(data, 9)


def decode_blocks(data) -> list[SummaryBlock]:
    """Raises ValueError for a payload it cannot read (then report replays its samples:
    summaries are derived, nothing is lost)."""
    try:
        data = bytes(data)
        # an .xz stream starts with 0xFD; a zlib stream with 0x78 (a 32 KiB window)
        raw = lzma.decompress(data) if data[:1] == b"\xfd" else zlib.decompress(data)
        return [SummaryBlock.from_json(d) for d in json.loads(raw)]
    except (zlib.error, lzma.LZMAError, ValueError, KeyError, TypeError, IndexError, AttributeError) as err:
        raise ValueError(f"{type(err).__name__}: {err}") from None


__all__ = ["ABSENT", "LEDGER_FIELDS", "MAX_BLOCK_JOBS", "JobRows", "DiskSums", "Stretch", "SummaryBlock", "decode_blocks", "encode_blocks"]
