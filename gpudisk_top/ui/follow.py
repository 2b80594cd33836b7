"""Following one job of a shared node (the dashboard's `j`, `J`, `esc`): which job is
followed, and an Update as that job's panels see it (its verdict in the banner, with its
evidence and what-if; its episodes; its GPUs and states on the timeline).  The GPU panel
and the header still see the node: the one owner of "what the followed job is" for the
dashboard and replay alike.

A job is followed by its id (model/jobs.py JobInfo.id), not by its place in the list, so
that jobs starting or ending around it do not move the view to another one; where the
followed job is no longer on the node the view is the node's again (follow.current
answers None)."""

from __future__ import annotations

from dataclasses import replace

from gpudisk_top.model.jobs import UNKNOWN_ID
from gpudisk_top.textsafe import printable
from gpudisk_top.ui.widgets.base import cut
from gpudisk_top.verdict.detect import STARVED_STATES

NAME_W = 28           # a job's name where a line names it (the banner, the header's flag)
RAW_NAME_MAX = 400    # characters of a name looked at at all (a name is cut long before)


def job_name(name: str, width: int = NAME_W) -> str:
    """A job's name as a screen shows it: made printable (a name is untrusted: a pod's or
    a process's own text, escape sequences included) and cut to `width` cells."""
    return cut(printable(name[:RAW_NAME_MAX]), width)


def job_label(number, name: str, width: int = NAME_W) -> str:
    """'job 3 NAME' ('job 3/8 NAME' for number '3/8'): how a line names the job numbered
    `number` in the GPU panel, its name printable and cut to `width`."""
    return f"job {number} {job_name(name, width)}"


def shows_jobs(jobs) -> bool:
    """Whether the node's jobs are worth listing: several, or one the node could tell
    (one `unknown` job is every GPU process, as before jobs were told apart)."""
    return len(jobs) > 1 or (len(jobs) == 1 and jobs[0].id != UNKNOWN_ID)


def job_verdicts(update) -> dict:
    """Each job's own verdict in `update`, by job id (the node's verdict carries them)."""
    v = update.verdict if update is not None else None
    return {} if v is None else {jv.job.id: jv for jv in v.jobs if jv.job is not None}


class Follow:
    """The followed job's id, or None: the node."""

    def __init__(self) -> None:
        self.job_id: str | None = None

    def cycle(self, jobs, step: int) -> str | None:
        """Follow the next (step 1) or previous (-1) of `jobs` (model.jobs, in their
        order), the node coming between the last and the first; returns the id."""
        ids = [j.id for j in jobs]
        if not ids:
            self.job_id = None
            return None
        ring = [None, *ids]
        at = ring.index(self.job_id) if self.job_id in ring else 0
        self.job_id = ring[(at + step) % len(ring)]
        return self.job_id

    def stop(self) -> None:
        self.job_id = None

    def current(self, update):
        """(number, JobInfo) of the followed job in `update` (its place in model.jobs,
        from 1), or None when no job is followed or it is not on the node."""
        if self.job_id is None or update is None:
            return None
        for n, info in enumerate(update.model.jobs, 1):
            if info.id == self.job_id:
                return n, info
        return None

    def view(self, update, history):
        """`update` as the followed job's panels see it: its verdict, its episodes and how
        long its raw starved state has held (from the history's columns of it); `update`
        itself when no job is followed or it is gone."""
        if self.current(update) is None:
            return update
        verdict = job_verdicts(update).get(self.job_id)
        if verdict is None:
            return update
        return replace(update, verdict=verdict,
                       episodes=[e for e in update.episodes if e.job_id == self.job_id],
                       pending_intervals=pending(history, self.job_id, verdict))

    def episodes(self, episodes) -> list:
        """The episodes of the followed job (all of them when none is followed)."""
        if self.job_id is None:
            return list(episodes)
        return [e for e in episodes if e.job_id == self.job_id]


def pending(history, job_id: str, verdict) -> int:
    """How many intervals a job's raw starved state has held up to its verdict's, counted
    back over the history's columns of that job (the node's own count is its worst
    job's)."""
    if verdict.episode is not None or verdict.raw_state not in STARVED_STATES:
        return 0
    run = 0
    cols = history.columns
    # by index, newest first: the sampling thread appends meanwhile, and a deque that
    # changes under an iterator raises (a shifted index only shifts the count by one)
    for i in range(len(cols) - 1, -1, -1):
        try:
            col = cols[i]
        except IndexError:
            break
        if col.wall_s > verdict.wall_s:
            continue            # paused: the screen shows an older interval
        if col.jobs.get(job_id, (None, None))[1] != verdict.raw_state:
            break
        run += 1
    return run
