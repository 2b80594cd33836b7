"""Each job on a shared node as Prometheus series (issue 37): what the exporter keeps of
every job from one update to the next (JobBook) and the families rendered from it.

    book = JobBook(retention_s=300.0)
    book.update(model, verdict, episodes, loss)       # the sampler thread, each interval
    frame.jobs, frame.jobs_left_out = book.series()   # a snapshot; never mutated after
    families = job_families(frame.jobs, frame.jobs_left_out)

Labels: job_id, job_name, job_source (model/vocab.py JOB_LABELS), never `job` or
`instance`, which Prometheus puts on every series it scrapes.  A job's name is untrusted
text (a pod's name, an environment variable): control characters are shown escaped
(textsafe.printable, as the node's `reason` label), it is cut to NAME_MAX_CHARS, and it is
the name the job had when the exporter first saw it, so a counter's series keeps one
identity over the job's life.  The exposition format's own escaping (backslash, double
quote, newline) is prometheus_client's.

Counters (a job's GPU time lost by cause, its episodes by state) are this exporter's, from
0 when it starts or first sees the job, as the node's are (exporter/server.py): each
interval's IntervalLoss part of the job (verdict/ledger.py, the same loss the step adds to
its JobTrack.ledger) added once.  A restart of the exporter starts them at 0 again: a
counter reset, which rate() and increase() count across; nothing is counted twice.

Each job's cgroup v2 interval (model/cgjob.py, cgroup first: issue 41) as gauges
(model/cgjob_words.py JOB_CGROUP): the CPUs it used, the share of its CFS periods it was
throttled in, its cpu, io and memory pressure, its block reads and writes a second; the
same figures as its JSON's cgroup_totals.  None where the job has no cgroup interval
(no cgroup of its own, a v1-only host, its first interval) and a figure none where the
interval cannot give it (no cpu.max limit, no io.stat): n/a, never 0.

Bounded cardinality: a job that ended keeps its info and counters for `retention_s` (its
last increments must reach a scrape) and loses its state, starved and cgroup gauges at
once (they are no longer true); then all its series go.  At most `max_jobs` jobs are
exported (the worst states first, then the jobs that ended most recently);
gpudisk_top_jobs_left_out says how many were not.  What is kept of jobs is bounded too:
at most MAX_KEPT ended jobs wait for their retention to pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from gpudisk_top.exporter.gauges import fill, gauges
from gpudisk_top.exporter.options import DEFAULT_JOB_RETENTION_S
from gpudisk_top.model.cgjob_words import JOB_CGROUP, cgroup_figures
from gpudisk_top.model.metric import PROM_PREFIX as P
from gpudisk_top.model.vocab import (JOB_ENDED, JOB_EPISODES, JOB_GPUS_STARVED, JOB_INFO,
                                     JOB_LABELS, JOB_LOST, JOB_STATE, LEDGER)
from gpudisk_top.textsafe import printable
from gpudisk_top.verdict.detect import OWN_CAUSE_STATES, STATES
from gpudisk_top.verdict.detect.states import gpu_ranges
from gpudisk_top.verdict.jobs import severity
from gpudisk_top.verdict.ledger import CAUSES, Ledger

MAX_JOBS = 64            # jobs exported at once (8 GPUs a node: 8 jobs, and room for a sweep)
MAX_KEPT = 256           # ended jobs kept for their retention (a sweep of short runs)
NAME_MAX_CHARS = 200     # a job_name label, escaped


def name_label(name: str | None) -> str:
    """A job's name as a label value: control characters escaped, at most NAME_MAX_CHARS."""
    text = printable(name or "")
    return text if len(text) <= NAME_MAX_CHARS else text[:NAME_MAX_CHARS - 1] + "…"


def gpus_starved(verdict) -> int:
    """The GPUs a verdict counts as starved by the node's own cause (disk, CPU, checkpoint
    writes), else 0: a straggler's or an undiagnosed stall's GPUs wait on a peer.  The
    node's gpudisk_top_gpus_starved and each job's share this rule."""
    return len(verdict.gpus) if verdict.state in OWN_CAUSE_STATES else 0


