"""The what-if is one list, made once by the model (verdict/whatif.py) and shown the same on
every surface: `--once` JSON (`verdict.whatif`) and text (`what-if:` lines), the exporter's
`gpudisk_top_whatif_speedup{fix}`, the report (each episode's `whatif` and its `best:`
line), re-derived from a recording's raw samples.  The simulator's checkpoint-stalls
scenario (its checkpoints are seen twice, so the fix has a period to gain over)."""

from __future__ import annotations

import json

from recording_helpers import origin, run_command, sim_samples, write_recording
from gpudisk_top.exporter import MetricsServer
from gpudisk_top.model.select import DeviceFilter
from gpudisk_top.verdict.step import Stepper
from gpudisk_top.verdict.whatif import best_line, of_json
from gpudisk_top.output import once

SCENARIO = "checkpoint-stalls"


def stepped(samples):
    stepper = Stepper()
    out = []
    for i, s in enumerate(samples):
        out.append(stepper.step(s, fresh=i == 0))
    return out


def test_every_surface_shows_the_same_best_fix(tmp_path):
    samples = sim_samples(SCENARIO, n=240)
    steps = stepped(samples)
    predicted = [(m, v) for m, v, _loss in steps if v.whatif]
    assert predicted, "the scenario's stalls get no prediction"
    model, verdict = predicted[-1]
    best = verdict.whatif[0]
    assert best.fix == "checkpoint" and best.speedup > 1.02
    # a later stall knows the time between checkpoints: measured, not the stall alone
    assert any(v.whatif[0].confidence == "measured" or "one every" in v.whatif[0].basis
               for _, v in predicted)

    doc = once.to_json(model, DeviceFilter(), origin(SCENARIO), verdict)
    assert doc["verdict"]["whatif"] == [w.as_json() for w in verdict.whatif]
    assert of_json(doc["verdict"]["whatif"])[0].line() == best.line()
    text = once.render_text(model, DeviceFilter(), origin(SCENARIO), verdict)
    assert f"what-if: {best.line()}" in text

    server = MetricsServer(None)
    server.update(model, verdict)
    assert (f'gpudisk_top_whatif_speedup{{fix="{best.fix}"}} {round(best.speedup, 3)}'
            in server.render_text())

    rec = write_recording(tmp_path / "ckpt.gdtrec", samples, scenario=SCENARIO)
    report = run_command("report", rec, "--json")
    assert report.returncode == 0, report.stderr
    episodes = [e for e in json.loads(report.stdout)["episodes"] if e["whatif"]]
    assert episodes and all(e["state"] == "checkpoint-stall" for e in episodes)
    # the report re-derives the same predictions from the raw samples
    assert episodes[-1]["whatif"][0]["fix"] == best.fix
    text = run_command("report", rec)
    assert text.returncode == 0, text.stderr
    line = best_line(of_json(episodes[-1]["whatif"])).removeprefix("best fix: ")
    assert line[:40] in text.stdout.replace("\n          ", " ")


def test_a_healthy_verdict_predicts_nothing():
    steps = stepped(sim_samples("healthy-cached", n=20))
    assert all(v.whatif == [] for _, v, _loss in steps)
    doc = once.to_json(steps[-1][0], DeviceFilter(), origin("healthy-cached"), steps[-1][1])
    assert doc["verdict"]["whatif"] == []

