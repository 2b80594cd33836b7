"""The derived stream of a recording (format v2): what the model and the detector made of
every interval, summed by the minute, so that `report` need not replay a day.

The recorder feeds each sample to Model.new and a Detector, as the live screen does, and
keeps per summary block (SUMMARY_SAMPLES consecutive samples of one session):

  - per interval: the detector's state, its raw state, the open episode's id and the
    GPUs its verdict names (runs of small integers; nearly free).  The episode id is the
    step's (verdict/step.py: numbered on across the detectors a gap starts, so one id is
    one episode of the session), and the interval's ledger row (below) counts its lost
    time to that episode: `report` attributes lost time by it, as the step does;
  - the block's sums: covered seconds, seconds of each GPU in each state, GPU utilization
    (sum, count, minimum) for the chart, and per device the interval sums `report` needs
    (requests, milliseconds waited, sectors, busy milliseconds: integers, so any window of
    whole blocks adds up exactly to what replaying it gives) with the worst await;
  - the GPUs and devices it saw, and every episode open during it, as of the block's end;
  - the disks' health readings (Sample.health) that were new at one of its samples: the
    readings its session's first sample carried, then each one the poller made after.
    These are raw readings, not derived: `report` judges them with today's model, and
    takes them from the samples where it replays.

On a node of several jobs (model/jobs.py) each job's own rows go beside the node's
(record/v2/summary.py JobRows): per interval its state, raw state and episode codes and
its ledger row, taken from the step by job_parts(), the one rule by which the recorder and
`report`'s replay read a job's figures off a step.  The node's ledger row stays the
node's (its sums, its idle GPUs); its causes are its jobs' (a Ledger counts each part's
cause), which `report` reads back from the jobs' rows (loss_of(parts=...)).

Everything here is derived: a summary is used only when it was made by this model and
detector (gpudisk_top.model.MODEL_VERSION, DERIVED_LAYOUT) with the thresholds `report`
is asked to use; otherwise `report` replays the raw samples.  The same per-interval
accumulation (Window.add) serves the recorder and `report`'s replay, so the two agree.
"""

from __future__ import annotations

import json
import operator
from dataclasses import asdict

from gpudisk_top.collect import utilpct
from gpudisk_top.collect.sample import DiskHealth, is_new
from gpudisk_top.model import MODEL_VERSION
from gpudisk_top.model.disk import await_ms
from gpudisk_top.verdict.detect import STARVED_STATES, STATES, UNAVAILABLE, Episode
from gpudisk_top.verdict.detect.evidence import Culprit
from gpudisk_top.verdict.detect.phases import phase_at, phases_from
from gpudisk_top.verdict import gaps
from gpudisk_top.verdict.gaps import CLOCK_STEP_S, cadence_of
from gpudisk_top.verdict.ledger import IntervalLoss
from gpudisk_top.model.snapshot import Model
from gpudisk_top.verdict.step import Stepper
from gpudisk_top.verdict.whatif import WhatIf
# the codec of a summary block (what this module fills, as it is stored)
from gpudisk_top.record.v2.summary import (ABSENT, LEDGER_FIELDS, MAX_BLOCK_JOBS,
                                           MAX_CGROUP_CHARS, MAX_JOB_PIDS, DiskSums, JobRows,
                                           Stretch, SummaryBlock)

DERIVED_LAYOUT = 3        # the layout of a summary block; raised when it changes
# 2: a device's worst is its worst interval's await (reads and writes together), not
# the larger of its r_await and w_await; 3: each job's rows (JobRows): blocks of layout 2
# hold one detector's verdicts of the whole node and no job's, so `report` recomputes
# them, as after a change of the model
SUMMARY_SAMPLES = 60      # samples per summary block
GPU_STATES = STATES + ("lost",)
_STATE_INDEX = {s: i for i, s in enumerate(STATES)}


def gpu_state(g, state: str, gpus, by_gpu: dict | None = None) -> str:
    """The state one GPU spent an interval in, given the detector's verdict (the node's),
    or, for a GPU of a job (by_gpu: gpu_verdicts), that job's verdict."""
    if by_gpu is not None and g.index in by_gpu:
        state, gpus = by_gpu[g.index]
    if g.lost:
        return "lost"
    if state in STARVED_STATES:
        if g.index in gpus or (not gpus and g.processes):
            return state
    return "healthy" if g.processes else "idle"


# (read requests, write requests, ms reads waited, ms writes waited, sectors read, sectors
# written, ms busy) of one interval: the counter differences the model made its rates of
# (Model.disk_deltas), the integers a summary adds up
disk_ints = operator.attrgetter("rd_ios", "wr_ios", "rd_ticks", "wr_ticks", "rd_sectors",
                                "wr_sectors", "tot_ticks")