@dataclass(frozen=True)
class JobSeries:
    """One job as one frame renders it.  state None: the job ended (at ended_wall_s).
    cgroup: its cgroup interval's figures (model/cgjob_words.py cgroup_figures: a new
    dict a frame, never written after), None: none (no cgroup of its own, cgroup v1, ended)."""

    id: str
    source: str
    name: str                                  # the label, escaped and bounded
    gpus: tuple[int, ...]
    state: str | None
    gpus_starved: int
    lost_by_cause: tuple[tuple[str, float], ...]
    episodes: tuple[tuple[str, int], ...]
    ended_wall_s: float | None = None
    cgroup: Mapping[str, float | None] | None = None


@dataclass
class _Track:
    id: str
    source: str
    name: str
    gpus: tuple[int, ...] = ()
    state: str | None = None
    gpus_starved: int = 0
    ledger: Ledger = field(default_factory=Ledger)
    episodes: dict[str, int] = field(default_factory=dict)
    order: int = 0                           # its place among the live jobs of the node
    last_wall_s: float | None = None
    ended_at_s: float | None = None          # the sample clock when it was seen no more
    ended_wall_s: float | None = None
    cgroup: dict[str, float | None] | None = None   # the last interval's cgroup figures


def _clock_s(model) -> float:
    """The samples' monotonic clock (a simulated node's runs with its samples)."""
    sample = getattr(model, "sample", None)
    mono = getattr(sample, "mono_s", None)
    return float(mono) if mono is not None else float(model.wall_s)


class JobBook:
    """Every job's series state across updates (the module's docstring).  Not
    thread-safe: the exporter's update() holds its lock around it."""

    def __init__(self, retention_s: float = DEFAULT_JOB_RETENTION_S,
                 max_jobs: int = MAX_JOBS, max_kept: int = MAX_KEPT) -> None:
        self.retention_s = retention_s
        self.max_jobs = max_jobs
        self.max_kept = max_kept
        self._tracks: dict[str, _Track] = {}

    def update(self, model, verdict=None, episodes=None, loss=None) -> None:
        """Take one interval: the node's verdict (its `jobs`: each job's), the episodes
        (a Stepper's list; a mapping, the node's counts only, is ignored here) and the
        step's IntervalLoss (its `parts`: each job's).  Never raises for a missing part."""
        now_s = _clock_s(model)
        live = [v for v in (getattr(verdict, "jobs", None) or ()) if v.job is not None]
        seen = set()
        for order, v in enumerate(live):
            info = v.job
            track = self._tracks.get(info.id)
            if track is None:
                track = self._tracks[info.id] = _Track(info.id, info.source or "",
                                                       name_label(info.name))
            track.gpus, track.state, track.order = tuple(info.gpus), v.state, order
            track.gpus_starved = gpus_starved(v)
            track.cgroup = cgroup_figures(info.cgroup_totals)
            track.last_wall_s, track.ended_at_s, track.ended_wall_s = model.wall_s, None, None
            seen.add(info.id)
        if loss is not None:
            for part in loss.parts or ((loss,) if loss.job_id is not None else ()):
                track = self._tracks.get(part.job_id)
                if track is not None:
                    track.ledger.add(part)
        self._count_episodes(episodes)
        for track in self._tracks.values():
            if track.id not in seen and track.ended_at_s is None:
                track.ended_at_s, track.ended_wall_s = now_s, track.last_wall_s
                track.state, track.gpus_starved, track.cgroup = None, 0, None
        self._expire(now_s)

    def _count_episodes(self, episodes) -> None:
        """Each job's episodes by state.  Never lower than before: the Stepper keeps a
        bounded number of ended jobs' episodes, and a counter only grows."""
        if episodes is None or isinstance(episodes, Mapping):
            return
        counts: dict[str, dict[str, int]] = {}
        for ep in episodes:
            job_id = getattr(ep, "job_id", None)
            if job_id in self._tracks:
                by_state = counts.setdefault(job_id, {})
                by_state[ep.state] = by_state.get(ep.state, 0) + 1
        for job_id, by_state in counts.items():
            mine = self._tracks[job_id].episodes
            for state, n in by_state.items():
                mine[state] = max(mine.get(state, 0), n)

    def _expire(self, now_s: float) -> None:
        """Drop the jobs whose retention has passed (or whose clock went back: a new
        session), then the oldest ended ones past MAX_KEPT."""
        ended = []
        for track in list(self._tracks.values()):
            if track.ended_at_s is None:
                continue
            age_s = now_s - track.ended_at_s
            if age_s >= self.retention_s or age_s < 0:
                del self._tracks[track.id]
            else:
                ended.append(track)
        if len(ended) > self.max_kept:
            ended.sort(key=lambda t: t.ended_at_s)
            for track in ended[:len(ended) - self.max_kept]:
                del self._tracks[track.id]

    def series(self) -> tuple[tuple[JobSeries, ...], int]:
        """(the jobs to export, at most max_jobs: the live ones, worst state first, in the
        node's order, then those that ended, latest first; how many were left out)."""
        live = sorted((t for t in self._tracks.values() if t.ended_at_s is None),
                      key=lambda t: (-severity(t.state), t.order))
        ended = sorted((t for t in self._tracks.values() if t.ended_at_s is not None),
                       key=lambda t: -t.ended_at_s)
        chosen = (live + ended)[:self.max_jobs]
        out = tuple(JobSeries(
            t.id, t.source, t.name, t.gpus, t.state, t.gpus_starved,
            tuple((c, t.ledger.by_cause.get(c, 0.0)) for c in CAUSES),
            tuple(sorted(t.episodes.items())), t.ended_wall_s, t.cgroup) for t in chosen)
        return out, len(self._tracks) - len(chosen)


