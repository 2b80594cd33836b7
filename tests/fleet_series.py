"""The series a Prometheus answers to the fleet's queries, made by hand: a node's raw table
series (verdict, since, GPUs starved, last sample, each GPU's utilization) and one series
of the raw ledger query, in the instant-vector answer shape.  One owner for the fleet's
unit tests (on parse_answer of it) and the fault matrix's stand-in server (which serves
it as JSON)."""

from __future__ import annotations

from gpudisk_top.verdict.detect import OWN_CAUSE_STATES, STATES
from gpudisk_top.verdict.detect.states import gpu_ranges

P = "gpudisk_top_"


def vector_answer(series: list[tuple[dict, float]], now_s: float) -> dict:
    """The JSON document of an instant query's answer holding `series` at now_s."""
    return {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": labels, "value": [now_s, repr(float(v))]} for labels, v in series]}}


def node_series(instance: str, now_s: float, *, gpus: int = 8, state: str = "healthy",
                job: str = "gpudisk-top", training_job: str | None = "llama",
                verdicts: tuple[str, ...] | None = None, extra: dict | None = None,
                verdict_gpus: list[int] | None = None, devices: str = "",
                util: dict[int, float] | None = None) -> list:
    """The raw table query's series of one node, as a real exporter's through Prometheus:
    its verdict (or several), since, GPUs starved, last sample, and each GPU's
    utilization (0.3 while starved, else 0.95; util: by GPU, instead).  training_job
    None: a target without the job label; verdict_gpus: the GPUs the verdict names
    (default: all of them while starved)."""
    target = {"instance": instance, "job": job, **({"training_job": training_job}
                                                    if training_job is not None else {}),
              **(extra or {})}
    if verdict_gpus is None:
        verdict_gpus = list(range(gpus)) if state in ("disk-starved", "cpu-starved") else []
    starved = len(verdict_gpus) if state in ("disk-starved", "cpu-starved") else 0
    default = 0.3 if starved else 0.95
    out = [(dict(target, __name__=P + "verdict_info", state=s, kind="", devices=devices,
                 gpus=",".join(map(str, verdict_gpus))), 1.0)
           for s in (verdicts or (state,))]
    out += [(dict(target, __name__=P + "state_since_timestamp_seconds"), now_s - 600),
            (dict(target, __name__=P + "gpus_starved"), starved),
            (dict(target, __name__=P + "last_sample_timestamp_seconds"), now_s - 1)]
    out += [(dict(target, __name__=P + "gpu_utilization_ratio", gpu=str(g)),
             (util or {}).get(g, default)) for g in range(gpus)]
    return out


def job_table_series(instance: str, job_id: str, *, name: str = "", source: str = "slurm",
                     gpus: str = "0-7", state: str = "healthy", starved: int = 0,
                     job: str = "gpudisk-top", extra: dict | None = None) -> list:
    """One job's series of the raw table query's answer, as Prometheus gives them from an
    exporter's job_info, job_gpus_starved and job_state (only its state at 1, marked by
    the query: queries.JOB_STATE_LABEL)."""
    ident = {"instance": instance, "job": job, "job_id": job_id, "job_name": name,
             "job_source": source, **(extra or {})}
    return [(dict(ident, __name__=P + "job_info", gpus=gpus), 1.0),
            (dict(ident, __name__=P + "job_gpus_starved"), starved),
            (dict(ident, __name__=P + "job_state", state=state, fleet_job_state="1"), 1.0)]


def lost_series(instance: str, cause: str, value: float, *, job: str = "gpudisk-top",
                training_job: str = "llama", extra: dict | None = None) -> tuple[dict, float]:
    """One series of the raw ledger query's answer (increase() drops the metric name)."""
    return {"cause": cause, "instance": instance, "job": job, "training_job": training_job,
            **(extra or {})}, value


# ---------------------------------------------------------------------------- jobs (issue 37)
# A node's jobs as its exporter exposes them (gpudisk_top_job_*, labelled job_id, job_name,
# job_source; the target's `instance` tells the node), until the exporter's own land: the
# fleet's tests write them through here, one owner of their shape.
def _escape(value: str) -> str:
    """A label value in the text exposition format (backslash, quote, newline escaped)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _line(name: str, labels: dict, value: float) -> str:
    inner = ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items())
    return f"{P}{name}{{{inner}}} {float(value)!r}"


def job_exposition(job_id: str, name: str, source: str, gpus: list[int], state: str,
                   starved: int = 0, lost: dict[str, float] | None = None) -> list[str]:
    """One job's lines: its info (its GPUs as '0-3'), its state one-hot, its GPUs
    starved, its GPU-seconds lost by cause."""
    ident = {"job_id": job_id, "job_name": name, "job_source": source}
    runs = gpu_ranges(gpus).removeprefix("GPU ")
    lines = [_line("job_info", dict(ident, gpus=runs), 1)]
    lines += [_line("job_state", dict(ident, state=s), 1 if s == state else 0) for s in STATES]
    lines.append(_line("job_gpus_starved", ident, starved))
    lines += [_line("job_gpu_lost_seconds_total", dict(ident, cause=c), v)
              for c, v in (lost or {}).items()]
    return lines


def node_exposition(*, gpus: int = 8, state: str = "healthy", verdict_gpus: list[int] = (),
                    devices: str = "", kind: str = "", util: dict[int, float] | None = None,
                    since_s: float, last_s: float, lost: dict[str, float] | None = None,
                    jobs: list[list[str]] = ()) -> bytes:
    """A node's /metrics as `serve` writes it for the fleet's table: its verdict (the
    worst job's), since, GPUs starved, last sample, each GPU's utilization (ratio), its
    own GPU-seconds lost by cause, then its jobs' lines (job_exposition)."""
    lines = [_line("verdict_info", {"state": state, "kind": kind, "devices": devices,
                                    "gpus": ",".join(map(str, verdict_gpus))}, 1),
             _line("state_since_timestamp_seconds", {}, since_s),
             _line("gpus_starved", {}, len(verdict_gpus) if state in OWN_CAUSE_STATES else 0),
             _line("last_sample_timestamp_seconds", {}, last_s)]
    lines += [_line("gpu_utilization_ratio", {"gpu": str(g)}, (util or {}).get(g, 0.95))
              for g in range(gpus)]
    lines += [_line("gpu_seconds_total", {"cause": c}, v) for c, v in (lost or {}).items()]
    for job in jobs:
        lines += job
    return ("\n".join(lines) + "\n").encode()

