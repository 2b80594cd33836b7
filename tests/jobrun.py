"""A real job recorded as users record one, for the tests that judge verdicts on real work
(test_real_jobs, test_remote_mount): tests/jobs/loader_job.py as the job, gpudisk-top's
`record` for the whole run with stand-in GPUs that follow the job's progress
(tests/standin.py), a `--once --json` in the middle, and `report --json` afterwards
(tests/cgjobs.py's observe and report_json, which a node of several jobs uses too)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from cgjobs import HEALTHY_STEPS_S, LOADER_JOB as JOB, observe, report_json, starved_share  # noqa: F401

RECORD_S = 16


class Run:
    """One scenario: the job, gpudisk-top recording it (with a --once in the middle), and
    the report of that recording."""

    def __init__(self, tmp_path, mode: str, workers: int, data: str, others=(),
                 reads: int = 128, job: bool = True, preexec_fn=None) -> None:
        self.tmp = tmp_path
        progress, truth = str(tmp_path / "progress"), str(tmp_path / "truth.jsonl")
        self.others = list(others)
        self.job = None
        if job:
            self.job = subprocess.Popen([sys.executable, JOB, mode, "--workers", str(workers),
                                         "--seconds", str(RECORD_S + 8), "--data", data,
                                         "--progress", progress, "--truth", truth,
                                         "--reads", str(reads)], preexec_fn=preexec_fn)
        gpu = dict(gpus=1, processes={0: [self.job.pid]} if job else {},
                   progress=progress if job else None, healthy_steps_s=HEALTHY_STEPS_S)
        try:
            seen = observe(tmp_path, RECORD_S, once_at_s=RECORD_S / 2, **gpu)
        finally:
            for p in self.others + ([self.job] if self.job else []):
                p.kill()
                p.wait()
        self.once = seen.once
        self.report = report_json(seen.rec)
        self.truth = []
        if job and os.path.exists(truth):
            with open(truth) as f:
                self.truth = [json.loads(line) for line in f if line.strip()]

    @property
    def pid(self) -> int:
        return self.job.pid

    def episodes(self, state: str | None = None) -> list[dict]:
        return [e for e in self.report["episodes"] if state is None or e["state"] == state]

    def starved_share(self) -> float:
        """The share of the job's seconds in which it was not fed (cgjobs.starved_share)."""
        return starved_share(self.truth)

    def detected_within_s(self, state: str) -> float:
        """Seconds from the recording's first interval to the start of the first episode of
        `state` (the job is starved from its first step)."""
        first = min(e["start_s"] for e in self.episodes(state))
        return first - self.report["start_s"]

    def explain(self) -> str:
        return json.dumps({"once": self.once["verdict"],
                           "episodes": [(e["state"], e.get("kind"), e["devices"],
                                         e["processes"], e["reason"]) for e in self.episodes()],
                           "truth": [t["steps"] for t in self.truth]}, indent=1)


def assert_starved(run: Run, state: str, device: str | None = None, kinds=None) -> dict:
    assert run.starved_share() >= 0.6, run.explain()     # the job really was starved
    episodes = run.episodes(state)
    assert episodes, run.explain()
    longest = max(episodes, key=lambda e: e["duration_s"])
    # nearly the whole run in that state, and no other starvation called
    assert longest["duration_s"] >= RECORD_S - 6, run.explain()
    assert all(e["state"] == state for e in run.episodes()), run.explain()
    assert run.pid in longest["processes"], run.explain()
    if device is not None:
        assert device in longest["devices"], run.explain()
    if kinds is not None:
        assert longest["kind"] in kinds, run.explain()
    # detected within 3 intervals of the start (the episode starts at its first interval)
    assert run.detected_within_s(state) <= 3 + 1, run.explain()
    # --once in the middle says the same
    assert run.once["verdict"]["state"] == state, run.explain()
    assert run.pid in run.once["verdict"]["processes"], run.explain()
    return longest