def interval_await_ms(ints) -> float:
    """iostat's await (every request's wait over every request, reads and writes
    together) of one interval's disk_ints: the figure `report`'s await column and its
    chart give over the window, so the worst interval is the worst of that same figure.
    0 for an interval without requests."""
    return await_ms(ints[2] + ints[3], ints[0] + ints[1])


def gpu_verdicts(verdict) -> dict | None:
    """Each GPU of a job -> (that job's state, the GPUs its verdict names), from the
    node's verdict's jobs (a GPU two jobs share: the first job's); None with no job."""
    if not verdict.jobs:
        return None
    out: dict = {}
    for jv in verdict.jobs:
        for i in jv.job.gpus:
            out.setdefault(i, (jv.state, jv.gpus))
    return out


def interval_facts(model: Model, state: str, gpus, by_gpu: dict | None = None):
    """What one interval contributes: (GPU states, chart utilizations, per device
    (ints, worst await, has done I/O)).  Shared by the recorder and report's replay."""
    gstates = [(g.index, gpu_state(g, state, gpus, by_gpu)) for g in model.gpus]
    utils = [g.util_pct for g in model.gpus if g.util_pct is not None and not g.lost
             and (g.processes or state == "idle")]
    disks = []
    if model.interval_s > 0:
        devices = model.devices
        counters = model.sample.disks
        for name, d in model.disk_deltas.items():
            if name not in devices:
                continue
            c = counters.get(name)
            ints = disk_ints(d)
            disks.append((name, ints, interval_await_ms(ints),
                          c is not None and c.total_ios() > 0))
    return gstates, utils, disks


# ---------------------------------------------------------------------------- health readings
class NewReadings:
    """The health readings a run of samples carries, each once: new_in(snapshot) gives
    those that differ from the ones the samples before carried (all of them at first),
    by the one rule (collect.sample.is_new) the recorder's records also follow.  Shared
    by the recorder's summaries and report's replay."""

    def __init__(self) -> None:
        self.snapshot = None
        self.last: dict[str, DiskHealth] = {}

    def new_in(self, snapshot) -> list[DiskHealth]:
        if snapshot is None or not is_new(snapshot, self.snapshot):
            return []
        self.snapshot = snapshot
        out = []
        for dev, h in snapshot.readings.items():
            if is_new(h, self.last.get(dev)):
                self.last[dev] = h
                out.append(h)
        return out


# ---------------------------------------------------------------------------- summary blocks
def episode_record(e: Episode, opened_at: int, intervals_at_open: int,
                   lost_gpu_s: float) -> dict:
    """An episode as a summary block keeps it: its fields, where it opened, and the GPU
    time the recorder's ledger counted to it so far (Ledger.lost_of; the same key as
    when Episode carried it, so old and new blocks read alike)."""
    d = asdict(e)
    d["lost_gpu_s"] = lost_gpu_s
    d["opened_at"] = opened_at
    d["intervals_at_open"] = intervals_at_open
    return d


def ledger_row(loss) -> tuple | None:
    """An interval's stall ledger (verdict/ledger.py IntervalLoss) as a summary block keeps
    it (LEDGER_FIELDS)."""
    return None if loss is None else tuple(getattr(loss, f) for f in LEDGER_FIELDS)


def loss_of(row, wall_s: float, state: str, episode_id: int = 0, job_id: str | None = None,
            parts: tuple = (), phase: int | None = None) -> IntervalLoss | None:
    """The IntervalLoss a summary block's row (ledger_row) was made from; episode_id: the
    interval's episode code (0: none), the episode its lost time went to; job_id: a job's
    row's; parts: the node's row's jobs' losses (loss_of each), whose causes a Ledger
    counts; phase: the index of the episode's phase (block_phase)."""
    return None if row is None else IntervalLoss(wall_s=wall_s, state=state,
                                                 episode_id=episode_id or None, job_id=job_id,
                                                 parts=parts, phase=phase,
                                                 **dict(zip(LEDGER_FIELDS, row)))


def state_of(code: int) -> str:
    """A summary's state code as a state (an unknown code: idle)."""
    return STATES[code] if 0 <= code < len(STATES) else "idle"


