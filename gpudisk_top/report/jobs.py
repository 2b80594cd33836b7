"""The report's jobs (issue 37): every job that ran in the window, each with its identity,
when it was seen, its state shares, its episodes with the GPU time each lost, and its own
GPU time lost by cause; and `report --job`'s choice of one.

The figures are the window reader's (session/jobs.py JobTally, added up from a replay's
step or from the recorder's summaries: the same either way); this module words them, as
JSON (the report's "jobs", an API like the rest of it: keys are added, never renamed) and
as the text's "Jobs" section.  A job's ledger section is report/ledger.py's section() of
its own ledger, so it reads as the node's does (its shares are of the job's GPU time: a
job has no idle GPU).

`report --job ID` takes, in this order: a job's id exactly ("slurm:1001", "pid:4121"),
a job's name exactly where one job has it, a prefix of one job's id only ("k8s:7f3a").
Anything else is a one-line error that lists the window's job ids (at most LISTED_IDS).
Names are untrusted (collect/jobid.py cuts them, nothing escapes them): the text escapes
every line (textsafe), an error message escapes what it quotes, JSON escapes itself.
"""

from __future__ import annotations

from gpudisk_top.errors import UsageError
from gpudisk_top.model.present import pct
from gpudisk_top.model.timefmt import duration
from gpudisk_top.model.vocab import gpu_hours, iso_time
from gpudisk_top.report import ledger as report_ledger
from gpudisk_top.session.jobs import JobTally
from gpudisk_top.textsafe import printable
from gpudisk_top.verdict.detect import STATES
from gpudisk_top.verdict.detect.states import gpu_ranges
from gpudisk_top.verdict.ledger import NO_PRICE, Price

LISTED_IDS = 10        # the job ids an error lists
TEXT_JOBS = 32         # the jobs the text report words one by one (JSON has them all)
TEXT_EPISODES = 5      # a job's episodes the text lists
NAME_CHARS = 60        # a job's name in the text, cut


def jobs_json(tallies: list[JobTally], episodes: list[dict], lost: dict[int, float],
              end_s: float | None, price: Price = NO_PRICE) -> list[dict]:
    """The report JSON's "jobs": per job (in the order first seen) its identity, "first",
    "last" (and _s), "ended" (last seen before the window's last sample, end_s),
    "intervals", "seconds" (its intervals' length) and "states" (seconds in each state of
    its verdict) with "state_share_pct", "episodes" (the window's of that job: id, state,
    start, end, duration_s, lost_gpu_s), "lost_gpu_s" and "ledger" (report/ledger.py
    section() of its own ledger).  episodes: the report's episode JSON (with job_id);
    lost: GPU-seconds lost by episode id."""
    out = []
    for t in tallies:
        eps = [e for e in episodes if e.get("job_id") == t.id]
        eps_lost = [lost.get(e["id"], 0.0) for e in eps]
        seconds = sum(t.states.values())
        out.append({
            "id": t.id, "source": t.source, "name": t.name, "gpus": list(t.gpus),
            "pids": list(t.pids), "cgroup": t.cgroup,
            "first": iso_time(t.first_s) if t.first_s is not None else None,
            "last": iso_time(t.last_s) if t.last_s is not None else None,
            "first_s": t.first_s, "last_s": t.last_s,
            "ended": t.last_s is not None and end_s is not None and t.last_s < end_s,
            "intervals": t.intervals, "seconds": seconds,
            "states": {s: t.states[s] for s in STATES if t.states.get(s)},
            "state_share_pct": {s: t.states[s] / seconds * 100.0 for s in STATES
                                if t.states.get(s) and seconds > 0},
            "episodes": [{"id": e["id"], "state": e["state"], "start": e["start"],
                          "end": e["end"], "duration_s": e["duration_s"], "lost_gpu_s": v}
                         for e, v in zip(eps, eps_lost)],
            "lost_gpu_s": t.ledger.lost_gpu_s,
            "ledger": report_ledger.section(t.ledger, eps, eps_lost, price),
        })
    return out


