"""The series a Prometheus answers to the fleet's queries, made by hand: a node's raw table
series (verdict, since, GPUs starved, last sample, each GPU's utilization) and one series
of the raw ledger query, in the instant-vector answer shape.  One owner for the fleet's
unit tests (on parse_answer of it) and the fault matrix's stand-in server (which serves
it as JSON)."""

from __future__ import annotations

P = "gpudisk_top_"


def vector_answer(series: list[tuple[dict, float]], now_s: float) -> dict:
    """The JSON document of an instant query's answer holding `series` at now_s."""
    return {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": labels, "value": [now_s, repr(float(v))]} for labels, v in series]}}


def node_series(instance: str, now_s: float, *, gpus: int = 8, state: str = "healthy",
                job: str = "gpudisk-top", training_job: str = "llama",
                verdicts: tuple[str, ...] | None = None, extra: dict | None = None) -> list:
    """The raw table query's series of one node, as a real exporter's through Prometheus:
    its verdict (or several), since, GPUs starved, last sample, and each GPU's
    utilization (0.3 while starved, else 0.95)."""
    target = {"instance": instance, "job": job, "training_job": training_job, **(extra or {})}
    starved = gpus if state in ("disk-starved", "cpu-starved") else 0
    util = 0.3 if starved else 0.95
    out = [(dict(target, __name__=P + "verdict_info", state=s, kind="", devices="",
                 gpus=",".join(map(str, range(gpus))) if starved else ""), 1.0)
           for s in (verdicts or (state,))]
    out += [(dict(target, __name__=P + "state_since_timestamp_seconds"), now_s - 600),
            (dict(target, __name__=P + "gpus_starved"), starved),
            (dict(target, __name__=P + "last_sample_timestamp_seconds"), now_s - 1)]
    out += [(dict(target, __name__=P + "gpu_utilization_ratio", gpu=str(g)), util)
            for g in range(gpus)]
    return out


def lost_series(instance: str, cause: str, value: float, *, job: str = "gpudisk-top",
                training_job: str = "llama", extra: dict | None = None) -> tuple[dict, float]:
    """One series of the raw ledger query's answer (increase() drops the metric name)."""
    return {"cause": cause, "instance": instance, "job": job, "training_job": training_job,
            **(extra or {})}, value