def job_parts(verdict, loss: IntervalLoss) -> list[tuple]:
    """Each job's (JobInfo, Verdict, IntervalLoss) of one step (verdict/step.py: the node's
    Verdict and IntervalLoss): its loss is the node loss's part of that job; where the
    node's loss has no parts (an interval with no rates, or no GPU readable) the job's
    counts nothing, as the Accountant counts such an interval.  [] with no job."""
    if not verdict.jobs:
        return []
    parts = {p.job_id: p for p in loss.parts}
    out = []
    for jv in verdict.jobs:
        info = jv.job
        part = parts.get(info.id)
        if part is None:
            part = IntervalLoss(loss.wall_s, loss.interval_s, jv.state, job_id=info.id)
        out.append((info, jv, part))
    return out


class BlockJobs:
    """The recorder's rows of each job (JobRows) over a block of n intervals being
    derived.  More than MAX_BLOCK_JOBS jobs: none is kept (fields() says how many)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.rows: dict[str, JobRows] = {}
        self.over: set[str] = set()

    def add(self, j: int, info, verdict, loss: IntervalLoss) -> None:
        """Interval j of the block: job `info`'s verdict and loss (job_parts)."""
        if self.over or (info.id not in self.rows and len(self.rows) >= MAX_BLOCK_JOBS):
            self.over.add(info.id)
            return
        r = self.rows.get(info.id)
        if r is None:
            n = self.n
            r = self.rows[info.id] = JobRows(info.id, info.source, info.name, None, [], [],
                                             [ABSENT] * n, [ABSENT] * n, [0] * n, [0] * n,
                                             [None] * n)
        r.source, r.name = info.source, info.name
        cgroup = info.cgroup
        r.cgroup = cgroup if cgroup is None or len(cgroup) <= MAX_CGROUP_CHARS else None
        r.gpus.extend(g for g in info.gpus if g not in r.gpus)
        r.pids.extend(p for p in info.pids[:MAX_JOB_PIDS] if p not in r.pids)
        del r.pids[MAX_JOB_PIDS:]
        r.state[j] = _STATE_INDEX.get(verdict.state, 255)
        r.raw[j] = _STATE_INDEX.get(verdict.raw_state, 255)
        r.episode[j] = verdict.episode.id if verdict.episode is not None else 0
        r.named[j] = gpu_mask(verdict.gpus)
        r.ledger[j] = ledger_row(loss)

    def fields(self) -> tuple[list[JobRows] | None, int]:
        """(SummaryBlock.jobs, SummaryBlock.jobs_over)."""
        if self.over:
            return None, len(self.rows) + len(self.over)
        return list(self.rows.values()), 0


def gpu_mask(gpus) -> int:
    """GPU indices as a summary's bit mask (mask_gpus: back)."""
    mask = 0
    for i in gpus:
        mask |= 1 << i
    return mask


def mask_gpus(mask: int) -> list[int]:
    return [k for k in range(mask.bit_length()) if mask >> k & 1]


def block_gpu_verdicts(b: SummaryBlock, j: int, jobs) -> dict | None:
    """gpu_verdicts of interval j of a block, from its jobs' rows: each job of the
    interval's model (jobs: its JobInfo list, for their GPUs) with its recorded state and
    named GPUs; None where the block has no job rows or the interval no job."""
    if not b.jobs or not jobs:
        return None
    rows = {r.id: r for r in b.jobs}
    out: dict = {}
    for info in jobs:
        r = rows.get(info.id)
        if r is None or r.state[j] == ABSENT:
            continue
        for i in info.gpus:
            out.setdefault(i, (state_of(r.state[j]), mask_gpus(r.named[j])))
    return out


def job_codes(b: SummaryBlock, job_id: str | None):
    """(state, raw, episode) codes per interval of one job in a block: its rows', the
    node's where the episode is of no job (job_id None) or the block has no job rows."""
    for r in b.jobs or ():
        if r.id == job_id:
            return r.state, r.raw, r.episode
    return b.state, b.raw, b.episode


def episode_from(d: dict) -> Episode:
    return Episode(id=d["id"], state=d["state"], start_wall_s=d["start_wall_s"],
                   end_wall_s=d["end_wall_s"], last_wall_s=d["last_wall_s"],
                   gpus=list(d["gpus"]), devices=list(d["devices"]),
                   processes=list(d["processes"]), reason=d["reason"], advice=d["advice"],
                   kind=d.get("kind"), intervals=d["intervals"], min_util_pct=d["min_util_pct"],
                   culprits=[Culprit(**c) for c in d.get("culprits") or ()],
                   whatif=[WhatIf(**w) for w in d.get("whatif") or ()],
                   job_id=_str_or_none(d.get("job_id")), job_name=_str_or_none(d.get("job_name")),
                   phases=phases_from(d.get("phases")))


