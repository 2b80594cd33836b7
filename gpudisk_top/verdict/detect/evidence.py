"""Who else loads the blamed device, and what to do about the job's storage: the one
builder of the verdict's culprits and storage advice.

A culprit is a process outside the GPU job that reads the device the verdict blames, with
its share of the device's reads (model/ioprocs.py readers_of).  The detector builds them
once per interval; the evidence text ("read by pid 912 (rsync), 88% of its reads"), the
JSON (`verdict.culprits`, an episode's `culprits`), the report and the exporter are all
made from these objects, so a pid or a figure named on one surface is the one named on
every other.  The share is rounded once, here, for the same reason.

The advice follows the evidence: a neighbour that holds most of the device's reads is
the first thing to deal with (stop, throttle or move it: no cache or faster disk helps a
job that queues behind another's reads); the page cache is advised only when the job's
reads go through it (not O_DIRECT) and its data could fit in the memory available.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudisk_top.model.ioprocs import readers_of
from gpudisk_top.model.present import pct, pid_name, pids_name, size
from gpudisk_top.model.vocab import mb_s

# a neighbour holding at least this share of the blamed device's reads is what the job
# waits behind: the advice is to stop, throttle or move it
NEIGHBOUR_SHARE_PCT = 50.0
CULPRITS_SHOWN = 2
# memory and data sizes in the advice read in GiB, whatever their size
GIB_ONLY = ("GiB",)


@dataclass(frozen=True, slots=True)
class Culprit:
    """A process outside the job reading the device the verdict blames, over one interval;
    or another job of the node (job_id set), its reading processes (pids) taken together,
    pid its first GPU process."""

    pid: int
    name: str | None
    device: str
    read_share_pct: float | None     # of the device's reads (rkB/s), rounded to 0.1
    read_kb_s: float | None
    job_id: str | None = None
    job_name: str | None = None
    pids: tuple[int, ...] = ()

    def who(self) -> str:
        """'pid 912 (rsync)'; 'job slurm 1001 (train.py)' for another job."""
        return f"job {self.job_name}" if self.job_id else pid_name(self.pid, self.name)

    def clause(self) -> str:
        """'pid 912 (rsync), 88% of its reads' (else its read rate)."""
        share = (f"{pct(self.read_share_pct)} of its reads" if self.read_share_pct is not None
                 else f"{mb_s(self.read_kb_s or 0):.0f} MB/s")
        return f"{self.who()}, {share}"

    def as_json(self) -> dict:
        return {"pid": self.pid, "name": self.name, "device": self.device,
                "read_share_pct": self.read_share_pct,
                "read_kb_s": None if self.read_kb_s is None else round(self.read_kb_s, 1),
                "job_id": self.job_id, "job_name": self.job_name,
                "pids": list(self.pids or (self.pid,))}


# a reader with less of the device's reads than this is not a culprit: naming "pid 13407
# (pip), 0% of its reads" beside the fio that takes 95% is noise
CULPRIT_MIN_PCT = 1.0


def culprits_of(model, device: str, n: int = CULPRITS_SHOWN, job=None) -> list[Culprit]:
    """The `n` readers of `device` outside the job (a verdict/detect/job.py Job; None:
    outside every GPU process's tree) that read the most from it: processes, and the
    node's other jobs, each job's readers taken together."""
    mine = {v.pid for v in job.members} if job is not None and job.info is not None else None
    owner = {pid: info for info in model.jobs for pid in info.pids} if mine is not None else {}
    found: list[Culprit] = []
    by_job: dict[str, list] = {}
    for r in readers_of(model, device):
        if mine is None and r.job or mine is not None and r.view.pid in mine:
            continue
        info = owner.get(r.view.root_pid)
        if info is not None:
            by_job.setdefault(info.id, [info]).append(r)
            continue
        found.append(Culprit(r.view.pid, r.view.name, device,
                             None if r.read_share_pct is None else round(r.read_share_pct, 1),
                             r.view.read_kb_s))
    for info, *rows in by_job.values():
        shares = [r.read_share_pct for r in rows if r.read_share_pct is not None]
        found.append(Culprit(info.pids[0], None, device,
                             round(min(100.0, sum(shares)), 1) if shares else None,
                             sum(r.view.read_kb_s or 0.0 for r in rows), job_id=info.id,
                             job_name=info.name, pids=tuple(r.view.pid for r in rows)))
    found = [c for c in found if c.read_share_pct is None or c.read_share_pct >= CULPRIT_MIN_PCT]
    found.sort(key=lambda c: (-(c.read_kb_s or 0.0), c.pid))
    return found[:n]


def culprits_clause(culprits: list[Culprit]) -> str:
    """'pid 912 (rsync), 88% of its reads, pid 40 (tar), 3% of its reads'."""
    return ", ".join(c.clause() for c in culprits)


def neighbours(culprits: list[Culprit]) -> list[Culprit]:
    """The culprits when together they hold most of the device's reads (a tool with
    several worker processes, such as fio --numjobs, is one neighbour); else []."""
    known = [c for c in culprits if c.read_share_pct]
    if sum(c.read_share_pct for c in known) < NEIGHBOUR_SHARE_PCT:
        return []
    return known


def _who(culprits: list[Culprit]) -> str:
    """'pid 912 (rsync)', 'pids 912, 913 (fio)', 'pid 912 (rsync) and pid 40 (tar)'."""
    names = {c.name for c in culprits}
    if len(names) == 1 and not any(c.job_id for c in culprits):
        return pids_name([c.pid for c in culprits], culprits[0].name)
    return " and ".join(c.who() for c in culprits)


def storage_advice(host, culprits: list[Culprit], display: str, direct: bool | None,
                   data_kb: float | None) -> str:
    """What to do about a saturated device the job reads from.

    host: the model's HostView (memory); display: the device as the disk table names it;
    direct: whether the job's loaders read their data with O_DIRECT (None: unknown);
    data_kb: the size of the data files a loader has open through the page cache (None:
    unknown)."""
    top = neighbours(culprits)
    if top:
        one = len(top) == 1
        share = sum(c.read_share_pct for c in top)
        return (f"{_who(top)} {'takes' if one else 'take'} {pct(share)} of {display}'s reads "
                f"(not the job): stop {'it' if one else 'them'}, throttle "
                f"{'it' if one else 'them'} (ionice -c3 -p "
                f"{' '.join(str(p) for c in top for p in (c.pids or (c.pid,)))}, or {'its' if one else 'their'} "
                f"cgroup's io.max or blkio weight) or move {'it' if one else 'them'} to another disk")
    if direct:
        return ("the job reads with O_DIRECT, which the page cache cannot help: faster "
                "storage, a local NVMe copy, or a packed format (fewer, larger reads)")
    h = host
    if data_kb and h is not None and h.mem_available_kb is not None:
        free = size(h.mem_available_kb, GIB_ONLY, 0)
        if data_kb <= h.mem_available_kb:
            return (f"the data files open ({size(data_kb, GIB_ONLY)}) fit in the {free} "
                    "of memory available: warm the page cache with them (e.g. vmtouch -t), "
                    "or use faster storage or a packed format")
        return (f"the data files open ({size(data_kb, GIB_ONLY, 0)}) do not fit in the "
                f"{free} of memory available: faster storage, a local NVMe cache, or a packed "
                "format (fewer, larger reads)")
    if h is not None and h.cached_kb and h.mem_total_kb and h.mem_available_kb is not None:
        cached, free = size(h.cached_kb, GIB_ONLY, 0), size(h.mem_available_kb, GIB_ONLY, 0)
        if h.mem_available_kb < 0.2 * h.mem_total_kb or h.cached_kb > 0.3 * h.mem_total_kb:
            return (f"the dataset does not fit in the page cache ({cached}): "
                    "faster storage, a local NVMe cache, or a packed format "
                    "(fewer, larger reads)")
        return (f"{free} of memory is free: warm the page cache with the "
                "dataset, or use faster storage or a packed format")
    return "faster storage, a local cache, or a packed format (fewer, larger reads)"