def _labels(job: JobSeries) -> list[str]:
    return [job.id, job.name, job.source]


def job_ledger_families(jobs) -> list:
    """Each job's GPU time lost by cause (every cause from its first scrape: increase()
    needs a series from the start), the node's ledger counter's HELP and unit, per job."""
    lost = LEDGER["lost_gpu_s"]
    fam = CounterMetricFamily(P + JOB_LOST, f"{lost.prom_help} One job's, on a shared node.",
                              labels=[*JOB_LABELS, "cause"])
    for job in jobs:
        for cause, gpu_s in job.lost_by_cause:
            fam.add_metric(_labels(job) + [cause], gpu_s * lost.prom_factor)
    return [fam]


def job_families(jobs, left_out: int = 0) -> list:
    """Every per-job family (empty when no job runs: the names are always served)."""
    names = list(JOB_LABELS)
    info = GaugeMetricFamily(P + JOB_INFO, "Always 1: a job on the node (Slurm job, pod, "
                             "container, service, launcher or process tree) and its GPUs "
                             "(gpus: '0-3'); kept for the retention after it ended.",
                             labels=names + ["gpus"])
    state = GaugeMetricFamily(P + JOB_STATE, "The job's state now, one-hot, as the node's "
                              "gpudisk_top_state (the node's is its worst job's); none once "
                              "the job ended.", labels=names + ["state"])
    starved = GaugeMetricFamily(P + JOB_GPUS_STARVED, "The job's GPUs when it is starved by "
                                "the node's own cause (disk-starved, cpu-starved, "
                                "checkpoint-stall), else 0; none once the job ended.",
                                labels=names)
    episodes = CounterMetricFamily(P + JOB_EPISODES, "The job's starvation episodes opened, "
                                   "per state.", labels=names + ["state"])
    ended = GaugeMetricFamily(P + JOB_ENDED, "When the job was last seen (Unix time), for a "
                              "job that ended; its series go after the retention.",
                              labels=names)
    cgroup = gauges(JOB_CGROUP, names)
    for job in jobs:
        key = _labels(job)
        info.add_metric(key + [gpu_ranges(list(job.gpus)).removeprefix("GPU ")], 1)
        if job.cgroup is not None:
            fill(cgroup, JOB_CGROUP, key, job.cgroup)
        counts = dict(job.episodes)
        for s in STATES:
            episodes.add_metric(key + [s], counts.get(s, 0))
        if job.state is not None:
            for s in STATES:
                state.add_metric(key + [s], 1 if s == job.state else 0)
            starved.add_metric(key, job.gpus_starved)
        elif job.ended_wall_s is not None:
            ended.add_metric(key, job.ended_wall_s)
    dropped = GaugeMetricFamily(P + "jobs_left_out", f"Jobs on the node whose series are "
                                f"not exported (at most {MAX_JOBS} jobs are; the worst "
                                "states first).", value=left_out)
    return [info, state, starved, *job_ledger_families(jobs), episodes, ended,
            *cgroup.values(), dropped]
