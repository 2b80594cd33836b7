"""The postmortem of a recording window.

build() returns a Summary: `data` is the JSON report (an API: keys are added, never
renamed or removed; README "Report JSON"), `series` what the text report charts.

Two ways to the same numbers:
  - recorded summaries (format v2, record/derived.py): what the recorder's model and
    detector made of every interval, summed by the minute.  Used when they were made by
    this version's model and detector with the thresholds asked for: a day reads in well
    under a second.  Intervals at the edges of the window are replayed one by one, and
    samples without summaries (a recorder killed before writing its last ones) are
    replayed as below;
  - replaying the raw samples through Replay (the model and the detector), in one
    process, one pass over each stretch of a steady clock.
The window is the index ranges Recording.ranges() gives (one per stretch of a wall clock
that never went back), so the work is bounded by the samples in it, never by its span: a
gap of months between two sessions costs nothing, and a clock that stepped back reads
each stretch in recorded order.  Summaries are used when the window is one such stretch.
Both add intervals up with derived.add_interval, so their device and state figures agree;
their episodes can differ where the detector's learned baselines matter: the summaries
hold what the recorder's detector decided from its session's start, a replay warms its
detector up WARMUP_S before the window.

Who does what: session/summaries.py reads the window (which pieces are summaries, which
are replayed, and the episodes: the replay screen reads them there too; each job's
figures, session/jobs.py), report/tally.py adds each piece's intervals up,
report/series.py places them on the charts, report/jobs.py words the jobs (and picks
`--job`'s), and this module sums the pieces into the JSON and the stall ledger.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpudisk_top import __version__
from gpudisk_top.errors import UsageError
from gpudisk_top.model import MODEL_VERSION
from gpudisk_top.model.disk import await_ms
from gpudisk_top.model.select import DeviceFilter
from gpudisk_top.model.vocab import episode_json, iso_time
from gpudisk_top.record import sources
from gpudisk_top.record.derived import GPU_STATES
from gpudisk_top.record.reader import Recording
from gpudisk_top.record.v2.summary import DiskSums
from gpudisk_top.report import jobs as report_jobs
from gpudisk_top.report import ledger as report_ledger
from gpudisk_top.report.health import HealthSeries, episode_health, health_section
from gpudisk_top.report.series import BUCKETS, Axis, DiskChart, Series, place
from gpudisk_top.report.tally import Tally, new_tally
from gpudisk_top.report.tiers import TierCount, add_tiers
from gpudisk_top.session import summaries
from gpudisk_top.verdict.detect import UNAVAILABLE, Episode
from gpudisk_top.verdict.detect.states import gpu_ranges
from gpudisk_top.verdict.ledger import NO_PRICE, Ledger, Price

RECORDED = f"recorded summaries, model v{MODEL_VERSION}"
RECOMPUTED = "recomputed"


@dataclass
class Summary:
    data: dict
    series: Series
    episodes: list[Episode]
    warnings: list[str]
    # per episode: the (first, last) sample indexes of the stretch of a steady clock it
    # was found in (Recording.ranges: wall times alone are ambiguous after a step back)
    spans: list[tuple[int, int]] = field(default_factory=list)
    # the window's stall ledger where every sample of it was replayed or read from
    # summaries that carry it (else None)
    ledger: Ledger | None = None
    # the jobs data["jobs"] lists, by id (session/jobs.py: their ledgers' one-line account)
    jobs: dict = field(default_factory=dict)
    # `report --job`: the chosen job's chart, per bucket its GPUs' mean utilization in %
    job_util: list | None = None


def build(rec: Recording, start_s: float | None = None, end_s: float | None = None,
          thresholds=None, dev_filter: DeviceFilter | None = None,
          recompute: bool = False, price: Price = NO_PRICE, job: str | None = None) -> Summary:
    """The report over the samples with start_s <= wall_s <= end_s, from the recorded
    summaries when they fit (see the module's doc), else (or with recompute) by
    replaying the raw samples in one pass per stretch of a steady clock, the detector
    warmed up WARMUP_S before the window.  The caller checks that the window holds samples.
    price: [ledger] of the config, for the cost of the GPU time lost.  job: `report
    --job`'s (report/jobs.py select): the report of that job only (its episodes, its
    GPUs' states, its ledger, its chart).  Raises RuntimeFailure or OSError where the
    recording cannot be read, UsageError where `job` names no job of the window."""
    dev_filter = dev_filter or DeviceFilter()
    ranges = rec.ranges(start_s, end_s)
    axis = Axis(ranges)
    window = summaries.read(rec, ranges, start_s, thresholds, recompute,
                            lambda: new_tally(Series(axis), dev_filter))
    tallies = window.jobs()
    fallback = None
    if ((tallies is None or any(p.ledger is None for p in window.pieces))
            and axis.n <= report_ledger.REPLAY_MAX_SAMPLES):
        # summaries written before they carried the ledger or the jobs' rows
        key_at = {i: key for piece in window.pieces for i, key in piece.key_at.items()}
        fallback = report_ledger.replay_ledger(rec, start_s, end_s, thresholds, key_at)
        if tallies is None:
            tallies = fallback[2]
    chosen = None
    if job is not None:
        if tallies is None:
            raise UsageError(f"--job: {JOBS_NOT_COUNTED}")
        chosen = report_jobs.select(job, tallies.ordered())
    keep = [k for k, e in enumerate(window.episodes) if chosen is None or e.job_id == chosen.id]
    episodes = [window.episodes[k] for k in keep]
    where = [window.where[k] for k in keep]
    if window.recorded:
        result = _summary(rec, window.pieces, episodes, axis, RECORDED, window.replayed)
    else:
        result = _summary(rec, window.pieces, episodes, axis, RECOMPUTED, where=where)
    lost = _add_ledger(result, window, fallback, keep, chosen, price)
    _add_jobs(result, window, tallies, chosen, lost, price)
    return result


# why a report has no jobs (summaries without the jobs' rows, too many samples to replay)
JOBS_NOT_COUNTED = (f"the window holds more than {report_ledger.REPLAY_MAX_SAMPLES} samples and "
                    "its recorded summaries were written before they carried each job's "
                    "figures: report --recompute, or a shorter --from/--to, counts them")


def _add_ledger(result: Summary, window, fallback, keep: list[int], chosen,
                price: Price) -> dict[int, float]:
    """data["ledger"]: the window's GPU time lost (report/ledger.py), as the replay or
    the recorded summaries counted it; where summaries written before they carried the
    ledger were read, replayed for it (fallback: replay_ledger's) when the window is not
    too long.  data["ledger"]["counted_from"] says which.  Each episode's lost time is its
    intervals' in the window, by the step's rule (session/summaries.py
    Window.lost_by_episode).  keep: the window's episodes the report lists; chosen: the
    one job (--job), whose own ledger the section is.  Returns the lost time of every
    episode of the window, by its id."""
    why_not = None
    replayed = None
    if result.ledger is not None:
        how = (report_ledger.FROM_REPLAY if result.data.get("derived") == RECOMPUTED
               else report_ledger.FROM_SUMMARIES)
    elif fallback is not None:
        result.ledger, replayed = fallback[0], fallback[1]
        how = report_ledger.FROM_OLD_SUMMARIES
    else:
        why_not = (f"the window holds more than {report_ledger.REPLAY_MAX_SAMPLES} samples "
                   "and its recorded summaries were written before they carried the "
                   "ledger: report --recompute, or a shorter --from/--to, counts it")
    lost_all = window.lost_by_episode(replayed) if result.ledger is not None else []
    lost_by_id = {e.id: v for e, v in zip(window.episodes, lost_all)}
    lost = [lost_by_id[window.episodes[k].id] for k in keep] if lost_all else []
    if result.ledger is not None and replayed is None:
        # each phase's lost time, by the same rule (summaries predating the ledger have
        # no phases: their episodes' figures stand alone)
        by_phase = window.lost_by_phase()
        for e, k in zip(result.data["episodes"], keep):
            for p, v in zip(e["phases"], by_phase[k]):
                p["lost_gpu_s"] = v
    ledger = chosen.ledger if chosen is not None and result.ledger is not None else result.ledger
    result.data["ledger"] = report_ledger.section(ledger, result.data["episodes"], lost, price,
                                                  why_not)
    if result.ledger is not None:
        result.data["ledger"]["counted_from"] = how
    for e, row in zip(result.data["episodes"], result.data["ledger"].get("by_episode") or ()):
        e["lost_gpu_s"] = row["lost_gpu_s"]      # the ledger's count, whichever path
    return lost_by_id


def _add_jobs(result: Summary, window, tallies, chosen, lost: dict[int, float],
              price: Price) -> None:
    """data["jobs"] (report/jobs.py jobs_json: every job of the window, or the one chosen
    with --job, also as data["job"]), "jobs_left_out" and, where they could not be counted,
    "jobs_counted": false with "jobs_why_not"; with --job, "gpus" and "states" are its
    GPUs' only and the chart is its GPUs'."""
    data = result.data
    data["jobs_counted"] = tallies is not None
    if tallies is None:
        data["jobs"], data["jobs_why_not"], data["jobs_left_out"] = [], JOBS_NOT_COUNTED, 0
        return
    ordered = [chosen] if chosen is not None else tallies.ordered()
    # a job's episodes are the report's with its job_id, by the report's ids
    data["jobs"] = report_jobs.jobs_json(ordered, data["episodes"], lost, data["end_s"], price)
    data["jobs_left_out"] = len(tallies.left_out)
    result.jobs = {t.id: t for t in ordered}
    if chosen is None:
        return
    data["job"] = data["jobs"][0]
    mine = set(chosen.gpus)
    data["gpus"] = [g for g in data["gpus"] if g["index"] in mine]
    data["states"] = {k: v for k, v in data["states"].items() if int(k) in mine}
    buckets: dict = {}
    for piece in window.pieces:
        for b, (busy, total) in getattr(piece, "job_util", {}).get(chosen.id, {}).items():
            cell = buckets.setdefault(b, [0.0, 0.0])
            cell[0] += busy
            cell[1] += total
    result.job_util = report_jobs.util_of(buckets, BUCKETS)


# ---------------------------------------------------------------------------- the JSON
def _summary(rec: Recording, parts: list[Tally], episodes: list[Episode], axis: Axis,
             how: str, replayed: int = 0, where: list[int] | None = None) -> Summary:
    """The JSON and the charts of the pieces added up; `where`: the range (of axis) each
    episode was found in (default: the first)."""
    series = Series(axis)
    states: dict[int, dict[str, float]] = {}
    gpu_info: dict[int, dict] = {}
    samples, covered, no_gpu_s = 0, 0.0, 0.0
    first_s = last_s = None
    devices: dict = {}
    disks: dict[str, DiskSums] = {}
    health = HealthSeries()
    tiers = TierCount()
    for part in parts:
        health.merge(part.health)
        tiers.merge(part.tiers)
        t = part.stretch
        samples += t.samples
        covered += t.covered_s
        no_gpu_s += t.no_gpu_s
        # the earliest and the latest sample: pieces are in recorded order, and a clock
        # that stepped back puts a later piece earlier
        if t.first_s is not None:
            first_s = t.first_s if first_s is None else min(first_s, t.first_s)
        if t.last_s is not None:
            last_s = t.last_s if last_s is None else max(last_s, t.last_s)
        for i, info in t.gpu_info.items():
            gpu_info.setdefault(i, info)
            per = states.setdefault(i, dict.fromkeys(GPU_STATES, 0.0))
            for k, v in t.states.get(i, {}).items():
                per[k] = per.get(k, 0.0) + v
        series.merge(part.series)
        for name, d in t.disks.items():
            into = disks.setdefault(name, DiskSums())
            for f in ("r_ios", "w_ios", "r_wait_ms", "w_wait_ms", "r_sectors", "w_sectors",
                      "busy_ms", "seconds", "intervals"):
                setattr(into, f, getattr(into, f) + getattr(d, f))
            if d.worst_ms > into.worst_ms:
                into.worst_ms, into.worst_at = d.worst_ms, d.worst_at
        devices = t.devices or devices
        for w in part.warnings:
            if w not in rec.warnings:
                rec.warnings.append(w)
    for per in states.values():      # no GPU could be read: each known GPU was unavailable
        per[UNAVAILABLE] += no_gpu_s
    for name in disks:
        series.disks.setdefault(name, DiskChart())
    header = rec.header
    place(rec, series, episodes, where or [0] * len(episodes), header.get("interval_s"))
    source = rec.source
    episodes_json = [episode_json(e) for e in episodes]
    data = {
        "version": __version__,
        "file": rec.path,
        "format_version": rec.version,
        "source": source.label,
        # not known to be live: a simulated session, or one whose header is damaged
        "simulated": source.kind != sources.LIVE,
        "source_kind": source.kind,
        "host_name": source.host_name if source.host_name is not None else header.get("host_name"),
        "kernel": header.get("kernel"),
        "recorded_by": header.get("tool_version"),
        "derived": how,
        "samples": samples,
        "start": iso_time(first_s) if first_s is not None else None,
        "end": iso_time(last_s) if last_s is not None else None,
        "start_s": first_s,
        "end_s": last_s,
        "duration_s": round(covered, 3),
        "interval_s": header.get("interval_s"),
        "segments": [{"start": iso_time(rec.wall_s(lo)), "end": iso_time(rec.wall_s(hi)),
                      "start_s": rec.wall_s(lo), "end_s": rec.wall_s(hi), "samples": hi - lo + 1}
                     for lo, hi in axis.ranges],
        "left_out": rec.left_out,
        "output_gaps": output_gaps(rec, first_s, last_s),
        "gpus": [gpu_info[i] for i in sorted(gpu_info)],
        "states": {str(i): {k: round(v, 3) for k, v in states[i].items()} for i in sorted(states)},
        "unavailable_s": round(no_gpu_s, 3),
        "episodes": episodes_json,
        "devices": _devices_json(disks, devices, episodes_json),
        "health": health_section(health),
        "warnings": list(rec.warnings),
    }
    add_tiers(data, tiers, rec, axis.ranges)
    for e in data["episodes"]:
        e["health"] = episode_health(health, devices, e)
    if how == RECORDED:
        data["replayed_samples"] = replayed
    ledger = None
    if parts and all(p.ledger is not None for p in parts):
        ledger = Ledger()
        for p in parts:
            ledger.merge(p.ledger)
    return Summary(data=data, series=series, episodes=episodes, warnings=list(rec.warnings),
                   spans=[axis.ranges[r] for r in where or [0] * len(episodes)], ledger=ledger)


def output_gaps(rec: Recording, first_s: float | None, last_s: float | None) -> list[dict]:
    """The times the recorder could not write (its output stalled: record/queued.py) that
    fall in the window: {"start", "end", "start_s", "end_s", "samples"} each, from the E
    frames' "gap" (checked here: a recording is read as untrusted input)."""
    out = []
    for session in rec.sessions:
        gap = session.end.get("gap") if isinstance(session.end, dict) else None
        if not isinstance(gap, dict):
            continue
        lo, hi, n = gap.get("from_s"), gap.get("to_s"), gap.get("samples")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                   for v in (lo, hi, n)) or hi < lo or n < 0:
            continue
        # after the window, unless it ended the recording (a stall until the recorder
        # stopped follows the last sample)
        after = last_s is not None and lo > last_s and session is not rec.sessions[-1]
        if (first_s is not None and hi < first_s) or after:
            continue
        out.append({"start": iso_time(lo), "end": iso_time(hi), "start_s": lo, "end_s": hi,
                    "samples": int(n)})
    return out


def _mean(total: float, n: float) -> float | None:
    return round(total / n, 3) if n > 0 else None


def _await_ms(wait_ms: float, ios: float) -> float | None:
    """iostat's await over the window's sums (model/disk.await_ms, the one formula);
    None where no request completed in it."""
    return round(await_ms(wait_ms, ios), 3) if ios > 0 else None


def blamed_by(episodes: list[dict], listed, infos: dict) -> dict[str, list[dict]]:
    """The episodes that blame each listed device: those whose `devices` name it, or name
    a device over it that is not listed itself (a partition, where the list has its disk:
    the default filter lists disks).  Each episode once per device, in their order."""
    out: dict[str, list[dict]] = {}
    for e in episodes:
        named = []
        for name in e["devices"]:
            info = infos.get(name)
            if name not in listed and info is not None and info.parent in listed:
                name = info.parent
            if name in listed and name not in named:
                named.append(name)
        for name in named:
            out.setdefault(name, []).append(e)
    return out


def _devices_json(disks: dict[str, DiskSums], infos: dict, episodes: list[dict]) -> list[dict]:
    blamed = blamed_by(episodes, disks, infos)
    out = []
    for name, d in disks.items():
        eps = blamed.get(name, [])
        ios = d.r_ios + d.w_ios
        info = infos.get(name)
        out.append({
            "name": name,
            "display_name": info.display_name if info else name,
            "class": info.dev_class if info else "unknown",
            "mountpoints": list(info.mountpoints) if info else [],
            "await_ms": _await_ms(d.r_wait_ms + d.w_wait_ms, ios),
            "r_await_ms": _await_ms(d.r_wait_ms, d.r_ios),
            "w_await_ms": _await_ms(d.w_wait_ms, d.w_ios),
            "worst_await_ms": round(d.worst_ms, 3),
            "worst_at": iso_time(d.worst_at) if d.worst_at is not None else None,
            "r_s": _mean(d.r_ios, d.seconds),
            "w_s": _mean(d.w_ios, d.seconds),
            "rkb_s": _mean(d.r_sectors / 2, d.seconds),
            "wkb_s": _mean(d.w_sectors / 2, d.seconds),
            "util_pct": _mean(d.busy_ms / 10, d.seconds),
            "blamed_s": round(sum(e["duration_s"] for e in eps), 3),
            "blamed_by": [e["id"] for e in eps],
        })
    # the devices the episodes blame first, the most starved time first; then the worst
    # await (iostat's, over the window), then the worst interval's
    out.sort(key=lambda x: (-x["blamed_s"], -(x["await_ms"] or 0.0), -x["worst_await_ms"],
                            x["name"]))
    return out


def describe_gpus(indexes: list[int]) -> str:
    return gpu_ranges(indexes) if indexes else "-"


def finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)