def block_phase(b: SummaryBlock, cache: dict, episode_id: int, wall_s: float) -> int | None:
    """The phase (verdict/detect/phases.py phase_at) of the interval ending at wall_s of
    a block's episode episode_id, by the phases its record in the block holds (every
    episode open in a block is recorded in it); cache: the block's phases by episode id,
    read once a block."""
    if not episode_id:
        return None
    if not cache:
        cache.update((r.get("id"), phases_from(r.get("phases"))) for r in b.episodes
                     if isinstance(r, dict))
        cache.setdefault(None, [])
    return phase_at(cache.get(episode_id) or [], wall_s)


def _str_or_none(v) -> str | None:
    return v if isinstance(v, str) else None


_INTERVAL, _GAP = LEDGER_FIELDS.index("interval_s"), LEDGER_FIELDS.index("gap_s")


def replay_block(rec, g: int, b: SummaryBlock) -> bool:
    """Must `report` replay a summary block (its first sample g) instead of adding it up?
    When the wall clock stepped within its intervals (their wall span is longer than the
    monotonic seconds they cover and the gaps between them, by more than CLOCK_STEP_S:
    the recorder's detector ran across the step, a replay starts afresh there), or when
    it counted as time an interval that is a gap (verdict/gaps.py: written before the rule),
    which a replay does not count, or it holds a utilization that is not a percentage (a
    damaged or hostile file: collect/utilpct.py's rule, which the replay's reader applies),
    or it had more jobs than it keeps rows of (jobs_over)."""
    t = b.sums
    if b.jobs_over:         # more jobs than a block keeps rows of
        return True
    if t.util_n and not (utilpct.is_pct(t.util_min) and utilpct.is_pct(t.util_sum / t.util_n)):
        return True
    if any(isinstance(r, dict) and r.get("min_util_pct") is not None
           and not utilpct.is_pct(r["min_util_pct"]) for r in b.episodes):
        return True
    a = g if rec.starts_session(g) else g - 1
    rows = b.ledger or ()
    gap_total = sum(r[_GAP] or 0.0 for r in rows if r is not None)
    if rec.wall_s(g + b.n - 1) - rec.wall_s(a) - b.sums.covered_s - gap_total > CLOCK_STEP_S:
        return True
    cadence = rec.interval_at(g)
    for i, r in enumerate(rows, g):
        if r is None or not r[_INTERVAL] or i == 0 or rec.starts_session(i):
            continue
        if gaps.gap_s(r[_INTERVAL], rec.wall_s(i) - rec.wall_s(i - 1), cadence) is not None:
            return True
    return False


def meta(thresholds) -> dict:
    """The session header's "derived" entry: what made the summaries."""
    return {"model_version": MODEL_VERSION, "layout": DERIVED_LAYOUT,
            "summary_samples": SUMMARY_SAMPLES, "thresholds": asdict(thresholds)}


def usable(header_meta: dict | None, thresholds) -> bool:
    """Were these summaries made by this model, in this layout, with these thresholds?"""
    return (isinstance(header_meta, dict)
            and header_meta.get("model_version") == MODEL_VERSION
            and header_meta.get("layout") == DERIVED_LAYOUT
            and header_meta.get("thresholds") == json.loads(json.dumps(asdict(thresholds))))