def select(spec: str, tallies: list[JobTally]) -> JobTally:
    """The job `report --job spec` names (the module's doc says how).  Raises UsageError,
    one line listing the window's job ids, where it names none or several."""
    by_id = {t.id: t for t in tallies}
    if spec in by_id:
        return by_id[spec]
    for found in ([t for t in tallies if t.name == spec],
                  [t for t in tallies if t.id.startswith(spec)] if spec else []):
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise UsageError(f"--job {_quoted(spec)} names {len(found)} jobs: "
                             f"{_ids(found)}; give one id")
    if not tallies:
        raise UsageError(f"--job {_quoted(spec)}: no job ran in this window")
    raise UsageError(f"--job {_quoted(spec)}: no such job in this window; its jobs: "
                     f"{_ids(tallies)}")


def _quoted(spec: str) -> str:
    cut = spec if len(spec) <= 80 else spec[:79] + "…"
    return "'" + printable(cut) + "'"


def _ids(tallies: list[JobTally]) -> str:
    """The jobs' ids, LISTED_IDS of them at most, and how many more."""
    shown = ", ".join(t.id for t in tallies[:LISTED_IDS])
    more = len(tallies) - LISTED_IDS
    return shown + (f" and {more} more" if more > 0 else "")


def _short(iso: str | None) -> str:
    return "-" if iso is None else iso.replace("T", " ")[:19]


def _name(name: str) -> str:
    return name if len(name) <= NAME_CHARS else name[:NAME_CHARS - 1] + "…"


def lines(jobs: list[dict], tallies: dict[str, JobTally], price: Price = NO_PRICE,
          left_out: int = 0, one: bool = False) -> list[str]:
    """The text report's "Jobs" section, from the JSON (jobs_json) and each job's tally
    (its ledger's one-line account, Ledger.line).  one: the report is of one job
    (--job)."""
    if not jobs:
        return ["Jobs: none (no GPU process in this window)"]
    if one:
        head = "Job:"
    else:
        head = (f"Jobs ({len(jobs)}{f' and {left_out} not counted' if left_out else ''}; "
                "report --job ID for one):")
    out = [head]
    for j in jobs[:TEXT_JOBS]:
        gpus = gpu_ranges(j["gpus"]) if j["gpus"] else "no GPU"
        span = (f"seen {_short(j['first'])} to {_short(j['last'])[11:]} "
                f"({duration(max(0.0, (j['last_s'] or 0.0) - (j['first_s'] or 0.0)))})")
        out.append(f"  {j['id']}  {_name(j['name'])}: {gpus}, {span}"
                   + (", ended" if j["ended"] else ""))
        shares = sorted(j["state_share_pct"].items(), key=lambda kv: -kv[1])
        if shares:
            out.append("     states: " + ", ".join(f"{s} {pct(v, 1)}" for s, v in shares))
        tally = tallies.get(j["id"])
        if tally is not None:
            out.append("     " + tally.ledger.line(price))
        eps = j["episodes"]
        for e in eps[:TEXT_EPISODES]:
            out.append(f"     #{e['id']} {e['state']} {_short(e['start'])[11:]} to "
                       f"{_short(e['end'])[11:]} ({duration(e['duration_s'])}, "
                       f"{gpu_hours(e['lost_gpu_s'])} GPU-h lost)")
        if len(eps) > TEXT_EPISODES:
            out.append(f"     ... and {len(eps) - TEXT_EPISODES} more episodes (report --json)")
    if len(jobs) > TEXT_JOBS:
        out.append(f"  ... and {len(jobs) - TEXT_JOBS} more jobs (report --json lists them all)")
    return out


def util_of(buckets: dict[int, list[float]], n: int) -> list[float | None]:
    """A job's chart (report/tally.py Tally.job_util): per bucket the mean utilization of
    its GPUs in %, weighted by GPU time (None where it had no GPU time)."""
    out: list[float | None] = [None] * n
    for b, (busy, total) in buckets.items():
        if total > 0 and 0 <= b < n:
            out[b] = busy / total * 100.0
    return out


__all__ = ["LISTED_IDS", "jobs_json", "lines", "select", "util_of"]
