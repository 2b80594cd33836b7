"""Alert rules and the jobs of a shared node (issue 37): which jobs a rule names, each
job's verdict as a rule's subject, and what an alert says of its job.

A rule with `job = GLOB` or `job_name = GLOB` (alerts/rules.py) is judged per job: a
verdict rule on each matching job's own verdict (the node's verdict carries them in
`jobs`, verdict/step.py), a GPU metric rule on the GPUs of the matching jobs only.  Its
subject is the job's id, so holds, cooldowns and commands are per job.  A rule without
one is judged as before, on the node's verdict (its worst job's) or on every GPU.

A job's name is untrusted text (a pod's name, an environment variable): where an alert
carries it ({job_name}, GDT_ALERT_JOB_NAME, the message) it is shown escaped.
"""

from __future__ import annotations

from gpudisk_top.textsafe import printable


def job_verdicts(rule, verdict) -> list:
    """The verdicts of the jobs the rule names, in the node's order."""
    return [v for v in (getattr(verdict, "jobs", None) or ())
            if v.job is not None and rule.matches_job(v.job.id, v.job.name)]


def job_gpus(rule, model) -> set[int]:
    """The GPUs of the jobs the rule names (model/jobs.py JobInfo.gpus)."""
    return {g for info in getattr(model, "jobs", None) or ()
            if rule.matches_job(info.id, info.name) for g in info.gpus}


def job_of_gpu(model, index: int):
    """The job computing on GPU `index` (the first, where several share it), or None."""
    return next((info for info in getattr(model, "jobs", None) or () if index in info.gpus),
                None)


def job_of_id(model, verdict, job_id: str):
    """The JobInfo of that id, from the verdict's jobs or the model's; None if gone."""
    for v in getattr(verdict, "jobs", None) or ():
        if v.job is not None and v.job.id == job_id:
            return v.job
    return next((info for info in getattr(model, "jobs", None) or () if info.id == job_id),
                None)


def job_fields(info) -> dict[str, str]:
    """job_id and job_name as an alert's details carry them ("" without a job)."""
    if info is None:
        return {"job_id": "", "job_name": ""}
    return {"job_id": info.id, "job_name": printable(info.name or "")}


def job_words(info) -> str:
    """How a message names the job: 'job NAME [ID]'."""
    return f"job {printable(info.name or '')} [{info.id}]"