# ---------------------------------------------------------------------------- the recorder's side
class Deriver:
    """Feeds a session's samples through the one step (model.step.Stepper) and sums them
    into summary blocks.  Samples wait in a batch and are derived SUMMARY_SAMPLES at a time (a warm
    loop once a minute, not a call on cold caches every second); finish() derives what
    is left."""

    def __init__(self, thresholds=None, block_samples: int = SUMMARY_SAMPLES,
                 cadence_s=None) -> None:
        """cadence_s: the session header's interval_s (the gap rule's, verdict/gaps.py:
        a replay of the recording reads the same header)."""
        from gpudisk_top.verdict.detect import Thresholds

        self.thresholds = thresholds if thresholds is not None else Thresholds()
        self.block_samples = block_samples
        self.stepper = Stepper(self.thresholds, cadence_s=cadence_of(cadence_s))
        self._pending: list = []     # samples not derived yet
        self._first = 0              # session number of the first pending sample
        self._opened: dict[int, tuple[int, int]] = {}   # episode id -> (opened at, intervals)
        self._health = NewReadings()
        self.done: list[SummaryBlock] = []              # blocks not yet taken by the writer

    def add(self, sample) -> bool:
        """Queue one sample; True when a summary block was completed (in `done`).  Its
        utilizations are derived as a recording's reader reads them back
        (collect/utilpct.py), so the summaries agree with a replay of the raw samples."""
        self._pending.append(utilpct.checked(sample))
        if len(self._pending) >= self.block_samples:
            self._derive()
            return True
        return False

    def finish(self) -> bool:
        """Derive the pending samples as a (short) block; True if there were any."""
        if self._pending:
            self._derive()
            return True
        return False

    def take(self) -> list[SummaryBlock]:
        out, self.done = self.done, []
        return out

    def _derive(self) -> None:
        first = self._first
        n = len(self._pending)
        codes_state, codes_raw, codes_ep, codes_gpus = [], [], [], []
        s = Stretch()
        # every episode open at some point of the block: the one open before it (it may
        # close in the block's first intervals) and those its verdicts name
        touched: dict[int, Episode] = {}
        for open_ep in self.stepper.open_episodes:
            touched[open_ep.id] = open_ep
        index = _STATE_INDEX
        health = []
        ledger = []
        jobs = BlockJobs(n)
        for j, sample in enumerate(self._pending):
            health += [(j, h) for h in self._health.new_in(sample.health)]
            model, v, loss = self.stepper.step(sample)
            ep = v.episode
            codes_state.append(index.get(v.state, 255))
            codes_raw.append(index.get(v.raw_state, 255))
            codes_gpus.append(gpu_mask(v.gpus))
            codes_ep.append(0 if ep is None else ep.id)
            for job_ep in (jv.episode for jv in (v.jobs or [v])):
                if job_ep is not None:
                    touched.setdefault(job_ep.id, job_ep)
                    if job_ep.id not in self._opened:
                        self._opened[job_ep.id] = (first + j, job_ep.intervals)
            for info, jv, jloss in job_parts(v, loss):
                jobs.add(j, info, jv, jloss)
            add_interval(s, model, v.state, v.gpus, offset=j, by_gpu=gpu_verdicts(v))
            ledger.append(ledger_row(loss))
        records = [episode_record(e, *self._opened.get(e.id, (first, e.intervals)),
                                  self.stepper.ledger.lost_of(e.id))
                   for e in touched.values()]
        self.done.append(SummaryBlock(first, n, codes_state, codes_raw, codes_ep, codes_gpus,
                                      s, records, health, ledger, *jobs.fields()))
        self._first += n
        self._pending = []


def add_interval(s: Stretch, model: Model, state: str, gpus, offset=None, clip_s=None,
                 selected=None, series=None, by_gpu: dict | None = None) -> None:
    """Add one interval to a stretch.  `offset` (in a summary block) is stored as the
    worst await's time instead of the wall time; clip_s cuts an interval that begins
    before it; `selected(name, info, counters)` chooses devices (None: every device with
    an identity, counting its I/O intervals apart); `series` gets the chart buckets;
    by_gpu (gpu_verdicts): each job's GPUs' state is their job's."""
    s.samples += 1
    wall = model.wall_s
    if s.first_s is None:
        s.first_s = wall
    s.last_s = wall
    for g in model.gpus:
        if g.index not in s.gpu_info:
            s.gpu_info[g.index] = {"index": g.index, "name": g.name, "uuid": g.uuid}
            s.states[g.index] = {}
    s.devices = model.devices
    if model.interval_s <= 0:
        return
    dt = model.interval_s
    scale = 1.0
    if clip_s is not None and wall - dt < clip_s:
        clipped = max(0.0, wall - clip_s)
        scale = clipped / dt
        dt = clipped
    s.covered_s += dt
    gstates, utils, disks = interval_facts(model, state, gpus, by_gpu)
    for idx, st in gstates:
        per = s.states[idx]
        per[st] = per.get(st, 0.0) + dt
    if state == UNAVAILABLE and not model.gpus:
        s.no_gpu_s += dt
    if utils:
        total, low = sum(utils), min(utils)
        s.util_sum += total
        s.util_n += len(utils)
        s.util_min = low if s.util_min is None else min(s.util_min, low)
        if series is not None:
            series.add_util(wall, total, len(utils), low)
    at = offset if offset is not None else wall
    for name, ints, worst, did_io in disks:
        if selected is not None and not selected(name, model.devices[name], did_io):
            continue
        d = s.disks.get(name)
        if d is None:
            d = s.disks[name] = DiskSums()
        d.add(ints, scale)
        d.seconds += dt
        d.intervals += 1
        if did_io:
            d.io_seconds += dt
            d.io_intervals += 1
        if worst > d.worst_ms:
            d.worst_ms, d.worst_at = worst, at
        if series is not None:
            series.add_disk(name, wall, (ints[2] + ints[3]) * scale, (ints[0] + ints[1]) * scale)
